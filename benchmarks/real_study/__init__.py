# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The studies on SmolLM2-135M-Instruct: the pilot comparison (`bench`, `make bench-real`), the paired, powered study
in stages (`study`, `make bench-real-study`) with its design (`design`, the leaf every stage imports), what its stages
read from finished runs (`readings`), its stages (`stability`, `head`, `probe`) and report (`report`), and the
generation engines compared on its runs (`engine`, `make bench-real-engine`)."""

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The CPU benchmark suite, run from the repository root: `python -m benchmarks.run` (`make bench`),
`python -m benchmarks.demo` (`make demo`) and `python -m benchmarks.step_cost` (`make bench-step`)."""

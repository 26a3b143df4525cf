# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The benchmark suite, run from the repository root: `python -m benchmarks.run` (`make bench`),
`python -m benchmarks.demo` (`make demo`) and `python -m benchmarks.step_cost` (`make bench-step`; its GPU mode,
`--gpu`, is `make bench-step-gpu`), on a CPU but for that GPU mode."""

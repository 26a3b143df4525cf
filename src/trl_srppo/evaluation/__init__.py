# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Pass@k evaluation: benchmark registry, generation engines, runner, reports, and a training callback.

```python
from trl_srppo.evaluation import EvalConfig, evaluate

summary = evaluate(EvalConfig(model="Qwen/Qwen3-0.6B", benchmarks=["aime24"], n=16, output_dir="runs/eval"))
print(summary["benchmarks"]["aime24"]["pass_at_k"])
```

Imports are lazy, so that `trl-srppo eval --help` and the registry do not pay for importing torch and transformers.
"""

import importlib

_LAZY = {
    "BENCHMARKS": "benchmarks",
    "Benchmark": "benchmarks",
    "Problem": "benchmarks",
    "get_benchmark": "benchmarks",
    "list_benchmarks": "benchmarks",
    "register_benchmark": "benchmarks",
    "Completion": "engines",
    "GenerationEngine": "engines",
    "SamplingConfig": "engines",
    "TransformersEngine": "engines",
    "VLLMEngine": "engines",
    "select_engine": "engines",
    "ModelSource": "models",
    "load_model": "models",
    "load_tokenizer": "models",
    "resolve_model": "models",
    "EvalConfig": "runner",
    "build_engine": "runner",
    "evaluate": "runner",
    "compare_runs": "report",
    "load_summary": "report",
    "markdown_table": "report",
    "plot_pass_at_k": "report",
    "PassAtKCallback": "callback",
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

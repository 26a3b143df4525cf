# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Pass@k evaluation: benchmark registry, generation engines, runner, reports, and a training callback.

One module per job: `benchmarks` (a task plus its source), `config` (`EvalConfig`), `sampling` (`SamplingConfig`),
`prompts` (rendering and tokenizing), `engines` (generation, and `build_engine`), `models` (loading a model folder,
checkpoint or adapter), `scoring` (verifying samples), `storage` (the output folder's files), `runner` (the
`evaluate` loop), `generation` (a run's missing samples), `verification` (a run's unverified samples), `progress` (a
run's progress bars), `report` (summary, table, plot), `callback` (pass@k during training) and `cli`
(`trl-srppo eval`).

```python
from trl_srppo.evaluation import EvalConfig, evaluate

config = EvalConfig(
    model_name_or_path="Qwen/Qwen3-0.6B", benchmarks=["aime24"], num_generations=16, output_dir="runs/eval"
)
summary = evaluate(config)
print(summary["benchmarks"]["aime24"]["pass_at_k"])
```

Imports are lazy, so that `trl-srppo eval --help` and the registry do not pay for importing torch and transformers.
"""

import importlib

_LAZY = {
    "BENCHMARKS": "benchmarks",
    "Benchmark": "benchmarks",
    "Problem": "benchmarks",
    "benchmark_label": "benchmarks",
    "get_benchmark": "benchmarks",
    "list_benchmarks": "benchmarks",
    "register_benchmark": "benchmarks",
    "Completion": "engines",
    "GenerationEngine": "engines",
    "SamplingConfig": "sampling",
    "TransformersEngine": "engines",
    "VLLMEngine": "engines",
    "select_engine": "engines",
    "ModelSource": "models",
    "load_model": "models",
    "load_tokenizer": "models",
    "resolve_model": "models",
    "build_engine": "engines",
    "EvalConfig": "config",
    "default_ks": "config",
    "render_prompt": "prompts",
    "score_completions": "scoring",
    "unreadable_completions": "scoring",
    "evaluate": "runner",
    "compare_runs": "report",
    "load_summary": "report",
    "pass_at_k_table": "report",
    "plot_pass_at_k": "report",
    "PassAtKCallback": "callback",
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

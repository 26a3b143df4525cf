# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Run a pass@k evaluation: load problems, generate the missing samples (`generation`), verify them
(`verification`), and write the report (`report`).

Layout of the output folder:

```
<output_dir>/
    run_config.json           settings of the run; the generation settings must match to reuse stored samples
    problems/<bench>.jsonl    each problem's id, rendered prompt and verifier columns
    samples/<bench>.jsonl     every sample: problem_id, sample_index, completion, num_tokens, finish_reason, reward,
                              correct (appended as generation goes, so an interrupted run resumes where it stopped)
    summary.json              pass@k per benchmark, the share of unreadable answers, per-problem counts (`report.py`)
    results.md                markdown table of pass@k (fractions, 0 to 1) and of the unreadable share
    pass_at_k.png             pass@k against k, one panel per benchmark
```

Re-running with the same folder reuses the stored samples and only generates what is missing (more problems, or a
larger `n`); with a smaller `n` the first `n` samples of each problem are scored. Samples without a verdict (a run
stopped during scoring) are scored on the next run; `rescore=True` re-verifies all of them (after a verifier change).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .benchmarks import Problem, benchmark_label, get_benchmark
from .config import EvalConfig
from .engines import GenerationEngine
from .generation import call_seed, generate_missing
from .storage import check_run_config, read_jsonl
from .verification import verify_samples

__all__ = ["call_seed", "evaluate", "missing_samples"]  # `call_seed` lives in `generation`; kept importable here


def evaluate(
    config: EvalConfig,
    engine: GenerationEngine | None = None,
    engine_factory: Callable[[EvalConfig], GenerationEngine] | None = None,
) -> dict[str, Any]:
    """
    Run a pass@k evaluation and write its outputs to `config.output_dir`.

    Args:
        config ([`EvalConfig`]):
            The settings.
        engine ([`~evaluation.engines.GenerationEngine`] or `None`, *optional*):
            An engine already built (e.g. around a model in memory). Its `tokenizer` renders the prompts.
        engine_factory (`Callable[[EvalConfig], GenerationEngine]` or `None`, *optional*):
            Builds the engine when `engine` is not given; defaults to [`build_engine`]. Called only when samples are
            missing, so re-scoring a finished run does not load the model.

    Returns:
        `dict`: the summary (also written to `summary.json`).
    """
    from ..rewards import get_reward_func
    from .report import build_summary, write_reports

    config.check_complete()
    output_dir = Path(config.output_dir)
    benchmarks = {name: get_benchmark(name) for name in config.benchmarks}
    problems: dict[str, list[Problem]] = {
        name: bench.load(
            source=config.data_files.get(name), data_dir=config.data_dir, max_problems=config.max_problems
        )
        for name, bench in benchmarks.items()
    }
    reward_funcs = {name: get_reward_func(bench.verifier) for name, bench in benchmarks.items()}  # fail early
    check_run_config(output_dir, config)
    (output_dir / "samples").mkdir(exist_ok=True)
    (output_dir / "problems").mkdir(exist_ok=True)

    stored = {name: _stored_samples(output_dir / "samples" / f"{name}.jsonl") for name in benchmarks}
    missing = missing_samples(problems, stored, config.num_generations)
    _print_plan(config, problems, missing)

    if any(sum(m.values()) for m in missing.values()):
        engine = generate_missing(config, engine, engine_factory, problems, stored, missing)
    verify_samples(config, benchmarks, problems, stored, reward_funcs)

    summary = build_summary(
        config=config,
        problems=problems,
        samples={name: stored[name] for name in benchmarks},
        engine_name=engine.name if engine is not None else None,
    )
    write_reports(summary, output_dir, plot=config.plot)
    _warn_unreadable(summary)
    return summary


def _stored_samples(path: Path) -> dict[str, list[dict]]:
    """The sample records of a samples file (none when it does not exist), by problem id, in file order."""
    by_problem: dict[str, list[dict]] = {}
    for record in read_jsonl(path):
        by_problem.setdefault(record["problem_id"], []).append(record)
    return by_problem


def missing_samples(
    problems: dict[str, list[Problem]], stored: dict[str, dict[str, list[dict]]], num_generations: int
) -> dict[str, dict[str, int]]:
    """How many samples each problem still needs to reach `num_generations`.

    Returns:
        `dict[str, dict[str, int]]`: benchmark name -> problem id -> the number of samples to generate (0 when it
        has `num_generations` or more stored).
    """
    return {
        name: {p.id: max(0, num_generations - len(stored[name].get(p.id, []))) for p in items}
        for name, items in problems.items()
    }


def _warn_unreadable(summary: dict[str, Any]) -> None:
    """Print a warning for each benchmark where most samples hold no answer its verifier can read."""
    from ..rewards import get_reward_func

    for name, result in summary["benchmarks"].items():
        share = result.get("unreadable_fraction")
        if share is None or share <= 0.5:
            continue
        expected = getattr(get_reward_func(result["verifier"]), "answer_format", "its format")
        print(
            f"[trl-srppo eval] warning: {share:.0%} of the {result['label']} samples hold no answer the "
            f"'{result['verifier']}' verifier can read (it reads {expected}); they score 0 whatever the model "
            "solved. Check the prompt (where it asks for the answer), the chat template, and a few samples in "
            f"samples/{name}.jsonl."
        )


def _print_plan(config: EvalConfig, problems: dict[str, list[Problem]], missing: dict[str, dict[str, int]]) -> None:
    """Print what the run holds and what it will generate: per benchmark, problems, samples stored and to generate."""
    n = config.num_generations
    print(f"[trl-srppo eval] {config.model_name_or_path}: {len(problems)} benchmark(s), n={n}, k={config.ks}")
    for name, items in problems.items():
        count, todo = len(items), sum(missing[name].values())
        shown = benchmark_label(name, config.data_files.get(name))
        print(
            f"  {shown:<16} {count:>5} problems x {n} samples = {count * n:>7} "
            f"({count * n - todo} stored, {todo} to generate)"
        )
    total_missing = sum(sum(m.values()) for m in missing.values())
    if total_missing:
        print(
            f"  total: {total_missing} samples to generate, up to {config.max_completion_length} new tokens each "
            f"(at most {total_missing * config.max_completion_length:,} tokens)"
        )

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Run a pass@k evaluation: load problems, generate the missing samples, verify them, and write the report.

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

import inspect
import json
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..tasks.registry import is_correct
from .benchmarks import Problem, benchmark_label, get_benchmark
from .config import EvalConfig
from .engines import GenerationEngine, build_engine
from .prompts import render_prompt, tokenize_prompts, uses_chat_template
from .scoring import score_completions
from .storage import check_run_config, prompt_sha, read_jsonl, write_jsonl

__all__ = ["call_seed", "evaluate"]


def _progress(total: int, desc: str, enabled: bool, unit: str):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, disable=not enabled, dynamic_ncols=True)


class _Throughput:
    """Moves the generation bar as samples are generated and shows the rate since generation began (completions/s
    and tokens/s); called by an engine with `(samples, tokens)` as parts of a call finish."""

    def __init__(self, bar):
        self.bar = bar
        self.start = time.monotonic()
        self.samples = 0
        self.tokens = 0

    def __call__(self, samples: int, tokens: int) -> None:
        self.samples += samples
        self.tokens += tokens
        self.bar.update(samples)
        elapsed = max(time.monotonic() - self.start, 1e-9)
        self.bar.set_postfix_str(f"{self.samples / elapsed:.2f} completions/s, {self.tokens / elapsed:,.0f} tokens/s")


def _takes_progress(engine: GenerationEngine) -> bool:
    """Whether the engine's `generate` accepts a `progress` callable."""
    try:
        parameters = inspect.signature(engine.generate).parameters
    except (TypeError, ValueError):
        return False
    return "progress" in parameters


def call_seed(base_seed: int, benchmark: str, problem_id: str, start_index: int) -> int:
    """Seed of one engine call: depends on the run's seed and on the first (problem, sample index) it generates, so
    that resuming never draws the same random numbers twice for a problem."""
    return (base_seed * 1_000_003 + zlib.crc32(f"{benchmark}/{problem_id}/{start_index}".encode())) % (2**31 - 1)


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

    # Stored samples, per benchmark and problem id.
    stored: dict[str, dict[str, list[dict]]] = {}
    for name in benchmarks:
        by_problem: dict[str, list[dict]] = {}
        for record in read_jsonl(output_dir / "samples" / f"{name}.jsonl"):
            by_problem.setdefault(record["problem_id"], []).append(record)
        stored[name] = by_problem
    missing = {
        name: {p.id: max(0, config.num_generations - len(stored[name].get(p.id, []))) for p in problems[name]}
        for name in benchmarks
    }
    _print_plan(config, problems, missing)

    if any(sum(m.values()) for m in missing.values()):
        engine = _generate_missing(config, engine, engine_factory, problems, stored, missing)
    _score_unscored(config, benchmarks, problems, stored, reward_funcs)

    summary = build_summary(
        config=config,
        problems=problems,
        samples={name: stored[name] for name in benchmarks},
        engine_name=engine.name if engine is not None else None,
    )
    write_reports(summary, output_dir, plot=config.plot)
    _warn_unreadable(summary)
    return summary


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


def _generate_missing(
    config: EvalConfig,
    engine: GenerationEngine | None,
    engine_factory: Callable[[EvalConfig], GenerationEngine] | None,
    problems: dict[str, list[Problem]],
    stored: dict[str, dict[str, list[dict]]],
    missing: dict[str, dict[str, int]],
) -> GenerationEngine:
    """Render the prompts, write `problems/<bench>.jsonl` and generate the missing samples; returns the engine used
    (an engine built here is closed, to free the GPU before verification)."""
    output_dir = Path(config.output_dir)
    built_here = engine is None
    if engine is None:
        engine = (engine_factory or build_engine)(config)
    tokenizer = engine.tokenizer
    templated = uses_chat_template(tokenizer, config.use_chat_template)
    if config.use_chat_template and not templated:
        print("[trl-srppo eval] the tokenizer has no chat template: prompts are given as plain text.")
    rendered = {
        name: [
            render_prompt(tokenizer, p.prompt, config.system_prompt, templated, config.chat_template_kwargs)
            for p in items
        ]
        for name, items in problems.items()
    }
    for name, items in problems.items():
        _check_prompts(name, items, rendered[name], stored[name])
        write_jsonl(
            output_dir / "problems" / f"{name}.jsonl",
            [{"problem_id": p.id, "prompt": text, "columns": p.columns} for p, text in zip(items, rendered[name])],
        )
    total_missing = sum(sum(m.values()) for m in missing.values())
    with _progress(total_missing, "generating", config.progress, "sample") as bar:
        throughput = _Throughput(bar)
        for name, items in problems.items():
            _generate_benchmark(
                name, items, rendered[name], stored[name], missing[name], engine, templated, config, throughput
            )
    if built_here:
        engine.close()
    return engine


def _score_unscored(
    config: EvalConfig,
    benchmarks: dict,
    problems: dict[str, list[Problem]],
    stored: dict[str, dict[str, list[dict]]],
    reward_funcs: dict[str, Callable],
) -> None:
    """Verify every sample without a verdict (all of them with `rescore`) and rewrite the samples files."""
    to_score = {
        name: [
            r
            for problem in problems[name]
            for r in stored[name].get(problem.id, [])
            if config.rescore or r.get("correct") is None
        ]
        for name in benchmarks
    }
    total_to_score = sum(len(v) for v in to_score.values())
    if not total_to_score:
        return
    with _progress(total_to_score, "verifying", config.progress, "sample") as bar:
        for name, bench in benchmarks.items():
            columns_by_id = {p.id: p.columns for p in problems[name]}
            prompts_by_id = {p.id: p.prompt for p in problems[name]}
            records = to_score[name]
            for start in range(0, len(records), 64):
                batch = records[start : start + 64]
                rewards = score_completions(
                    bench,
                    [prompts_by_id[r["problem_id"]] for r in batch],
                    [r["completion"] for r in batch],
                    [columns_by_id[r["problem_id"]] for r in batch],
                    reward_func=reward_funcs[name],
                )
                for record, reward in zip(batch, rewards):
                    record["reward"] = reward
                    record["correct"] = is_correct(reward)
                bar.update(len(batch))
            if records:
                order = {p.id: i for i, p in enumerate(problems[name])}
                all_records = [r for rs in stored[name].values() for r in rs]
                all_records.sort(key=lambda r: (order.get(r["problem_id"], len(order)), r["sample_index"]))
                write_jsonl(Path(config.output_dir) / "samples" / f"{name}.jsonl", all_records)


def _check_prompts(name: str, problems: list[Problem], rendered: list[str], stored: dict[str, list[dict]]) -> None:
    """Refuse to mix samples of a prompt with samples of a different one (edited template, other tokenizer)."""
    for problem, text in zip(problems, rendered):
        shas = {r.get("prompt_sha") for r in stored.get(problem.id, [])} - {None}
        if shas and shas != {prompt_sha(text)}:
            raise ValueError(
                f"Benchmark {name!r}, problem {problem.id!r}: the stored samples were generated from another prompt "
                "(the prompt template or the chat template changed). Use another output folder."
            )


def _generate_benchmark(
    name: str,
    problems: list[Problem],
    rendered: list[str],
    stored: dict[str, list[dict]],
    missing: dict[str, int],
    engine: GenerationEngine,
    templated: bool,
    config: EvalConfig,
    throughput: _Throughput,
) -> None:
    """Generate the missing samples of one benchmark, appending them to its JSONL file chunk by chunk; the progress
    bar moves as the engine reports parts of a chunk done (at the end of the chunk for engines that do not)."""
    path = Path(config.output_dir) / "samples" / f"{name}.jsonl"
    todo = [(p, text) for p, text in zip(problems, rendered) if missing[p.id] > 0]
    sampling = config.sampling
    extra = {"progress": throughput} if _takes_progress(engine) else {}
    # Problems missing the same number of samples go to the engine together (usually all of them).
    groups: dict[int, list[tuple[Problem, str]]] = {}
    for problem, text in todo:
        groups.setdefault(missing[problem.id], []).append((problem, text))
    for count, items in groups.items():
        for start in range(0, len(items), max(1, config.chunk_size)):
            chunk = items[start : start + config.chunk_size]
            prompt_ids = tokenize_prompts(engine.tokenizer, [text for _, text in chunk], templated)
            first = chunk[0][0]
            seed = call_seed(config.seed, name, first.id, config.num_generations - count)
            reported = throughput.samples
            outputs = engine.generate(prompt_ids, count, sampling, seed=seed, **extra)
            reported = throughput.samples - reported
            if len(outputs) != len(chunk) or any(len(o) != count for o in outputs):
                raise RuntimeError(f"The {engine.name} engine returned the wrong number of samples.")
            new_records = []
            for (problem, text), completions in zip(chunk, outputs):
                records = stored.setdefault(problem.id, [])
                next_index = max((r["sample_index"] for r in records), default=-1) + 1
                for offset, completion in enumerate(completions):
                    record = {
                        "benchmark": name,
                        "problem_id": problem.id,
                        "sample_index": next_index + offset,
                        "prompt_sha": prompt_sha(text),
                        "completion": completion.text,
                        "num_tokens": completion.num_tokens,
                        "finish_reason": completion.finish_reason,
                        "reward": None,
                        "correct": None,
                    }
                    records.append(record)
                    new_records.append(record)
            with path.open("a", encoding="utf-8") as handle:
                for record in new_records:
                    handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            if reported < len(new_records):  # an engine that does not report its progress, or not all of it
                tokens = sum(r["num_tokens"] for r in new_records) if reported == 0 else 0
                throughput(len(new_records) - reported, tokens)

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Verification of an evaluation's stored samples: score those without a verdict (all of them on a re-score) and
rewrite the samples files with their rewards."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..tasks.registry import is_correct
from . import progress
from .benchmarks import Problem
from .config import EvalConfig
from .scoring import score_completions
from .storage import write_jsonl

__all__ = ["samples_in_order", "verify_samples"]

BATCH_SIZE = 64  # samples per call of the verifier


def verify_samples(
    config: EvalConfig,
    benchmarks: dict,
    problems: dict[str, list[Problem]],
    stored: dict[str, dict[str, list[dict]]],
    reward_funcs: dict[str, Callable],
) -> None:
    """Verify every sample of `stored` without a verdict (all of them with `config.rescore`), setting its `reward` and
    `correct` in place, and rewrite the samples file of each benchmark that had any."""
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
    with progress.progress_bar(total_to_score, "verifying", config.progress, "sample") as bar:
        for name, bench in benchmarks.items():
            records = to_score[name]
            _verify_records(bench, problems[name], records, reward_funcs[name], bar)
            if records:
                write_jsonl(
                    Path(config.output_dir) / "samples" / f"{name}.jsonl",
                    samples_in_order(problems[name], stored[name]),
                )


def _verify_records(bench, problems: list[Problem], records: list[dict], reward_func: Callable, bar) -> None:
    """Score `records` (samples of `problems`) in batches, setting each one's `reward` and `correct`."""
    columns_by_id = {p.id: p.columns for p in problems}
    prompts_by_id = {p.id: p.prompt for p in problems}
    for start in range(0, len(records), BATCH_SIZE):
        batch = records[start : start + BATCH_SIZE]
        rewards = score_completions(
            bench,
            [prompts_by_id[r["problem_id"]] for r in batch],
            [r["completion"] for r in batch],
            [columns_by_id[r["problem_id"]] for r in batch],
            reward_func=reward_func,
        )
        for record, reward in zip(batch, rewards):
            record["reward"] = reward
            record["correct"] = is_correct(reward)
        bar.update(len(batch))


def samples_in_order(problems: list[Problem], stored: dict[str, list[dict]]) -> list[dict]:
    """Every stored sample of a benchmark in the order of its samples file.

    Returns:
        `list[dict]`: the records of `stored` (problem id -> its samples) sorted by the position of their problem in
        `problems` (samples of problems not among them last), then by `sample_index`.
    """
    order = {p.id: i for i, p in enumerate(problems)}
    records = [r for rs in stored.values() for r in rs]
    records.sort(key=lambda r: (order.get(r["problem_id"], len(order)), r["sample_index"]))
    return records

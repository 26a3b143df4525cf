# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Scoring of evaluation samples with the benchmark's task (its verifier, and
[`~trl_srppo.tasks.registry.is_correct`])."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..tasks.registry import CORRECT_THRESHOLD, is_correct
from .benchmarks import Benchmark

__all__ = ["CORRECT_THRESHOLD", "is_correct", "score_completions", "unreadable_completions"]


def score_completions(
    benchmark: Benchmark,
    prompts: Sequence[str],
    completions: Sequence[str],
    columns: Sequence[dict[str, Any]],
    reward_func: Callable | None = None,
) -> list[float | None]:
    """
    Verify completions with the benchmark's task (see [`~trl_srppo.tasks.registry.Task.score`]).

    Args:
        benchmark ([`Benchmark`]):
            The benchmark.
        prompts (sequence of `str`):
            The user prompt of each completion.
        completions (sequence of `str`):
            The completions.
        columns (sequence of `dict`):
            The problem's verifier columns, one dict per completion.
        reward_func (`Callable` or `None`, *optional*):
            The verifier, when already looked up.

    Returns:
        `list[float | None]`: one reward per completion (`None` when the verifier abstains).
    """
    return benchmark.task.score(prompts, completions, columns, reward_func=reward_func)


def unreadable_completions(
    benchmark: Benchmark,
    completions: Sequence[str],
    columns: Sequence[dict[str, Any]],
    reward_func: Callable | None = None,
) -> list[bool] | None:
    """
    Which completions hold no answer the benchmark's verifier can read (see `trl_srppo.rewards.unreadable`).

    Args:
        benchmark ([`Benchmark`]):
            The benchmark.
        completions (sequence of `str`):
            The completions.
        columns (sequence of `dict`):
            The problem's verifier columns, one dict per completion.
        reward_func (`Callable` or `None`, *optional*):
            The verifier, when already looked up.

    Returns:
        `list[bool]` or `None`: True where no answer can be read; None when the verifier has no `extract_answer`.
    """
    from ..rewards import get_reward_func, unreadable

    func = reward_func if reward_func is not None else get_reward_func(benchmark.verifier)
    kwargs = {name: [row[name] for row in columns] for name in benchmark.reward_columns}
    return unreadable(func, list(completions), **kwargs)

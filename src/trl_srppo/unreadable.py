# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Completions whose answer a reward function cannot read, during training: the share per reward function that
`SRPPOTrainer` logs as `rewards/<name>/unreadable`, and the warning when most of a batch is unreadable.

A reward function reports what it reads through its `extract_answer` attribute (see
`trl_srppo.rewards.unreadable` and `docs/rewards.md`); functions without one (reward models, a user's own function)
are left out.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .rewards import unreadable

__all__ = ["UNREADABLE_WARN_SHARE", "unreadable_shares", "warn_unreadable"]

#: Above this share of a batch without a readable answer for a reward function, the trainer warns (once per run).
UNREADABLE_WARN_SHARE = 0.5

_NOT_COLUMNS = ("prompt", "completion", "completion_ids")  # as GRPOTrainer leaves them out of the reward kwargs


def unreadable_shares(
    reward_funcs: Sequence[Any],
    inputs: Sequence[dict[str, Any]],
    completions: Sequence[Any],
    gather: Callable[[torch.Tensor], torch.Tensor],
    device: torch.device | str = "cpu",
) -> dict[int, float]:
    """
    The share of a batch's completions, over all processes, in which each reward function reads no answer.

    Every process must call this with the same reward functions (`gather` is a collective).

    Args:
        reward_funcs (sequence):
            The trainer's reward functions (reward models included: they have no reader and are left out).
        inputs (sequence of `dict`):
            This process's examples, one per completion (their dataset columns reach the readers).
        completions (sequence):
            This process's completions (strings or message lists).
        gather (`Callable`):
            Concatenates a tensor over the processes (`accelerator.gather`).
        device (`torch.device` or `str`, *optional*, defaults to `"cpu"`):
            Where the tensor given to `gather` lives.

    Returns:
        `dict[int, float]`: index of each reward function with a reader -> its share of unreadable completions.
    """
    columns = {key: [example[key] for example in inputs] for key in inputs[0] if key not in _NOT_COLUMNS}
    flags = {i: unreadable(func, completions, **columns) for i, func in enumerate(reward_funcs)}
    flags = {i: rows for i, rows in flags.items() if rows is not None}
    if not flags:
        return {}
    local = torch.tensor(list(flags.values()), dtype=torch.float32, device=device).T  # (B, readers)
    shares = gather(local.reshape(len(completions), len(flags))).mean(dim=0)  # (readers,)
    return {i: float(share) for i, share in zip(flags, shares)}


def warn_unreadable(
    shares: dict[int, float], reward_funcs: Sequence[Any], names: Sequence[str], warned: set[int], step: int
) -> None:
    """
    Warn, once per reward function (`warned` holds those already named), when more than [`UNREADABLE_WARN_SHARE`] of
    a batch's completions hold no answer it can read.
    """
    for index, share in shares.items():
        if share <= UNREADABLE_WARN_SHARE or index in warned:
            continue
        warned.add(index)
        name = names[index]
        expected = getattr(reward_funcs[index], "answer_format", None) or "the format its extract_answer reads"
        warnings.warn(
            f"Reward function '{name}' found no answer it can read in {share:.0%} of the completions of the batch "
            f"scored at global step {step}: it reads {expected}. These completions get reward 0 whether or not the "
            "model solved the problem, so this is a format problem, not (only) wrong answers. Say in the prompt or "
            "system prompt where the answer goes (e.g. 'Put the final answer in \\boxed{}.'), check that an instruct "
            "model is prompted with its chat template, or use a reward function that reads the model's format. The "
            f"share is logged as rewards/{name}/unreadable (this warning is shown once per run).",
            UserWarning,
            stacklevel=2,
        )

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Difficulty bins of prompts from `n` rollouts each.

The paper bins prompts by the number `c` of correct rollouts among `n = 8`: easy when `c >= 6`, medium when
`3 <= c <= 5`, hard when `c <= 2`. For other `n` the thresholds are scaled as fractions of `n`, compared exactly (in
integers, no rounding):

- easy   when `c / n >= 6 / 8`  (`8 c >= 6 n`),
- hard   when `c / n <= 2 / 8`  (`8 c <= 2 n`),
- medium otherwise.

So `n = 4`: easy `c >= 3`, medium `c = 2`, hard `c <= 1`; `n = 16`: easy `c >= 12`, medium `5 .. 11`, hard `c <= 4`.
At `n = 8` this is exactly the paper's rule.

`n` counts the prompt's scorable rollouts only: an unscorable rollout (NaN reward, every reward function returned
`None`) says nothing about the prompt's difficulty, so a prompt with 5 correct of 5 scorable rollouts (and 3
unscorable) is easy, not medium. A prompt without any scorable rollout gets no bin (`None`): it is counted in no bin
and its rollouts, which carry no update weight, are left out of the shares.
"""

from fractions import Fraction

import torch

__all__ = ["BINS", "bin_counts", "bin_members", "correct_counts", "difficulty_bin", "prompt_bins"]

BINS = ("easy", "medium", "hard")
EASY_FRACTION = Fraction(6, 8)
HARD_FRACTION = Fraction(2, 8)


def difficulty_bin(num_correct: int, num_rollouts: int = 8) -> str:
    """The difficulty bin of a prompt with `num_correct` correct rollouts out of `num_rollouts`.

    Args:
        num_correct (`int`):
            Number of correct rollouts, `0 <= num_correct <= num_rollouts`.
        num_rollouts (`int`, *optional*, defaults to `8`):
            Number of rollouts of the prompt; the paper's thresholds are scaled as fractions of it.

    Returns:
        `str`: `"easy"`, `"medium"` or `"hard"`.
    """
    if num_rollouts < 1 or not 0 <= num_correct <= num_rollouts:
        raise ValueError(
            f"difficulty_bin: need 0 <= num_correct <= num_rollouts, got {num_correct} of {num_rollouts}."
        )
    rate = Fraction(int(num_correct), int(num_rollouts))
    if rate >= EASY_FRACTION:
        return "easy"
    if rate <= HARD_FRACTION:
        return "hard"
    return "medium"


def correct_counts(correct: torch.Tensor, prompt_index: torch.Tensor, num_prompts: int) -> torch.Tensor:
    """Number of correct rollouts of each prompt.

    Args:
        correct (`torch.Tensor` of shape `(B,)`):
            1 (or True) for a correct rollout.
        prompt_index (`torch.Tensor` of shape `(B,)`):
            The prompt each rollout belongs to, in `0 .. num_prompts - 1`.
        num_prompts (`int`):
            Number of prompts.

    Returns:
        `torch.Tensor` of shape `(num_prompts,)`: counts (int64).
    """
    counts = torch.zeros(num_prompts, dtype=torch.long)
    return counts.index_add_(0, prompt_index.long().cpu(), correct.long().cpu())


def prompt_bins(
    correct: torch.Tensor, prompt_index: torch.Tensor, num_prompts: int, scorable: torch.Tensor | None = None
) -> list[str | None]:
    """The difficulty bin of every prompt, each judged on its own scorable rollouts.

    Args:
        correct (`torch.Tensor` of shape `(B,)`):
            1 (or True) for a correct rollout.
        prompt_index (`torch.Tensor` of shape `(B,)`):
            The prompt each rollout belongs to, in `0 .. num_prompts - 1`.
        num_prompts (`int`):
            Number of prompts.
        scorable (`torch.Tensor` of shape `(B,)`, *optional*):
            1 (or True) for a rollout with a reward; an unscorable rollout counts neither as correct nor in the
            prompt's number of rollouts. Defaults to every rollout being scorable.

    Returns:
        `list[str | None]`: the bin of each prompt (see [`difficulty_bin`]), `None` for a prompt without a scorable
        rollout.
    """
    if scorable is None:
        scorable = torch.ones_like(prompt_index, dtype=torch.bool)
    scorable = scorable.bool().cpu()  # (B,)
    counts = correct_counts(correct.bool().cpu() & scorable, prompt_index, num_prompts)  # (num_prompts,)
    totals = correct_counts(scorable, prompt_index, num_prompts)  # (num_prompts,) scorable rollouts
    return [difficulty_bin(int(c), int(n)) if n > 0 else None for c, n in zip(counts, totals)]


def bin_counts(bins: list[str | None]) -> dict[str, int]:
    """Number of prompts in each bin (a prompt without a bin, `None`, is in none of the counts)."""
    return {b: bins.count(b) for b in BINS}


def bin_members(bins: list[str | None]) -> dict[str, list[int]]:
    """The positions in `bins` (one bin per prompt, or per rollout) of each bin's items.

    Returns:
        `dict[str, list[int]]`: every bin of `BINS` -> the indices `i` with `bins[i]` equal to it, in increasing
        order (an item without a bin, `None`, is in none of them).
    """
    return {b: [i for i, item_bin in enumerate(bins) if item_bin == b] for b in BINS}

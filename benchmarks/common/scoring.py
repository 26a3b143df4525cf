# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Pass@k of scored rollouts, whatever the task: the correct count of each prompt, the mean unbiased pass@k over
prompts, and the paper's difficulty bins."""

import numpy as np
import torch

from trl_srppo.analysis import BINS, difficulty_bin
from trl_srppo.evaluation.pass_at_k import pass_at_k


def correct_per_prompt(rollouts) -> np.ndarray:
    """Number of correct samples of each prompt, `(num_prompts,)`."""
    correct = rollouts.correct.long()
    counts = torch.zeros(rollouts.num_prompts, dtype=torch.long).index_add_(0, rollouts.prompt_index, correct)
    return counts.numpy()


def pass_at(counts: np.ndarray, n: int, ks=(1, 8)) -> dict[str, float]:
    """Mean unbiased pass@k over prompts for each k (`trl_srppo.evaluation.pass_at_k.pass_at_k`)."""
    return {f"pass@{k}": float(np.mean(pass_at_k(n, counts, k))) for k in ks if k <= n}


def bins_of(counts: np.ndarray, n: int) -> list[str]:
    """The paper's difficulty bin of each prompt from its correct count out of `n`."""
    return [difficulty_bin(int(c), n) for c in counts]


def bin_shares(bins: list[str]) -> dict[str, float]:
    """Fraction of prompts in each difficulty bin."""
    return {b: sum(1 for x in bins if x == b) / max(len(bins), 1) for b in BINS}

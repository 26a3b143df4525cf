# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The critic's offline warm start (`critic_warm_start_prompts`): before the first policy update, the starting policy
samples `critic_warm_start_samples` rollouts of each of a set of training prompts, and the critic learns from them.

A fresh value head knows nothing of the task: for its first updates its values hardly differ between prompts, so
every Pass@k weight is the same (the value cold start). A*-PO (arXiv 2505.20686) and VC-PPO / VAPO start their value
estimates from samples of the starting policy; this is the same for the prefix critic. The targets are Monte Carlo
outcomes of the starting policy, so the warm-started critic is a baseline of that policy, which the online updates
then follow; the policy gradient stays unbiased for any baseline that does not depend on the rollout itself.

The plan is a pure function of the settings (`warm_start_plan`), so the critic's schedule can count its steps before
they run; the trainer runs it (`SRPPOMethod._warm_start_critic`).
"""

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class WarmStartPlan:
    """The rollouts of a warm start, as dataset rows.

    Args:
        prompts (`list[int]`):
            The dataset indices of the warm start's prompts, distinct, in the order they are sampled.
        batches (`list[list[int]]`):
            Each generated batch's rows over every process, `generation_batch_size` of them: each prompt's index
            repeated `critic_warm_start_samples` times, in `prompts`' order. Process `p` generates the `p`-th of
            `num_processes` equal slices of each batch.
    """

    prompts: list[int]
    batches: list[list[int]]

    def local_rows(self, batch: int, process_index: int, num_processes: int) -> list[int]:
        """The rows of generated batch `batch` that process `process_index` generates."""
        rows = self.batches[batch]
        size = len(rows) // num_processes
        return rows[process_index * size : (process_index + 1) * size]


def warm_start_plan(num_rows: int, prompts: int, samples: int, generation_batch_size: int, seed: int) -> WarmStartPlan:
    """The warm start's prompts and generated batches.

    `prompts` distinct rows of the dataset (`num_rows` of them) are drawn at random with `seed`; their number is
    rounded up to the fewest that make whole generated batches of `generation_batch_size` rollouts at `samples` each
    (e.g. 3 prompts x 4 samples with batches of 8 become 4 prompts).

    Example:

    ```python
    >>> plan = warm_start_plan(num_rows=10, prompts=3, samples=4, generation_batch_size=8, seed=0)
    >>> len(plan.prompts), [len(b) for b in plan.batches]
    (4, [8, 8])
    ```
    """
    if prompts <= 0:
        return WarmStartPlan([], [])
    step = generation_batch_size // math.gcd(samples, generation_batch_size)  # prompts per whole number of batches
    count = -(-prompts // step) * step
    if count > num_rows:
        raise ValueError(
            f"critic_warm_start_prompts={prompts} (rounded up to {count}, so that {count} x "
            f"critic_warm_start_samples={samples} rollouts fill whole generated batches of {generation_batch_size}) "
            f"needs {count} distinct training prompts, but the training dataset has {num_rows}. Lower "
            "critic_warm_start_prompts or critic_warm_start_samples."
        )
    generator = torch.Generator().manual_seed(seed)
    chosen = torch.randperm(num_rows, generator=generator)[:count].tolist()
    rows = [index for index in chosen for _ in range(samples)]
    batches = [rows[i : i + generation_batch_size] for i in range(0, len(rows), generation_batch_size)]
    return WarmStartPlan(chosen, batches)


def warm_start_critic_steps(plan: WarmStartPlan, epochs: int, steps_per_batch: int) -> int:
    """The critic's optimizer steps in the warm start: `epochs` passes over its batches, each update of
    `steps_per_batch` steps (the online update's count, `critic_epochs` included)."""
    return len(plan.batches) * epochs * steps_per_batch

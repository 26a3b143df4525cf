# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The critic's offline warm start (`critic_warm_start_prompts`): before the first policy update, the starting policy
samples `critic_warm_start_samples` rollouts of each of a set of training prompts, and the critic learns from them.

A fresh value head knows nothing of the task: for its first updates its values hardly differ between prompts, so
every Pass@k weight is the same (the value cold start). A*-PO (arXiv 2505.20686) and VC-PPO / VAPO start their value
estimates from samples of the starting policy; this is the same for the prefix critic. The targets are Monte Carlo
outcomes of the starting policy, so the warm-started critic is a baseline of that policy, which the online updates
then follow; the policy gradient stays unbiased for any baseline that does not depend on the rollout itself.

The plan is a pure function of the settings (`warm_start_plan`, [`warm_start_plan_from_args`]), so the critic's
schedule can count its steps before they run; [`run_warm_start`] runs it, called by the trainer before the critic is
first read (before the first generated batch, and before prompt sampling's first draw).
"""

import copy
import math
import time
from dataclasses import dataclass

import torch
from accelerate.utils import gather
from transformers.utils import logging

logger = logging.get_logger(__name__)


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


def warm_start_plan_from_args(args, dataset) -> WarmStartPlan:
    """The run's warm start ([`warm_start_plan`] of `args`' `critic_warm_start_*` settings, over `dataset`); an empty
    plan without one."""
    if args.critic_warm_start_prompts == 0:
        return WarmStartPlan([], [])
    return warm_start_plan(
        len(dataset),
        args.critic_warm_start_prompts,
        args.critic_warm_start_samples,
        args.generation_batch_size,
        args.seed,
    )


def check_warm_start_dataset(args, dataset) -> None:
    """Refuse, when the trainer is built, a warm start over a dataset it cannot index."""
    if args.critic_warm_start_prompts > 0 and not hasattr(dataset, "__len__"):
        raise ValueError(
            f"critic_warm_start_prompts={args.critic_warm_start_prompts} draws its prompts from the training "
            f"dataset by index, which a {type(dataset).__name__} has not. Pass a map-style dataset "
            "(`datasets.Dataset`, e.g. `load_dataset(..., streaming=False)`), or set critic_warm_start_prompts=0."
        )


def run_warm_start(trainer) -> None:
    """Run the warm start of `trainer` (an `SRPPOTrainer`), before the critic is first read.

    The starting policy samples `critic_warm_start_samples` rollouts of each of the plan's prompts, through GRPO's
    generation and reward functions (`trainer._scored_batch`), and the critic makes `critic_warm_start_epochs` passes
    over them, each batch's update as an online one (`Critic.learn`, its `critic_epochs` included); the first pass
    learns from each batch as it is generated, the others go over the batches kept (their token ids, not a policy
    head's features). The policy does not move. GRPO's metrics and completion logs of these batches are dropped (the
    trainer state's token count keeps them); `critic/warm_start_*` are logged with the first step's metrics.
    """
    start = time.perf_counter()
    args, critic, accelerator = trainer.args, trainer.critic_backend, trainer.accelerator
    plan = warm_start_plan_from_args(args, trainer.train_dataset)
    metrics = {mode: {name: list(values) for name, values in kept.items()} for mode, kept in trainer._metrics.items()}
    completion_logs = copy.deepcopy(trainer._logs)
    steps, kept, losses, tokens = trainer._critic_steps_per_generation(), [], [], 0
    for index in range(len(plan.batches)):  # the first pass learns from each batch as it is generated
        rows = plan.local_rows(index, accelerator.process_index, accelerator.num_processes)
        _, rewards, lengths, batch, mask = trainer._scored_batch([trainer.train_dataset[row] for row in rows], "train")

        def estimate(values, rows, rewards=rewards, mask=mask):  # (b, C) values of the rows `rows` -> their estimate
            return trainer._advantage_estimate(values, rewards[rows], mask[rows])

        result = critic.learn(batch, mask, estimate, steps, 0)
        losses.append(result.loss)
        batch.cache.clear()  # a policy head's features, (B, C, H): recomputed if the batch is seen again
        tokens += int(gather(lengths.to(rewards.device)).sum())
        if args.critic_warm_start_epochs > 1:
            kept.append((batch, result.estimate.mask, result.estimate.returns, result.values))
    for _ in range(args.critic_warm_start_epochs - 1):  # the other passes, over the batches kept
        for batch, mask, returns, values in kept:
            losses.append(critic.update(batch, mask, steps, 0, returns, values).loss)
            batch.cache.clear()
    for mode, logged in trainer._metrics.items():  # GRPO's metrics of the warm start's batches are not the run's
        logged.clear()
        logged.update(metrics[mode])
    trainer._logs = completion_logs
    warm_start = {
        "prompts": len(plan.prompts),
        "completions": sum(len(b) for b in plan.batches),
        "tokens": tokens,
        "seconds": time.perf_counter() - start,
        "loss": sum(losses) / max(len(losses), 1),
    }
    for name, value in warm_start.items():
        trainer._metrics["train"][f"critic/warm_start_{name}"].append(value)
    logger.info(
        f"Critic warm start: {warm_start['completions']} rollouts of {warm_start['prompts']} prompts "
        f"({tokens} generated tokens) in {warm_start['seconds']:.1f} s, final loss {losses[-1]:.4f}."
    )

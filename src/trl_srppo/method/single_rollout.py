# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""One rollout per prompt on TRL's `GRPOConfig`: [`single_rollout_checks`].

`GRPOConfig.__post_init__` refuses `num_generations < 2`, since GRPO's baseline is the group of a prompt's rollouts.
SR-PPO's baseline is the critic, so one rollout is its normal case. The config's other reads of `num_generations` are
divisibility checks (the eval batch and the generation batch must hold whole groups), which a group of one always
passes. So while GRPO's checks run, `num_generations` holds a group size `n >= 2` that divides the generation batch
(and evaluation groups of one, as the trainer runs them), and 1 again once they are done: every check GRPO makes then
passes or fails as it would for one rollout. `tests/test_config.py` reads `GRPOConfig.__post_init__` and fails if it
reads `num_generations` in any other way.
"""

import contextlib
import os

__all__ = ["grpo_check_group", "single_rollout_checks"]


def grpo_check_group(args) -> int:
    """A group size `n` that divides the generation batch `GRPOConfig` will derive from `args` (whenever that batch is
    valid at all): `generation_batch_size` as given, or `per_device_train_batch_size x steps_per_generation` (or
    `gradient_accumulation_steps`, its default) times the number of processes. The processes are counted from the
    launcher's `WORLD_SIZE` only when the rest is 1.

    Raises:
        `ValueError`: the generation batch holds a single rollout over all processes, which no group of two divides.
    """
    if args.generation_batch_size is not None:  # GRPOConfig requires it to be a multiple of the global batch
        group = args.generation_batch_size
    else:
        group = args.per_device_train_batch_size * (args.steps_per_generation or args.gradient_accumulation_steps)
        if group == 1:
            group = int(os.environ.get("WORLD_SIZE", "1"))
    if group < 2:
        raise ValueError(
            "SRPPOConfig extends TRL's GRPOConfig, which needs a generated batch of at least 2 rollouts; this one "
            "holds 1 (per_device_train_batch_size=1, one step per generation, one process). Set "
            "per_device_train_batch_size >= 2 or gradient_accumulation_steps >= 2."
        )
    return group


@contextlib.contextmanager
def single_rollout_checks(args):
    """Around `GRPOConfig.__post_init__` for a config with `num_generations=1`: the group size of
    [`grpo_check_group`] while GRPO checks it, `num_generations=1` afterwards (and `num_generations_eval` as the user
    left it)."""
    eval_group = args.num_generations_eval
    args.num_generations = grpo_check_group(args)
    args.num_generations_eval = 1 if eval_group is None else eval_group  # the trainer's default: num_generations
    try:
        yield
    finally:
        args.num_generations, args.num_generations_eval = 1, eval_group

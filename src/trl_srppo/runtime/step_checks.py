# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The checks `SRPPOTrainer` runs on the numbers of each step, before any optimizer step uses them.

- [`check_finite`]: a NaN or an inf in critic values, advantages, losses or gradients stops the run with
  [`NonFiniteError`], naming what, where and the fix.
- [`check_finite_rewards`]: a reward of +-inf is an error naming its function (`None`, an unscorable rollout, is not).
- [`check_outcome_range`]: the sigmoid critic's outcome must lie in `[0, 1]`; the error says which setting fixes it.
"""

import torch

__all__ = ["NonFiniteError", "check_finite", "check_finite_rewards", "check_outcome_range"]


class NonFiniteError(FloatingPointError):
    """A NaN or infinite value in the numbers of a training step, found before any optimizer step applied it."""


def check_finite(what: str, tensor: torch.Tensor, step: int, fix: str) -> None:
    """Raise [`NonFiniteError`] naming `what`, the global `step` and the `fix` when `tensor` holds a NaN or an inf.

    Args:
        what (`str`):
            What the tensor is ("critic values", "policy gradients", ...).
        tensor (`torch.Tensor` of any shape):
            The numbers to check.
        step (`int`):
            The global step of the run (`trainer.state.global_step`), for the message.
        fix (`str`):
            What the user can do about it.
    """
    finite = torch.isfinite(tensor.detach())
    if bool(finite.all()):
        return
    bad = tensor.detach()[~finite]
    raise NonFiniteError(
        f"Non-finite {what} at global step {step}: {bad.numel()} of {tensor.numel()} value(s) are NaN or inf "
        f"({int(torch.isnan(bad).sum())} NaN). The run stopped before any optimizer step applied them and before any "
        f"checkpoint held them; resume from the last checkpoint once fixed. {fix}"
    )


def check_finite_rewards(rewards_per_func: torch.Tensor, reward_func_names: list[str], step: int) -> None:
    """Raise a `ValueError` naming the first reward function that returned +-inf.

    Args:
        rewards_per_func (`torch.Tensor` of shape `(N, F)`):
            The rewards of every function, as GRPO gathers them; NaN (a `None`) is an unscorable rollout, not an error.
        reward_func_names (`list[str]` of length `F`):
            The functions' names (`trainer.reward_func_names`).
        step (`int`):
            The global step of the run, for the message.
    """
    infinite = torch.isinf(rewards_per_func).any(dim=0)  # (F,)
    if infinite.any():
        name = reward_func_names[int(infinite.nonzero()[0])]
        raise ValueError(
            f"Reward function '{name}' returned an infinite reward at global step {step}. "
            "Return a finite number, or None when a completion cannot be scored."
        )


# What an outcome outside [0, 1] means under each `srppo_outcome`, before the fixes every mode shares.
OUTCOME_FIXES = {
    "weighted_sum": (
        "A weighted sum passes 1 where several reward functions score on one rollout, and a reward function valued "
        "outside [0, 1] passes it alone: srppo_outcome='normalized_sum' divides the sum by its maximum, for "
        "functions valued in [0, 1] or in [0, srppo_outcome_reward_max]. "
    ),
    "normalized_sum": (
        "srppo_outcome='normalized_sum' takes each function's smallest value as 0 and its largest as 1 (or its "
        "srppo_outcome_reward_max): a function with negative rewards, or above its maximum, is outside that range. "
    ),
    "reward_func": "srppo_outcome='reward_func' trains on the chosen function's score as it is. ",
}


def check_outcome_range(rewards: torch.Tensor, args, step: int) -> None:
    """With the sigmoid critic (`args.critic_head == "sigmoid"`), raise a `ValueError` naming the first outcome outside
    `[0, 1]` and the settings that fix it; NaN (an unscorable rollout) is left alone.

    Args:
        rewards (`torch.Tensor` of shape `(N,)`):
            The outcome of each rollout (`trl_srppo.method.core.outcome_from_rewards`).
        args ([`SRPPOConfig`]):
            The run's settings: `critic_head` and `srppo_outcome`.
        step (`int`):
            The global step of the run, for the message.
    """
    if args.critic_head != "sigmoid":
        return
    bad = torch.isfinite(rewards) & ((rewards < 0) | (rewards > 1))
    if bad.any():
        raise ValueError(
            f"SR-PPO got the outcome {rewards[bad][0].item():.4g} (srppo_outcome={args.srppo_outcome!r}), "
            f"outside [0, 1], at global step {step}. Its sigmoid critic predicts the "
            "probability of success, so the outcome must be in [0, 1]. "
            + OUTCOME_FIXES.get(args.srppo_outcome, "")
            + "Either: srppo_outcome_threshold=<t> (success where the outcome reaches t, for rewards of any "
            "range, e.g. +1 / -1); srppo_outcome='reward_func' with srppo_outcome_reward_func=<name> (one "
            "function's score is the success signal); rescale `reward_weights`; or srppo_method='ppo' (linear "
            "critic) for unbounded rewards."
        )

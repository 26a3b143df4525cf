# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The checks a trainer runs on the numbers of each step, before any optimizer step uses them.

- [`check_finite`]: a NaN or an inf in critic values, advantages, losses or gradients stops the run with
  [`NonFiniteError`], naming what, where and the fix.
- [`check_finite_rewards`]: a reward of +-inf is an error naming its function (`None`, an unscorable rollout, is not).
"""

import torch

__all__ = ["NonFiniteError", "check_finite", "check_finite_rewards"]


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

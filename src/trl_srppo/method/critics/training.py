# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The critic's optimizer steps on a generated batch, for every critic type and mode: mini-batches of rows, each an
optimizer step whose micro-batches' gradients accumulate, with the loss a token mean over every process.

The critic type gives the forward (`critic.forward`, inside `critic.trainable()`); its engine (`critic.engine`) gives
the accumulation context, the backward and the optimizer step (see [`~trl_srppo.method.critics.engine.Engine`]).
"""

from collections.abc import Callable

import torch

from ...runtime.step_checks import check_finite
from ..core import critic_loss
from .engine import CRITIC_FIX

# `targets(rows, raw)`: the value targets and the clipping reference, `(b, C)` each, of the rows `rows` (`(b,)`) from
# their raw values `raw` (`(b, C)`, with a graph).
Targets = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


def train(critic, batch, mask: torch.Tensor, steps: int, global_step: int, targets: Targets) -> dict:
    """`critic_epochs` passes of `steps` optimizer steps of `critic` (a [`Critic`]) over the batch's rows;
    `targets(rows, raw)` gives the value targets and the clipping reference `(b, C)` of the rows `rows` from their raw
    values `raw` `(b, C)`. Returns the fields of a [`CriticUpdate`]: `loss`, `learning_rate`, `grad_norm`,
    `head_learning_rate`."""
    mini_batches = torch.arange(batch.input_ids.size(0), device=batch.input_ids.device).tensor_split(steps)
    losses, grad_norms = [], []
    critic.model.train()
    with critic.trainable():
        for _ in range(critic.args.critic_epochs):
            for rows in mini_batches:
                loss, rates, grad_norm = _optimizer_step(critic, batch, rows, mask, global_step, targets)
                losses.append(loss)
                grad_norms.append(grad_norm)
    return {
        "loss": torch.stack(losses).mean().item(),
        "learning_rate": rates[0],
        "grad_norm": sum(grad_norms) / len(grad_norms),
        "head_learning_rate": None if critic.args.critic_head_learning_rate is None else rates[-1],  # the last group
    }


def _optimizer_step(
    critic, batch, rows: torch.Tensor, mask: torch.Tensor, global_step: int, targets: Targets
) -> tuple[torch.Tensor, list[float], float]:
    """One optimizer step on the mini-batch `rows` (indices `(b,)`), its micro-batches' gradients accumulated.
    Returns the step's loss (the global token mean), its learning rate per parameter group and the gradients' norm
    before clipping."""
    accelerator, engine = critic.accelerator, critic.engine
    num_processes = accelerator.num_processes
    # Token mean over the mini-batch of *all* processes: the processes' gradients are averaged, so each process
    # scales its token sum by `num_processes / global tokens`.
    global_tokens = accelerator.gather(mask[rows].sum().reshape(1)).sum().clamp(min=1.0)
    scale = num_processes / global_tokens
    micro_batches = rows.split(critic.args.per_device_train_batch_size)
    step_loss = torch.zeros((), device=batch.input_ids.device)
    for i, idx in enumerate(micro_batches):
        with engine.accumulation(i == len(micro_batches) - 1):
            raw = critic.forward(batch, idx)  # (b, C)
            loss = _token_sum_loss(critic.args, raw, *targets(idx, raw), mask[idx]) * scale  # -> share of global
            engine.backward(loss)
        step_loss += loss.detach() / num_processes
    check_finite("critic loss", step_loss, global_step, CRITIC_FIX)
    rates = critic.lr_scheduler.get_last_lr()  # this step's, as transformers logs the policy's
    grad_norm = engine.step(critic.optimizer, critic.trainable_parameters(), global_step)
    critic.lr_scheduler.step()
    critic.steps += 1
    return accelerator.gather(step_loss.reshape(1)).sum(), rates, grad_norm


def _token_sum_loss(args, raw: torch.Tensor, returns: torch.Tensor, reference: torch.Tensor, mask: torch.Tensor):
    """The critic's loss of a micro-batch, `(b, C)` tensors, as a token sum (its token mean times its tokens)."""
    loss = critic_loss(
        raw,
        returns,
        mask,
        head=args.critic_head,
        loss_type=args.critic_loss_type,
        mse_coef=args.critic_mse_coef,
        old_values=reference,
        cliprange_value=args.critic_cliprange_value,
    )
    return loss * mask.sum().clamp(min=1.0)

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""How a critic's network runs over the processes: the strategy a [`~trl_srppo.method.critics.base.Critic`] holds as
`critic.engine`, apart from what the critic computes.

An [`Engine`] answers the questions whose answers differ between the ways the network is wrapped: how a micro-batch's
backward accumulates, who reduces the gradients, how an optimizer step is taken, how a fresh value head is set, and in
which form the weights and the optimizer state are gathered for a checkpoint and loaded back
([`~trl_srppo.method.critics.checkpoint`] asks them). This module holds the two whole-module engines:

| engine                 | network                                                  | gradients averaged by |
|------------------------|----------------------------------------------------------|-----------------------|
| [`Engine`]             | whole on every process, Accelerate's or torch's DDP      | the DDP wrapper       |
| [`HandAveragedEngine`] | whole, not wrapped (a policy head, a policy LoRA critic) | an all-reduce by hand |

`fsdp2.FSDP2Engine` (sharded with FSDP2) and `deepspeed_engine.DeepSpeedCriticEngine` (its own DeepSpeed engine) are
in their modes' modules. Every method that touches the network is a collective under a distributed run: call it on
every process.
"""

import contextlib
from collections.abc import Callable

import torch
from torch import nn

from ...runtime.step_checks import check_finite
from .model import start_value_head_at, value_output_layer
from .optimizer_state import load_whole

# What to do about a non-finite number in the critic's values, loss or gradients.
CRITIC_FIX = (
    "Check the critic's starting weights (critic_model_name_or_path, or the checkpoint resumed from), lower "
    "critic_learning_rate, set max_grad_norm (it clips the critic's gradients too) and keep critic_dtype='float32'."
)


def scalar(value) -> float:
    """A 0-d tensor (a `DTensor` too, made whole: a collective) or a number as a Python float."""
    full_tensor = getattr(value, "full_tensor", None)
    return float(full_tensor() if full_tensor is not None else value)


def critic_adamw(params: list[nn.Parameter], args, critic: nn.Module) -> torch.optim.Optimizer:
    """The critic's AdamW over `params`: `critic_learning_rate`, `critic_weight_decay`, the policy's betas and
    epsilon; where `critic_head_learning_rate` is set, the parameters of `params` that belong to `critic`'s value head
    ([`value_output_layer`], `critic` unwrapped) form a second group at that rate (the only group where every parameter
    is the head's)."""
    head_ids = set()
    if args.critic_head_learning_rate is not None:
        head_ids = {id(p) for p in value_output_layer(critic).parameters()}
    groups = [
        {"params": [p for p in params if id(p) not in head_ids]},
        {"params": [p for p in params if id(p) in head_ids], "lr": args.critic_head_learning_rate},
    ]
    return torch.optim.AdamW(
        [group for group in groups if group["params"]],
        lr=args.critic_learning_rate,
        betas=(args.adam_beta1, args.adam_beta2),
        eps=args.adam_epsilon,
        weight_decay=args.critic_weight_decay,
    )


class Engine:
    """A critic network whole on every process, its gradients averaged by the wrapper around it (Accelerate's or
    torch's DDP; none on a single process).

    Args:
        model (`nn.Module`):
            The network a forward runs, as its mode wraps it.
        args ([`SRPPOConfig`]):
            The run's configuration.
        accelerator (`accelerate.Accelerator`):
            The trainer's accelerator (processes, device, collectives).
    """

    whole = True  # every process holds the whole critic and its optimizer state (each may write them)
    engine_checkpoint = False  # the optimizer state goes to an engine checkpoint of its own (`critic/deepspeed/`)

    def __init__(self, model: nn.Module, args, accelerator):
        self.model = model
        self.args = args
        self.accelerator = accelerator

    def unwrapped(self) -> nn.Module:
        """The network without its wrapper (what is saved and loaded)."""
        return self.accelerator.unwrap_model(self.model)

    # ---- one optimizer step -----------------------------------------------------------------------------------------

    def new_optimizer(self, params: list[nn.Parameter]) -> torch.optim.Optimizer:
        """The critic's optimizer over its trainable parameters `params` ([`critic_adamw`])."""
        return critic_adamw(params, self.args, self.unwrapped())

    def accumulation(self, last: bool):
        """Context of one micro-batch's backward: the gradients are reduced across processes at the step's last."""
        return contextlib.nullcontext() if last or not hasattr(self.model, "no_sync") else self.model.no_sync()

    def backward(self, loss: torch.Tensor) -> None:
        loss.backward()

    def average_gradients(self, params: list[nn.Parameter]) -> None:
        """The gradients' mean over processes where no wrapper reduces them (none here: DDP does)."""

    def step(self, optimizer: torch.optim.Optimizer, params: list[nn.Parameter], global_step: int) -> float:
        """Check the gradients of `params`, clip them (`max_grad_norm`), step the optimizer and zero them; returns the
        norm of the gradients (averaged over processes) before clipping."""
        self.average_gradients(params)
        grad_norm = self.gradient_norm([p.grad for p in params if p.grad is not None])
        check_finite("critic gradients", grad_norm, global_step, CRITIC_FIX)
        if self.args.max_grad_norm is not None and self.args.max_grad_norm > 0:
            self.clip(params, grad_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return scalar(grad_norm)

    def gradient_norm(self, grads: list[torch.Tensor]) -> torch.Tensor:
        """The 2-norm of all of `grads` together (averaged over processes already)."""
        return torch.nn.utils.get_total_norm(grads)

    def clip(self, params: list[nn.Parameter], grad_norm: torch.Tensor) -> None:
        """Scale the gradients of `params` to a norm of `max_grad_norm` where `grad_norm` (their norm) exceeds it."""
        torch.nn.utils.clip_grads_with_norm_(params, self.args.max_grad_norm, grad_norm)

    def start_value_head(self, raw: float) -> bool:
        """Set a fresh (all-zero) value head to output `raw` for every prefix; `False` for a head that is not fresh."""
        return start_value_head_at(self.unwrapped(), raw)

    # ---- the checkpoint's form --------------------------------------------------------------------------------------

    def gather_state_dict(self) -> dict | None:
        """The whole state dict where the critic is split over processes (a collective); `None` where each process
        holds it whole."""
        return None

    def optimizer_state_dict(self, optimizer: torch.optim.Optimizer, folder: str | None) -> dict | None:
        """The optimizer state to checkpoint (a collective), or `None` where the engine writes its own into
        `folder`."""
        return optimizer.state_dict()

    def extra_training_state(self) -> dict:
        """What the engine adds to the training state beside the schedule and the step count."""
        return {}

    def load_into(self, load: Callable[[nn.Module], object]) -> None:
        """Run `load(module)` on the unwrapped network (an engine that keeps another copy of the weights updates
        it)."""
        load(self.unwrapped())

    def load_state_dict(self, state_dict: dict) -> None:
        """Load a whole state dict, given on every process."""
        self.unwrapped().load_state_dict(state_dict)

    def load_optimizer_state(self, optimizer: torch.optim.Optimizer, state: dict) -> None:
        """Load a whole optimizer state (keyed by parameter name or by index), given on every process."""
        load_whole(self.model, optimizer, state)

    def load_engine_checkpoint(self, folder: str, state: dict | None) -> None:
        """Restore the engine checkpoint in `folder` (`critic/`), for an engine that writes one."""
        raise NotImplementedError(f"{type(self).__name__} writes no engine checkpoint.")


class HandAveragedEngine(Engine):
    """A critic network whole on every process and not wrapped by DDP (a head on the policy's hidden states, an
    adapter on the policy's own modules): its gradients are averaged over processes by hand before each step."""

    def average_gradients(self, params: list[nn.Parameter]) -> None:
        """The mean of the gradients over processes, in place (zeros for a parameter without one), as DDP would give
        them."""
        num_processes = self.accelerator.num_processes
        if num_processes <= 1:
            return
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            torch.distributed.all_reduce(p.grad)
            p.grad /= num_processes

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The critic interface: what `SRPPOTrainer` asks of a critic, whatever its type and mode.

A [`Critic`] holds its network (`critic.model`, as its mode wraps it), its optimizer, its learning-rate schedule and
its step count. The trainer calls, like verl's `BasePPOCritic` (`compute_values`, `update_critic`):

- `values(batch)`: the values `qhat` `(B, C)` of every prefix (the head applied, checked to be finite), no gradient,
  before the critic learns from the batch;
- `learn(batch, mask, estimate, steps, global_step)`: the values before the batch, the advantage estimate made from
  them, and the critic's update on the batch, a [`CriticUpdate`] holding all three. The critic decides how: one
  forward for the values and a single optimizer step's loss where that step is the whole update, else
  `values` and then `update`;
- `update(batch, mask, steps, global_step, returns, old_values)`: `critic_epochs` passes of `steps` optimizer steps
  on the batch towards `returns` (the warm start's later passes over batches it kept);

and, for its lifecycle: `create_optimizer_and_scheduler(total_steps)`, `start_value_head(raw)`, `dropout_active()`
(whether a train-mode forward drops anything, so that one forward cannot serve both values and update) and
`saving_policy()` (a context for saving the policy). The critic's files are written and read by
[`~trl_srppo.method.critics.checkpoint`] (`save_critic`, `save_critic_training_state`, `load_critic_checkpoint`), not
by the critic.

A critic type (a model of its own, `policy_head`, `policy_lora`) defines what a forward computes (`forward`, and
`trainable`, the context its forward and backward run in); a mode (`data_parallel`, `fsdp2`, `deepspeed_engine`)
chooses its [`~trl_srppo.method.critics.engine.Engine`], the strategy that wraps, steps and checkpoints the network
over the processes. [`trl_srppo.method.critics.build.build_critic`] builds the run's critic from the
`critic_type` registry. Every method that touches the network is a collective under a distributed run: call it on
every process.
"""

import contextlib
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn
from transformers import get_scheduler

from ...runtime.step_checks import check_finite
from ..core import AdvantageEstimate, critic_values
from .engine import CRITIC_FIX, Engine
from .model import prefix_values
from .training import train

__all__ = ["CRITIC_FIX", "Critic", "CriticBatch", "CriticUpdate"]


@dataclass
class CriticBatch:
    """The critic's view of a generated batch: prompt + completion, the completion's `C` prefixes.

    Args:
        input_ids (`torch.Tensor` of shape `(B, P + C)`):
            Left-padded prompts followed by right-padded completions.
        attention_mask (`torch.Tensor` of shape `(B, P + C)`):
            The critic's attention mask: every generated token.
        logits_to_keep (`int`):
            `C`, the padded completion length.
        batch_size (`int`):
            Rows per forward of the values pass (`per_device_train_batch_size`, or the eval one).
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    logits_to_keep: int
    batch_size: int
    cache: dict = field(default_factory=dict)  # what a critic type computes once per batch (a policy head's features)


@dataclass(frozen=True)
class CriticUpdate:
    """What the critic's update on a generated batch reports ([`Critic.update`], [`Critic.learn`]).

    Args:
        loss (`float`):
            The mean over the update's optimizer steps of each step's loss (its token mean over every process).
        learning_rate (`float`):
            The learning rate of the last step (as transformers logs the policy's).
        head_learning_rate (`float`, *optional*):
            The value head's learning rate of the last step, where `critic_head_learning_rate` gives it its own.
        grad_norm (`float`):
            The mean over the update's optimizer steps of the global norm of the critic's gradients before clipping
            (`max_grad_norm`), averaged over processes as the step applies them.
        values (`torch.Tensor` of shape `(B, C)`, *optional*):
            [`Critic.learn`] only: the values before the update (detached).
        estimate ([`~trl_srppo.method.core.AdvantageEstimate`], *optional*):
            [`Critic.learn`] only: the advantage estimate made from `values`.
    """

    loss: float
    learning_rate: float
    grad_norm: float
    head_learning_rate: float | None = None
    values: torch.Tensor | None = None
    estimate: AdvantageEstimate | None = None


class Critic:
    """A critic: its network, optimizer, schedule and step count, and the operations the trainer runs on them.

    Args:
        model (`nn.Module`):
            The network a forward runs, as its mode wraps it (a DDP wrapper, an FSDP2 module, a DeepSpeed engine, or
            the module itself).
        args ([`SRPPOConfig`]):
            The run's configuration.
        accelerator (`accelerate.Accelerator`):
            The trainer's accelerator (processes, device, collectives).
    """

    engine_class: type[Engine] = Engine  # the mode's strategy (`critic.engine`)

    def __init__(self, model: nn.Module, args, accelerator):
        self.model = model
        self.args = args
        self.accelerator = accelerator
        self.engine = self.engine_class(model, args, accelerator)
        self.optimizer = None
        self.lr_scheduler = None
        self.steps = 0  # optimizer steps so far

    # ---- what the trainer calls -------------------------------------------------------------------------------------

    @torch.no_grad()
    def values(self, batch: CriticBatch, global_step: int) -> torch.Tensor:
        """Values `qhat` `(B, C)` of every row (the `critic_head` applied to the raw output), in eval mode,
        `batch.batch_size` rows per forward; a non-finite value is an error naming `global_step`."""
        self.model.eval()
        chunks = [
            self.forward(batch, slice(start, start + batch.batch_size))
            for start in range(0, batch.input_ids.size(0), batch.batch_size)
        ]
        values = critic_values(torch.cat(chunks, dim=0), self.args.critic_head)  # (B, C)
        check_finite("critic values", values, global_step, CRITIC_FIX)
        return values

    def learn(
        self,
        batch: CriticBatch,
        mask: torch.Tensor,
        estimate: Callable[[torch.Tensor, torch.Tensor], AdvantageEstimate],
        steps: int,
        global_step: int,
    ) -> CriticUpdate:
        """The critic's turn on a generated batch: its values before it learns from the batch, the advantage estimate
        `estimate` makes from them, and its update towards the estimate's targets.

        Where the update is a single optimizer step whose train-mode forward drops nothing, and
        `critic_fused_forward` is set, one forward gives both the values (detached) and the step's loss; otherwise
        [`Critic.values`] and then [`Critic.update`].

        Args:
            batch ([`CriticBatch`]):
                The generated batch.
            mask (`torch.Tensor` of shape `(B, C)`):
                The loss mask (tokens of scorable rollouts), known before the values.
            estimate (`Callable`):
                `estimate(values, rows)`: the [`~trl_srppo.method.core.AdvantageEstimate`] of the rows `rows` (indices
                `(b,)`) from their values `(b, C)` before the update. It must be row by row, so that the micro-batches'
                estimates make the whole batch's.
            steps (`int`):
                Optimizer steps per pass over the batch.
            global_step (`int`):
                The policy's step, named by an error about a non-finite number.

        Returns:
            [`CriticUpdate`], with `values` `(B, C)` and `estimate` (the whole batch's).
        """
        if self._fuses(steps):
            return self._update_fused(batch, mask, global_step, estimate)
        values = self.values(batch, global_step)  # (B, C), before the critic sees the batch
        result = estimate(values, torch.arange(values.size(0), device=values.device))
        update = self.update(batch, result.mask, steps, global_step, result.returns, values)
        return dataclasses.replace(update, values=values, estimate=result)

    def _fuses(self, steps: int) -> bool:
        """Whether [`Critic.learn`] takes the values and the update's loss from one forward: `critic_fused_forward`,
        and the update is a single optimizer step (`steps` 1 and `critic_epochs` 1) whose train-mode forward drops
        nothing ([`Critic.dropout_active`])."""
        args = self.args
        return args.critic_fused_forward and args.critic_epochs == 1 and steps == 1 and not self.dropout_active()

    def update(
        self,
        batch: CriticBatch,
        mask: torch.Tensor,
        steps: int,
        global_step: int,
        returns: torch.Tensor,
        old_values: torch.Tensor,
    ) -> CriticUpdate:
        """The critic's optimizer steps on a generated batch: `critic_epochs` passes, each split into `steps`
        mini-batches of rows, each mini-batch into micro-batches of `per_device_train_batch_size` rows.

        Args:
            batch ([`CriticBatch`]):
                The generated batch.
            mask (`torch.Tensor` of shape `(B, C)`):
                The loss mask (tokens of scorable rollouts).
            steps (`int`):
                Optimizer steps per pass.
            global_step (`int`):
                The policy's step, named by an error about a non-finite number.
            returns (`torch.Tensor` of shape `(B, C)`):
                The value targets.
            old_values (`torch.Tensor` of shape `(B, C)`):
                The values before the update (the reference of `critic_cliprange_value`).

        Returns:
            [`CriticUpdate`]: the loss, learning rate and gradient norm (no `values`, no `estimate`).
        """

        def targets(rows: torch.Tensor, raw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return returns[rows], old_values[rows]

        return CriticUpdate(**train(self, batch, mask, steps, global_step, targets))

    def _update_fused(
        self,
        batch: CriticBatch,
        mask: torch.Tensor,
        global_step: int,
        estimate: Callable[[torch.Tensor, torch.Tensor], AdvantageEstimate],
    ) -> CriticUpdate:
        """[`Critic.learn`]'s fused step: the critic's single optimizer step on a generated batch, whose forward also
        gives the values before the step (detached), from which `estimate` makes the advantage estimate and the
        targets."""
        args = self.args
        values, parts = [], []

        def targets(rows: torch.Tensor, raw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            rows_values = critic_values(raw.detach(), args.critic_head)  # (b, C), before the step
            check_finite("critic values", rows_values, global_step, CRITIC_FIX)
            part = estimate(rows_values, rows)
            values.append(rows_values)
            parts.append(part)
            return part.returns, rows_values

        result = CriticUpdate(**train(self, batch, mask, 1, global_step, targets))
        return dataclasses.replace(result, values=torch.cat(values), estimate=AdvantageEstimate.cat(parts))

    def create_optimizer_and_scheduler(self, total_steps: int) -> None:
        """The optimizer (the engine's, over the trainable parameters, the value head's apart), and the schedule
        (`critic_lr_scheduler_type`, else the policy's) over `total_steps`."""
        args = self.args
        self.optimizer = self.engine.new_optimizer(self.trainable_parameters())
        self.lr_scheduler = get_scheduler(
            args.critic_lr_scheduler_type or args.lr_scheduler_type,
            optimizer=self.optimizer,
            num_warmup_steps=args.get_warmup_steps(total_steps),
            num_training_steps=total_steps,
            scheduler_specific_kwargs=args.lr_scheduler_kwargs,
        )

    def start_value_head(self, raw: float) -> bool:
        """Set a fresh (all-zero) value head to output `raw` for every prefix; `False` for a head that is not fresh."""
        return self.engine.start_value_head(raw)

    def dropout_active(self) -> bool:
        """Whether a forward in train mode would drop anything: a dropout module, or an attention-dropout rate (applied
        functionally by transformers' attention layers), above 0, in any module a critic forward runs through."""
        for module in self._network().modules():
            if isinstance(module, torch.nn.Dropout) and module.p > 0:
                return True
            rate = getattr(module, "attention_dropout", 0.0)
            if isinstance(rate, float) and rate > 0:
                return True
        return False

    def saving_policy(self):
        """Context in which the trainer saves the policy (a policy LoRA critic keeps its adapter out of it)."""
        return contextlib.nullcontext()

    def unwrapped(self) -> nn.Module:
        """The critic without its mode's wrapper (what is saved and loaded)."""
        return self.engine.unwrapped()

    def trainable_parameters(self) -> list[nn.Parameter]:
        """The parameters the critic's optimizer updates."""
        with self.trainable():
            return [p for p in self.model.parameters() if p.requires_grad]

    # ---- what a critic type defines ---------------------------------------------------------------------------------

    def forward(self, batch: CriticBatch, rows: torch.Tensor | slice) -> torch.Tensor:
        """Raw values `(b, C)` of the batch's rows `rows`, in float32, with a graph when gradients are enabled."""
        # Explicit autocast: Accelerate's is a no-op under DeepSpeed, where a critic may run beside the engine.
        device, bf16 = self.accelerator.device.type, bool(self.args.bf16)
        with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
            return prefix_values(self.model, batch.input_ids[rows], batch.attention_mask[rows], batch.logits_to_keep)

    def trainable(self):
        """Context in which the critic's forward and backward run (a policy LoRA critic's adapter active)."""
        return contextlib.nullcontext()

    def _network(self) -> nn.Module:
        """Every module a critic forward runs through (for [`Critic.dropout_active`])."""
        return self.model

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The critic protocol: what `SRPPOTrainer` asks of a critic, whatever the mode it runs in, and the logic every mode
shares.

A [`Critic`] holds the network a forward runs (wrapped as its mode needs), its optimizer, its learning-rate schedule
and its step count. What the trainer calls:

- `values(batch)`: the raw values `(B, C)` of every prefix, no gradient, before the critic learns from the batch;
- `update(batch, ...)`: `critic_epochs` passes of optimizer steps on the batch, a [`CriticUpdate`];
- `update_fused(batch, ...)`: the fused step, one optimizer step whose forward also gives the values before the step
  and, from them, the advantage estimate (both in its [`CriticUpdate`]);
- `dropout_active()`, `create_optimizer_and_scheduler(total_steps)`, `start_value_head(raw)`, `saving_policy()`;
- `save(folder)`, `save_training_state(folder)`, `load(checkpoint_folder)`.

The base class runs them for a critic that is a whole module on every process, its gradients averaged by the wrapper
its mode puts around it (Accelerate's or torch's DDP) or by hand ([`Critic.average_gradients`]). A mode overrides the
hooks that differ (the forward, the backward and the optimizer step, the weights' gathering and loading, the optimizer
state's form), each in a module of its own (`data_parallel`, `fsdp2`, `deepspeed_engine`, `policy_head`,
`policy_lora`), and [`trl_srppo.method.critics.build.build_critic`] picks the class. Every method that touches the
network is a collective under a distributed run: call it on every process.
"""

import contextlib
import dataclasses
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn
from transformers import get_scheduler
from transformers.utils import logging

from ...runtime.step_checks import check_finite
from ..core import AdvantageEstimate, critic_loss, critic_values
from .model import (
    CRITIC_SETTINGS,
    CRITIC_SUBFOLDER,
    CRITIC_TRAINING_STATE,
    ENGINE_FOLDER,
    prefix_values,
    start_value_head_at,
    value_output_layer,
)
from .optimizer_state import load_whole
from .weights import adapter_loader, read_state_dict, write_weights

logger = logging.get_logger(__name__)

# What to do about a non-finite number in the critic's values, loss or gradients.
CRITIC_FIX = (
    "Check the critic's starting weights (critic_model_name_or_path, or the checkpoint resumed from), lower "
    "critic_learning_rate, set max_grad_norm (it clips the critic's gradients too) and keep critic_dtype='float32'."
)


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
    cache: dict = field(default_factory=dict)  # what a mode computes once per batch (a policy head's features)


@dataclass(frozen=True)
class CriticUpdate:
    """What the critic's update on a generated batch reports ([`Critic.update`], [`Critic.update_fused`]).

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
            The fused step only: the values before the step, from its forward (detached).
        estimate ([`~trl_srppo.method.core.AdvantageEstimate`], *optional*):
            The fused step only: the advantage estimate made from `values`.
    """

    loss: float
    learning_rate: float
    grad_norm: float
    head_learning_rate: float | None = None
    values: torch.Tensor | None = None
    estimate: AdvantageEstimate | None = None


# `targets(rows, raw)`: the value targets and the clipping reference, `(b, C)` each, of the rows `rows` (`(b,)`) from
# their raw values `raw` (`(b, C)`, with a graph).
Targets = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


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


def has_engine_checkpoint(folder: str) -> bool:
    """Whether a checkpoint's `critic/` folder holds an engine checkpoint of the optimizer state (`critic/deepspeed/`)
    rather than the whole optimizer state inside `CRITIC_TRAINING_STATE`."""
    return os.path.isdir(os.path.join(folder, ENGINE_FOLDER))


def other_mode_error(checkpoint: str, engine_checkpoint: bool) -> ValueError:
    """The error of a checkpoint whose critic optimizer state another `critic_parallelism` wrote."""
    return ValueError(
        f"Checkpoint {checkpoint} holds the critic's optimizer state of another critic_parallelism mode "
        f"(its `{CRITIC_SUBFOLDER}/` has {'no ' if not engine_checkpoint else 'a '}DeepSpeed engine "
        "checkpoint); resume with the critic_parallelism it was written with ('deepspeed' for a DeepSpeed "
        "engine checkpoint; any of 'accelerate', 'replicate' and 'fsdp' otherwise)."
    )


class Critic:
    """A critic in one mode: its network, optimizer, schedule and step count, and the operations on them.

    Args:
        model (`nn.Module`):
            The network a forward runs, as its mode wraps it (a DDP wrapper, an FSDP2 module, a DeepSpeed engine, or
            the module itself).
        args ([`SRPPOConfig`]):
            The run's configuration.
        accelerator (`accelerate.Accelerator`):
            The trainer's accelerator (processes, device, collectives).
    """

    def __init__(self, model: nn.Module, args, accelerator):
        self.model = model
        self.args = args
        self.accelerator = accelerator
        self.optimizer = None
        self.lr_scheduler = None
        self.steps = 0  # optimizer steps so far

    # ---- the network ------------------------------------------------------------------------------------------------

    def unwrapped(self) -> nn.Module:
        """The critic without its mode's wrapper (what is saved and loaded)."""
        return self.accelerator.unwrap_model(self.model)

    def network(self) -> nn.Module:
        """Every module a critic forward runs through (for the dropout check of the fused step)."""
        return self.model

    def dropout_active(self) -> bool:
        """Whether a forward in train mode would drop anything: a dropout module, or an attention-dropout rate (applied
        functionally by transformers' attention layers), above 0, in any module a critic forward runs through."""
        for module in self.network().modules():
            if isinstance(module, torch.nn.Dropout) and module.p > 0:
                return True
            rate = getattr(module, "attention_dropout", 0.0)
            if isinstance(rate, float) and rate > 0:
                return True
        return False

    def trainable_parameters(self) -> list[nn.Parameter]:
        with self.trainable():
            return [p for p in self.model.parameters() if p.requires_grad]

    def trainable(self):
        """Context in which the critic's forward and backward run (a policy LoRA critic's adapter active)."""
        return contextlib.nullcontext()

    def saving_policy(self):
        """Context in which the trainer saves the policy (a policy LoRA critic keeps its adapter out of it)."""
        return contextlib.nullcontext()

    def autocast(self):
        # Explicit, because Accelerate's autocast is a no-op under DeepSpeed, where a critic may run beside the engine.
        return torch.autocast(self.accelerator.device.type, dtype=torch.bfloat16, enabled=bool(self.args.bf16))

    def forward(self, batch: CriticBatch, rows: torch.Tensor | slice) -> torch.Tensor:
        """Raw values `(b, C)` of the batch's rows `rows`, in float32, with a graph when gradients are enabled."""
        with self.autocast():
            return prefix_values(self.model, batch.input_ids[rows], batch.attention_mask[rows], batch.logits_to_keep)

    @torch.no_grad()
    def values(self, batch: CriticBatch) -> torch.Tensor:
        """Raw values `(B, C)` of every row, in eval mode, `batch.batch_size` rows per forward."""
        self.model.eval()
        chunks = [
            self.forward(batch, slice(start, start + batch.batch_size))
            for start in range(0, batch.input_ids.size(0), batch.batch_size)
        ]
        return torch.cat(chunks, dim=0)

    # ---- one optimizer step -----------------------------------------------------------------------------------------

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

        return self._train(batch, mask, steps, global_step, targets)

    def update_fused(
        self,
        batch: CriticBatch,
        mask: torch.Tensor,
        global_step: int,
        estimate: Callable[[torch.Tensor, torch.Tensor], AdvantageEstimate],
    ) -> CriticUpdate:
        """The fused step: the critic's single optimizer step on a generated batch, whose forward also gives the
        values before the step (detached), from which `estimate` makes the advantage estimate and the targets.

        Args:
            batch ([`CriticBatch`]):
                The generated batch.
            mask (`torch.Tensor` of shape `(B, C)`):
                The loss mask (tokens of scorable rollouts), known before the values.
            global_step (`int`):
                The policy's step, named by an error about a non-finite number.
            estimate (`Callable`):
                `estimate(values, rows)`: the [`~trl_srppo.method.core.AdvantageEstimate`] of the rows `rows` (indices
                `(b,)`) from their values `(b, C)` before the step. It must be row by row, so that the micro-batches'
                estimates make the whole batch's.

        Returns:
            [`CriticUpdate`], with `values` `(B, C)` and `estimate` (the whole batch's).
        """
        args = self.args
        if args.critic_epochs != 1:
            raise ValueError("The fused critic step needs a single optimizer step per generated batch.")
        values, parts = [], []

        def targets(rows: torch.Tensor, raw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            rows_values = critic_values(raw.detach(), args.critic_head)  # (b, C), before the step
            check_finite("critic values", rows_values, global_step, CRITIC_FIX)
            part = estimate(rows_values, rows)
            values.append(rows_values)
            parts.append(part)
            return part.returns, rows_values

        result = self._train(batch, mask, 1, global_step, targets)
        return dataclasses.replace(result, values=torch.cat(values), estimate=AdvantageEstimate.cat(parts))

    def _train(
        self, batch: CriticBatch, mask: torch.Tensor, steps: int, global_step: int, targets: Targets
    ) -> CriticUpdate:
        """`critic_epochs` passes of `steps` optimizer steps over the batch's rows; `targets(rows, raw)` gives the
        value targets and the clipping reference `(b, C)` of the rows `rows` from their raw values `raw` `(b, C)`."""
        mini_batches = torch.arange(batch.input_ids.size(0), device=batch.input_ids.device).tensor_split(steps)
        losses, grad_norms = [], []
        self.model.train()
        with self.trainable():
            for _ in range(self.args.critic_epochs):
                for rows in mini_batches:
                    loss, rates, grad_norm = self._optimizer_step(batch, rows, mask, global_step, targets)
                    losses.append(loss)
                    grad_norms.append(grad_norm)
        return CriticUpdate(
            loss=torch.stack(losses).mean().item(),
            learning_rate=rates[0],
            grad_norm=sum(grad_norms) / len(grad_norms),
            head_learning_rate=None if self.args.critic_head_learning_rate is None else rates[-1],  # the last group
        )

    def _optimizer_step(
        self, batch: CriticBatch, rows: torch.Tensor, mask: torch.Tensor, global_step: int, targets: Targets
    ) -> tuple[torch.Tensor, list[float], float]:
        """One optimizer step on the mini-batch `rows` (indices `(b,)`), its micro-batches' gradients accumulated.
        Returns the step's loss (the global token mean), its learning rate per parameter group and the gradients' norm
        before clipping."""
        num_processes = self.accelerator.num_processes
        # Token mean over the mini-batch of *all* processes: the processes' gradients are averaged, so each process
        # scales its token sum by `num_processes / global tokens`.
        global_tokens = self.accelerator.gather(mask[rows].sum().reshape(1)).sum().clamp(min=1.0)
        scale = num_processes / global_tokens
        micro_batches = rows.split(self.args.per_device_train_batch_size)
        step_loss = torch.zeros((), device=batch.input_ids.device)
        for i, idx in enumerate(micro_batches):
            with self.accumulation(i == len(micro_batches) - 1):
                raw = self.forward(batch, idx)  # (b, C)
                loss = self._loss(raw, *targets(idx, raw), mask[idx]) * scale  # token mean -> share of global
                self.backward(loss)
            step_loss += loss.detach() / num_processes
        check_finite("critic loss", step_loss, global_step, CRITIC_FIX)
        rates = self.lr_scheduler.get_last_lr()  # this step's, as transformers logs the policy's
        grad_norm = self.step(global_step)
        self.lr_scheduler.step()
        self.steps += 1
        return self.accelerator.gather(step_loss.reshape(1)).sum(), rates, grad_norm

    def _loss(self, raw: torch.Tensor, returns: torch.Tensor, reference: torch.Tensor, mask: torch.Tensor):
        """The critic's loss of a micro-batch, `(b, C)` tensors, as a token sum (its token mean times its tokens)."""
        args = self.args
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

    def accumulation(self, last: bool):
        """Context of one micro-batch's backward: the gradients are reduced across processes at the step's last."""
        return contextlib.nullcontext() if last or not hasattr(self.model, "no_sync") else self.model.no_sync()

    def backward(self, loss: torch.Tensor) -> None:
        loss.backward()

    def average_gradients(self, params: list[nn.Parameter]) -> None:
        """The gradients' mean over processes where no wrapper reduces them (none here: DDP does)."""

    def step(self, global_step: int) -> float:
        """Check the gradients, clip them (`max_grad_norm`), step the optimizer and zero them; returns the norm of the
        gradients (averaged over processes) before clipping."""
        params = self.trainable_parameters()
        self.average_gradients(params)
        grad_norm = torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None])
        check_finite("critic gradients", grad_norm, global_step, CRITIC_FIX)
        if self.args.max_grad_norm is not None and self.args.max_grad_norm > 0:
            torch.nn.utils.clip_grads_with_norm_(params, self.args.max_grad_norm, grad_norm)  # the norm just taken
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return scalar(grad_norm)

    # ---- optimizer, schedule, start -------------------------------------------------------------------------------

    def new_optimizer(self) -> torch.optim.Optimizer:
        """The critic's optimizer ([`critic_adamw`] over its trainable parameters, its value head's apart)."""
        return critic_adamw(self.trainable_parameters(), self.args, self.unwrapped())

    def create_optimizer_and_scheduler(self, total_steps: int) -> None:
        """The optimizer, and the schedule (`critic_lr_scheduler_type`, else the policy's) over `total_steps`."""
        args = self.args
        self.optimizer = self.new_optimizer()
        self.lr_scheduler = get_scheduler(
            args.critic_lr_scheduler_type or args.lr_scheduler_type,
            optimizer=self.optimizer,
            num_warmup_steps=args.get_warmup_steps(total_steps),
            num_training_steps=total_steps,
            scheduler_specific_kwargs=args.lr_scheduler_kwargs,
        )

    def start_value_head(self, raw: float) -> bool:
        """Set a fresh (all-zero) value head to output `raw` for every prefix; `False` for a head that is not fresh."""
        return start_value_head_at(self.unwrapped(), raw)

    # ---- saving and loading -----------------------------------------------------------------------------------------

    def gather_state_dict(self) -> dict | None:
        """The whole state dict where the critic is split over processes (a collective); `None` where each process
        holds it whole."""
        return None

    def save(self, folder: str, settings: dict, should_save: bool) -> None:
        """Write the critic's weights (safetensors, [`~trl_srppo.method.critics.weights.write_weights`]) and
        `settings` (`CRITIC_SETTINGS`) to `folder`, the `critic/` of a model folder or checkpoint. Every process calls
        it."""
        state_dict = self.gather_state_dict()
        if not should_save or (state_dict is not None and not self.accelerator.is_main_process):
            return
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, CRITIC_SETTINGS), "w", encoding="utf-8") as f:
            json.dump(settings, f, indent=2)
        write_weights(self.unwrapped(), folder, state_dict)

    def optimizer_state_dict(self, folder: str) -> dict | None:
        """The optimizer state to checkpoint (a collective), or `None` where the mode writes its own into `folder`."""
        return self.optimizer.state_dict()

    def extra_training_state(self) -> dict:
        """What a mode adds to `CRITIC_TRAINING_STATE` beside the schedule and the step count."""
        return {}

    def is_whole(self) -> bool:
        """Whether every process holds the whole critic and its optimizer state (each process may write them)."""
        return True

    def save_training_state(self, folder: str, should_save: bool) -> None:
        """Write the optimizer state, the schedule and the step count (`CRITIC_TRAINING_STATE`) to `folder`, the
        checkpoint's `critic/`. Every process calls it."""
        if self.optimizer is None:
            return
        optimizer_state = self.optimizer_state_dict(folder)
        if not should_save or not (self.is_whole() or self.accelerator.is_main_process):
            return
        state = {
            "lr_scheduler": self.lr_scheduler.state_dict(),
            "critic_step": self.steps,
            "num_processes": self.accelerator.num_processes,
        }
        if optimizer_state is not None:
            state["optimizer"] = optimizer_state
        state.update(self.extra_training_state())
        torch.save(state, os.path.join(folder, CRITIC_TRAINING_STATE))

    def load_weights(self, folder: str) -> None:
        """Load the weights [`Critic.save`] wrote in `folder` into the critic (a LoRA critic's adapter, or its whole
        state dict)."""
        load_adapter = adapter_loader(self.unwrapped(), folder)
        if load_adapter is not None:
            self.load_into(load_adapter)
        else:
            self.load_state_dict(read_state_dict(folder))

    def load_into(self, load) -> None:
        """Run `load(module)` on the unwrapped critic (a mode that keeps another copy of the weights updates it)."""
        load(self.unwrapped())

    def load_state_dict(self, state_dict: dict) -> None:
        """Load a whole state dict, given on every process."""
        self.unwrapped().load_state_dict(state_dict)

    def load_optimizer_state(self, state: dict) -> None:
        load_whole(self.model, self.optimizer, state)

    def restore(self, checkpoint: str, folder: str, state: dict | None) -> None:
        """Load the weights and, with `state` (`CRITIC_TRAINING_STATE`, `None` under `save_only_model`), the
        optimizer state of the checkpoint's `critic/` folder: here the safetensors weights and the whole optimizer
        state inside `state`, keyed by name (`fsdp`) or by index, which loads on any number of processes."""
        if state is not None and (has_engine_checkpoint(folder) or "optimizer" not in state):
            raise other_mode_error(checkpoint, has_engine_checkpoint(folder))
        self.load_weights(folder)
        if state is not None:
            self.load_optimizer_state(state["optimizer"])

    def load(self, checkpoint: str) -> None:
        """Restore what [`Critic.save`] and [`Critic.save_training_state`] wrote in `checkpoint`'s `critic/`."""
        folder = os.path.join(checkpoint, CRITIC_SUBFOLDER)
        if not os.path.isdir(folder):
            raise FileNotFoundError(
                f"Checkpoint {checkpoint} has no `{CRITIC_SUBFOLDER}/` folder, so the critic cannot be restored. "
                "Resume from a checkpoint written by SRPPOTrainer."
            )
        state_file = os.path.join(folder, CRITIC_TRAINING_STATE)
        state = torch.load(state_file, map_location="cpu", weights_only=True) if os.path.isfile(state_file) else None
        self.restore(checkpoint, folder, state)
        if state is None:  # `save_only_model=True`: weights only, as for the policy
            logger.warning(
                f"Checkpoint {checkpoint} has the critic's weights but not its optimizer state "
                f"({CRITIC_SUBFOLDER}/{CRITIC_TRAINING_STATE}; written unless save_only_model=True): the critic "
                "resumes with a fresh optimizer and learning-rate schedule."
            )
            return
        self.lr_scheduler.load_state_dict(state["lr_scheduler"])
        self.steps = state["critic_step"]

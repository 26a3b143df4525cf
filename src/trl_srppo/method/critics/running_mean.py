# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""A critic that reads nothing (`critic_type="running_mean"`): one value for every prefix of every prompt, the running
mean of the outcomes.

It is the control that asks what a learned critic adds: the baseline of REINFORCE with a moving-average reward
(Williams, 1992), with no network, no optimizer and no forward. Its value before a batch is `m`; after the batch,

    m <- decay * m + (1 - decay) * mean(Y)

where `mean(Y)` is the batch's success rate over every process's scorable rollouts and `decay` is
`critic_running_mean_decay`. With `critic_value_init="success_rate"` the first batch sets `m` (and values that batch
with its own rate, as a fresh value head does). The baseline depends only on earlier batches, so the policy gradient
stays unbiased; every prompt gets the same value, so the Pass@k weight `k (1 - m)^(k-1)` is one factor for the whole
batch (a step size that falls as the success rate rises), not a weight between prompts.

Its files: `critic/running_mean.safetensors` (the mean and the number of batches it has seen) and
[`RUNNING_MEAN_CONFIG`]. A checkpoint holds nothing more (there is no optimizer state).
"""

import json
import os
from types import SimpleNamespace

import torch
from torch import nn

from ..core import CRITIC_HEADS
from .base import Critic, CriticUpdate
from .checkpoint import RUNNING_MEAN_CONFIG

RUNNING_MEAN_WEIGHTS = "running_mean.safetensors"
CLAMP = 1e-6  # a sigmoid critic's mean stays within [CLAMP, 1 - CLAMP], so that its logit is finite


class RunningMeanValue(nn.Module):
    """The running mean as a module called like a token-classification critic: every position's raw value (`logits`,
    `(B, T, 1)`) is the head's raw output for the mean. Its state is two buffers: `value` (the mean, on the head's
    scale: a probability for the sigmoid head) and `batches` (how many batches it has learned from; 0 for a fresh one).

    Args:
        head (`str`, *optional*, defaults to `"sigmoid"`):
            The run's `critic_head`: how the mean is written as a raw value.
    """

    def __init__(self, head: str = "sigmoid"):
        super().__init__()
        self.head = head
        # A fresh mean outputs raw 0, as a fresh value head does (probability 0.5 for the sigmoid head).
        self.register_buffer("value", torch.tensor(0.5 if CRITIC_HEADS[head].logits else 0.0))
        self.register_buffer("batches", torch.tensor(0, dtype=torch.long))

    def raw(self) -> torch.Tensor:
        """The raw value `()` whose head value is the mean (its logit for the sigmoid head)."""
        if not CRITIC_HEADS[self.head].logits:
            return self.value.float()
        return torch.logit(self.value.float(), eps=CLAMP)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **kwargs):
        """`(B, T)` token ids -> an output whose `logits` `(B, T, 1)` are the raw value of the mean everywhere."""
        return SimpleNamespace(logits=self.raw().to(input_ids.device).expand(*input_ids.shape, 1))

    def save_pretrained(self, folder: str, state_dict: dict | None = None, safe_serialization: bool = True, **kwargs):
        """Write [`RUNNING_MEAN_WEIGHTS`] and [`RUNNING_MEAN_CONFIG`] to `folder` (the trainer's `critic/`)."""
        from safetensors.torch import save_file

        os.makedirs(folder, exist_ok=True)
        state = state_dict if state_dict is not None else self.state_dict()
        save_file({k: v.detach().clone().cpu() for k, v in state.items()}, os.path.join(folder, RUNNING_MEAN_WEIGHTS))
        with open(os.path.join(folder, RUNNING_MEAN_CONFIG), "w", encoding="utf-8") as f:
            json.dump({"critic_type": "running_mean", "critic_head": self.head}, f, indent=2)

    def load_critic_folder(self, folder: str) -> None:
        """Load the state [`~RunningMeanValue.save_pretrained`] wrote in `folder` (resuming from a checkpoint)."""
        from safetensors.torch import load_file

        self.load_state_dict(load_file(os.path.join(folder, RUNNING_MEAN_WEIGHTS)))

    @classmethod
    def from_pretrained(cls, folder: str) -> "RunningMeanValue":
        """Load a running mean written by [`~RunningMeanValue.save_pretrained`]."""
        config_file = os.path.join(folder, RUNNING_MEAN_CONFIG)
        if not os.path.isfile(config_file):
            raise FileNotFoundError(
                f"{folder!r} has no {RUNNING_MEAN_CONFIG}, so it is not a critic saved with "
                "critic_type='running_mean' (the `critic/` folder of such a run). Point critic_model_name_or_path at "
                "one, or leave it unset to start a fresh mean."
            )
        with open(config_file, encoding="utf-8") as f:
            config = json.load(f)
        module = cls(config["critic_head"])
        module.load_critic_folder(folder)
        return module


def running_mean_update(value: torch.Tensor, outcome_sum: torch.Tensor, count: torch.Tensor, decay: float):
    """The mean after a batch: `decay * value + (1 - decay) * outcome_sum / count`; `value` unchanged when the batch
    has no scorable rollout (`count == 0`). All `()` tensors."""
    if float(count) == 0:
        return value
    return decay * value + (1.0 - decay) * outcome_sum / count


class RunningMeanCritic(Critic):
    """`critic_type="running_mean"`: a [`RunningMeanValue`], the same on every process (each batch's sum of outcomes
    and count are summed over the processes before the mean moves).

    Args:
        model ([`RunningMeanValue`]):
            The running mean, on this process's device.
        args, accelerator:
            As for [`Critic`].
    """

    @classmethod
    def build(cls, source, args, accelerator) -> "RunningMeanCritic":
        if source is None:
            module = RunningMeanValue(args.critic_head)
        elif isinstance(source, RunningMeanValue):
            module = source
        elif isinstance(source, str):
            module = RunningMeanValue.from_pretrained(source)
        else:
            raise TypeError(
                "With critic_type='running_mean', critic_model must be a RunningMeanValue or the `critic/` folder of "
                f"a run that saved one, got {type(source).__name__}."
            )
        if module.head != args.critic_head:
            raise ValueError(
                f"The running mean was saved with critic_head={module.head!r}, but this run has "
                f"critic_head={args.critic_head!r}; set critic_head={module.head!r}."
            )
        return cls(module.to(accelerator.device), args, accelerator)

    @torch.no_grad()
    def update(self, batch, mask, steps, global_step, returns, old_values) -> CriticUpdate:
        """Move the mean towards the batch's success rate (`returns` at each scorable rollout's first token: its
        outcome `Y` under the Monte Carlo targets, `gae_lambda=1`). `steps` and `critic_epochs` do not apply: the
        mean sees each batch once. The reported loss is the squared error of the values before the update, the
        learning rate `1 - decay`."""
        rows = mask[:, 0] > 0  # (B,), scorable rollouts with at least one token
        outcomes = returns[:, 0].float()  # (B,)
        errors = (old_values[:, 0].float() - outcomes) ** 2  # (B,)
        totals = torch.stack([outcomes[rows].sum(), rows.sum().float(), errors[rows].sum()])  # (3,)
        totals = self.accelerator.reduce(totals.to(self.accelerator.device), reduction="sum")
        outcome_sum, count, error_sum = totals
        decay = float(self.args.critic_running_mean_decay)
        module = self.model
        module.value.copy_(running_mean_update(module.value, outcome_sum, count, decay).to(module.value.dtype))
        module.batches += 1
        self.steps += 1
        loss = float(error_sum / count) if float(count) > 0 else 0.0
        return CriticUpdate(loss=loss, learning_rate=1.0 - decay, grad_norm=0.0)

    def _fuses(self, steps: int) -> bool:
        """Never: the mean has no forward to share, so [`Critic.learn`] reads its values, then updates it."""
        return False

    def create_optimizer_and_scheduler(self, total_steps: int) -> None:
        """Nothing to create: the mean has no optimizer and no schedule."""

    def start_value_head(self, raw: float) -> bool:
        """Start a fresh mean (no batch seen) at the head value of `raw`; `False` for a mean that has seen one."""
        module = self.model
        if int(module.batches) > 0:
            return False
        head = CRITIC_HEADS[module.head]
        module.value.fill_(float(head.values(torch.tensor(raw))))
        return True

    def trainable_parameters(self) -> list[nn.Parameter]:
        return []

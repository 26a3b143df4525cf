# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The critic whole on every process, its gradients averaged by DDP: prepared by Accelerate beside a policy that
Accelerate prepares too (`critic_parallelism="accelerate"`), or wrapped in torch's DDP beside a policy that DeepSpeed
or FSDP shards (`"replicate"`), since Accelerate prepares one DeepSpeed engine or FSDP wrapping per run. Both run on
the default [`~trl_srppo.method.critics.engine.Engine`]: DDP reduces the gradients at each optimizer step's last
micro-batch."""

import torch
from torch import nn

from .base import Critic


class AccelerateCritic(Critic):
    """`critic_parallelism="accelerate"`: prepared by the trainer's accelerator, like the policy."""

    @classmethod
    def build(cls, critic: nn.Module, args, accelerator) -> "AccelerateCritic":
        return cls(accelerator.prepare_model(critic), args, accelerator)


class ReplicatedCritic(Critic):
    """`critic_parallelism="replicate"`: a whole copy on every process, kept identical by torch DDP's gradient
    all-reduce. Memory: the full critic with its optimizer state on every GPU (a LoRA critic, `critic_use_peft=True`,
    keeps that small)."""

    @classmethod
    def build(cls, critic: nn.Module, args, accelerator) -> "ReplicatedCritic":
        device = accelerator.device
        critic = critic.to(device)
        if accelerator.num_processes > 1:
            critic = torch.nn.parallel.DistributedDataParallel(
                critic, device_ids=[device.index] if device.type == "cuda" else None
            )
        return cls(critic, args, accelerator)

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The prefix critic: its network (`model`), the protocol the trainer drives (`base.Critic`), one class per mode
(`data_parallel`, `fsdp2`, `deepspeed_engine`, `policy_head`, `policy_lora`) and the builder that picks it
(`build`)."""

from .base import Critic, CriticBatch
from .build import build_critic, critic_mode, load_saved_critic, saved_critic_mode
from .model import critic_from_policy, load_critic, prefix_values

__all__ = [
    "Critic",
    "CriticBatch",
    "build_critic",
    "critic_from_policy",
    "critic_mode",
    "load_critic",
    "load_saved_critic",
    "prefix_values",
    "saved_critic_mode",
]

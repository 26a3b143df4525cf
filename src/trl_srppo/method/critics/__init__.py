# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The prefix critic: its network (`model`), the interface the trainer drives (`base.Critic`: `values` and
`learn`), the strategy that runs it over the processes (`engine`, and one module per mode: `data_parallel`,
`fsdp2`, `deepspeed_engine`), the critic types on the policy (`policy_head`, `policy_lora`), its files
(`checkpoint`) and the registry that builds it (`build`)."""

from .base import Critic, CriticBatch, CriticUpdate
from .build import CRITIC_TYPES, build_critic, critic_mode, load_saved_critic, saved_critic_mode
from .checkpoint import load_critic_checkpoint, save_critic, save_critic_training_state
from .model import critic_from_policy, load_critic, prefix_values

__all__ = [
    "CRITIC_TYPES",
    "Critic",
    "CriticBatch",
    "CriticUpdate",
    "build_critic",
    "critic_from_policy",
    "critic_mode",
    "load_critic",
    "load_critic_checkpoint",
    "load_saved_critic",
    "prefix_values",
    "save_critic",
    "save_critic_training_state",
    "saved_critic_mode",
]

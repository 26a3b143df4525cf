# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Which critic a run gets, and how a saved one is read back: the one place that reads `critic_type`,
`critic_parallelism` and the policy's engine.

[`CRITIC_TYPES`] binds each `critic_type` to what builds its critic (the config checks the field against it, once);
a critic of its own (`"separate"`) then takes the class of its resolved `critic_parallelism` from
[`CRITIC_PARALLELISM`]. Each class is a [`~trl_srppo.method.critics.base.Critic`]:

| `critic_type` | mode          | critic                                          | class                             |
|---------------|---------------|-------------------------------------------------|-----------------------------------|
| `separate`    | `accelerate`  | a model of its own, prepared by Accelerate      | `data_parallel.AccelerateCritic`  |
| `separate`    | `replicate`   | a model of its own, whole, torch DDP            | `data_parallel.ReplicatedCritic`  |
| `separate`    | `fsdp`        | a model of its own, sharded with FSDP2          | `fsdp2.FSDPCritic`                |
| `separate`    | `deepspeed`   | a model of its own, its own DeepSpeed engine    | `deepspeed_engine.DeepSpeedCritic`|
| `policy_head` | `policy_head` | a linear head on the policy's hidden states     | `policy_head.PolicyHeadCritic`    |
| `policy_lora` | `policy_lora` | a second LoRA adapter on the policy, and a head | `policy_lora.PolicyLoraCritic`    |
| `running_mean`| `running_mean`| one value for every prefix: the outcomes' mean  | `running_mean.RunningMeanCritic`  |
"""

import os
from collections.abc import Callable
from dataclasses import dataclass

from torch import nn

from ..registry import Registry
from .base import Critic
from .checkpoint import OTHER_CRITIC_TYPES
from .data_parallel import AccelerateCritic, ReplicatedCritic
from .deepspeed_engine import DeepSpeedCritic
from .fsdp2 import FSDPCritic
from .model import build_critic_model, load_critic
from .policy_head import PolicyHeadCritic, PolicyHeadValueModel, PolicyValueHead
from .policy_lora import FSDPPolicyLoraCritic, PolicyLoraCritic, load_policy_lora_critic
from .running_mean import RunningMeanCritic, RunningMeanValue


def policy_zero_stage(deepspeed_config: dict | None) -> int | None:
    """The ZeRO stage of the policy's DeepSpeed config, or `None` when the policy does not run under DeepSpeed."""
    if deepspeed_config is None:
        return None
    return int(deepspeed_config.get("zero_optimization", {}).get("stage", 0))


def resolve_parallelism(requested: str, deepspeed_stage: int | None, fsdp: bool, peft_critic: bool) -> str:
    """The critic mode `critic_parallelism=requested` means for a policy under DeepSpeed ZeRO `deepspeed_stage`
    (`None`: not DeepSpeed) or FSDP. `"auto"` shards a full critic like the policy (`"deepspeed"` under ZeRO-2/3,
    `"fsdp"` under FSDP), replicates it beside ZeRO-0/1 or when it is a LoRA critic (small already), and lets
    Accelerate prepare it otherwise."""
    if requested == "deepspeed" and deepspeed_stage == 0:
        raise ValueError(
            "critic_parallelism='deepspeed' beside a policy under DeepSpeed ZeRO-0: the critic's engine takes the "
            "policy's stage, and stage 0 partitions nothing. Use critic_parallelism='replicate' (or 'auto')."
        )
    if requested != "auto":
        return requested
    if deepspeed_stage is not None:
        return "deepspeed" if deepspeed_stage >= 2 and not peft_critic else "replicate"
    if fsdp:
        return "replicate" if peft_critic else "fsdp"
    return "accelerate"


def critic_mode(args, deepspeed_stage: int | None = None, fsdp: bool = False, peft_critic: bool = False) -> str:
    """The mode of the run's critic: `critic_type` for a critic on the policy, else the resolved
    `critic_parallelism` (see `resolve_parallelism`) for a policy under DeepSpeed ZeRO `deepspeed_stage` (`None`: not
    DeepSpeed) or FSDP, and a LoRA critic (`peft_critic`)."""
    if args.critic_type != "separate":
        return args.critic_type
    return resolve_parallelism(args.critic_parallelism, deepspeed_stage, fsdp, peft_critic)


def critic_model_before_policy(policy, critic_model, args) -> nn.Module | None:
    """The critic model of a mode that has one, built from `critic_model` (or the policy) before the trainer wraps
    the policy; `None` for a critic on the policy, built by [`build_critic`] from the wrapped policy."""
    if critic_mode(args) not in CRITIC_PARALLELISM:  # a critic on the policy
        return None
    return build_critic_model(policy, critic_model, args)


@dataclass(frozen=True)
class CriticSetup:
    """What a critic is built from ([`build_critic`]'s arguments).

    Args:
        critic_model (`nn.Module` or `None`):
            What [`critic_model_before_policy`] built.
        source (`str`, `nn.Module` or `None`):
            The trainer's `critic_model` (a saved critic's folder, or a module), for a critic on the policy.
        policy (`nn.Module`):
            The trainer's policy, as prepared.
        args ([`SRPPOConfig`]):
            The run's configuration.
        accelerator (`accelerate.Accelerator`):
            The trainer's accelerator.
        deepspeed_config (`dict` or `None`):
            The policy's DeepSpeed config, `None` when it does not run under DeepSpeed.
        fsdp (`bool`):
            Whether the policy runs under FSDP.
    """

    critic_model: nn.Module | None
    source: object
    policy: nn.Module
    args: object
    accelerator: object
    deepspeed_config: dict | None
    fsdp: bool


# `critic_type` -> what builds its critic from a [`CriticSetup`].
CRITIC_TYPES = Registry("critic_type")
# A critic of its own: the resolved `critic_parallelism` -> what builds it from a [`CriticSetup`].
CRITIC_PARALLELISM = Registry("critic_parallelism")


@CRITIC_TYPES.register("separate")
def _separate_critic(setup: CriticSetup) -> Critic:
    mode = critic_mode(
        setup.args, policy_zero_stage(setup.deepspeed_config), setup.fsdp, hasattr(setup.critic_model, "peft_config")
    )
    if mode == "accelerate" and (setup.deepspeed_config is not None or setup.fsdp):
        raise ValueError(
            "critic_parallelism='accelerate' cannot be used when the policy runs under DeepSpeed or FSDP "
            "(Accelerate wraps one model per run there); use critic_parallelism='fsdp', 'replicate' or 'auto'."
        )
    return CRITIC_PARALLELISM[mode](setup)


@CRITIC_TYPES.register("policy_head")
def _policy_head_critic(setup: CriticSetup) -> Critic:
    zero3 = policy_zero_stage(setup.deepspeed_config) == 3  # its forward calls the backbone (see PolicyHeadCritic)
    return PolicyHeadCritic.build(setup.policy, setup.source, setup.args, setup.accelerator, through_backbone=zero3)


@CRITIC_TYPES.register("policy_lora")
def _policy_lora_critic(setup: CriticSetup) -> Critic:
    if policy_zero_stage(setup.deepspeed_config) == 3:
        raise ValueError(
            "critic_type='policy_lora' cannot run beside a DeepSpeed ZeRO-3 policy: ZeRO-3 partitions every parameter "
            "of the policy's model, the critic adapter's too, but gathers and partitions gradients only for the "
            "parameters of the policy's own optimizer, so the critic adapter, trained by an optimizer of its own, "
            "has nowhere to put its gradients. Use critic_type='policy_head' (no second adapter), "
            "critic_type='separate' with critic_use_peft=True, or ZeRO-2 or FSDP2 for the policy."
        )
    critic_class = FSDPPolicyLoraCritic if setup.fsdp else PolicyLoraCritic  # ZeRO-2 keeps the weights whole
    return critic_class.build(setup.policy, setup.source, setup.args, setup.accelerator)


@CRITIC_TYPES.register("running_mean")
def _running_mean_critic(setup: CriticSetup) -> Critic:
    return RunningMeanCritic.build(setup.source, setup.args, setup.accelerator)


@CRITIC_PARALLELISM.register("accelerate")
def _accelerate_critic(setup: CriticSetup) -> Critic:
    return AccelerateCritic.build(setup.critic_model, setup.args, setup.accelerator)


@CRITIC_PARALLELISM.register("replicate")
def _replicated_critic(setup: CriticSetup) -> Critic:
    return ReplicatedCritic.build(setup.critic_model, setup.args, setup.accelerator)


@CRITIC_PARALLELISM.register("fsdp")
def _fsdp_critic(setup: CriticSetup) -> Critic:
    return FSDPCritic.build(setup.critic_model, setup.args, setup.accelerator)


@CRITIC_PARALLELISM.register("deepspeed")
def _deepspeed_critic(setup: CriticSetup) -> Critic:
    return DeepSpeedCritic.build(setup.critic_model, setup.args, setup.accelerator, setup.deepspeed_config)


def build_critic(
    critic_model: nn.Module | None, source, policy: nn.Module, args, accelerator, deepspeed_config, fsdp: bool
) -> Critic:
    """The run's critic, built by what [`CRITIC_TYPES`] binds to `args.critic_type` (the arguments are those of
    [`CriticSetup`])."""
    setup = CriticSetup(critic_model, source, policy, args, accelerator, deepspeed_config, fsdp)
    return CRITIC_TYPES[args.critic_type](setup)


def saved_critic_mode(folder: str) -> str:
    """The kind of critic a `critic/` folder holds: `"policy_head"`, `"policy_lora"`, `"running_mean"`, or
    `"separate"` (a model of its own, whatever its parallelism was)."""
    for marker, mode in OTHER_CRITIC_TYPES.items():
        if os.path.isfile(os.path.join(folder, marker)):
            return mode
    return "separate"


def load_saved_critic(
    folder: str,
    policy: Callable[[], nn.Module],
    lora_policy: Callable[[], nn.Module],
    model_init_kwargs: dict | None = None,
) -> nn.Module:
    """A saved critic as a module whose forward gives `(B, L, 1)` raw values (what
    [`~trl_srppo.method.critics.model.prefix_values`] calls), for reading its values outside the trainer.

    Args:
        folder (`str`):
            The `critic/` folder.
        policy (`Callable`):
            Loads the policy a `policy_head` critic reads.
        lora_policy (`Callable`):
            Loads the LoRA policy (its adapter not merged) a `policy_lora` critic sits on.
        model_init_kwargs (`dict`, *optional*):
            `from_pretrained` arguments of a critic model of its own (e.g. `dtype`).
    """
    mode = saved_critic_mode(folder)
    if mode == "running_mean":
        return RunningMeanValue.from_pretrained(folder)
    if mode == "policy_lora":
        return load_policy_lora_critic(lora_policy(), folder)
    if mode == "policy_head":
        return PolicyHeadValueModel(policy(), PolicyValueHead.from_pretrained(folder))
    return load_critic(folder, model_init_kwargs)

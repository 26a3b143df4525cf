# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Which critic a run gets, and how a saved one is read back: the one place that reads `critic_type`,
`critic_parallelism` and the policy's engine.

[`CRITIC_TYPES`] binds each `critic_type` to a [`CriticType`]: what builds its critic and reads a saved one back, and
what it asks of the run (the config checks the field against it, once); a critic of its own (`"separate"`) then takes
the class of its resolved `critic_parallelism` from [`CRITIC_PARALLELISMS`], whose [`CriticParallelism`] entries say
how `"auto"` resolves and what each mode refuses. Each class is a [`~trl_srppo.method.critics.base.Critic`]:

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
from .checkpoint import POLICY_HEAD_CONFIG, POLICY_LORA_CRITIC_CONFIG, RUNNING_MEAN_CONFIG
from .data_parallel import AccelerateCritic, ReplicatedCritic
from .deepspeed_engine import DeepSpeedCritic
from .fsdp2 import FSDPCritic
from .model import build_critic_model, holds_saved_critic_model, load_critic
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
    (`None`: not DeepSpeed) or FSDP: the mode itself, or what `"auto"` picks ([`auto_parallelism`])."""
    parallelism = CRITIC_PARALLELISMS[requested]
    if parallelism.zero_engine and deepspeed_stage == 0:
        raise ValueError(
            "critic_parallelism='deepspeed' beside a policy under DeepSpeed ZeRO-0: the critic's engine takes the "
            "policy's stage, and stage 0 partitions nothing. Use critic_parallelism='replicate' (or 'auto')."
        )
    if parallelism.automatic:
        return parallelism.pick(deepspeed_stage, fsdp, peft_critic)
    return requested


def critic_mode(args, deepspeed_stage: int | None = None, fsdp: bool = False, peft_critic: bool = False) -> str:
    """The mode of the run's critic: `critic_type` for a critic on the policy, else the resolved
    `critic_parallelism` (see `resolve_parallelism`) for a policy under DeepSpeed ZeRO `deepspeed_stage` (`None`: not
    DeepSpeed) or FSDP, and a LoRA critic (`peft_critic`)."""
    if not CRITIC_TYPES[args.critic_type].own_model:
        return args.critic_type
    return resolve_parallelism(args.critic_parallelism, deepspeed_stage, fsdp, peft_critic)


def critic_model_before_policy(policy, critic_model, args) -> nn.Module | None:
    """The critic model of a mode that has one, built from `critic_model` (or the policy) before the trainer wraps
    the policy; `None` for a critic on the policy, built by [`build_critic`] from the wrapped policy."""
    if not CRITIC_TYPES[args.critic_type].own_model:  # a critic on the policy
        return None
    source = critic_model if critic_model is not None else args.critic_model_name_or_path
    if isinstance(source, str):
        refuse_other_critic_type(source, args.critic_type)
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


@dataclass(frozen=True)
class CriticType:
    """What a `critic_type` choice ([`CRITIC_TYPES`]) builds, and what it asks of the run.

    Args:
        build (`Callable`):
            A [`CriticSetup`] to the run's [`~trl_srppo.method.critics.base.Critic`].
        load (`Callable`):
            `(folder, policy, lora_policy, model_init_kwargs)` to the critic saved in `folder` as a module, for
            reading its values outside the trainer (the arguments are [`load_saved_critic`]'s).
        own_model (`bool`):
            Whether the critic is a model of its own, built before the policy is wrapped and placed by
            `critic_parallelism`.
        has_network (`bool`, *optional*, defaults to `True`):
            Whether the critic is a network; `False` for one value for every prefix (a running mean).
        policy_adapter (`bool`, *optional*, defaults to `False`):
            Whether the critic is a LoRA adapter on the policy's base, which takes the policy adapter's LoRA rank and
            alpha where `critic_lora_r` and `critic_lora_alpha` are unset.
        fixed_settings (`tuple[str, ...]`, *optional*, defaults to `()`):
            The settings it cannot take from their defaults (of `critic_use_peft`, `critic_parallelism` and
            `critic_lora_dropout`).
        refusal (`str`, *optional*, defaults to `""`):
            The refusal of `fixed_settings` that are set, naming the fix; `{bad}` stands for the list of those set.
        marker (`str`, *optional*):
            The file that marks a `critic/` folder this type saved ([`saved_critic_mode`]); `None` for a model of its
            own, whose folder is a `save_pretrained` one.
    """

    build: Callable[[CriticSetup], Critic]
    load: Callable[..., nn.Module]
    own_model: bool
    has_network: bool = True
    policy_adapter: bool = False
    fixed_settings: tuple[str, ...] = ()
    refusal: str = ""
    marker: str | None = None

    @property
    def reads_policy(self) -> bool:
        """Whether the critic reads its run's policy (a value head on it, or an adapter on its base)."""
        return self.has_network and not self.own_model


@dataclass(frozen=True)
class CriticParallelism:
    """What a `critic_parallelism` choice ([`CRITIC_PARALLELISMS`]) builds, and what it asks of the run.

    Args:
        build (`Callable`, *optional*):
            A [`CriticSetup`] to the critic of its own in this mode; `None` for `"auto"`, which picks another mode.
        pick (`Callable`, *optional*):
            `(deepspeed_stage, fsdp, peft_critic)` to the mode it resolves to ([`auto_parallelism`]), for `"auto"`.
        prepared_with_policy (`bool`, *optional*, defaults to `False`):
            Whether Accelerate prepares the critic as it prepares the policy, which it cannot beside a policy under
            DeepSpeed or FSDP (one model per run there).
        zero_engine (`bool`, *optional*, defaults to `False`):
            Whether the critic runs in a DeepSpeed engine of its own, at the policy's ZeRO stage beside a DeepSpeed
            policy (never stage 0, which partitions nothing).
    """

    build: Callable[[CriticSetup], Critic] | None = None
    pick: Callable[[int | None, bool, bool], str] | None = None
    prepared_with_policy: bool = False
    zero_engine: bool = False

    @property
    def automatic(self) -> bool:
        """Whether the mode is left to the run (picked from the policy's engine), rather than set."""
        return self.pick is not None


# `critic_type` -> the [`CriticType`] that builds its critic from a [`CriticSetup`].
CRITIC_TYPES = Registry("critic_type")
# `critic_parallelism` -> the [`CriticParallelism`] that places a critic of its own.
CRITIC_PARALLELISMS = Registry("critic_parallelism")


def auto_parallelism(deepspeed_stage: int | None, fsdp: bool, peft_critic: bool) -> str:
    """What `critic_parallelism="auto"` picks beside a policy under DeepSpeed ZeRO `deepspeed_stage` (`None`: not
    DeepSpeed) or FSDP: shard a full critic like the policy (`"deepspeed"` under ZeRO-2/3, `"fsdp"` under FSDP),
    replicate it beside ZeRO-0/1 or when it is a LoRA critic (`peft_critic`: small already), and let Accelerate
    prepare it otherwise."""
    if deepspeed_stage is not None:
        return "deepspeed" if deepspeed_stage >= 2 and not peft_critic else "replicate"
    if fsdp:
        return "replicate" if peft_critic else "fsdp"
    return "accelerate"


def _separate_critic(setup: CriticSetup) -> Critic:
    mode = critic_mode(
        setup.args, policy_zero_stage(setup.deepspeed_config), setup.fsdp, hasattr(setup.critic_model, "peft_config")
    )
    parallelism = CRITIC_PARALLELISMS[mode]
    if parallelism.prepared_with_policy and (setup.deepspeed_config is not None or setup.fsdp):
        raise ValueError(
            "critic_parallelism='accelerate' cannot be used when the policy runs under DeepSpeed or FSDP "
            "(Accelerate wraps one model per run there); use critic_parallelism='fsdp', 'replicate' or 'auto'."
        )
    return parallelism.build(setup)


def _policy_head_critic(setup: CriticSetup) -> Critic:
    zero3 = policy_zero_stage(setup.deepspeed_config) == 3  # its forward calls the backbone (see PolicyHeadCritic)
    return PolicyHeadCritic.build(setup.policy, setup.source, setup.args, setup.accelerator, through_backbone=zero3)


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


def _running_mean_critic(setup: CriticSetup) -> Critic:
    return RunningMeanCritic.build(setup.source, setup.args, setup.accelerator)


def _accelerate_critic(setup: CriticSetup) -> Critic:
    return AccelerateCritic.build(setup.critic_model, setup.args, setup.accelerator)


def _replicated_critic(setup: CriticSetup) -> Critic:
    return ReplicatedCritic.build(setup.critic_model, setup.args, setup.accelerator)


def _fsdp_critic(setup: CriticSetup) -> Critic:
    return FSDPCritic.build(setup.critic_model, setup.args, setup.accelerator)


def _deepspeed_critic(setup: CriticSetup) -> Critic:
    return DeepSpeedCritic.build(setup.critic_model, setup.args, setup.accelerator, setup.deepspeed_config)


CRITIC_PARALLELISMS.register("auto", CriticParallelism(pick=auto_parallelism))
CRITIC_PARALLELISMS.register("accelerate", CriticParallelism(_accelerate_critic, prepared_with_policy=True))
CRITIC_PARALLELISMS.register("replicate", CriticParallelism(_replicated_critic))
CRITIC_PARALLELISMS.register("fsdp", CriticParallelism(_fsdp_critic))
CRITIC_PARALLELISMS.register("deepspeed", CriticParallelism(_deepspeed_critic, zero_engine=True))


def _load_separate(folder: str, policy, lora_policy, model_init_kwargs: dict | None) -> nn.Module:
    return load_critic(folder, model_init_kwargs)


def _load_policy_head(folder: str, policy, lora_policy, model_init_kwargs: dict | None) -> nn.Module:
    return PolicyHeadValueModel(policy(), PolicyValueHead.from_pretrained(folder))


def _load_policy_lora(folder: str, policy, lora_policy, model_init_kwargs: dict | None) -> nn.Module:
    return load_policy_lora_critic(lora_policy(), folder)


def _load_running_mean(folder: str, policy, lora_policy, model_init_kwargs: dict | None) -> nn.Module:
    return RunningMeanValue.from_pretrained(folder)


CRITIC_TYPES.register("separate", CriticType(_separate_critic, _load_separate, own_model=True))
CRITIC_TYPES.register(
    "policy_head",
    CriticType(
        _policy_head_critic,
        _load_policy_head,
        own_model=False,
        marker=POLICY_HEAD_CONFIG,
        fixed_settings=("critic_use_peft", "critic_parallelism"),
        refusal=(
            "critic_type='policy_head' is a value head on the policy's hidden states, placed wherever the policy is, "
            "so {bad} cannot be set (critic_use_peft=False and critic_parallelism='auto'); unset them, or use "
            "critic_type='separate'."
        ),
    ),
)
CRITIC_TYPES.register(
    "policy_lora",
    CriticType(
        _policy_lora_critic,
        _load_policy_lora,
        own_model=False,
        marker=POLICY_LORA_CRITIC_CONFIG,
        policy_adapter=True,
        fixed_settings=("critic_use_peft", "critic_parallelism", "critic_lora_dropout"),
        refusal=(
            "critic_type='policy_lora' is a second LoRA adapter on the policy's PeftModel, run in the policy's train "
            "mode and placed wherever the policy is, so {bad} cannot be set (critic_use_peft=False, "
            "critic_parallelism='auto', critic_lora_dropout=0); unset them, or use critic_type='separate'."
        ),
    ),
)
CRITIC_TYPES.register(
    "running_mean",
    CriticType(
        _running_mean_critic,
        _load_running_mean,
        own_model=False,
        marker=RUNNING_MEAN_CONFIG,
        has_network=False,
        fixed_settings=("critic_use_peft", "critic_parallelism"),
        refusal=(
            "critic_type='running_mean' has no network, so {bad} cannot be set (critic_use_peft=False and "
            "critic_parallelism='auto'); unset them, or use critic_type='separate'."
        ),
    ),
)


def build_critic(
    critic_model: nn.Module | None, source, policy: nn.Module, args, accelerator, deepspeed_config, fsdp: bool
) -> Critic:
    """The run's critic, built by what [`CRITIC_TYPES`] binds to `args.critic_type` (the arguments are those of
    [`CriticSetup`])."""
    setup = CriticSetup(critic_model, source, policy, args, accelerator, deepspeed_config, fsdp)
    return CRITIC_TYPES[args.critic_type].build(setup)


def saved_critic_mode(folder: str) -> str:
    """The kind of critic a `critic/` folder holds: `"policy_head"`, `"policy_lora"`, `"running_mean"`, or
    `"separate"` (a model of its own, whatever its parallelism was)."""
    for name in CRITIC_TYPES:
        marker = CRITIC_TYPES[name].marker
        if marker is not None and os.path.isfile(os.path.join(folder, marker)):
            return name
    return next(name for name in CRITIC_TYPES if CRITIC_TYPES[name].own_model)  # the one type without a marker


def holds_saved_critic(name_or_path: str, revision: str | None = None, trust_remote_code: bool = False) -> bool:
    """Whether `name_or_path` (a folder or Hub id, as `resolve_critic_source` returns it) holds a critic the trainer
    saved, of any `critic_type`, rather than a model that `load_critic` would give a fresh value head."""
    if CRITIC_TYPES[saved_critic_mode(name_or_path)].marker is not None:  # a type's marker file
        return True
    return holds_saved_critic_model(name_or_path, revision, trust_remote_code)


def refuse_other_critic_type(folder: str, critic_type: str) -> None:
    """A clear error for a local `critic/` folder that a critic type other than `critic_type`, and not a model of its
    own, saved: a critic of its own cannot load it."""
    saved = saved_critic_mode(folder)
    if saved != critic_type and CRITIC_TYPES[saved].marker is not None:
        raise ValueError(
            f"{folder!r} holds a critic saved with critic_type={saved!r} ({CRITIC_TYPES[saved].marker}), which is not "
            f"a model of its own and loads only with critic_type={saved!r}. Set critic_type={saved!r} to go on with "
            "it, or leave critic_model_name_or_path unset to start a separate critic from the policy."
        )


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
    return CRITIC_TYPES[saved_critic_mode(folder)].load(folder, policy, lora_policy, model_init_kwargs)

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The runtime's settings, beside the runtime: [`RuntimeConfig`], the fields that bound a run's faults, for any trainer
on `trl_srppo.runtime.mixin.RuntimeMixin`; [`GRPORuntimeConfig`], TRL's `GRPOConfig` with them (what
`trl-srppo train` parses for `trainer: grpo`). `SRPPOConfig` takes them the same way."""

from dataclasses import dataclass, field, fields

from transformers import TrainingArguments
from trl import GRPOConfig

__all__ = ["GRPORuntimeConfig", "RuntimeConfig"]

# transformers 5.2x renamed `gradient_checkpointing` to `activation_checkpointing` and warns on the old name, which
# TRL's GRPOConfig sets by default and every recipe uses; older releases know only the old name.
_ACTIVATION_CHECKPOINTING = "activation_checkpointing" in {f.name for f in fields(TrainingArguments)}


@dataclass
class RuntimeConfig:
    r"""
    The settings of trl-srppo's runtime, mixed into a TRL config (put it before the config class:
    `class MyConfig(RuntimeConfig, GRPOConfig)`). A trainer on the runtime refuses a config without them. The config
    reads `gradient_checkpointing` (the name TRL's default and every recipe use) as transformers' newer
    `activation_checkpointing` where that is unset, without the deprecation warning at every run.

    Parameters:
        > Parameters that bound a run's faults

        reward_timeout (`float`, *optional*, defaults to `600.0`):
            Seconds each call of a Python reward function may take on one process before the run stops with an error
            naming the function and the process; otherwise a function stuck on one process leaves every other process
            waiting. A synchronous function runs in the main thread, as under GRPO (so verifiers that bound their own
            work with `signal.alarm`, such as math-verify, keep their limits), and a timer signal (`SIGUSR1`) ends it
            at the deadline. An async function gets `asyncio.wait_for`, which ends a call waiting at an `await` but
            cannot preempt one that blocks the event loop. Reward models get no deadline. `None` disables the deadline.
        save_on_preemption (`bool`, *optional*, defaults to `True`):
            While training, the first `SIGTERM` or `SIGUSR1` (what SLURM, Kubernetes and torchrun send before they
            take the machine) stops the run at the end of the current optimizer step, on every process, with a
            complete checkpoint, and `train()` raises `trl_srppo.runtime.preemption.TrainingPreempted`, a `SystemExit`
            with status 128 + the signal's number (143 for SIGTERM); relaunch with `--resume_from_checkpoint true`
            (`trainer.train(resume_from_checkpoint=True)`) to go on. A second signal ends the run at once. The grace
            period must cover the rest of a step, generation included, and a save. `False` leaves both signals their
            default action (the process ends at once, with no checkpoint).

        > Parameters that control what the run logs

        log_kl_from_start (`bool`, *optional*, defaults to `False`):
            Log the KL divergence of the policy from the starting policy with every generated batch of training, on
            that batch's completions: `policy/kl_from_start` (per token, the estimator GRPO logs as `kl`) and
            `policy/sequence_kl_from_start` (per completion). With `beta = 0` GRPO computes no KL; this keeps a
            frozen copy of the starting model for it (a PEFT policy uses itself with its adapters off, and `beta > 0`
            GRPO's own reference), at the cost of its weights' memory and one forward pass per generated batch
            (`trl_srppo.runtime.policy_drift`).
    """

    reward_timeout: float | None = field(
        default=600.0,
        metadata={
            "help": "Seconds a call of a Python reward function (sync, or async through asyncio.wait_for) may take on "
            "one process before the run stops with an error; None disables the deadline."
        },
    )
    save_on_preemption: bool = field(
        default=True,
        metadata={
            "help": "A SIGTERM or SIGUSR1 during training stops the run at the end of the current optimizer step "
            "with a complete checkpoint and exit status 128 + the signal's number; a second one ends it at once. "
            "False leaves the signals their default action."
        },
    )

    log_kl_from_start: bool = field(
        default=False,
        metadata={
            "help": "Log the policy's KL divergence from the starting policy with every generated batch "
            "(policy/kl_from_start, policy/sequence_kl_from_start); with beta=0 a frozen copy of the starting model "
            "is kept for it."
        },
    )

    def __post_init__(self):
        if _ACTIVATION_CHECKPOINTING and self.activation_checkpointing is None:
            # Either name sets it, without transformers' deprecation warning at every run.
            self.activation_checkpointing = self.gradient_checkpointing
        if self.reward_timeout is not None and not self.reward_timeout > 0:
            raise ValueError(
                f"reward_timeout must be > 0 seconds, or None to disable the deadline; got {self.reward_timeout}."
            )
        super().__post_init__()


@dataclass
class GRPORuntimeConfig(RuntimeConfig, GRPOConfig):
    r"""
    TRL's [`~trl.GRPOConfig`] with the runtime's settings ([`RuntimeConfig`]: `reward_timeout`,
    `save_on_preemption`): the config of TRL's `GRPOTrainer` on trl-srppo's runtime
    (`trl_srppo.runtime.mixin.grpo_trainer_class()`, `trainer: grpo`).
    """

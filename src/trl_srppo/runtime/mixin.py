# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The runtime as one layer: [`RuntimeMixin`], everything trl-srppo changes in a TRL `GRPOTrainer` beyond the method,
the same for `SRPPOTrainer` and for `trainer: grpo` ([`with_runtime`], [`grpo_trainer_class`]).

[`RUNTIME_HOOKS`] is the one list of the `GRPOTrainer` / `Trainer` methods it overrides, each with what it changes;
`tests/test_trl_hooks.py` derives the overridden methods from the trainers' MRO and checks them against it. A trainer
built as `class MyTrainer(SRPPOMethod, GRPOTrainer)` (or `trl_srppo.method.srppo_trainer.SRPPOMethodTrainer`) runs the
method on TRL's own runtime, with none of these changes.
"""

from .config import GRPORuntimeConfig, RuntimeConfig
from .resume import ReliableTrainerMixin
from .reward_deadline import guard_reward_func
from .run_output import RunOutputMixin
from .teardown import drain_gloo_at_exit

__all__ = ["RUNTIME_HOOKS", "RuntimeMixin", "grpo_trainer_class", "with_runtime"]

# Every `GRPOTrainer` / `Trainer` method the runtime overrides -> what the override changes.
RUNTIME_HOOKS = {
    "__init__": (
        "a config without the runtime's settings (`trl_srppo.runtime.config.RuntimeConfig`) refused, "
        "vLLM's CPU colocate set-up before GRPO starts the engine, `ddp_timeout` on every process-group backend, a "
        "warning when the Accelerate config's engine is not the run's, each Python reward function run under its "
        "deadline (`reward_timeout`) with its output checked, the starting policy kept for `log_kl_from_start`, "
        "gloo's worker threads drained at the script's exit (`trl_srppo.runtime.teardown.drain_gloo_at_exit`)"
    ),
    "train": (
        "a dataset smaller than one generated batch and missing reward columns refused at start; "
        "`resume_from_checkpoint=True` takes the newest complete checkpoint, a partial one is refused; SIGTERM and "
        "SIGUSR1 stop the run with a complete checkpoint"
    ),
    "_save_checkpoint": (
        "a checkpoint marked complete once every process wrote its part, before older ones are rotated away; the rest "
        "of a generated batch kept in it"
    ),
    "_init_training_state": "a resume in the middle of a generated batch goes on with that batch",
    "_load_optimizer_and_scheduler": "a multi-process CPU run's optimizer state loads onto `cpu`",
    "_get_train_sampler": "TRL's sampler with the order of epoch `e` from the seed and `e` alone: exact on resume",
    "_calculate_rewards": "the share of completions each reward function cannot read, logged and warned about",
    "_generate_single_turn": "a progress bar of decoding steps while transformers generates",
    "_generate_and_score_completions": (
        "counts the generated batches, for completion logs once per batch; with `log_kl_from_start`, the batch's KL "
        "from the starting policy (`trl_srppo.runtime.policy_drift`)"
    ),
    "log": (
        "completion logs printed and saved once per generated batch, never empty; each training step's log with the "
        "process's memory (`memory/rss_mib`, `memory/peak_rss_mib`)"
    ),
    "create_model_card": "the card names a local model folder and where the result is",
    "_issue_warnings_after_load": "no missing-key warning on resume for a tied weight",
}


class RuntimeMixin(ReliableTrainerMixin, RunOutputMixin):
    """Complete checkpoints and exact resume, preemption, reward deadlines, start-up checks, vLLM's CPU set-up and what
    the run shows its user, for a TRL `GRPOTrainer` (put the mixin before it): the overrides of [`RUNTIME_HOOKS`].

    A trainer on this runtime may override `_check_resume_settings(checkpoint)`, called before a resume loads
    anything, to refuse a checkpoint written with other settings.
    """

    def __init__(self, model, reward_funcs=None, args=None, *positional, **kwargs):
        if args is None:  # as GRPOTrainer names its default config, with the runtime's settings
            model_name = model if isinstance(model, str) else model.config._name_or_path
            args = GRPORuntimeConfig(f"{str(model_name).split('/')[-1]}-GRPO")
        if not isinstance(args, RuntimeConfig):
            raise TypeError(
                f"{type(self).__name__} runs on trl-srppo's runtime, whose settings (reward_timeout, "
                f"save_on_preemption) a {type(args).__name__} lacks. Build the config with "
                "trl_srppo.runtime.config.GRPORuntimeConfig(...) (every GRPOConfig field, plus the runtime's), or "
                "SRPPOConfig(...) for SR-PPO."
            )
        super().__init__(model, reward_funcs, args, *positional, **kwargs)
        drain_gloo_at_exit()  # a multi-process CPU run's script then exits with its own status, not an abort
        self.reward_funcs = [
            guard_reward_func(func, name, self.args, self._reward_call_site)
            for func, name in zip(self.reward_funcs, self.reward_func_names)
        ]

    def _reward_call_site(self) -> str:
        # Where a reward function runs when it is called, for the message of a call past its deadline.
        return (
            f"on process {self.accelerator.process_index} (phase: scoring the rollouts of global step "
            f"{self.state.global_step})"
        )


def with_runtime(trainer_class: type) -> type:
    """`trainer_class` (a `GRPOTrainer` or a subclass) on trl-srppo's runtime: a subclass with [`RuntimeMixin`]
    first, of the same name."""
    return type(trainer_class.__name__, (RuntimeMixin, trainer_class), {"__module__": __name__})


def grpo_trainer_class() -> type:
    """TRL's `GRPOTrainer` on trl-srppo's runtime: what `trl-srppo train` runs for `trainer: grpo`."""
    from trl import GRPOTrainer

    return with_runtime(GRPOTrainer)

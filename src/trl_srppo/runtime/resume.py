# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""What keeps a long run from losing more than its last checkpoint, in a TRL `GRPOTrainer`: [`ReliableTrainerMixin`]
(part of `trl_srppo.runtime.mixin.RuntimeMixin`, for `SRPPOTrainer` and `trainer: grpo` alike).

- Complete checkpoints (`trl_srppo.runtime.checkpoints`): marked complete once every process has written its part,
before
  older ones are rotated away; `resume_from_checkpoint=True` takes the newest complete one.
- Exact resume: [`EpochRepeatSampler`], TRL's `RepeatSampler` with the permutation of epoch `e` drawn from the seed
  and `e` alone, so a run resumed in or after the second epoch sees the same prompts in the same order as an
  uninterrupted one (the parent's generator is seeded once per sampler and a resumed run builds a new sampler, which
  would start again at epoch 0's order); and a checkpoint in the middle of a generated batch keeps the rest of it,
  which the resumed run goes on with.
- `ddp_timeout` applied to the process group on every backend, the start-up checks of
`trl_srppo.runtime.startup_checks`
  when training starts, and a run stopped by SIGTERM or SIGUSR1 ended with a complete checkpoint
  (`trl_srppo.runtime.preemption`, `save_on_preemption`).
"""

import contextlib
import logging
import os
import shutil

import torch
from trl.trainer.utils import RepeatSampler

from .checkpoints import (
    CHECKPOINT_COMPLETE,
    TRAINER_STATE,
    check_resume_processes,
    checkpoint_processes,
    is_partial_write,
    last_complete_checkpoint,
    list_checkpoints,
    mark_checkpoint_complete,
    read_json,
    resolve_resume_checkpoint,
)
from .preemption import stop_on_preemption
from .startup_checks import check_one_generated_batch, check_reward_columns, engine_mismatch

__all__ = ["GENERATION_BUFFER", "EpochRepeatSampler", "ReliableTrainerMixin", "plain_cpu_device"]

logger = logging.getLogger(__name__)

GENERATION_BUFFER = "generation_buffer"  # a checkpoint's folder of each process's generated batch, when mid-way


class EpochRepeatSampler(RepeatSampler):
    """TRL's `RepeatSampler` whose shuffled order in epoch `e` depends on the seed and `e` only.

    The permutation of epoch `e` is the `(e + 1)`-th draw of a generator seeded with `seed`, as in the parent when one
    sampler lives through the whole run, so an uninterrupted run sees the same order as with TRL's sampler; and a
    sampler built for a resumed run (the `Trainer` calls `set_epoch` before each epoch) starts at the order of the
    epoch it resumes in, where the parent's would start at epoch 0's.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        if self.shuffle and self.seed is not None:
            self.generator = torch.Generator()
            self.generator.manual_seed(self.seed)
            for _ in range(self.epoch):
                torch.randperm(self.num_samples, generator=self.generator)
        yield from super().__iter__()


# ---- the generated batch in a checkpoint ----------------------------------------------------------------------------


def _to_device(value, device):
    # A generated batch (dicts and lists of tensors and plain values) onto `device`.
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {k: _to_device(v, device) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to_device(v, device) for v in value)
    return value


def _plain(value) -> bool:
    # Whether `torch.load(weights_only=True)` reads `value` back: tensors, and dicts, lists and plain tuples of them
    # and of strings, numbers, booleans and None.
    if value is None or isinstance(value, (torch.Tensor, str, int, float, bool)):
        return True
    if isinstance(value, dict):
        return all(isinstance(k, (str, int)) and _plain(v) for k, v in value.items())
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):  # not a namedtuple
        return all(_plain(v) for v in value)
    return False


class ReliableTrainerMixin:
    """Complete checkpoints, `resume_from_checkpoint=True` that skips incomplete ones, an exact sampler order on
    resume, a resume in the middle of a generated batch that goes on with that batch, `ddp_timeout` on every
    process-group backend, a `train_dataset` smaller than one generated batch refused when training starts, a SIGTERM
    or SIGUSR1 that stops the run with a complete checkpoint (`trl_srppo.runtime.preemption`), and vLLM's colocate
    settings (`trl_srppo.runtime.vllm_cpu`), and a one-line warning when the Accelerate config asks for FSDP or
    DeepSpeed but the run got another engine (`trl_srppo.runtime.startup_checks.engine_mismatch`), for a TRL
    `GRPOTrainer` (put the mixin first).

    Overrides `Trainer.train`, `Trainer._save_checkpoint`, `Trainer._init_training_state` (the generated batch of
    a checkpoint), `Trainer._load_optimizer_and_scheduler` and `GRPOTrainer._get_train_sampler`.
    """

    def __init__(self, model, reward_funcs=None, args=None, *positional, **kwargs):
        from .vllm_cpu import check_engine_dtype, prepare_colocate

        prepare_colocate(model, args)  # before GRPO starts vLLM
        super().__init__(model, reward_funcs, args, *positional, **kwargs)
        self._apply_ddp_timeout()
        check_engine_dtype(self)
        mismatch = engine_mismatch(os.environ, self.accelerator.distributed_type)
        if mismatch and self.accelerator.is_main_process:
            logger.warning(mismatch)

    def _check_resume_settings(self, checkpoint: str) -> None:
        """A trainer's own check that `checkpoint` was written with settings this run can resume (nothing here)."""

    def _pool_factor(self) -> int:
        """How many generated batches of prompts the data loader gives for each generated batch: 1 here; a trainer
        that draws each batch's prompts from a larger pool says how large (checked against the dataset's size when
        training starts)."""
        return 1

    def _apply_ddp_timeout(self):
        # Transformers passes `ddp_timeout` to the process group only off CPU; a CPU (gloo) run keeps torch's 30
        # minutes. Applied here to whatever group exists, so a stuck process ends every run within `ddp_timeout`.
        if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
            return
        from torch.distributed.distributed_c10d import _set_pg_timeout

        try:
            _set_pg_timeout(self.args.ddp_timeout_delta)
        except (ValueError, AssertionError, RuntimeError) as err:  # a backend without a settable timeout
            logger.warning("Could not apply ddp_timeout=%s s to the process group: %s", self.args.ddp_timeout, err)

    def train(self, resume_from_checkpoint=None, *args, **kwargs):
        check_one_generated_batch(
            self.train_dataset, self.args, self.num_generations, self.accelerator.num_processes, self._pool_factor()
        )
        check_reward_columns(self.train_dataset, self.reward_funcs, self.rollout_func)
        if isinstance(resume_from_checkpoint, bool) and resume_from_checkpoint:
            resume_from_checkpoint = resolve_resume_checkpoint(self.args.output_dir)
            if resume_from_checkpoint is not None:
                logger.info("Resuming from %s, the newest complete checkpoint.", resume_from_checkpoint)
        explicit = isinstance(resume_from_checkpoint, (str, os.PathLike)) and os.path.isdir(resume_from_checkpoint)
        if explicit and is_partial_write(str(resume_from_checkpoint)):
            newest = last_complete_checkpoint(os.path.dirname(os.path.abspath(resume_from_checkpoint)))
            raise ValueError(
                f"Checkpoint {resume_from_checkpoint} was cut short while saving (no {TRAINER_STATE}, no "
                f"{CHECKPOINT_COMPLETE}): it cannot be resumed. "
                + (f"Resume from {newest}, the newest complete one, or " if newest else "")
                + "pass resume_from_checkpoint=True (--resume_from_checkpoint true) to take the newest complete one."
            )
        if isinstance(resume_from_checkpoint, (str, os.PathLike)) and os.path.isdir(resume_from_checkpoint):
            self._check_resume_settings(str(resume_from_checkpoint))
            deepspeed_config = None
            if getattr(self, "is_deepspeed_enabled", False):
                deepspeed_config = self.accelerator.state.deepspeed_plugin.deepspeed_config
            warning = check_resume_processes(
                str(resume_from_checkpoint),
                self.accelerator.num_processes,
                self.args.per_device_train_batch_size,
                self.args.ignore_data_skip,
                deepspeed_config,
            )
            if warning is not None and self.accelerator.is_main_process:
                logger.warning(warning)
        with stop_on_preemption(self):
            return super().train(resume_from_checkpoint, *args, **kwargs)

    def _get_train_sampler(self, dataset=None):
        sampler = super()._get_train_sampler(dataset)
        if type(sampler) is not RepeatSampler:
            return sampler
        return EpochRepeatSampler(
            data_source=sampler.data_source,
            mini_repeat_count=sampler.mini_repeat_count,
            batch_size=sampler.batch_size,
            repeat_count=sampler.repeat_count,
            shuffle=sampler.shuffle,
            seed=sampler.seed,
        )

    def _save_checkpoint(self, model, trial):
        # The parent writes the files, then rotates older checkpoints away. The marker goes in between, once every
        # process has written its part: the rotation must never leave a run with no complete checkpoint.
        from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, rotate_checkpoints

        run_dir = self._get_output_dir(trial=trial)
        folder = os.path.join(run_dir, f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}")
        if self.args.should_save and os.path.exists(os.path.join(folder, CHECKPOINT_COMPLETE)):
            os.remove(os.path.join(folder, CHECKPOINT_COMPLETE))  # rewritten in place: incomplete until done
        limit = self.args.save_total_limit
        self.args.save_total_limit = None
        try:
            super()._save_checkpoint(model, trial)
        finally:
            self.args.save_total_limit = limit
        self._save_generation_buffer(folder)
        self.accelerator.wait_for_everyone()
        if self.args.should_save:
            mark_checkpoint_complete(
                folder,
                self.state.global_step,
                self.accelerator.num_processes,
                self.args.per_device_train_batch_size,
            )
            if limit is not None:
                # Saves cut short by a kill are never resumed from (a resumed run writes its step again): they go
                # first, so that the limit keeps as many whole checkpoints as it says.
                for stale in list_checkpoints(run_dir):
                    if is_partial_write(stale) and os.path.normpath(stale) != os.path.normpath(folder):
                        logger.warning("Removing %s, a save cut short (no %s).", stale, TRAINER_STATE)
                        shutil.rmtree(stale, ignore_errors=True)
            rotate_checkpoints(
                output_dir=run_dir,
                save_total_limit=limit,
                best_model_checkpoint=self.state.best_model_checkpoint,
                use_mtime=True,
            )

    def _generation_schedule(self) -> list[int]:
        # `steps_per_generation` and `num_iterations`: a generated batch serves their product in micro-steps.
        return [self.args.steps_per_generation, getattr(self, "num_iterations", 1)]

    def _generation_buffer_file(self, folder: str) -> str:
        return os.path.join(folder, GENERATION_BUFFER, f"process_{self.accelerator.process_index}.pt")

    def _save_generation_buffer(self, folder: str) -> None:
        # GRPO generates a batch for `steps_per_generation * num_iterations` micro-steps and forgets it on resume, so a
        # checkpoint in the middle of a batch would resume on a new one (and an SR-PPO critic would learn twice from
        # its prompts). Each process keeps its rest of the batch and its micro-step count in the checkpoint; the count
        # alone when the batch cannot be kept, so that a resume still generates on the run's schedule.
        path = self._generation_buffer_file(folder)
        if os.path.exists(path):
            os.remove(path)  # a checkpoint rewritten in place
        buffered = getattr(self, "_buffered_inputs", None)
        steps_per_generation, num_iterations = self._generation_schedule()
        # At a generation boundary there is nothing to keep.
        if buffered is None or self._step % (steps_per_generation * num_iterations) == 0:
            return
        if not _plain(buffered):  # something a safe load cannot read back (a custom rollout's objects)
            logger.warning(
                "The generated batch holds objects other than tensors and plain values, so %s does not keep it: a "
                "resume from it generates a new batch for the rest of it.",
                folder,
            )
            buffered = None
        os.makedirs(os.path.dirname(path), exist_ok=True)
        state = {
            "global_step": self.state.global_step,
            "step": self._step,
            "schedule": self._generation_schedule(),
            "buffered_inputs": buffered,
        }
        torch.save(_to_device(state, "cpu"), path)

    def _init_training_state(
        self, max_steps, num_update_steps_per_epoch, num_train_epochs, resume_from_checkpoint, trial
    ):
        # Where the Trainer restores its state from the checkpoint (global step, callbacks), GRPO's is restored too:
        # its micro-step count and the rest of the generated batch.
        trained = super()._init_training_state(
            max_steps, num_update_steps_per_epoch, num_train_epochs, resume_from_checkpoint, trial
        )
        if resume_from_checkpoint is not None:
            self._load_generation_buffer(resume_from_checkpoint)
        return trained

    def _load_optimizer_and_scheduler(self, checkpoint):
        with plain_cpu_device(self.args):
            super()._load_optimizer_and_scheduler(checkpoint)

    def _load_generation_buffer(self, checkpoint: str) -> None:
        """Resume in the middle of a generated batch: this process's rest of the batch and GRPO's micro-step count.
        Where the batch cannot be restored (written by another number of processes, or not kept), the count alone is,
        so the run generates a new batch of the same prompts for the rest of it and then goes on on its schedule (a
        count of 0 would put every later generation out of step with the checkpoint's). With another schedule
        (`steps_per_generation`, `num_iterations`) neither is."""
        path = self._generation_buffer_file(checkpoint)
        if not os.path.isfile(path):  # another process's file (a checkpoint of fewer processes), or none at all
            path = os.path.join(checkpoint, GENERATION_BUFFER, "process_0.pt")
        if not os.path.isfile(path):  # saved at a generation boundary, or by a Trainer that does not keep it
            return
        state = torch.load(path, map_location="cpu", weights_only=True)
        schedule = self._generation_schedule()
        if state.get("schedule") != schedule:
            logger.warning(
                "Checkpoint %s was saved in the middle of a generated batch with steps_per_generation, num_iterations "
                "= %s, and this run has %s: it generates a new batch for the rest of it.",
                checkpoint,
                state.get("schedule"),
                schedule,
            )
            return
        saved_step = read_json(os.path.join(checkpoint, TRAINER_STATE)).get("global_step")
        if state["global_step"] != saved_step:
            raise ValueError(
                f"{path} was written at step {state['global_step']}, but its checkpoint is at step {saved_step}: "
                f"delete {os.path.dirname(path)} to resume on a newly generated batch."
            )
        self._step = state["step"]
        if checkpoint_processes(checkpoint) != self.accelerator.num_processes:
            logger.warning(
                "Checkpoint %s was saved in the middle of a generated batch by another number of processes: this run "
                "generates a new batch of the same prompts for the rest of it (the critic learns from those prompts "
                "a second time), then goes on on the run's schedule.",
                checkpoint,
            )
            return
        if state["buffered_inputs"] is None:
            logger.warning(
                "Checkpoint %s did not keep its generated batch: this run generates a new batch of the same prompts "
                "for the rest of it, then goes on on the run's schedule.",
                checkpoint,
            )
            return
        self._buffered_inputs = _to_device(state["buffered_inputs"], self.accelerator.device)


@contextlib.contextmanager
def plain_cpu_device(args):
    """Within the block, `args.device` reads `cpu` where it is an indexed CPU device (`cpu:0`, a process of a
    multi-process CPU run). transformers below 5.18 loads such a run's optimizer state with `map_location=args.device`,
    and torch cannot restore a storage to `cpu:0` ("don't know how to restore data location"): without this, the run
    could not resume."""
    device = args.device
    if device.type != "cpu" or device.index is None:
        yield
        return
    args.__dict__["_setup_devices"] = torch.device("cpu")  # the cached value `TrainingArguments.device` returns
    try:
        yield
    finally:
        args.__dict__["_setup_devices"] = device

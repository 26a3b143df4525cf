# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""What a scheduler's stop signal does to a training run: a complete checkpoint, then an exit that says how to resume.

SLURM, Kubernetes and torchrun send `SIGTERM` some seconds before they take the machine (SLURM's `KillWait`,
Kubernetes' `terminationGracePeriodSeconds` and torchrun's shutdown timeout are 30 s by default), and SLURM's
`--signal=USR1@<seconds>` sends `SIGUSR1` that long before a job's time limit. With `save_on_preemption=True` (the
default), while `Trainer.train` runs:

- The first `SIGTERM` or `SIGUSR1` only sets a flag, and says so on standard error. At the end of the current
  optimizer step (or of the checkpoint being written, if it arrives during a save), every process stops at the same
  step: the flag is all-reduced (max) over the processes at each step boundary, so a signal that reached one process
  stops them all without a collective save waiting for the others. The checkpoint is an ordinary one,
  `<output_dir>/checkpoint-<step>`, complete (`checkpoint_complete.json`) as a periodic save (with `save_only_model`,
  the weights alone, as every checkpoint of such a run), and `train()` then raises [`TrainingPreempted`], a
  `SystemExit` with status `128 + signal number` (143 for SIGTERM, 138 for SIGUSR1), the status a shell reports for a
  process ended by that signal: a script that does not catch it exits with it, so a scheduler sees a job ended by its
  signal; the lines after `train()` (the final save, a push) do not run. Relaunching with
  `--resume_from_checkpoint true` (`trl-srppo train`) or `trainer.train(resume_from_checkpoint=True)` resumes exactly
  from it.
- How long it takes: the rest of the current optimizer step, then the save. A step that starts a generated batch
  generates and scores it first (each reward call may take up to `reward_timeout`); with long completions or
  `steps_per_generation` > 1 that can be most of the step's time. The grace period must cover one whole step plus a
  checkpoint save; with SLURM, give `--signal=USR1@<seconds>` that margin.
- A second signal (either of the two) ends the process at once, by that signal's default action, with no checkpoint.
- Launchers: `accelerate launch` with several processes (torchrun's agent) passes a SIGTERM it receives on to every
  training process, waits `TORCH_ELASTIC_SHUTDOWN_TIMEOUT` seconds (30 by default) before it kills them, and exits
  with status 1; it does not pass on SIGUSR1, which ends the launcher itself. So signal either the launcher (SIGTERM)
  or the training processes, not both (they would count two signals). A one-process `accelerate launch` passes on no
  signal: run `trl-srppo train` (or your script) directly instead.
- A signal whose handler is not the default when training starts (one of your own, or ignored) is left to it. Outside
  `train()` (model loading, the final `save_model`) and after the last step, the signals have their usual effect.

A reward call under its deadline (`reward_timeout`) passes a `SIGUSR1` it did not send itself to the handler installed
before it: this one, during training.
"""

import contextlib
import logging
import os
import signal
import threading

import torch
from transformers import TrainerCallback

logger = logging.getLogger(__name__)

PREEMPTION_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGUSR1") if hasattr(signal, name))
RESUME_HOW = "--resume_from_checkpoint true (trl-srppo train) or trainer.train(resume_from_checkpoint=True)"


class TrainingPreempted(SystemExit):
    """Raised by `train()` on every process after a stop signal, once the checkpoint of the step it stopped at is
    complete. A `SystemExit` whose status is `128 + signal number`: uncaught, the process exits with that status.

    Attributes:
        signal_name (`str`): `"SIGTERM"` or `"SIGUSR1"`.
        step (`int`): the global step of the checkpoint.
        checkpoint (`str`): its folder.
    """

    def __init__(self, signum: int, step: int, checkpoint: str):
        super().__init__(128 + signum)
        self.signal_name = signal.Signals(signum).name
        self.step = step
        self.checkpoint = checkpoint

    def __str__(self) -> str:
        return preempted_message(self.signal_name, self.step, self.checkpoint)

    def __reduce__(self):
        # Pickled with its own arguments, so that it crosses a process boundary (a `ProcessPoolExecutor` worker's
        # run ended by SIGTERM reaches its caller as this exception, not as a broken pool that stops the others).
        return type(self), (self.code - 128, self.step, self.checkpoint)


def preempted_message(signal_name: str, step: int, checkpoint: str) -> str:
    return (
        f"Stopped by {signal_name} at global step {step}, with the complete checkpoint {checkpoint}. To go on, "
        f"relaunch the same command with the same output_dir and {RESUME_HOW}."
    )


def _say(text: str) -> None:
    # From a signal handler: a plain write to the file descriptor, which takes none of the locks that logging and
    # Python's buffered streams hold (the main thread may be inside one of them).
    try:
        os.write(2, f"[trl-srppo, process {os.getpid()}] {text}\n".encode())
    except OSError:
        pass


class PreemptionCallback(TrainerCallback):
    """Stops the run, with a checkpoint, at the first step boundary after a stop signal (module docstring).

    `install()` sets the signal handlers (main thread only) and `restore()` puts back the ones before; `signum` is the
    first signal this process received, `stopped` the `(signal number, global step)` the processes agreed to stop at.
    """

    def __init__(self):
        self.signum: int | None = None
        self.stopped: tuple[int, int] | None = None
        self._previous: dict[int, object] = {}

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            logger.warning(
                "train() runs outside the main thread, where no signal handler can be set: a SIGTERM or SIGUSR1 ends "
                "the run without a checkpoint (save_on_preemption has no effect)."
            )
            return
        for signum in PREEMPTION_SIGNALS:
            if signal.getsignal(signum) is not signal.SIG_DFL:
                logger.info("%s already has a handler; it is left to it.", signal.Signals(signum).name)
                continue
            self._previous[signum] = signal.signal(signum, self._on_signal)

    def restore(self) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous = {}

    def _on_signal(self, signum, frame) -> None:
        name = signal.Signals(signum).name
        if self.signum is not None:
            _say(f"{name} received a second time: ending now, without a checkpoint.")
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)
            return
        self.signum = signum
        _say(
            f"{name} received: the run stops with a checkpoint at the end of this optimizer step "
            "(save_on_preemption). A second SIGTERM or SIGUSR1 ends it at once, without one."
        )

    def _agreed_signal(self, args) -> int:
        # The largest signal number any process received, 0 for none: the same answer on every process.
        received = self.signum or 0
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            flag = torch.tensor([received], dtype=torch.int64, device=args.device)
            torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
            received = int(flag.item())
        return received

    def on_step_end(self, args, state, control, **kwargs):
        signum = self._agreed_signal(args)
        if signum:
            self.stopped = (signum, state.global_step)
            control.should_save = True
            control.should_training_stop = True
        return control

    def on_save(self, args, state, control, **kwargs):
        # A signal during a periodic save: the checkpoint just written is the one to stop at, without another step.
        if self.stopped is None:
            signum = self._agreed_signal(args)
            if signum:
                self.stopped = (signum, state.global_step)
                control.should_training_stop = True
        return control


@contextlib.contextmanager
def stop_on_preemption(trainer):
    """Around `Trainer.train`: with `trainer.args.save_on_preemption` (`trl_srppo.runtime.config.RuntimeConfig`), a
    stop signal ends the run with a checkpoint and [`TrainingPreempted`]; without it, nothing changes."""
    if not trainer.args.save_on_preemption:
        yield
        return
    callback = PreemptionCallback()
    trainer.add_callback(callback)
    callback.install()
    try:
        yield
    finally:
        callback.restore()
        trainer.remove_callback(callback)
    if callback.stopped is not None:
        signum, step = callback.stopped
        checkpoint = os.path.join(trainer.args.output_dir, f"checkpoint-{step}")
        if trainer.is_world_process_zero():
            logger.warning(preempted_message(signal.Signals(signum).name, step, checkpoint))
        raise TrainingPreempted(signum, step, checkpoint)
    if callback.signum is not None:  # after the last step: too late to stop early, so the signal's usual effect now
        signal.raise_signal(callback.signum)

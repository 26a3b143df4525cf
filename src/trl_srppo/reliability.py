# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""What keeps a long run from losing more than its last checkpoint: complete checkpoints, exact resume, deadlines
and non-finite guards.

- A checkpoint is complete only once [`CHECKPOINT_COMPLETE`] is written in it, after every other file, on every
  process, and before older checkpoints are rotated away. [`last_complete_checkpoint`] picks the newest complete one
  and logs the incomplete ones it skips (a run killed while saving leaves one).
- [`EpochRepeatSampler`]: TRL's `RepeatSampler` with the permutation of epoch `e` drawn from the seed and `e` alone,
  so a run resumed in or after the second epoch sees the same prompts in the same order as an uninterrupted one (the
  parent's generator is seeded once per sampler and a resumed run builds a new sampler, so it replayed epoch 0).
- [`check_resume_processes`]: what a checkpoint resumed on another number of processes restores, and a clear error
  where the resume cannot be exact.
- [`ReliableTrainerMixin`] puts them in a `Trainer` (`SRPPOTrainer`, and TRL's `GRPOTrainer` in `trl-srppo train`),
  applies `ddp_timeout` to the process group on every backend, and ends a run stopped by SIGTERM or SIGUSR1 with a
  complete checkpoint (`trl_srppo.preemption`, `save_on_preemption`).
- [`check_finite`], [`call_with_deadline`] and [`check_reward_output`]: the checks `SRPPOTrainer` runs on the
  numbers of each step and on every reward function call.
- [`end_distributed`]: destroys the process groups at the end of a run and lets gloo's worker threads finish before
  the interpreter shuts down, so a finished CPU run does not abort at exit.
"""

import contextlib
import inspect
import json
import logging
import numbers
import os
import re
import shutil
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from trl.trainer.utils import RepeatSampler

from .preemption import stop_on_preemption

logger = logging.getLogger(__name__)

CHECKPOINT_COMPLETE = "checkpoint_complete.json"  # written last in a checkpoint folder
TRAINER_STATE = "trainer_state.json"  # the Trainer's, written after its other files of a checkpoint
GENERATION_BUFFER = "generation_buffer"  # a checkpoint's folder of each process's generated batch, when mid-way
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
_RNG_FILE = re.compile(r"^rng_state_\d+\.pth$")  # the Trainer's, one per process in a multi-process run


class NonFiniteError(FloatingPointError):
    """A NaN or infinite value in the numbers of a training step, found before any optimizer step applied it."""


# ---- non-finite values ---------------------------------------------------------------------------------------------


def check_finite(what: str, tensor: torch.Tensor, step: int, fix: str) -> None:
    """Raise [`NonFiniteError`] naming `what`, the global `step` and the `fix` when `tensor` holds a NaN or an inf.

    Args:
        what (`str`):
            What the tensor is ("critic values", "policy gradients", ...).
        tensor (`torch.Tensor` of any shape):
            The numbers to check.
        step (`int`):
            The global step of the run (`trainer.state.global_step`), for the message.
        fix (`str`):
            What the user can do about it.
    """
    finite = torch.isfinite(tensor.detach())
    if bool(finite.all()):
        return
    bad = tensor.detach()[~finite]
    raise NonFiniteError(
        f"Non-finite {what} at global step {step}: {bad.numel()} of {tensor.numel()} value(s) are NaN or inf "
        f"({int(torch.isnan(bad).sum())} NaN). The run stopped before any optimizer step applied them and before any "
        f"checkpoint held them; resume from the last checkpoint once fixed. {fix}"
    )


# ---- reward functions ----------------------------------------------------------------------------------------------


def check_reward_output(output: Any, name: str) -> list:
    """The reward function's output as a list; a `TypeError` naming the function when it is not numbers or `None`s.

    A string or a single number would otherwise fail deep inside TRL (`too many dimensions 'str'`, `'float' object is
    not iterable`). Any other iterable is accepted, as GRPO accepts it: a one-shot one (`map`, a generator) is read
    once, here, and its list goes on to TRL.
    """
    fix = f"Reward function '{name}' must return a list with one float (or None for an unscorable completion) per "
    if isinstance(output, (str, bytes, dict)) or not hasattr(output, "__iter__"):
        raise TypeError(f"{fix}completion; it returned a {type(output).__name__}: {str(output)[:80]!r}.")
    output = list(output)
    for i, value in enumerate(output):
        if value is None or isinstance(value, (numbers.Real, np.bool_)):  # numpy numbers are Real; numpy bools are not
            continue
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            continue
        raise TypeError(f"{fix}completion; item {i} of its output is a {type(value).__name__}: {str(value)[:80]!r}.")
    return output


class RewardTimeoutError(TimeoutError):
    """A reward function did not return within its deadline."""


def reward_timeout_error(description: str, timeout: float) -> RewardTimeoutError:
    """The error of a reward function call that ran past its deadline (sync or async).

    Args:
        description (`str`):
            Who and where (function name, process, phase).
        timeout (`float`):
            The deadline, in seconds (`reward_timeout`).
    """
    return RewardTimeoutError(
        f"{description} did not return within reward_timeout={timeout:g} s, so the run stops rather than leave every "
        "process waiting. Make the function faster or give it its own per-completion deadline, or raise "
        "`reward_timeout` (None disables the deadline)."
    )


# The signal that ends a reward call in the main thread at its deadline. Its handler is installed for the call
# alone and the one before it put back after, once any signal already sent has been handled.
_DEADLINE_SIGNAL = getattr(signal, "SIGUSR1", None)
_RESEND_SECONDS = 0.5  # past the deadline, the signal is sent again this often until the call ends


class _DeadlineReached(BaseException):
    """Raised in the reward function at its deadline: a `BaseException`, so that a function that catches `Exception`
    (as verifiers do around parsing) does not absorb it."""


def _watch(timeout: float, finished: threading.Event, expired: threading.Event, main: int) -> None:
    # The timer thread: at the deadline, signal the main thread, and again until the call ends (a call that swallowed
    # one interrupt gets the next).
    if finished.wait(timeout):
        return
    expired.set()
    while not finished.is_set():
        signal.pthread_kill(main, _DEADLINE_SIGNAL)
        finished.wait(_RESEND_SECONDS)


def _forward_signal(handler, signum, frame) -> None:
    """Handle a signal as `handler`, the one installed before the reward call, would have: call it, ignore the
    signal, or take its default action (for SIGUSR1, ending the process)."""
    if callable(handler):
        handler(signum, frame)
    elif handler == signal.SIG_DFL:
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)


def _call_in_main_thread(func, timeout, description, kwargs):
    # The call runs where a caller of GRPO's would run it, in the main thread, so verifiers that bound their own work
    # with `signal.alarm` (math-verify's `parse` and `verify`, TRL's `accuracy_reward`) keep their per-answer limits;
    # a timer thread sends the main thread a signal at the deadline, which interrupts a blocking system call as well
    # as Python code (a single long C call that holds the GIL, a regex match for one, ends first). A call that returns
    # after its deadline is a timeout too: an interrupt it swallowed may have cut a result short.
    finished, expired = threading.Event(), threading.Event()

    def on_signal(signum, frame):
        if expired.is_set():  # the deadline's signal (or one sent after the deadline, taken as it)
            if not finished.is_set():
                raise _DeadlineReached
            return  # sent before the call ended, handled after: let it pass
        _forward_signal(previous, signum, frame)  # someone else's (a job scheduler's, the user's): theirs to handle

    previous = signal.signal(_DEADLINE_SIGNAL, on_signal)
    watcher = threading.Thread(
        target=_watch, args=(timeout, finished, expired, threading.main_thread().ident), daemon=True
    )
    watcher.start()
    try:
        try:
            result = func(**kwargs)
        finally:
            try:
                finished.set()
            finally:  # runs even if a signal was handled on the line above
                finished.set()
                watcher.join()
                if expired.is_set():
                    time.sleep(0.01)  # a signal still on its way is handled now, by `on_signal`, which lets it pass
                signal.signal(_DEADLINE_SIGNAL, previous)
    except _DeadlineReached:
        raise reward_timeout_error(description, timeout) from None
    if expired.is_set():
        raise reward_timeout_error(description, timeout)
    return result


def _call_in_thread(func, timeout, description, kwargs):
    # Off the main thread, where no signal can reach the call: it runs in a daemon thread and is abandoned, not
    # interrupted, at the deadline, so a call stuck for good cannot keep the process alive once the error ends the run.
    result: dict[str, Any] = {}

    def target():
        try:
            result["value"] = func(**kwargs)
        except BaseException as err:  # re-raised in the caller's thread
            result["error"] = err

    thread = threading.Thread(target=target, name=f"reward {description}", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise reward_timeout_error(description, timeout)
    if "error" in result:
        raise result["error"]
    return result["value"]


def call_with_deadline(func: Callable[..., Any], timeout: float | None, description: str, /, **kwargs) -> Any:
    """`func(**kwargs)`, raising [`RewardTimeoutError`] when it has not returned after `timeout` seconds. The first
    three arguments are positional-only, so that `kwargs` (GRPO passes every dataset column) may hold any name.

    Called from the main thread (a training process), `func` runs there, as GRPO runs a reward function, and a timer
    sends the main thread a signal (`SIGUSR1`, its handler set for the call alone) at the deadline and every 0.5 s
    after: it interrupts Python code and blocking system calls (a verifier server that does not answer), but not one
    long C call that holds the GIL, which ends first. A call that returns after its deadline is a timeout too.
    Verifiers that bound their own work with `signal.alarm` keep doing so. From another thread, `func` runs in a daemon
    thread that is abandoned at the deadline. (The math verifier bounds its own work in killable worker processes,
    `trl_srppo.rewards._timeout`, which needs JSON-serialisable jobs and so cannot run an arbitrary reward function.)

    Args:
        func (`Callable`):
            The reward function.
        timeout (`float` or `None`):
            Seconds to wait; `None` calls `func` directly, with no deadline.
        description (`str`):
            Who and where, for the error message (function name, process, phase).
    """
    if timeout is None:
        return func(**kwargs)
    if _DEADLINE_SIGNAL is not None and threading.current_thread() is threading.main_thread():
        return _call_in_main_thread(func, timeout, description, kwargs)
    return _call_in_thread(func, timeout, description, kwargs)


# ---- start-up checks -----------------------------------------------------------------------------------------------


def check_critic_vocabulary(
    policy_vocab_size: int, critic_vocab_size: int, policy_vocab: dict | None, critic_vocab: dict | None
) -> str | None:
    """Check that the critic can read the policy's token ids: raise a `ValueError` when it cannot, return a warning
    when it cannot be told, else `None`.

    Args:
        policy_vocab_size (`int`):
            Rows of the policy's input embeddings: every id the policy can generate is below it.
        critic_vocab_size (`int`):
            Rows of the critic's input embeddings.
        policy_vocab (`dict[str, int]`, *optional*):
            The policy tokenizer's vocabulary (`get_vocab()`).
        critic_vocab (`dict[str, int]`, *optional*):
            The vocabulary of the tokenizer saved with the critic's checkpoint; `None` when it has none.
    """
    if critic_vocab_size < policy_vocab_size:
        raise ValueError(
            f"The critic's vocabulary ({critic_vocab_size} token embeddings) is smaller than the policy's "
            f"({policy_vocab_size}): token ids the policy generates would be out of the critic's range. Start the "
            "critic from a checkpoint with the policy's tokenizer (by default the policy's own)."
        )
    differ = 0
    if policy_vocab is not None and critic_vocab is not None:
        differ = sum(critic_vocab.get(token) != index for token, index in policy_vocab.items())
    if differ:
        raise ValueError(
            f"The critic's tokenizer is not the policy's: {differ} of the policy's {len(policy_vocab)} tokens have "
            "another id (or none) in it. The critic reads the policy's token ids, so it must share its tokenizer; "
            "start it from a checkpoint of the policy's family (by default the policy's own)."
        )
    if critic_vocab_size > policy_vocab_size and critic_vocab is None:
        return (
            f"The critic has {critic_vocab_size} token embeddings and the policy {policy_vocab_size}, and the "
            "critic's checkpoint has no tokenizer to compare: make sure both use the same tokenizer, as the critic "
            "reads the policy's token ids."
        )
    return None


def check_prompt_lengths(
    lengths: list[int], max_positions: int, max_completion_length: int, rotary: bool = False
) -> str | None:
    """Prompts that leave no room for a completion in the model's `max_positions` positions: a `ValueError` with their
    count for a model of learned absolute positions (a position past its table fails inside the forward), a warning
    text for a rotary model (`rotary=True`), which runs past them as GRPO lets it, outside the lengths it was
    trained on; `None` when every prompt fits."""
    limit = max_positions - max_completion_length
    long = [n for n in lengths if n > limit]
    if not long:
        return None
    message = (
        f"{len(long)} of {len(lengths)} prompt(s) are longer than {limit} tokens (the longest: {max(long)}), so "
        f"with max_completion_length={max_completion_length} they do not fit the model's {max_positions} positions "
        "(max_position_embeddings)."
    )
    fix = (
        "Filter them out of the dataset (for example `dataset.filter(...)` on the tokenized length) or lower "
        "max_completion_length."
    )
    if rotary:
        return f"{message} Its rotary positions run past them, beyond the lengths the model was trained on. {fix}"
    raise ValueError(f"{message} {fix}")


# ---- checkpoints ---------------------------------------------------------------------------------------------------


def checkpoint_step(folder: str) -> int | None:
    """The step of a `checkpoint-<step>` folder name, or `None` for any other name."""
    match = _CHECKPOINT.match(os.path.basename(os.path.normpath(folder)))
    return int(match.group(1)) if match else None


def is_complete_checkpoint(folder: str) -> bool:
    """Whether every file of the checkpoint was written (its completeness marker exists)."""
    return os.path.isfile(os.path.join(folder, CHECKPOINT_COMPLETE))


def mark_checkpoint_complete(
    folder: str, global_step: int, num_processes: int | None = None, per_device_train_batch_size: int | None = None
) -> None:
    """Write the completeness marker, atomically (a temporary file renamed over it), with the global step, and the
    number of processes that wrote the checkpoint and their batch size when given (read by
    [`check_resume_processes`]; a resumed run's `trainer_state.json` keeps the batch size of the run it resumed)."""
    path = os.path.join(folder, CHECKPOINT_COMPLETE)
    content = {"global_step": global_step}
    if num_processes is not None:
        content["num_processes"] = num_processes
    if per_device_train_batch_size is not None:
        content["per_device_train_batch_size"] = per_device_train_batch_size
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(content, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(path + ".tmp", path)


def list_checkpoints(output_dir: str) -> list[str]:
    """The `checkpoint-<step>` folders of `output_dir`, oldest step first."""
    if not os.path.isdir(output_dir):
        return []
    folders = [os.path.join(output_dir, n) for n in os.listdir(output_dir) if _CHECKPOINT.match(n)]
    return sorted((f for f in folders if os.path.isdir(f)), key=checkpoint_step)


def last_complete_checkpoint(output_dir: str) -> str | None:
    """The newest complete checkpoint of `output_dir` (by step), or `None`; logs a warning for every newer,
    incomplete one it skips."""
    checkpoints = list_checkpoints(output_dir)
    skipped = []
    for folder in reversed(checkpoints):
        if is_complete_checkpoint(folder):
            if skipped:
                logger.warning(
                    "Skipping incomplete checkpoint(s) %s (no %s: the run stopped while saving them); resuming from "
                    "%s.",
                    ", ".join(skipped),
                    CHECKPOINT_COMPLETE,
                    folder,
                )
            return folder
        skipped.append(folder)
    return None


def is_partial_write(folder: str) -> bool:
    """Whether an incomplete checkpoint folder is certainly a save that was cut short: the Trainer writes
    `trainer_state.json` after every other file of its own, so a folder without it never held a whole checkpoint
    (one with it and no completeness marker may be a whole checkpoint written before checkpoints were marked)."""
    return not is_complete_checkpoint(folder) and not os.path.isfile(os.path.join(folder, TRAINER_STATE))


def resolve_resume_checkpoint(output_dir: str) -> str | None:
    """What `resume_from_checkpoint=True` means: the newest complete checkpoint of `output_dir`, or `None` (start from
    the beginning, with a warning) when the run has no checkpoint yet: no folder at all, or only saves cut short
    ([`is_partial_write`], a kill during the first save), so a restart-on-failure loop recovers from a kill before or
    during the first save too. A `ValueError` that says why when the only checkpoints may be whole but are unmarked."""
    folder = last_complete_checkpoint(output_dir)
    if folder is not None:
        return folder
    incomplete = list_checkpoints(output_dir)
    unmarked = [f for f in incomplete if not is_partial_write(f)]
    if unmarked:
        raise ValueError(
            f"No complete checkpoint in {output_dir}: {', '.join(unmarked)} have no {CHECKPOINT_COMPLETE} (a run "
            "stopped while saving them, or they were written before checkpoints were marked complete). Pass a "
            "checkpoint folder you trust as `resume_from_checkpoint`, or start afresh."
        )
    if incomplete:
        logger.warning(
            "No complete checkpoint in %s: %s were cut short while saving (no %s); resume_from_checkpoint=True starts "
            "from the beginning, and the new run writes them again.",
            output_dir,
            ", ".join(incomplete),
            TRAINER_STATE,
        )
        return None
    logger.warning("No checkpoint in %s yet: resume_from_checkpoint=True starts from the beginning.", output_dir)
    return None


def _read_json(path: str) -> dict:
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def checkpoint_processes(folder: str) -> int | None:
    """The number of processes that wrote a checkpoint: from its completeness marker or, for a checkpoint from before
    the marker recorded it, from the Trainer's random-number-generator files (`rng_state.pth` in one process,
    `rng_state_<rank>.pth` in each of several); `None` when neither tells."""
    recorded = _read_json(os.path.join(folder, CHECKPOINT_COMPLETE)).get("num_processes")
    if recorded is not None:
        return int(recorded)
    names = os.listdir(folder)
    if "rng_state.pth" in names:
        return 1
    return sum(bool(_RNG_FILE.match(name)) for name in names) or None


def check_resume_processes(
    folder: str,
    num_processes: int,
    per_device_train_batch_size: int,
    ignore_data_skip: bool = False,
    deepspeed_config: dict | None = None,
) -> str | None:
    """What resuming `folder` on `num_processes` processes restores: `None` when the checkpoint was written by as many
    processes (or the number is unknown), a warning naming what is not restored when by another number, and a
    `ValueError` naming the fix when the resume cannot be exact.

    On another number of processes, the Trainer restores the policy's weights, optimizer state (whole under DDP) and
    learning-rate schedule, the global step, and the position in the data, which it counts in batches: the last is
    right only when the batch over all processes (`num_processes * per_device_train_batch_size`) is the checkpoint's.
    It does not restore the random number generators (one state per process). A policy under DeepSpeed ZeRO has a
    checkpoint partitioned over the processes that wrote it, which DeepSpeed loads on another number only from its
    universal form.

    Args:
        folder (`str`):
            The checkpoint folder.
        num_processes (`int`):
            Processes of this run.
        per_device_train_batch_size (`int`):
            This run's batch per process.
        ignore_data_skip (`bool`, *optional*, defaults to `False`):
            The Trainer's `ignore_data_skip`: the resumed epoch starts at the beginning of its data, so no batch
            count needs to carry over.
        deepspeed_config (`dict`, *optional*):
            The policy's DeepSpeed config, when it runs under DeepSpeed.
    """
    saved = checkpoint_processes(folder)
    if saved is None or saved == num_processes:
        return None
    saved_batch = _read_json(os.path.join(folder, CHECKPOINT_COMPLETE)).get("per_device_train_batch_size")
    if saved_batch is None:  # a checkpoint from before the marker recorded it
        saved_batch = _read_json(os.path.join(folder, TRAINER_STATE)).get("train_batch_size")
    rows = saved * saved_batch if saved_batch else None
    if rows is not None and not ignore_data_skip and rows != num_processes * per_device_train_batch_size:
        if rows % num_processes == 0:
            fix = f"Set per_device_train_batch_size={rows // num_processes} to keep {rows} rows per step"
        else:
            fix = f"Use a number of processes and a per_device_train_batch_size whose product is {rows}"
        raise ValueError(
            f"Checkpoint {folder} was written by {saved} process(es) with per_device_train_batch_size={saved_batch} "
            f"({rows} rows per step over all processes), and this run has {num_processes} with "
            f"per_device_train_batch_size={per_device_train_batch_size} ({num_processes * per_device_train_batch_size}"
            "). The Trainer finds its place in the data by counting batches, so the resumed run would repeat or skip "
            f"prompts. {fix}, or set ignore_data_skip=True to start the current epoch's data again from its "
            "beginning."
        )
    stage = int((deepspeed_config or {}).get("zero_optimization", {}).get("stage", 0))
    universal = bool((deepspeed_config or {}).get("checkpoint", {}).get("load_universal", False))
    if deepspeed_config is not None and stage >= 1 and not universal:
        step = checkpoint_step(folder)
        engine = os.path.join(folder, f"global_step{step}")
        raise ValueError(
            f"Checkpoint {folder} was written by {saved} process(es) and this run has {num_processes}, but the policy "
            f"runs under DeepSpeed ZeRO-{stage}, whose checkpoint ({engine}) is partitioned over the processes that "
            "wrote it. Resume on the same number of processes, or convert it to DeepSpeed's universal checkpoint "
            f"(`python -m deepspeed.checkpoint.ds_to_universal --inject_missing_state --input_folder {engine} "
            f'--output_folder {engine}_universal`) and add `"checkpoint": {{"load_universal": true}}` to the '
            "DeepSpeed config."
        )
    return (
        f"Resuming {folder}, written by {saved} process(es), on {num_processes}: the weights, optimizer states, "
        "learning-rate schedules, global step and place in the data are restored, but not the random number "
        "generators (the checkpoint holds one state per process of the run that wrote it), and each generated "
        "batch's prompts are split over the processes differently, so the completions sampled from here on differ "
        f"from those of an uninterrupted run on {saved} process(es)."
    )


# ---- a clean exit --------------------------------------------------------------------------------------------------

GLOO_DRAIN_SECONDS = 0.5


def uses_gloo() -> bool:
    """Whether a live process group of this process runs on gloo (the CPU backend, alone or next to NCCL)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return False
    return any("gloo" in str(backend) for backend, _ in dist.distributed_c10d._world.pg_map.values())


def end_distributed(accelerator=None, drain_seconds: float = GLOO_DRAIN_SECONDS) -> None:
    """End a process's distributed run before it exits: finish the trackers and destroy every process group
    (`accelerator.end_training()`, or `torch.distributed.destroy_process_group()` without an accelerator), then,
    where a group ran on gloo, release the GIL for `drain_seconds`.

    After a gloo collective, the worker thread that ran it drops its last references to the collective's tensors, and
    that takes the GIL. Destroying the group does not stop these threads. When the main thread reaches interpreter
    shutdown first, CPython (3.13 and older) ends the worker with `pthread_exit` as it asks for the GIL, which unwinds
    through C++ and aborts the process ("terminate called without an active exception", exit signal 6) after a run
    that finished (2 of 13 launches of a two-process toy run on 2 CPU cores; none of 30 with this wait). Waiting
    here lets the workers finish first. A run whose groups are all NCCL does not wait.

    Args:
        accelerator (`accelerate.Accelerator`, *optional*):
            The run's accelerator; its `end_training()` finishes the trackers too.
        drain_seconds (`float`, *optional*, defaults to `0.5`):
            How long to release the GIL to gloo's worker threads.
    """
    import torch.distributed as dist

    gloo = uses_gloo()
    if accelerator is not None:
        accelerator.end_training()
    elif dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    if gloo:
        time.sleep(drain_seconds)


# ---- the sampler ---------------------------------------------------------------------------------------------------


class EpochRepeatSampler(RepeatSampler):
    """TRL's `RepeatSampler` whose shuffled order in epoch `e` depends on the seed and `e` only.

    The permutation of epoch `e` is the `(e + 1)`-th draw of a generator seeded with `seed`, as in the parent when one
    sampler lives through the whole run, so an uninterrupted run sees the same order as with TRL's sampler; but a
    sampler built for a resumed run (the `Trainer` calls `set_epoch` before each epoch) no longer starts again at
    epoch 0's order.
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


# ---- the trainer mixin ---------------------------------------------------------------------------------------------


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
    or SIGUSR1 that stops the run with a complete checkpoint (`trl_srppo.preemption`), and vLLM's colocate settings
    (`trl_srppo.vllm_cpu`), for a TRL `GRPOTrainer` (put the mixin first).

    Overrides `Trainer.train`, `Trainer._save_checkpoint`, `Trainer._load_optimizer_and_scheduler` and
    `GRPOTrainer._get_train_sampler`.
    """

    def __init__(self, model, reward_funcs=None, args=None, *positional, **kwargs):
        from .vllm_cpu import check_engine_dtype, prepare_colocate

        prepare_colocate(model, args)  # before GRPO starts vLLM
        super().__init__(model, reward_funcs, args, *positional, **kwargs)
        self._apply_ddp_timeout()
        check_engine_dtype(self)

    def _check_one_generated_batch(self):
        # GRPO's sampler yields whole generated batches only: a train_dataset with fewer prompts than one would give
        # a run of no step that saves an untrained model and exits as if it had trained.
        try:
            size = len(self.train_dataset)
        except TypeError:  # none, or an iterable dataset: no length to check
            return
        prompts_per_batch = self.args.generation_batch_size // self.num_generations
        if size < prompts_per_batch:
            raise ValueError(
                f"train_dataset has {size} prompt(s), fewer than one generated batch of {prompts_per_batch} "
                f"(per_device_train_batch_size {self.args.per_device_train_batch_size} x "
                f"{self.accelerator.num_processes} process(es) x steps_per_generation {self.args.steps_per_generation}"
                f" / num_generations {self.num_generations}), so no step would be trained. Give it at least "
                f"{prompts_per_batch} rows (max_train_samples on the command line), or lower those settings."
            )

    def _check_resume_settings(self, checkpoint: str) -> None:
        """A trainer's own check that `checkpoint` was written with settings this run can resume (nothing here)."""

    def _check_reward_columns(self):
        # GRPO passes a reward function every dataset column as a keyword (with `prompts`, `completions`, ...); one
        # that needs a column the dataset lacks would fail at the first generated batch with a bare TypeError.
        columns = getattr(self.train_dataset, "column_names", None)
        if columns is None:  # an iterable dataset without known columns
            return
        if getattr(self, "rollout_func", None) is not None:  # its extra fields reach the reward functions too, by name
            return
        given = {*(c for c in columns if c not in ("prompt", "completion", "completion_ids")), *REWARD_KEYWORDS}
        for func in getattr(self, "reward_funcs", []):
            if isinstance(func, torch.nn.Module) or not callable(func):
                continue
            try:
                parameters = inspect.signature(func).parameters.values()
            except (TypeError, ValueError):  # a callable without a signature to read
                continue
            required = [
                p.name
                for p in parameters
                if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in given
            ]
            if required:
                name = getattr(func, "__name__", type(func).__name__)
                raise ValueError(
                    f"Reward function {name!r} needs the dataset column(s) {required}, which GRPO does not pass it: "
                    f"it passes {', '.join(REWARD_KEYWORDS[:3])} and every column of train_dataset but prompt "
                    f"(its columns: {sorted(columns)}). Add the column to the data, rename one to that name "
                    "(dataset_column_map on the command line), or give the function's parameter a default."
                )

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
        self._check_one_generated_batch()
        self._check_reward_columns()
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

    def _load_optimizer_and_scheduler(self, checkpoint):
        with plain_cpu_device(self.args):
            super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is not None:
            self._load_generation_buffer(checkpoint)

    def _load_generation_buffer(self, checkpoint: str) -> None:
        """Resume in the middle of a generated batch: this process's rest of the batch and GRPO's micro-step count.
        Where the batch cannot be restored (written by another number of processes, or not kept), the count alone is,
        so the run generates a new batch of the same prompts for the rest of it and then goes on on its schedule (a
        count of 0 would put every later generation out of step with the checkpoint's). With another schedule
        (`steps_per_generation`, `num_iterations`) neither is."""
        path = self._generation_buffer_file(checkpoint)
        if not os.path.isfile(path):  # another process's file (a checkpoint of fewer processes), or none at all
            path = os.path.join(checkpoint, GENERATION_BUFFER, "process_0.pt")
        if not os.path.isfile(path):  # saved at a generation boundary, or by a run without it
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
        saved_step = _read_json(os.path.join(checkpoint, TRAINER_STATE)).get("global_step")
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


# The keywords GRPO passes every reward function besides the dataset's columns.
REWARD_KEYWORDS = (
    "prompts",
    "completions",
    "completion_ids",
    "trainer_state",
    "log_extra",
    "log_metric",
    "environments",
)


def grpo_trainer_class():
    """TRL's `GRPOTrainer` with [`ReliableTrainerMixin`]: what `trl-srppo train` runs for `trainer: grpo`."""
    from trl import GRPOTrainer

    from .run_output import RunOutputMixin

    return type("GRPOTrainer", (ReliableTrainerMixin, RunOutputMixin, GRPOTrainer), {"__module__": __name__})

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Every call of a Python reward function has a deadline (`reward_timeout`) and its output is checked.

- [`call_with_deadline`]: the call, ended by [`RewardTimeoutError`] at its deadline, in the main thread as GRPO makes
  it (so verifiers that bound their own work with `signal.alarm` keep doing so).
- [`check_reward_output`]: one number or `None` per completion, or a `TypeError` naming the function.
- [`guard_reward_func`]: a reward function wrapped in both, sync or async, as `SRPPOTrainer` calls it.
"""

import asyncio
import functools
import numbers
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from trl.trainer.utils import is_async_callable

__all__ = [
    "RewardTimeoutError",
    "call_with_deadline",
    "check_reward_output",
    "guard_reward_func",
    "reward_timeout_error",
]


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


def guard_reward_func(func: Any, name: str, args, where: Callable[[], str]) -> Any:
    """A Python reward function, run under `args.reward_timeout` (read at each call) with its output type checked
    ([`check_reward_output`]); a reward model or anything not callable is returned as it is. An async function gets
    `asyncio.wait_for`, which ends a call stuck at an `await` (a call that blocks the event loop itself cannot be
    preempted there).

    Args:
        func (`Callable` or `torch.nn.Module`):
            One of the trainer's reward functions.
        name (`str`):
            Its name (`trainer.reward_func_names`), for the messages.
        args ([`~trl_srppo.runtime.config.RuntimeConfig`]):
            The run's settings, whose `reward_timeout` (seconds, or `None` for no deadline) bounds each call.
        where (`Callable[[], str]`):
            Where the call runs, read at its time, for the timeout's message: "on process 0 (phase: ...)".
    """
    if isinstance(func, torch.nn.Module) or not callable(func):
        return func

    def timeout():
        return args.reward_timeout

    if is_async_callable(func):  # an async function, or an object whose __call__ is one, as TRL tells them

        @functools.wraps(func)
        async def guarded_async(**kwargs):
            try:
                output = await asyncio.wait_for(func(**kwargs), timeout=timeout())
            except asyncio.TimeoutError as err:
                raise reward_timeout_error(f"Reward function '{name}' {where()}", timeout()) from err
            return check_reward_output(output, name)

        return guarded_async

    @functools.wraps(func)
    def guarded(**kwargs):
        output = call_with_deadline(func, timeout(), f"Reward function '{name}' {where()}", **kwargs)
        return check_reward_output(output, name)

    return guarded

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The end of a distributed run: [`end_distributed`] destroys the process groups and lets gloo's worker threads finish
before the interpreter shuts down, [`exit_process`] ends a launched process without interpreter shutdown where
gloo's threads are still alive, and [`drain_gloo_at_exit`] lets them finish at the end of any script that built a
trainer on the runtime, so a finished CPU run does not abort at exit."""

import atexit
import os
import sys
import threading
import time

__all__ = [
    "GLOO_DRAIN_SECONDS",
    "drain_gloo_at_exit",
    "end_distributed",
    "exit_process",
    "gloo_threads",
    "uses_gloo",
]

GLOO_DRAIN_SECONDS = 0.5
_ENDED_GLOO = False  # whether `end_distributed` destroyed a gloo group in this process
_DRAIN_REGISTERED = False  # whether `drain_gloo_at_exit` registered its `atexit` handler in this process


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

    global _ENDED_GLOO
    gloo = uses_gloo()
    _ENDED_GLOO = _ENDED_GLOO or gloo
    if accelerator is not None:
        accelerator.end_training()
    elif dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    if gloo:
        time.sleep(drain_seconds)


def gloo_threads() -> list[str]:
    """The names of this process's native gloo threads still alive (`pt_gloo_runloop`, a group's workers;
    `gloo_tcp_loop`, its transport), read from `/proc/self/task` (Linux); empty elsewhere."""
    names = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return names
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/comm", encoding="utf-8") as f:
                name = f.read().strip()
        except OSError:  # the thread ended meanwhile
            continue
        if "gloo" in name:
            names.append(name)
    return sorted(names)


def _drain_gloo(drain_seconds: float = GLOO_DRAIN_SECONDS) -> None:
    # `end_distributed` has drained already, after which nothing of the package runs a collective.
    if not _ENDED_GLOO and (gloo_threads() or uses_gloo()):
        time.sleep(drain_seconds)


def drain_gloo_at_exit() -> None:
    """Register, once per process, an `atexit` handler that releases the GIL to gloo's worker threads for
    `GLOO_DRAIN_SECONDS` where any are alive (the cause: [`end_distributed`]), so that a script that trained on gloo
    (a multi-process CPU run) exits with its own status and not with an abort, whoever wrote it.

    `atexit` handlers run after the script's last line and before interpreter shutdown, while a thread can still take
    the GIL: every collective of the script has been issued by then (a `save_model()`, `push_to_hub()` or `evaluate()`
    after `train()` included), and the workers drop their last references to its tensors during the wait. The process
    groups are left as they are, for the other `atexit` handlers; a worker that is idle when the interpreter shuts
    down is stopped without the GIL. A collective the script started without waiting for it and that is still running
    after the wait is not covered (wait for it: `work.wait()`). The trainers on the runtime call this when they are
    built."""
    global _DRAIN_REGISTERED
    if not _DRAIN_REGISTERED:
        atexit.register(_drain_gloo)
        _DRAIN_REGISTERED = True


def exit_process(code: int = 0) -> None:
    """End a launched process with `code`; where [`end_distributed`] destroyed a gloo group here and gloo threads
    are still alive, end it without interpreter shutdown.

    `destroy_process_group()` removes a group from torch's registry but does not stop gloo's threads (gloo has no
    `shutdown`): they stop only when the last reference to the group goes. Under DeepSpeed ZeRO-3 that never happens
    before exit: DeepSpeed keeps its own world group (`deepspeed.utils.groups._WORLD_GROUP`, a second gloo group), and
    every partitioned parameter, its engine and ZeRO optimizer hold the groups; the autograd hooks ZeRO-3 registers
    keep the engines alive, so `gc` cannot free them (6 gloo threads alive at exit on each process of a ZeRO-3 run of
    `trl-srppo train`, none freed by clearing DeepSpeed's globals). A thread alive during interpreter shutdown that
    asks for the GIL is ended by CPython (3.13 and older) with `pthread_exit`, which unwinds through C++ and aborts the
    process ("terminate called without an active exception") after a run that finished. Joining the threads is not
    possible while the groups are referenced, and a longer wait does not help a thread that wakes later, so the
    process ends here without that shutdown: the Python threads are joined and the `atexit` handlers run (logging,
    the reward workers), the standard streams are flushed, then `os._exit(code)`. Without a gloo group, or with every
    gloo thread gone, it is `sys.exit(code)`.

    Args:
        code (`int`, *optional*, defaults to `0`):
            The process's exit status.
    """
    if not (_ENDED_GLOO and gloo_threads()):
        sys.exit(code)
    main = threading.main_thread()
    for thread in threading.enumerate():  # as interpreter shutdown does: wait for the non-daemon Python threads
        if thread is not main and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed stream has nothing left to write
            pass
    os._exit(code)

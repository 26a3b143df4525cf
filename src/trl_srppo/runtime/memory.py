# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""A process's memory, logged with every training step (`memory/*`), so that a long run shows whether it grows: the
resident memory now and at its peak so far, and on a GPU the peak the caching allocator handed out."""

import sys

import torch

__all__ = ["memory_metrics", "proc_status_bytes"]

_MIB = 1024 * 1024
# `/proc/self/status` field -> the metric it is logged as.
_RESIDENT = {"VmRSS": "memory/rss_mib", "VmHWM": "memory/peak_rss_mib"}


def proc_status_bytes(*fields: str, status: str | None = None) -> dict[str, int]:
    """`fields` of Linux's `/proc/self/status` (`VmHWM`, `VmRSS`, ...), or of its text `status`, in bytes (the kernel
    writes kB); a field that is missing gives nothing, and so does a system without `/proc`.

    Example:

    ```python
    >>> proc_status_bytes("VmHWM", "VmRSS", status="Name:\tpython\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n")
    {'VmHWM': 2097152, 'VmRSS': 1048576}
    ```
    """
    if status is None:
        try:
            with open("/proc/self/status", encoding="utf-8") as f:
                status = f.read()
        except OSError:
            return {}
    found = {}
    for line in status.splitlines():
        name, _, value = line.partition(":")
        if name in fields and value.split():
            found[name] = int(value.split()[0]) * 1024
    return found


def memory_metrics() -> dict[str, float]:
    """This process's memory in MiB: `memory/rss_mib` and `memory/peak_rss_mib` from `/proc/self/status` (Linux; the
    peak alone from `resource` elsewhere), and `memory/gpu_peak_allocated_mib` where CUDA is in use."""
    found = proc_status_bytes(*_RESIDENT)
    metrics = {_RESIDENT[field]: size / _MIB for field, size in found.items()}
    if "memory/peak_rss_mib" not in metrics and sys.platform != "win32":
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kB on Linux, bytes on macOS
        metrics["memory/peak_rss_mib"] = peak / _MIB if sys.platform == "darwin" else peak / 1024
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        metrics["memory/gpu_peak_allocated_mib"] = torch.cuda.max_memory_allocated() / _MIB
    return metrics

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""A process's memory, logged with every training step (`memory/*`), so that a long run shows whether it grows: the
resident memory now and at its peak so far, and on a GPU the peak the caching allocator handed out."""

import sys

import torch

__all__ = ["memory_metrics", "resident_mib"]

_MIB = 1024 * 1024


def resident_mib(status: str) -> dict[str, float]:
    """The resident memory now (`VmRSS`) and at its peak so far (`VmHWM`), in MiB, read from the text of Linux's
    `/proc/<pid>/status` (sizes in kB); a line that is missing gives nothing.

    Example:

    ```python
    >>> resident_mib("Name:\\tpython\\nVmHWM:\\t  2048 kB\\nVmRSS:\\t  1024 kB\\n")
    {'memory/peak_rss_mib': 2.0, 'memory/rss_mib': 1.0}
    ```
    """
    names = {"VmHWM": "memory/peak_rss_mib", "VmRSS": "memory/rss_mib"}
    found = {}
    for line in status.splitlines():
        key, _, value = line.partition(":")
        if key in names and value.split():
            found[names[key]] = int(value.split()[0]) / 1024
    return found


def memory_metrics() -> dict[str, float]:
    """This process's memory in MiB: `memory/rss_mib` and `memory/peak_rss_mib` from `/proc/self/status` (Linux; the
    peak alone from `resource` elsewhere), and `memory/gpu_peak_allocated_mib` where CUDA is in use."""
    try:
        with open("/proc/self/status", encoding="utf-8") as f:
            metrics = resident_mib(f.read())
    except OSError:
        metrics = {}
    if "memory/peak_rss_mib" not in metrics and sys.platform != "win32":
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kB on Linux, bytes on macOS
        metrics["memory/peak_rss_mib"] = peak / _MIB if sys.platform == "darwin" else peak / 1024
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        metrics["memory/gpu_peak_allocated_mib"] = torch.cuda.max_memory_allocated() / _MIB
    return metrics

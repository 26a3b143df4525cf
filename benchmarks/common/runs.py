# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The process of a benchmark command: where the repository is, the code a report records (`git_commit`), torch's
intra-op threads (`torch_threads`), the quiet, offline setting of a command (`quiet_offline_command`), a run
file's JSON (`finite_json`, and a run's spec as its file records it, `spec_record`) and a finished run read back from
the cache (`cached_result`)."""

import contextlib
import json
import math
import os
import subprocess
import warnings
from dataclasses import asdict

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def quiet_offline_command() -> None:
    """The setting of a benchmark command: warnings off, tokenizers single-threaded, the Hub offline (models are built
    here, never downloaded)."""
    warnings.filterwarnings("ignore")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


def git_commit(*paths: str) -> str:
    """The short commit of `HEAD`, with ` (with uncommitted changes)` when any of `paths` (folders of the repository,
    default `benchmarks`) differs from it; `unknown` outside a git checkout."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", *(paths or ("benchmarks",))],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
        ).stdout.strip()
        return commit + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


@contextlib.contextmanager
def torch_threads(num_threads: int):
    """Run the block with `num_threads` intra-op threads, restoring the previous number afterwards.

    The benchmark uses one thread per run: the models are tiny, and on a shared 2-core machine a second OpenMP
    thread that waits for a busy core was measured to make a supervised step 80 times slower.
    """
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(num_threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def finite_json(obj):
    """`obj` with every NaN or infinite float as `None` (standard JSON has neither)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): finite_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_json(v) for v in obj]
    return obj


def spec_record(spec) -> dict:
    """`spec` (a dataclass) as a run's file records it: its fields read back from JSON (a tuple as a list)."""
    return json.loads(json.dumps(asdict(spec)))


def cached_result(path: str, spec) -> dict | None:
    """The finished run at `path` when it was made with `spec` (a dataclass: a run's name leaves some fields out, so
    the whole spec is compared); `None` means train it."""
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        result = json.load(f)
    return result if result.get("spec") == spec_record(spec) else None

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""One `accelerate launch` of a benchmark's per-process script on CPU processes (`DS_ACCELERATOR=cpu`: DeepSpeed's
CPU accelerator, gloo between the processes), one torch thread each, no Hub access, the repository first on
`PYTHONPATH`: what the ZeRO-3 benchmarks (`sharded_step.py`, `sharded_memory.py`) launch."""

import os
import socket
import subprocess
import sys

from ..common.runs import REPO_ROOT


def free_port() -> int:
    """A free local port, for a launch's rendezvous."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(
    config_file: str, processes: int, mixed_precision: str, script: list[str], cwd: str, timeout: float | None = None
) -> subprocess.CompletedProcess:
    """`accelerate launch --config_file <config_file> --num_processes <processes> --mixed_precision
    <mixed_precision>` of `script` (a path or `-m module`, then its arguments), run in `cwd`; its output captured."""
    command = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", config_file]
    command += ["--num_processes", str(processes), "--mixed_precision", mixed_precision]
    command += ["--main_process_port", str(free_port()), *(str(a) for a in script)]
    path = os.pathsep.join(p for p in (REPO_ROOT, os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1", PYTHONPATH=path)
    env.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)

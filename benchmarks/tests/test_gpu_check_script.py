# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The GPU check, `python -m scripts.gpu_check`, runs end to end on its tiny CPU setting (the same code path as on a
GPU), and with `--vllm` reaches vLLM colocate."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import script_env

ROOT = Path(__file__).resolve().parents[2]


def gpu_check(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """`python -m scripts.gpu_check ARGS` in `cwd` (its `outputs/` go there), the repository root on `PYTHONPATH`
    (where `python -m` finds `scripts` and `benchmarks` when run from the root)."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    command = [sys.executable, "-m", "scripts.gpu_check", *args]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=300, cwd=cwd, env={**env, "PYTHONPATH": path}
    )


def test_gpu_check_script_smoke_runs_on_cpu(tmp_path):
    args = ["--tiny", "--cpu", "--completion-length", "8", "--prompt-length", "4", "--batch-size", "4"]
    result = gpu_check(args, tmp_path, **os.environ)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout[result.stdout.index("{\n") :])
    assert len(report["step_seconds"]) == 2 and report["critic_parameters"] > 0
    assert all(loss is not None for loss in report["critic_loss"])


@pytest.mark.vllm
def test_gpu_check_with_vllm_reaches_vllm_colocate(tmp_path):
    # On a CPU the tiny setting's heads of 16 are refused by name: the option turns vLLM colocate on.
    result = gpu_check(
        ["--tiny", "--cpu", "--vllm", "--steps", "1"], tmp_path, **script_env(VLLM_CPU_KVCACHE_SPACE="1")
    )
    assert result.returncode != 0
    assert "attention heads of size 16, which vLLM's CPU build cannot run" in result.stderr
    assert (tmp_path / "outputs" / "gpu_check" / "model" / "config.json").is_file()

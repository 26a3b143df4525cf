# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The GPU check script runs end to end on its tiny CPU setting (the same code path as on a GPU)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_gpu_check_script_smoke_runs_on_cpu(tmp_path):
    command = [sys.executable, str(ROOT / "scripts" / "gpu_check.py"), "--tiny", "--cpu"]
    command += ["--completion-length", "8", "--prompt-length", "4", "--batch-size", "4"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout[result.stdout.index("{\n") :])
    assert len(report["step_seconds"]) == 2 and report["critic_parameters"] > 0
    assert all(loss is not None for loss in report["critic_loss"])

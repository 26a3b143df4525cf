# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`make demo` (`python -m benchmarks.demo`) end to end, shortened: the bench's smoke-size task and model, two
updates."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_demo_prints_accuracy_before_and_after_and_saves_the_curve(tmp_path):
    command = [sys.executable, "-m", "benchmarks.demo", "--variant", "smoke", "--updates", "2"]
    command += ["--cache-dir", str(tmp_path / "cache"), "--output-dir", str(tmp_path / "demo")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert "Held-out pass@1: before" in out and "Held-out pass@8: before" in out
    assert "Sample held-out completions after training" in out
    assert (tmp_path / "demo" / "reward_curve.png").stat().st_size > 0
    assert (tmp_path / "demo" / "critic" / "model.safetensors").is_file()

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`make demo` (`python -m benchmarks.toy.demo`) end to end, shortened: the bench's smoke-size task and model, two
updates."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_demo_prints_both_methods_at_the_same_budget_and_saves_the_figure(tmp_path):
    command = [sys.executable, "-m", "benchmarks.toy.demo", "--variant", "smoke", "--updates", "4"]
    command += ["--cache-dir", str(tmp_path / "cache"), "--output-dir", str(tmp_path / "demo")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    table = {line.split("  ")[0]: line.split() for line in lines if line.startswith(("SR-PPO, 1", "GRPO, 4"))}
    assert set(table) == {"SR-PPO, 1 rollout per prompt", "GRPO, 4 rollouts per prompt"}, result.stdout
    sr_ppo, grpo = table["SR-PPO, 1 rollout per prompt"], table["GRPO, 4 rollouts per prompt"]
    assert sr_ppo[5] == "4" and grpo[5] == "2"  # updates: GRPO makes half as many, of twice the completions
    tokens = int(sr_ppo[6].replace(",", "")), int(grpo[6].replace(",", ""))
    assert min(tokens) > 0 and max(tokens) <= 2 * min(tokens)  # the same number of completions, so similar tokens
    assert "Sample held-out completions of the SR-PPO policy" in result.stdout
    assert (tmp_path / "demo" / "demo_curves.png").stat().st_size > 0
    assert (tmp_path / "demo" / "sr-ppo" / "critic" / "model.safetensors").is_file()

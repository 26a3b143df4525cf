# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`gradient_nsr_steps` and `log_kl_from_start` on two processes: the logged numbers are those of both processes'
rows, computed from scratch from what each process measured on its own (`tests/scripts/ddp_training_metrics.py`)."""

import json
import math
import subprocess
from pathlib import Path

import pytest
import torch
from helpers import script_env, two_process_launch

from trl_srppo.method.noise import NSRAccumulator

pytestmark = pytest.mark.sharded


def test_two_processes_log_the_metrics_of_both_processes_rows(tmp_path, toy_model_folder):
    script = Path(__file__).parent / "scripts" / "ddp_training_metrics.py"
    result = subprocess.run(
        two_process_launch(script, tmp_path, toy_model_folder), capture_output=True, text=True, timeout=600,
        env=script_env(),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    logs = json.loads((tmp_path / "log_history.json").read_text())
    logged_nsr = [
        (e["policy/gradient_nsr"], e["policy/gradient_nsr_unweighted"]) for e in logs if "policy/gradient_nsr" in e
    ]
    logged_kl = [e["policy/kl_from_start"] for e in logs if "policy/kl_from_start" in e]
    assert len(logged_nsr) == 2 and len(logged_kl) == 2  # two generated batches (4 updates, 2 per batch)
    for call, (weighted, unweighted) in enumerate(logged_nsr):
        parts = [torch.load(tmp_path / f"nsr_{call}_{rank}.pt") for rank in (0, 1)]
        assert all(len(part["grads"]) > 0 for part in parts)
        for name, logged in (("weighted", weighted), ("unweighted", unweighted)):
            reference = NSRAccumulator()
            for part in parts:
                for grad, scale in zip(part["grads"], part["scales"][name]):
                    reference.add(grad * scale)
            assert reference.num_replicas == sum(len(part["grads"]) for part in parts)
            assert logged == pytest.approx(reference.result().nsr, rel=1e-4)
    for call, logged in enumerate(logged_kl):
        parts = [torch.load(tmp_path / f"kl_{call}_{rank}.pt") for rank in (0, 1)]
        total, tokens = 0.0, 0.0
        for part in parts:
            mask = part["mask"].bool()
            d = (part["start"] - part["logps"])[mask].double()
            total += (torch.exp(d) - d - 1).sum().item()
            tokens += mask.sum().item()
        assert logged == pytest.approx(total / tokens, rel=1e-5, abs=1e-9)
    assert logged_kl[0] == pytest.approx(0.0, abs=1e-6) and math.isfinite(logged_kl[1])

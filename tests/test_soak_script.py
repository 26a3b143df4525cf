# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The soak script runs end to end on a few steps and records memory and step time where asked."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_soak_script_records_memory_and_step_time(tmp_path):
    command = [sys.executable, str(ROOT / "scripts" / "soak.py"), "--steps", "4", "--every", "2"]
    result = subprocess.run(command + ["--output_dir", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((tmp_path / "soak.json").read_text())
    assert [row["step"] for row in report["rows"]] == [1, 2, 4]
    assert all(row["rss_mb"] > 0 and row["step_s"] > 0 for row in report["rows"])

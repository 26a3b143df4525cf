# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`python -m benchmarks.real_model_cost`: its code on a tiny model folder (the real model's run is `make test-real`'s
model, timed by hand), and its error when the real model is not converted."""

from test_evaluation_helpers import require_data_dir, save_tiny_model

from benchmarks import real_model_cost


def test_cost_table_on_a_tiny_model(tmp_path, capsys):
    model = save_tiny_model(tmp_path / "model")
    argv = ["--model", str(model), "--data-dir", str(require_data_dir()), "--batch-size", "2", "--new-tokens", "3"]
    assert real_model_cost.main([*argv, "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "load average" in out and "upper bounds" in out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert [row.split(" | ")[0] for row in rows] == [
        "| generation (2 prompts x 3 new tokens, T=1)",
        "| policy forward + backward",
        "| critic values (forward, no grad)",
        "| critic forward + backward",
    ]
    assert "completions/s" in rows[0] and "tokens/s" in rows[1]


def test_missing_real_model_says_to_convert_it(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(real_model_cost, "DEFAULT_MODEL", str(tmp_path / "absent"))
    assert real_model_cost.main(["--model", str(tmp_path / "absent")]) == 1
    assert "python scripts/get_real_model.py" in capsys.readouterr().err

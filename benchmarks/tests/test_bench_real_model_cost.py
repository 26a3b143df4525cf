# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`python -m benchmarks.costs.real_model_cost`: its code on a tiny model folder (the real model's run is
`make test-real`'s model, timed by hand), and its error when the real model is not converted."""

import pytest

from benchmarks.costs import real_model_cost
from tests.test_evaluation_helpers import FIXTURES, save_tiny_model


def test_cost_table_on_a_tiny_model(tmp_path, capsys):
    model = save_tiny_model(tmp_path / "model")
    argv = ["--model", str(model), "--data-dir", str(FIXTURES), "--batch-size", "2", "--new-tokens", "3"]
    assert real_model_cost.main([*argv, "--repeats", "1", "--max-prompt-tokens", "60", "--critic-backward"]) == 0
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
    prompt_length = int(rows[0].split(" | ")[1].split(" x ")[1].split()[0])
    assert prompt_length <= 60  # only the short prompts


def test_too_few_short_prompts_is_an_error(tmp_path):
    from tests.test_evaluation_helpers import make_tokenizer

    with pytest.raises(ValueError, match="MATH-500 has 0 prompts of at most 5 tokens, fewer than 2"):
        real_model_cost.chat_prompts(make_tokenizer(), str(FIXTURES), 2, 5)


def test_missing_real_model_says_to_convert_it(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(real_model_cost, "DEFAULT_MODEL", str(tmp_path / "absent"))
    assert real_model_cost.main(["--model", str(tmp_path / "absent")]) == 1
    assert "python -m scripts.get_real_model" in capsys.readouterr().err

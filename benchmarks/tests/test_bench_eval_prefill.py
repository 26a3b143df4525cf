# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
from benchmarks.costs import eval_prefill
from benchmarks.tests.test_real_bench import tiny_model_folder


def test_eval_prefill_times_both_ways_and_compares_their_draws(tmp_path, capsys):
    model = tiny_model_folder(tmp_path / "model")
    assert eval_prefill.main(["--model", str(model), "--prompts", "3", "--samples", "4", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "3 prompts of" in out and "x 4 samples" in out
    assert "same draws: True" in out  # the shared cache changes the cost, not the samples
    assert eval_prefill.main(["--model", str(tmp_path / "missing")]) == 1

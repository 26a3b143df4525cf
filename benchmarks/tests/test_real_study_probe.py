# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
import numpy as np
import pytest

from benchmarks.real_study import probe
from benchmarks.tests.test_real_bench import tiny_model_folder


def test_ridge_in_the_dual_is_the_primal_solution_and_least_squares_when_weak():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(30, 5)) * [1, 2, 3, 4, 5] + 7, rng.normal(size=30)
    w, b, mean, scale = probe.ridge_fit(x, y, alpha=3.0)
    z = (x - x.mean(0)) / x.std(0)
    primal = np.linalg.solve(z.T @ z + 3.0 * np.eye(5), z.T @ (y - y.mean()))
    assert w == pytest.approx(primal) and b == pytest.approx(y.mean())
    # With a vanishing penalty and more rows than columns it is ordinary least squares with an intercept.
    weak = probe.ridge_fit(x, y, alpha=1e-9)
    design = np.column_stack([x, np.ones(30)])
    coef = np.linalg.lstsq(design, y, rcond=None)[0]
    assert probe.ridge_predict(weak, x) == pytest.approx(design @ coef, abs=1e-4)  # the dual is near singular here


def test_a_constant_column_does_not_break_the_standardisation():
    x = np.column_stack([np.arange(6.0), np.full(6, 4.0)])
    fit = probe.ridge_fit(x, np.arange(6.0), alpha=1e-9)
    assert probe.ridge_predict(fit, x) == pytest.approx(np.arange(6.0), abs=1e-6)


def test_folds_cover_every_problem_once_and_are_fixed_by_the_seed():
    folds = probe.folds_of(11, 5, seed=3)
    assert sorted(np.concatenate(folds).tolist()) == list(range(11)) and [len(f) for f in folds] == [3, 2, 2, 2, 2]
    assert all((a == b).all() for a, b in zip(folds, probe.folds_of(11, 5, seed=3)))


def test_choose_alpha_takes_the_strongest_of_equal_errors():
    # A constant target: every strength predicts it exactly, so the strongest is taken.
    x = np.random.default_rng(1).normal(size=(20, 4))
    assert probe.choose_alpha(x, np.full(20, 0.3)) == max(probe.PROBE_ALPHAS)


def test_a_problems_prediction_never_sees_its_own_label():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(40, 8))
    y = np.clip(x[:, 0] * 0.2 + 0.5, 0, 1)
    before = probe.probe_predictions(x, y)["values"]
    for i in (0, 17, 39):
        changed = y.copy()
        changed[i] = 1 - changed[i]
        assert probe.probe_predictions(x, changed)["values"][i] == before[i]


def test_level_predictions_leave_one_out_by_hand():
    # One problem per fold (5 folds, 5 problems): each value is the mean of its level's other problems.
    y = np.array([1.0, 0.0, 0.5, 0.2, 0.4])
    values = probe.level_predictions(["a", "a", "a", "b", "b"], y, folds=5)
    assert values == pytest.approx([0.25, 0.75, 0.5, 0.4, 0.2])
    # A level with no problem in the training folds takes their overall mean.
    assert probe.level_predictions(["a", "a", "c"], np.array([1.0, 0.0, 0.3]), folds=3)[2] == pytest.approx(0.5)


def test_sample_auc_by_hand():
    # Problem 0 (value 0.2): 1 of 2 correct; problem 1 (value 0.8): 2 of 2. Positives 0.2, 0.8, 0.8 against the
    # negative 0.2: a tie (1/2), then two wins: (0.5 + 1 + 1) / 3.
    assert probe.sample_auc([0.2, 0.8], [1, 2], 2) == pytest.approx(2.5 / 3)
    assert probe.sample_auc([0.8, 0.2], [1, 2], 2) == pytest.approx(0.5 / 3)  # the other order: a tie, two losses
    assert probe.sample_auc([0.2, 0.8], [0, 2], 2) == 1.0


def test_the_probe_finds_a_planted_signal_and_not_noise():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(200, 50))
    rate = 1 / (1 + np.exp(-2 * x[:, 0]))
    counts = rng.binomial(8, rate).tolist()
    found = probe.probe_run(x, counts, 8, ["one"] * 200)
    assert found["probe_auc"] > 0.75 and found["probe_r2"] > 0.3
    # One level: the value is the other folds' mean, which knows nothing of the problem (and is lower where the
    # held-out fold's own mean is higher, so it scores at or below 0.5, never above).
    assert found["level_auc"] <= 0.5
    assert found["probe_auc"] < found["oracle_auc"]
    noise = probe.probe_run(rng.normal(size=(200, 50)), counts, 8, ["one"] * 200)
    assert abs(noise["probe_auc"] - 0.5) < 0.08 and noise["probe_r2"] < 0.05


def test_prompt_features_are_what_the_value_head_reads(tmp_path):
    import torch
    from transformers import AutoModel, AutoModelForTokenClassification, AutoTokenizer

    from trl_srppo.evaluation.prompts import render_prompt

    folder = tiny_model_folder(tmp_path / "model")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    prompts = [[{"role": "user", "content": "What is 2 + 3?"}], [{"role": "user", "content": "What is 40 - 1?"}]]
    features = probe.prompt_features(AutoModel.from_pretrained(folder).eval(), tokenizer, prompts)  # (2, H)
    torch.manual_seed(0)
    critic = AutoModelForTokenClassification.from_pretrained(folder, num_labels=1).eval()
    w = critic.score.weight.detach()[0].numpy()  # (H,)
    b = 0.0 if critic.score.bias is None else float(critic.score.bias.detach()[0])
    for prompt, row in zip(prompts, features):
        ids = tokenizer(render_prompt(tokenizer, prompt), return_tensors="pt", add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            value = critic(input_ids=ids).logits[0, -1, 0].item()
        assert float(row @ w + b) == pytest.approx(value, abs=1e-5)


def test_probe_lines_name_undefined_aucs_and_runs_not_probed_yet():
    entry = {"probe_auc": None, "level_auc": 0.5, "oracle_auc": None, "probe_sd": 0.1}
    run = {**entry, "seed": 3, "prompts_per_update": 16, "pass1": 1.0, "critic_auc": None, "critic_sd": 0.0}
    found = {"features": [4, 16], "feature_seconds": 1.0, "base": entry, "runs": [run],
             "not_probed": ["sr-ppo_on_lr3e-05_s7 (16 prompts per update)"]}  # fmt: skip
    text = "\n".join(probe.probe_lines(found))
    assert "| SR-PPO, seed 3 | 16 | 1.000 | n/a | n/a | 0.500 | n/a | 0.0000 | 0.100 |" in text
    assert "Not probed yet (finished after the stage ran; run `--stage probe` again): sr-ppo_on_lr3e-05_s7" in text

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The long-horizon study (`benchmarks.long_horizon`): its testbed, its rules on hand-made curves and differences,
and the smoke run end to end on a tiny model, killed after its first checkpoint and resumed."""

import json
import math
import re

import pytest

from benchmarks.long_horizon import design, readings, report, run
from benchmarks.long_horizon import study as long_study
from benchmarks.real_study import design as real_design
from benchmarks.smollm2.task import TESTBEDS, level_problems
from benchmarks.tests.test_real_bench import tiny_model_folder


def test_the_long_testbed_adds_harder_levels_and_leaves_every_training_problem_at_most_three_draws():
    assert TESTBEDS["long"] == (*TESTBEDS["wide"], "add2", "sub2", "mul22")
    assert all(re.match(r"What is \d{2} - \d{2}\? ", r["problem"]) for r in level_problems("sub2"))
    assert min(int(r["answer"]) for r in level_problems("sub2")) == 0 and len(level_problems("mul22")) == 8100
    splits = real_design.study_splits(design.LONG)
    train = sum(len(s["train"]) for s in splits.values())
    assert train == 526 and design.LONG.updates * design.LONG.prompts_per_update / train <= 3
    assert [len(s["test"]) for s in splits.values()] == [8] * 7
    everything = [r["problem"] for level in splits.values() for split in level.values() for r in split]
    assert len(everything) == len(set(everything))
    # the existing studies' keys are unchanged by the new field
    assert real_design.settings_key(real_design.FULL, "HuggingFaceTB/SmolLM2-135M-Instruct") == "17535fb017"


def test_the_evaluation_points_and_checkpoints_of_a_run():
    assert design.eval_points(design.LONG, 16) == {
        40: (16, (1, 8)), 80: (64, design.FULL_KS), 120: (16, (1, 8)), 160: (64, design.FULL_KS)
    }  # fmt: skip
    assert design.save_steps(design.LONG) == 20 and design.save_steps(design.LONG_SMOKE) == 1


def curve(*values):
    return [{"update": 40 * (i + 1), "pass@1": v} for i, v in enumerate(values)]


def test_the_collapse_rule():
    assert readings.collapse_update(curve(0.3, 0.4, 0.5, 0.6), 0.2) is None
    assert readings.collapse_update(curve(0.3, 0.1, 0.1, 0.15), 0.2) == 80  # below the base from 80 on
    assert readings.collapse_update(curve(0.6, 0.25, 0.4, 0.29), 0.2) == 160  # below half the peak (0.3) at the end
    assert readings.collapse_update(curve(0.6, 0.25, 0.4, 0.31), 0.2) is None  # recovered: not a collapse
    assert readings.collapse_update(curve(0.3, 0.1, 0.3, 0.1), 0.2) == 160  # only the last point stays low


def test_a_collapsed_runs_path_is_read_in_windows_with_its_test_points_and_samples():
    # Off-policy: the reward at odd updates only (a generated batch's first), the length every update.
    logs = [{"step": s, "reward": s / 100 if s % 2 else None, "completions/mean_length": 30.0 + (s > 20)}
            for s in range(1, 51)]  # fmt: skip
    sample = {"level": "add1", "problem": "What is 2 + 6?", "completion": "8\n\nWhat is", "correct": True}
    last = {"update": 50, "pass@1": 0.1, "at_cap": 0.75, "examples": [sample]}
    r = {"spec": {"updates": 50, "seed": 0}, "by_update": logs, "curve": [{"update": 20, "pass@1": 0.5}, last]}
    rows = readings.windows(r, ["reward", "completions/mean_length", "entropy"])
    assert [w["update"] for w in rows] == [20, 40, 50]  # the last window holds the remainder
    assert [w["reward"] for w in rows] == pytest.approx([0.10, 0.30, 0.45])  # odd updates 1-19, 21-39, 41-49
    assert [w["completions/mean_length"] for w in rows] == [30.0, 31.0, 31.0] and math.isnan(rows[0]["entropy"])
    lines = report.collapse_path_lines("k2 s0", r, 32)
    assert "the length cap is 32 tokens" in lines[0]
    body = [line.split(" | ") for line in lines if line.startswith(("| 20 ", "| 40 ", "| 50 "))]
    assert [(row[0], row[1], row[-2], row[-1]) for row in body] == [
        ("| 20", "0.100", "0.500", "n/a |"), ("| 40", "0.300", "n/a", "n/a |"), ("| 50", "0.450", "0.100", "0.750 |")
    ]  # fmt: skip
    assert lines[-2] == "- add1 (right): `What is 2 + 6?` -> `8 What is`"


def d(low, high):
    return {"low": low, "high": high, "mean": (low + high) / 2, "seeds": 3}


def test_the_k_rule_covers_every_clause():
    zero = {"pass@1": d(-0.1, 0.1), "pass@32": d(-0.1, 0.1)}
    up = {"pass@1": d(-0.1, 0.1), "pass@32": d(0.01, 0.2)}
    down = {"pass@1": d(-0.2, -0.01), "pass@32": d(-0.1, 0.1)}
    assert readings.decide_k({"default": zero, "head": up}, 0, 0)["k"] == 2
    assert readings.decide_k({"default": down, "head": up}, 3, 0)["k"] == 2  # an interval above 0 comes first
    assert readings.decide_k({"default": zero, "head": zero}, 0, 1) == {
        "k": 2, "effect": True, "why": "k = 1 collapsed in 1 seeds, k = 2 in 0"
    }  # fmt: skip
    assert readings.decide_k({"default": down, "head": down}, 0, 0)["k"] == 1
    assert readings.decide_k({"default": down, "head": zero}, 0, 0)["effect"] is False  # below for one critic only
    assert readings.decide_k({"default": zero, "head": zero}, 2, 1)["k"] == 1
    nan = {"pass@1": d(float("nan"), float("nan"))}  # too few seeds: no interval, no separation
    assert readings.decide_k({"default": nan, "head": nan}, 0, 0) == {
        "k": 2, "effect": False, "why": "no separation and equal collapses: the weight showed no measured effect"
    }  # fmt: skip


def test_the_critic_rule_covers_every_clause():
    up = {"pass@1": d(0.01, 0.1), "pass@32": d(-0.1, 0.1)}
    zero = {"pass@1": d(-0.1, 0.1), "pass@32": d(-0.1, 0.1)}
    assert readings.decide_critic(up, 0, 0, -0.02, 0, 0) == {
        "critic_type": "separate", "head_rate": True,
        "why": "the separate critic beats the policy head (a 90% interval above 0, or fewer collapses)",
    }  # fmt: skip
    assert readings.decide_critic(up, 0, 0, -0.021, 0, 0)["head_rate"] is False  # the head loses more than 0.02
    assert readings.decide_critic(up, 0, 0, 0.05, 2, 1)["head_rate"] is False  # the head collapses more often
    assert readings.decide_critic(zero, 0, 1, 0.0, 0, 0)["critic_type"] == "separate"  # the policy head collapses
    assert readings.decide_critic(zero, 1, 1, 0.1, 0, 0) == {
        "critic_type": "policy_head", "head_rate": None,
        "why": "the separate critic does not beat the policy head: its cost buys no measured gain",
    }  # fmt: skip


def finished(seed, final, name="r"):
    return {"name": name, "spec": {"seed": seed}, "final": {"pass@1": final}}


def test_the_pilot_plans_the_seeds_and_the_rules_read_90_percent_intervals():
    from benchmarks.common.stats import detectable

    pilot = {"k2 head": [finished(100, 0.30), finished(101, 0.32)], "k1 head": [finished(100, 0.29),
                                                                              finished(101, 0.30)]}  # fmt: skip
    power = readings.planned_seeds(pilot)  # differences 0.01, 0.02: sd 0.00707
    assert power["sd"] == pytest.approx(0.01 / 2**0.5) and power["seeds"] == 2
    assert power["detectable"][2] == pytest.approx(detectable(0.01 / 2**0.5, 2))
    wide = {"k2 head": [finished(100, 0.5), finished(101, 0.1)], "k1 head": [finished(100, 0.1), finished(101, 0.1)]}
    assert readings.planned_seeds(wide)["seeds"] == 4
    assert readings.planned_seeds({})["seeds"] == 2
    # differences 0.1, 0.2, 0.3: mean 0.2, sd 0.1, t(2, 0.95) = 2.920
    runs = [finished(s, v) for s, v in enumerate((0.4, 0.5, 0.6))]
    reference = [finished(s, v) for s, v in enumerate((0.3, 0.3, 0.3))]
    got = readings.paired(runs, reference, "pass@1")
    assert got["low"] == pytest.approx(0.2 - 2.920 * 0.1 / 3**0.5)
    assert readings.better_separate({"k2": runs, "k2 head": reference}) == "k2"


def test_the_must_have_arms_run_over_every_seed_before_the_optional_ones_over_the_first_two():
    must, optional = list(design.ARMS_MUST), list(design.ARMS_OPTIONAL)
    planned = design.planned_runs([0, 1, 2])
    assert planned == ([(a, 0) for a in must] + [(a, 1) for a in must] + [(a, 2) for a in must]
                       + [(a, 0) for a in optional] + [(a, 1) for a in optional])  # fmt: skip
    assert design.planned_runs([2], ["td k2 head", "k1"], [2]) == [("k1", 2), ("td k2 head", 2)]
    runs = {"k1": [{"spec": {"seed": 0}, "training_seconds": 5400.0, "eval_seconds": 1800.0}]}
    lines = report.missing_lines(runs, [("k1", 0), ("k1", 1), ("td k2 head", 0)])
    assert lines[2] == "Not finished yet: k1 s1, td k2 head s0."
    assert report.machine_hours(runs, 2) == pytest.approx((2.0, 1.0))  # 7,200 s of one worker, two at once


def test_grpo_is_read_at_the_reference_runs_tokens_and_seconds():
    grpo = {"curve": [{"update": 40, "generated_tokens": 100, "training_seconds": 10.0, "pass@1": 0.2},
                      {"update": 80, "generated_tokens": 300, "training_seconds": 30.0, "pass@1": 0.4,
                       "pass@32": 0.9}]}  # fmt: skip
    ref = {"final": {"update": 80, "generated_tokens": 200, "training_seconds": 40.0}}
    assert readings.at_budget(grpo, ref, "generated_tokens", "pass@1") == pytest.approx(0.3)
    assert readings.at_budget(grpo, ref, "training_seconds", "pass@1") == pytest.approx(0.4)  # past it: its last
    assert readings.at_budget(grpo, ref, "generated_tokens", "pass@32") is None  # before its first n = 64 point


def test_the_mechanism_reads_early_and_late_quarters_and_the_levels_share_of_the_weight():
    logs = [{"step": s, "entropy": float(s), "clip_ratio/region_mean": 0.1, "memory/rss_mib": 90.0 + s,
             "memory/peak_rss_mib": [150.0, 100.0][s > 4] + s} for s in range(1, 9)]  # fmt: skip
    batches = [{"update": 1, "values": [0.5, 0.0], "outcomes": [1.0, 1.0], "levels": ["add1", "mul22"]},
               {"update": 7, "values": [0.5], "outcomes": [0.0], "levels": ["add1"]}]  # fmt: skip
    r = {"spec": {"updates": 8}, "by_update": logs, "prompt_values": batches, "config": {"pass_at_k": 2}}
    assert readings.early_late(r, "entropy") == (1.5, 7.5)
    assert readings.clip_key(r) == "clip_ratio/region_mean" and readings.rss_reading(r) == (91.5, 97.5, 154.0)
    assert readings.peak_growth(r, 5) == (5, 8, 3.0) and readings.peak_growth(r, 9) is None  # 105 -> 108 MiB
    assert readings.peak_growth({**r, "sessions": 2}, 5) is None  # resumed: its new process's peak starts afresh
    # The NSR of a quarter: its summed noise over its summed signal (update 1: 6 / 2 and update 2: 2 / -1 -> 8 / 1;
    # update 7: 4 / -1 alone -> not positive: infinite); none measured -> NaN.
    noise = {1: (6.0, 2.0), 2: (2.0, -1.0), 7: (4.0, -1.0)}
    for entry in logs:
        if entry["step"] in noise:
            entry["policy/gradient_noise"], entry["policy/gradient_signal"] = noise[entry["step"]]
    early, late = readings.quarters(8)
    # The lower bound: signals 2 and -1 (sd 2.1213), sum 1 + t(1 df, 0.95) 6.314 * 2.1213 * sqrt(2) = 19.94.
    early_nsr = readings.pooled_nsr([r], early)
    assert {k: early_nsr[k] for k in ("measured", "noise", "signal", "nsr")} == {
        "measured": 2, "noise": 8.0, "signal": 1.0, "nsr": 8.0
    }  # fmt: skip
    assert early_nsr["nsr_low"] == pytest.approx(8.0 / (1.0 + 6.314 * 3.0), rel=1e-6)
    assert readings.pooled_nsr([r], late)["nsr"] == math.inf
    assert math.isnan(readings.pooled_nsr([r], late)["nsr_low"])  # one batch: no spread
    assert math.isnan(readings.pooled_nsr([r], early, "_unweighted")["nsr"])
    # Seeds pool: a second run whose update 8 has 2 / 3 makes the last quarter's sums 6 / 2.
    other = {"by_update": [{"step": 8, "policy/gradient_noise": 2.0, "policy/gradient_signal": 3.0}]}
    assert readings.pooled_nsr([r, other], late)["nsr"] == pytest.approx(3.0)
    assert readings.quarter_spans(10) == [range(1, 3), range(3, 5), range(5, 7), range(7, 11)]
    # |Y - q|: 0.5 and 1.0, times the weight 2 (1 - q): 1.0 and 2.0
    assert readings.weight_shares(r, early, False) == pytest.approx({"add1": 1 / 3, "mul22": 2 / 3})
    # Bins from the base model's test success: below 0.05 hard, below 0.25 medium, else easy.
    bins = readings.difficulty({"echo2": 0.45, "add1": 0.25, "mul21": 0.115, "sub2": 0.049, "mul22": 0.0})
    assert bins == {"echo2": "easy", "add1": "easy", "mul21": "medium", "sub2": "hard", "mul22": "hard"}
    assert readings.binned({"add1": 0.2, "mul21": 0.1, "sub2": 0.3, "mul22": 0.4}, bins) == pytest.approx(
        {"easy": 0.2, "medium": 0.1, "hard": 0.7}
    )
    assert readings.weight_shares(r, early, True) == pytest.approx({"add1": 0.5 / 2.5, "mul22": 2 / 2.5})
    assert readings.weight_shares(r, late, True) == {"add1": 1.0}


def test_smoke_study_end_to_end_with_a_killed_and_resumed_run(tmp_path, monkeypatch):
    model = tiny_model_folder(tmp_path / "model")
    out, work = tmp_path / "report", tmp_path / "work"
    common = ["--smoke", "--model", str(model), "--workers", "1", "--output-dir", str(out), "--work-dir", str(work)]
    assert long_study.main([*common]) == 1  # the report before the base model: refused
    assert long_study.main([*common, "--stage", "base"]) == 0
    evaluated = []
    real_evaluate = run.evaluate

    def killed_at_3(model, tokenizer, rows, budget, samples, ks, update):
        evaluated.append(update)
        if update == 3:  # after the checkpoint of update 2: the process dies, nothing else is written
            raise KeyboardInterrupt
        return real_evaluate(model, tokenizer, rows, budget, samples, ks, update)

    monkeypatch.setattr(run, "evaluate", killed_at_3)
    with pytest.raises(KeyboardInterrupt):
        long_study.main([*common, "--stage", "pilot", "--arms", "k2 head"])
    (folder,) = work.glob("compare-*/*")
    assert run.resume_point(str(folder)).endswith("checkpoint-2")
    monkeypatch.setattr(run, "evaluate", lambda *a: evaluated.append(a[-1]) or real_evaluate(*a))
    assert long_study.main([*common, "--stage", "pilot"]) == 0
    assert evaluated[:4] == [1, 2, 3, 3] and not folder.exists()  # resumed at 3; the checkpoints deleted
    runs = {p.name: json.loads(p.read_text()) for p in out.glob("runs/compare-*/*.json")}
    assert len(runs) == 2
    resumed = next(r for r in runs.values() if r["sessions"] == 2)
    assert [p["update"] for p in resumed["curve"]] == [1, 2, 3, 4]
    assert [p["samples"] for p in resumed["curve"]] == [2, 4, 2, 4] and "pass@4" in resumed["final"]
    assert all(0.0 <= p["at_cap"] <= 1.0 and len({e["level"] for e in p["examples"]}) == len(p["examples"]) > 0
               for p in resumed["curve"])  # fmt: skip
    assert [e["step"] for e in resumed["by_update"]] == [1, 2, 3, 4] and len(resumed["update_seconds"]) == 4
    assert ["log_kl_from_start", True] in resumed["spec"]["options"]  # the metric options (design.METRIC_OPTIONS)
    assert all("policy/kl_from_start" in e and "completions/mean_length" in e for e in resumed["by_update"]
               if "reward" in e)  # fmt: skip
    assert [b["update"] for b in resumed["prompt_values"]] == [1]  # one generated batch of 4 updates
    assert len(resumed["prompt_values"][0]["values"]) == 4 * 2 and None not in resumed["prompt_values"][0]["levels"]
    assert long_study.main([*common, "--stage", "compare", "--seeds", "0", "--arms", "k2", "grpo"]) == 0
    readme = (out / "README.md").read_text()
    for heading in ("## Power", "## Paired differences", "## Decisions", "## Curves", "## Collapses",
                    "## The mechanism", "## The batch gradient", "## Cost", "## Missing runs"):  # fmt: skip
        assert heading in readme
    assert "k1 s0" in readme.split("## Missing runs")[1]  # not trained: listed
    assert re.search(r"Runs collapsed by rule 1: k2 [01] of 1, k1 0 of 0, k2 head [01] of 1,", readme)
    full = readme.split("pass@k at half and at the end")[1].split("## Collapses")[0]  # the share at the cap kept
    assert re.search(r"\n\| k2 s0 \| 4 \| [^\n]* \| [01]\.\d{3} \|\n", full)
    mechanism = readme.split("## The mechanism")[1].splitlines()[2]
    assert mechanism.startswith("| arm | entropy | KL from start | completion tokens | critic AUC |")
    results = json.loads((out / "results.json").read_text())
    assert set(results["runs"]) == {"k2", "grpo", "k2 head", "k1 head"} and results["complete"] is False  # pilot too
    # Every other arm trains too (a failure there would stop a study hours in): the report then holds them all.
    others = [arm for arm in design.ARMS if arm not in results["runs"]]
    assert long_study.main([*common, "--stage", "compare", "--seeds", "0", "--arms", *others]) == 0
    results = json.loads((out / "results.json").read_text())
    assert set(results["runs"]) == set(design.ARMS)
    assert all(len(names) == 1 for names in results["runs"].values())

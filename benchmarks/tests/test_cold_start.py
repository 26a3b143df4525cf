# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The cold-start study (`benchmarks.cold_start`): its testbed, its readings by hand, its rule, and the smoke run of
every stage end to end (A*-PO, GRPO and the warm start included) on a tiny model."""

import itertools
import json
import math
import re
import shutil
from dataclasses import replace

import pytest

from benchmarks.cold_start import design, readings
from benchmarks.cold_start import report as cold_report
from benchmarks.cold_start import study as cold_study
from benchmarks.real_study import design as real_design
from benchmarks.smollm2.task import TESTBEDS, level_problems
from benchmarks.tests.test_real_bench import tiny_model_folder

FORMS = {  # each wide level's prompt form: the level is readable from the prompt
    "echo2": r"What is \d{2}\? ",
    "add1": r"What is \d \+ \d\? ",
    "plus1": r"What is \d{2} \+ 1\? ",
    "mul21": r"What is \d{2} \* \d\? ",
}


def test_the_wide_levels_are_told_apart_by_their_form_and_split_into_one_epoch_of_the_run():
    assert TESTBEDS["wide"] == tuple(FORMS)
    for level in FORMS:
        for row in level_problems(level):
            matching = [other for other, f in FORMS.items() if re.match(f, row["problem"])]
            assert matching == [level], row
    assert level_problems("echo2")[5] == {
        "problem": "What is 15? Reply with the number only.", "answer": "15", "level": "echo2"
    }  # fmt: skip
    assert {r["answer"] for r in level_problems("plus1")} == {str(a + 1) for a in range(10, 100)}
    splits = real_design.study_splits(design.WIDE)
    train = [r["problem"] for level in splits.values() for r in level["train"]]
    everything = [r["problem"] for level in splits.values() for split in level.values() for r in split]
    assert len(everything) == len(set(everything))  # disjoint
    assert len(train) == design.WIDE.updates * design.WIDE.prompts_per_update == 128  # every prompt visited once
    assert len(splits["mul21"]["train"]) + 8 + len(splits["mul21"]["val"]) + len(splits["mul21"]["test"]) == 90


def test_the_arithmetic_studys_cache_key_is_unchanged_by_the_choice_of_testbed():
    # computed before `Study.testbed` existed: the committed runs of reports/real_study stay readable
    assert real_design.settings_key(real_design.FULL, "HuggingFaceTB/SmolLM2-135M-Instruct") == "17535fb017"
    assert (
        real_design.settings_key(replace(real_design.FULL, testbed="wide"), "HuggingFaceTB/SmolLM2-135M-Instruct")
        != "17535fb017"
    )


def brute_auc(scores, labels):
    pairs = [(p, n) for p, n in itertools.product(range(len(scores)), repeat=2) if labels[p] and not labels[n]]
    return sum(1.0 if scores[p] > scores[n] else 0.5 if scores[p] == scores[n] else 0.0 for p, n in pairs) / len(pairs)


def run_with_batches(batches, options=(), updates=None, lengths=None, tokens=1000, warm_start=0.0):
    updates = updates or len(batches)
    by_update = [{"reward": 0.0, "completions/mean_length": (lengths or [10.0] * updates)[i]} for i in range(updates)]
    if warm_start:
        by_update[0]["critic/warm_start_tokens"] = warm_start
    return {
        "spec": {"seed": 0, "options": [list(o) for o in options], "prompts_per_update": 4, "updates": updates},
        "prompt_values": [{"values": v, "outcomes": y} for v, y in batches],
        "by_update": by_update,
        "generated_tokens": tokens,
    }


def test_training_auc_pools_the_batches_of_a_range_and_tracking_reads_each_batch():
    batches = [([0.1, 0.2, 0.3, 0.4], [0, 0, 1, 1]), ([0.5, 0.1, 0.2, 0.2], [0, 1, 0, 1]),
               ([0.2, 0.2, 0.2, 0.2], [1, 1, 1, 1]), ([0.3, 0.9, 0.1, 0.5], [0, 1, 0, 1])]  # fmt: skip
    run = run_with_batches(batches)
    values = [v for b, _ in batches[1:3] for v in b]
    labels = [y for _, b in batches[1:3] for y in b]
    assert readings.training_auc(run, 2, 3) == pytest.approx(brute_auc(values, labels))
    assert readings.quarter_aucs(run)[0] == 1.0 and readings.quarter_aucs(run)[3] == 1.0
    assert readings.quarter_aucs(run)[2] != readings.quarter_aucs(run)[2]  # one class only: NaN
    track = readings.tracking(run)
    gaps = [abs(0.25 - 0.5), abs(0.25 - 0.5), abs(0.2 - 1.0), abs(0.45 - 0.5)]
    assert track["mean_gap"] == pytest.approx(sum(gaps) / 4) and track["first_gap"] == pytest.approx(0.25)
    assert track["within"] == pytest.approx(0.25)


def test_extra_tokens_count_the_warm_start_the_critic_only_updates_and_a2pos_offline_stage():
    run = run_with_batches([([0.1], [0])] * 4, options=[("critic_warmup_steps", 2)], lengths=[10.0, 20.0, 5.0, 5.0],
                           tokens=1000, warm_start=80.0)  # fmt: skip
    assert readings.extra_tokens(run) == 80.0 + (10.0 + 20.0) * 4
    assert readings.token_share(run) == pytest.approx(200.0 / 800.0)
    assert readings.extra_tokens({**run, "offline_tokens": 640}) == 640.0


def option_row(seeds, score, share=0.0, below=False, sd=0.1):
    runs = [{"seed": s, "token_share": share, "below_base": below, "held_out": [{"sd": 0.0}, {"sd": sd}]}
            for s in seeds]  # fmt: skip
    return {"runs": runs, "score": score}


def test_the_options_rule():
    seeds = (100, 101)
    table = {"default": option_row(seeds, 0.55), "head": option_row(seeds, 0.70),
             "big": option_row(seeds, 0.90, share=8.0), "bad": option_row(seeds, 0.95, below=True),
             "flat": option_row(seeds, 0.99, sd=0.001)}  # fmt: skip
    # over budget, below the base, values that hardly spread at the end: not eligible
    assert readings.choose_option(table, seeds)[0] == "head"
    assert readings.choose_option({**table, "head": option_row((100,), 0.7)}, seeds)[0] is None  # unfinished
    only_bad = {"default": option_row(seeds, 0.5, below=True), "big": option_row(seeds, 0.9, share=1.0)}
    assert readings.choose_option(only_bad, seeds)[0] == "default"


def test_the_issues_goals_hold_only_when_every_run_meets_them():
    def row(*runs):  # (share of updates within 0.1, first quarter's training-batch AUC, token share) per run
        tracks = [{"within": w, "calibrated": 0.4} for w, _, _ in runs]
        return {"runs": [{"tracking": k, "training": [q, 0.5, 0.5, 0.5], "token_share": t}
                         for k, (_, q, t) in zip(tracks, runs)]}  # fmt: skip

    assert readings.goals(row((1.0, 0.70, 0.10), (1.0, 0.66, 0.0)), 0.66) == {
        "tracks": True, "ceiling": True, "tokens": True
    }  # fmt: skip
    # one run off at one update, one run below the ceiling, one run over the budget: each goal fails on its own
    assert readings.goals(row((1.0, 0.70, 0.0), (0.94, 0.70, 0.0)), 0.66)["tracks"] is False
    assert readings.goals(row((1.0, 0.70, 0.0), (1.0, 0.65, 0.0)), 0.66) == {
        "tracks": True, "ceiling": False, "tokens": True
    }  # fmt: skip
    assert readings.goals(row((1.0, 0.70, 0.11), (1.0, 0.70, 0.0)), 0.66)["tokens"] is False
    assert readings.goals(row((1.0, float("nan"), 0.0)), 0.66)["ceiling"] is False  # no AUC: not reached
    lines = cold_report.goal_lines({"a": row((1.0, 0.7, 0.0)), "b": row((0.5, 0.7, 0.0)), "c": {"runs": []}}, 0.66)
    assert (
        "| a | yes | yes | yes | yes | 1.00 | 0.40 |" in lines and "| b | no | yes | yes | no | 0.50 | 0.40 |" in lines
    )
    assert math.isnan(cold_report.probe_ceiling({"val": {"probe_auc": None}}))  # stored as null: not drawn
    assert cold_report.probe_ceiling({"val": {"probe_auc": 0.658}}) == 0.658
    assert not readings.goals(row((1.0, 0.7, 0.0)), float("nan"))["ceiling"]  # no ceiling drawn: not reached
    assert lines[-2].startswith("Options meeting all three: a. ") and not any(
        line.startswith("| c ") for line in lines
    )


def sweep_run(method, rate, seed, final):
    return {"spec": {"method": method, "learning_rate": rate, "seed": seed}, "final": {"pass@1": final}}


def test_the_sweeps_rule_chooses_each_methods_own_rate():
    finals = {  # method -> rate -> (seed 100, seed 101)
        "sr-ppo": {1e-5: (0.3, 0.3), 3e-5: (0.5, 0.6), 1e-4: (0.9, 0.05)},  # 1e-4: one run below the base (0.1)
        "grpo": {1e-5: (0.2, 0.2), 3e-5: (0.2, 0.3), 1e-4: (0.4, 0.4)},
        "a2po": {1e-5: (0.05, 0.05), 3e-5: (0.06, 0.08), 1e-4: (0.02, 0.01)},  # every rate below the base
    }
    runs = [sweep_run(m, r, s, v) for m, rates in finals.items() for r, vs in rates.items()
            for s, v in zip((100, 101), vs)]  # fmt: skip
    table = readings.sweep_table(runs, base_val=0.1)
    rates, _ = readings.choose_rates(table, (100, 101))
    assert rates == {"sr-ppo": 3e-5, "grpo": 1e-4, "a2po": 3e-5}
    assert readings.choose_rates(readings.sweep_table(runs[1:], 0.1), (100, 101))[0] is None


def test_the_planned_seeds_come_from_the_sweeps_pooled_paired_spread():
    from benchmarks.common.stats import detectable

    finals = {  # method -> rate -> (seed 100, seed 101): SR-PPO - GRPO differences (0.1, 0.0), (0.2, 0.1), (0.0, 0.1)
        "sr-ppo": {1e-5: (0.5, 0.4), 3e-5: (0.6, 0.5), 1e-4: (0.3, 0.4)},
        "grpo": {1e-5: (0.4, 0.4), 3e-5: (0.4, 0.4), 1e-4: (0.3, 0.3)},
        "a2po": {1e-5: (0.1, 0.1), 3e-5: (0.1, 0.1), 1e-4: (0.1, 0.1)},
    }
    runs = [sweep_run(m, r, s, v) for m, rates in finals.items() for r, vs in rates.items()
            for s, v in zip((100, 101), vs)]  # fmt: skip
    power = readings.planned_seeds(readings.sweep_table(runs, base_val=0.0))
    # each rate's two differences lie 0.05 either side of their mean: sd sqrt(6 x 0.05^2 / 3)
    assert power["dof"] == 3 and power["sd"] == pytest.approx((6 * 0.05**2 / 3) ** 0.5)
    assert power["detectable"][6] == pytest.approx(detectable(power["sd"], 6))
    expected = next((n for n in design.SEED_CHOICES if detectable(power["sd"], n) <= 0.05), 12)
    assert power["seeds"] == expected
    assert readings.planned_seeds(readings.sweep_table([], 0.0))["seeds"] == design.SEED_CHOICES[0]


def test_a_budget_reading_starts_at_the_base_model_and_stays_there_through_the_offline_stage():
    # GRPO-like: nothing before its first update, evaluations at 100 and 300 tokens
    spec = {"options": [], "prompts_per_update": 4}
    run = {"spec": spec, "curve": [{"generated_tokens": 100, "pass@1": 0.2}, {"generated_tokens": 300, "pass@1": 0.6}]}
    assert readings.read_from_base(run, "generated_tokens", 200, base=0.1) == pytest.approx(0.4)
    assert readings.read_from_base(run, "generated_tokens", 50, base=0.1) == pytest.approx(0.15)  # halfway from 0.1
    assert readings.read_from_base(run, "generated_tokens", 900, base=0.1) == pytest.approx(0.6)  # a lower bound
    # A*-PO-like: an offline stage of 1,000 tokens and 40 s (the base model throughout), evaluations after it
    peer = {
        "spec": spec, "offline_tokens": 1000, "phase_seconds": {"offline values": 40.0},
        "curve": [{"generated_tokens": 1100, "training_seconds": 60.0, "pass@1": 0.5},
                  {"generated_tokens": 1200, "training_seconds": 80.0, "pass@1": 0.7}],
    }  # fmt: skip
    assert readings.read_from_base(peer, "generated_tokens", 600, base=0.1) == pytest.approx(0.1)
    assert readings.read_from_base(peer, "generated_tokens", 1050, base=0.1) == pytest.approx(0.3)
    assert readings.read_from_base(peer, "training_seconds", 30.0, base=0.1) == pytest.approx(0.1)
    assert readings.read_from_base(peer, "training_seconds", 50.0, base=0.1) == pytest.approx(0.3)
    # a warm start's logged seconds start the curve later; critic-only updates' seconds are not recorded
    warm = {"spec": {"options": [["critic_warm_start_prompts", 2]], "prompts_per_update": 4}, "by_update": [
        {"critic/warm_start_tokens": 50.0, "critic/warm_start_seconds": 10.0}],
        "curve": [{"generated_tokens": 150, "training_seconds": 30.0, "pass@1": 0.5}]}  # fmt: skip
    assert readings.start_cost(warm, "generated_tokens") == 50.0
    assert readings.read_from_base(warm, "training_seconds", 20.0, base=0.1) == pytest.approx(0.3)
    frozen = {"spec": {"options": [["critic_warmup_steps", 4]]}, "by_update": [],
              "curve": [{"generated_tokens": 150, "training_seconds": 30.0, "pass@1": 0.5}]}  # fmt: skip
    assert readings.read_from_base(frozen, "training_seconds", 20.0, base=0.1) is None


def test_the_comparison_shows_two_arms_of_one_setting_once_and_the_weights_own_effect():
    def run(name, seed, final):
        curve = [{"generated_tokens": 100, "training_seconds": 10.0, "pass@1": final, "pass@8": final + 0.1}]
        spec = {"seed": seed, "options": [], "prompts_per_update": 4}
        return {"name": name, "spec": spec, "final": curve[-1], "curve": curve, "generated_tokens": 100,
                "training_seconds": 10.0}  # fmt: skip

    head = [run("head_s0", 0, 0.5), run("head_s1", 1, 0.7)]
    compare = {"sr-ppo": [run("default_s0", 0, 0.4), run("default_s1", 1, 0.4)], "sr-ppo head": head, "best": head}
    lines = cold_report.compare_lines(compare, {"pass@1": 0.1, "pass@8": 0.3})
    label = "| SR-PPO, value head at 0.003 (the chosen cold-start option), k = 2 |"
    runs_row, pass1_row, pass8_row = (line for line in lines if line.startswith(label))
    assert runs_row.startswith(f"{label} 2 |") and not any("SR-PPO + the chosen" in line for line in lines)
    # 0.5 - 0.4 and 0.7 - 0.4: a mean of +0.2 at equal updates, tokens and seconds, on pass@1 and pass@8 alike
    assert pass1_row.count("+0.200 [") == 3 and pass8_row.count("+0.200 [") == 3
    compare["best k=1"] = [run("k1_s0", 0, 0.6), run("k1_s1", 1, 0.5)]
    weight = [line for line in cold_report.compare_lines(compare, {"pass@1": 0.1, "pass@8": 0.3}) if "| pass@" in line]
    assert len(weight) == 2 and weight[0].startswith("| pass@1 | +0.050 [")  # k = 2 - k = 1: -0.1 and +0.2
    compare["running mean k=1"] = [run("mean_s0", 0, 0.45), run("mean_s1", 1, 0.55)]
    lines = cold_report.compare_lines(compare, {"pass@1": 0.1, "pass@8": 0.3})
    heading = lines.index("What the learned critic adds: the chosen option at k = 1 minus the running mean at k = 1:")
    added = [line for line in lines[heading:] if line.startswith("| pass@")]
    assert len(added) == 2 and added[0].startswith("| pass@1 | +0.050 [")  # 0.6 - 0.45 and 0.5 - 0.55
    assert any(line.startswith("| SR-PPO, k = 1, the outcomes' running mean for a critic (no network) | 2 |")
               for line in lines)  # fmt: skip
    other = dict(compare, best=[run("warm_s0", 0, 0.3)])  # another option chosen: its own rows
    assert any(line.startswith("| SR-PPO + the chosen cold-start option, k = 2 | 1 |")
               for line in cold_report.compare_lines(other, {"pass@1": 0.1, "pass@8": 0.3}))  # fmt: skip


def test_each_parts_minutes_count_a_shared_run_once():
    base = {"select_seconds": 30.0, "val": {"eval_seconds": 20.0}, "test": {"eval_seconds": 40.0}}
    shared = {"name": "head_s0", "training_seconds": 100.0, "total_seconds": 300.0}
    compare = {"sr-ppo": [{"name": "default_s0", "training_seconds": 60.0}], "sr-ppo head": [shared], "best": [shared]}
    mechanisms = {
        "sr-ppo": {
            "run": {"training_seconds": 90.0, "total_seconds": 120.0},
            "spec": {},
            "prompts": 48,
            "bins": {"summary": {}, "seconds": 30.0},
            "nsr": {"summary": {}, "seconds": 30.0},
        }
    }
    minutes = cold_report.part_minutes(
        base,
        {"seconds": 30.0},
        [{"training_seconds": 60.0}],
        [{"total_seconds": 120.0}, {"total_seconds": 180.0}],
        cold_report.distinct_runs(compare),
        mechanisms,
    )
    # testbed 30 + 20 + 40 + 30 s; the shared run's total (300 s) once beside the default's training seconds (60 s)
    assert minutes == pytest.approx(
        {"testbed": 2.0, "options": 1.0, "sweep": 5.0, "comparison": 6.0, "mechanism": 3.0}
    )


def test_a_reading_no_evaluation_reached_says_how_far_past_the_budget_the_first_came():
    reference = {
        0: {"generated_tokens": 100, "training_seconds": 50.0},
        1: {"generated_tokens": 300, "training_seconds": 50.0},
    }
    # the peer's offline stage: first evaluations at 800 and 1,200 tokens, a mean 5x the references' 200
    peer = [{"curve": [{"generated_tokens": 800, "training_seconds": 80.0}]},
            {"curve": [{"generated_tokens": 1200, "training_seconds": 120.0}]}]  # fmt: skip
    none = {"seeds": 0, "mean": float("nan"), "low": float("nan"), "high": float("nan")}
    cell = cold_report.budget_cell(none, peer, reference, "generated_tokens")
    assert cell == "none: its first evaluation comes at 5.0x SR-PPO's generated tokens"
    seconds = cold_report.budget_cell(none, peer, reference, "training_seconds")
    assert seconds == "none: its first evaluation comes at 2.0x SR-PPO's seconds"
    read = {"seeds": 2, "mean": 0.1, "low": 0.0, "high": 0.2, "p_sign_flip": 0.5}
    assert (
        cold_report.budget_cell(read, peer, reference, "generated_tokens")
        == "+0.100 [+0.000, +0.200] (2 seeds), sign-flip p 0.500"
    )


def test_a_mechanism_checkpoint_is_named_by_its_method_and_options():
    from benchmarks.real_study.report import checkpoint_label

    assert checkpoint_label({"method": "sr-ppo", "options": []}) == "default SR-PPO"
    head = [["critic_head_learning_rate", 0.003]]
    assert checkpoint_label({"method": "sr-ppo", "options": head}) == "SR-PPO with critic_head_learning_rate=0.003"
    assert checkpoint_label({"method": "sr-ppo-pass1", "options": head}).startswith("SR-PPO at k = 1 with critic_head")


def test_smoke_study_end_to_end(tmp_path):
    model = tiny_model_folder(tmp_path / "model")
    out = tmp_path / "report"
    common = ["--smoke", "--model", str(model), "--workers", "1", "--output-dir", str(out)]
    common += ["--work-dir", str(tmp_path / "work")]
    assert cold_study.main([*common, "--stage", "compare"]) == 1  # no option chosen yet: refused
    assert cold_study.main([*common, "--stage", "options"]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["chosen"] in design.SMOKE_OPTIONS
    ceilings = results["ceilings"]
    assert set(ceilings) == {"val", "test", "seconds"}
    runs = {p.name: json.loads(p.read_text()) for p in out.glob("runs/options-*/*.json")}
    assert len(runs) == len(design.SMOKE_OPTIONS)
    for run in runs.values():
        updates = run["spec"]["updates"]
        assert len(run["prompt_values"]) == updates and [p["update"] for p in run["critic_curve"]] == [1, 2]
        assert all(len(b["values"]) == len(b["outcomes"]) == run["spec"]["prompts_per_update"]
                   for b in run["prompt_values"])  # fmt: skip
        assert len(run["critic_curve"][0]["critic_s0"]) == results["meta"]["sizes"]["val"]
        assert "logs" not in run and len([e for e in run["by_update"] if "reward" in e]) == updates
    (warm,) = [r for r in runs.values() if r["spec"]["options"]]
    assert readings.warm_start_tokens(warm) > 0
    assert warm["completions"] == 2 * 4 + warm["spec"]["updates"] * warm["spec"]["prompts_per_update"]
    arms = ["sr-ppo", "best", "running mean k=1", "grpo", "a2po"]
    assert cold_study.main([*common, "--stage", "compare", "--seeds", "0", "--arms", *arms]) == 1  # no rates yet
    assert cold_study.main([*common, "--stage", "sweep"]) == 0
    rates = json.loads((out / "results.json").read_text())["rates"]
    assert set(rates) == set(design.SWEEP_METHODS) and set(rates.values()) <= set(design.SWEEP_RATES)
    assert cold_study.main([*common, "--stage", "compare", "--seeds", "0", "--arms", *arms]) == 0
    (a2po,) = out.glob("runs/compare-*/a2po_*.json")
    a2po = json.loads(a2po.read_text())
    assert a2po["spec"]["learning_rate"] == rates["a2po"]
    train = results["meta"]["sizes"]["train"]
    # its offline stage: 8 samples of every training prompt, then one rollout per prompt per update
    assert a2po["completions"] == 8 * train + a2po["spec"]["updates"] * a2po["spec"]["prompts_per_update"]
    assert 0 < a2po["offline_tokens"] < a2po["generated_tokens"]
    (mean,) = out.glob("runs/compare-*/sr-ppo-pass1_*.json")  # the control: one value for every held-out problem
    mean = json.loads(mean.read_text())
    assert mean["spec"]["options"] == [["critic_type", "running_mean"]]
    assert all(len(set(point["critic_s0"])) == 1 for point in mean["critic_curve"])
    assert cold_study.main([*common, "--stage", "mechanism"]) == 0
    readme = (out / "README.md").read_text()
    mechanism = readme.split("## The mechanism on trained checkpoints")[1]
    for arm in design.MECHANISM_ARMS:
        assert f"### {design.ARM_LABELS[arm]}" in mechanism
    assert "batch NSR, without the Pass@k weight -> with it" in mechanism
    (analysed,) = out.glob("runs/mechanism-sr-ppo-*/run.json")
    assert (tmp_path / "work" / analysed.parent.name / "checkpoint" / "critic").is_dir()
    shutil.rmtree(tmp_path / "work")  # another machine: no checkpoint, every analysis kept in runs/
    kept = {p: p.stat().st_mtime_ns for p in out.glob("runs/mechanism-*/*.json")}
    assert cold_study.main([*common, "--stage", "mechanism"]) == 0
    assert {p: p.stat().st_mtime_ns for p in out.glob("runs/mechanism-*/*.json")} == kept  # nothing trained again
    for arm in ("sr-ppo", "running mean k=1", "grpo", "a2po"):
        assert f"| {design.ARM_LABELS[arm]} | 1 |" in readme
    assert "## The testbed (stage `base`)" in readme and "| mul21 |" in readme


def test_the_critic_summary_reads_the_weights_spread_and_the_runs_own_auc():
    assert readings.weight_ratio([0.5] * 10) == pytest.approx(1.0)  # one value: every problem weighed alike
    # q = 0, 0.1, .., 0.9: weights 2 (1 - q) = 2.0 .. 0.2; percentiles (linear) 0.38 and 1.82
    assert readings.weight_ratio([i / 10 for i in range(10)]) == pytest.approx(1.82 / 0.38)
    run = {
        "final": {"critic_s0": [0.2, 0.4], "correct_counts": [0, 2], "pass@1": 0.5, "pass@2": 0.5},
        "prompt_values": [{"values": [0.3, 0.3], "outcomes": [1.0, 0.0]}, {"values": [0.9, 0.1], "outcomes": [1, 0]}],
    }
    summary = readings.critic_summary(run)
    assert summary["test_auc"] == 1.0 and summary["test_sd"] == pytest.approx(0.1)  # the 2 successes ranked first
    # one value, differing by float noise between problems: no ranking
    noisy = {"critic_s0": [0.58107376, 0.58107382], "correct_counts": [0, 2], "pass@1": 0.5, "pass@2": 0.5}
    assert readings.final_test_auc(noisy) == 0.5
    assert summary["tracking"]["mean_gap"] == pytest.approx((0.2 + 0.0) / 2)  # |0.3 - 0.5| and |0.5 - 0.5|
    left = 0.7**2 + 0.3**2 + 0.1**2 + 0.1**2
    assert summary["squared_advantage"]["mean"] == pytest.approx(left / 4)
    # each batch's own rate, 0.5, would have left 0.25 per rollout: 1.0 in all
    assert summary["squared_advantage"]["relative"] == pytest.approx(left / 1.0)
    constant = {"prompt_values": [{"values": [0.4] * 3, "outcomes": [1, 0, 0]}]}  # one value, not the batch's 1/3
    assert readings.squared_advantage(constant)["relative"] == pytest.approx((0.36 + 0.16 * 2) / (4 / 9 + 2 / 9))


def test_the_defaults_decision_follows_its_rule_on_intervals_computed_by_hand():
    def runs(finals):
        return [{"spec": {"seed": s}, "final": {"pass@1": v, "pass@8": v + 0.1}} for s, v in enumerate(finals)]

    t2 = 4.3027  # Student's t, 2 degrees of freedom, 97.5% (to the 1e-4 the checks below allow)
    compare = {"sr-ppo": runs([0.5, 0.5, 0.5]), "best": runs([0.55, 0.5, 0.6]), "best k=1": runs([0.5, 0.45, 0.55]),
               "running mean k=1": runs([0.48, 0.5, 0.46])}  # fmt: skip
    so_far = "so far sr-ppo 3, best 3, best k=1 3, running mean k=1 3"
    assert readings.decide_defaults(compare, 4) == {
        "decided": False,
        "why": f"waits for 4 seeds of every arm it reads; {so_far}",
    }
    decision = readings.decide_defaults(compare, 3)
    # the option: differences 0.05, 0, 0.1 (sd 0.05): 0.05 -/+ t2 0.05 / sqrt(3), below 0 at its low end
    assert decision["option"]["pass@1"]["low"] == pytest.approx(0.05 - t2 * 0.05 / 3**0.5, abs=1e-4)
    assert not decision["option_pays"]
    # the weight: 0.05 on every seed, an interval of one point above 0
    assert decision["weight"]["pass@8"]["low"] == pytest.approx(0.05) and decision["weight_pays"]
    # the running mean: -0.02, 0, -0.04 (sd 0.02): low -0.02 - t2 0.02 / sqrt(3) = -0.0697 < -0.05
    assert decision["cheaper"]["running mean k=1"]["pass@1"]["low"] == pytest.approx(
        -0.02 - t2 * 0.02 / 3**0.5, abs=1e-4
    )
    assert decision["matches"] == {"running mean k=1": False, "best k=1": False} and decision["critic"] is None
    # a weight that does not pay, and a running mean within 0.01 of SR-PPO on every seed: it is the critic
    decision = readings.decide_defaults(
        dict(compare, **{"best k=1": compare["best"], "running mean k=1": runs([0.5, 0.49, 0.51])}), 3
    )
    assert not decision["weight_pays"] and decision["matches"]["running mean k=1"]
    assert decision["critic"] == "running mean k=1"
    lines = cold_report.decision_lines(dict(compare, **{"best k=1": compare["best"],
                                                         "running mean k=1": runs([0.5, 0.49, 0.51])}), 3)  # fmt: skip
    assert lines[-2] == (
        "Neither the option nor the Pass@k weight pays here: the recommendation is k = 1 with "
        f"{design.ARM_LABELS['running mean k=1']}."
    )
    # an option 0.10, 0.12, 0.14 above SR-PPO: low 0.12 - t2 0.02 / sqrt(3) = 0.070 > 0 on both measures: it pays
    paying = dict(compare, best=runs([0.6, 0.62, 0.64]))
    assert readings.decide_defaults(paying, 3)["option_pays"]
    assert cold_report.decision_lines(paying, 3)[-2] == "The chosen cold-start option pays: it becomes the default."


def test_a_calibrated_critics_tracking_chance_matches_every_outcome_enumerated():
    # 8 prompts at 0.5: only 4 successes of 8 land within 0.1 of 0.5, C(8, 4) / 2^8
    assert readings.calibrated_within([0.5] * 8) == pytest.approx(70 / 256)
    assert readings.calibrated_within([0.0, 1.0, 0.0, 1.0]) == pytest.approx(1.0)  # no chance left: always exact
    values = [0.05, 0.3, 0.62, 0.9, 0.47, 0.2]
    brute = 0.0
    for outcome in itertools.product((0, 1), repeat=len(values)):
        chance = 1.0
        for y, q in zip(outcome, values):
            chance *= q if y else 1 - q
        if abs(sum(outcome) / len(values) - sum(values) / len(values)) <= 0.1:
            brute += chance
    assert readings.calibrated_within(values) == pytest.approx(brute)
    run = {"prompt_values": [{"values": [0.5] * 8, "outcomes": [1.0] * 4 + [0.0] * 4},
                             {"values": values, "outcomes": [1.0] * 6}]}  # fmt: skip
    assert readings.tracking(run)["calibrated"] == pytest.approx((70 / 256 + brute) / 2)
    assert readings.tracking(run)["within"] == 0.5  # the first batch exactly, the second 1 - 0.423 away

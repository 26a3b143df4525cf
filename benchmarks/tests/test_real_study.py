# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
import json
import math
from dataclasses import asdict
from itertools import product

import numpy as np
import pytest

from benchmarks.common import stats as paired_stats
from benchmarks.common import tables
from benchmarks.real_study import design, readings
from benchmarks.real_study import head as real_study_head
from benchmarks.real_study import report as real_study_report
from benchmarks.real_study import study as real_study
from benchmarks.smollm2.task import LEVELS
from benchmarks.tests.test_real_bench import tiny_model_folder


def test_study_splits_are_disjoint_fixed_and_hold_200_test_problems():
    splits = design.study_splits(design.FULL)
    assert set(splits) == set(LEVELS)
    test = [r["problem"] for level in splits.values() for r in level["test"]]
    val = [r["problem"] for level in splits.values() for r in level["val"]]
    train = [r["problem"] for level in splits.values() for r in level["train"]]
    select = [r["problem"] for level in splits.values() for r in level["select"]]
    assert len(test) >= 200 and len(val) >= 60
    everything = test + val + train + select
    assert len(everything) == len(set(everything))  # disjoint, no repeats
    # The fractions: add1 has 81 problems, 73 after the selection's 8: val round(0.15 x 73) = 11, test 33, train 29.
    assert [len(splits["add1"][k]) for k in ("select", "val", "test", "train")] == [8, 11, 33, 29]
    assert design.study_splits(design.FULL) == splits  # fixed by the data seed
    other = design.study_splits(real_study.replace(design.FULL, data_seed=1))
    assert [r["problem"] for level in other.values() for r in level["test"]] != test


def run(method, lr, seed, final, half=None, updates=2):
    curve = ([{"update": updates // 2, "pass@1": half}] if half is not None else []) + [
        {"update": updates, "pass@1": final, "pass@8": min(1.0, 2 * final)}
    ]
    return {
        "spec": {"method": method, "learning_rate": lr, "seed": seed, "updates": updates, "options": []},
        "curve": curve,
        "final": curve[-1],
        "training_seconds": 10.0 * updates,
    }


def test_the_sweeps_rule_takes_the_best_mean_among_rates_with_no_run_below_the_base_model():
    results = [
        run("sr-ppo", 1e-5, 100, 0.30), run("sr-ppo", 1e-5, 101, 0.20),
        run("grpo", 1e-5, 100, 0.25), run("grpo", 1e-5, 101, 0.25),  # mean (0.25 + 0.25) / 2 = 0.25
        run("sr-ppo", 3e-5, 100, 0.60), run("sr-ppo", 3e-5, 101, 0.08),  # one run below the base model (0.10)
        run("grpo", 3e-5, 100, 0.60), run("grpo", 3e-5, 101, 0.60),
        run("sr-ppo", 1e-4, 100, 0.40), run("sr-ppo", 1e-4, 101, 0.30),
        run("grpo", 1e-4, 100, 0.20), run("grpo", 1e-4, 101, 0.20),  # mean (0.35 + 0.20) / 2 = 0.275
    ]  # fmt: skip
    table = real_study.sweep_table(results, base_val=0.10)
    assert table[1e-5]["score"] == pytest.approx(0.25) and table[1e-4]["score"] == pytest.approx(0.275)
    assert table[3e-5]["below_base"] and not table[1e-4]["below_base"]
    assert real_study.choose_learning_rate(table) == 1e-4  # 3e-5 scores highest but has a run below the base
    # Until every rate has both methods on every sweep seed, nothing is chosen (an interrupted sweep chooses nothing).
    partial = real_study.sweep_table(results[:8] + [run("sr-ppo", 1e-4, 100, 0.9), run("grpo", 1e-4, 100, 0.9)], 0.10)
    assert real_study.choose_learning_rate(partial) is None
    assert real_study.choose_learning_rate(real_study.sweep_table(results[4:8], 0.10)) is None
    assert real_study.choose_learning_rate(table, seeds=(100, 101, 102)) is None
    # Runs at a rate outside the sweep's are not candidates.
    other = real_study.sweep_table(
        results + [run(m, 1e-3, s, 0.99) for m in ("sr-ppo", "grpo") for s in (100, 101)], 0.1
    )
    assert real_study.choose_learning_rate(other) == 1e-4
    # Every rate with a run below the base model: none.
    assert real_study.choose_learning_rate(real_study.sweep_table(results, base_val=0.35)) is None


def test_power_reads_the_seeds_spread_at_the_chosen_rate():
    results = [
        run("sr-ppo", 1e-4, 100, 0.5), run("sr-ppo", 1e-4, 101, 0.7), run("sr-ppo", 1e-4, 102, 0.6),
        run("grpo", 1e-4, 100, 0.4), run("grpo", 1e-4, 101, 0.4), run("grpo", 1e-4, 102, 0.7),
        run("sr-ppo", 1e-5, 100, 0.0),  # another rate: left out
    ]  # fmt: skip
    out = readings.power(results, 1e-4)
    assert out["differences"] == pytest.approx([0.1, 0.3, -0.1])
    assert out["sr-ppo"]["sd"] == pytest.approx(0.1)  # 0.5, 0.7, 0.6
    sd = math.sqrt(((0.1 - 0.1) ** 2 + (0.3 - 0.1) ** 2 + (-0.1 - 0.1) ** 2) / 2)  # 0.2
    assert out["sr-ppo - grpo"]["sd"] == pytest.approx(sd)
    assert out["sr-ppo - grpo"]["pooled_sd"] == pytest.approx(sd)  # the other rate adds no degree of freedom
    assert out["sr-ppo - grpo"]["detectable"][4] == pytest.approx((3.182 + 0.978) * sd / 2)  # t with 3 dof
    assert out["planned_seeds"] == 12  # (2.201 + 0.876) x 0.2 / sqrt(12) = 0.18 > 0.05: the most seeds
    # Two rates, each around its own mean: differences 0.1, 0.3 (mean 0.2) and 0.02, 0.04 (mean 0.03).
    quiet = [
        run("sr-ppo", 1e-4, 100, 0.5), run("sr-ppo", 1e-4, 101, 0.7), run("grpo", 1e-4, 100, 0.4),
        run("grpo", 1e-4, 101, 0.4), run("sr-ppo", 3e-5, 100, 0.52), run("sr-ppo", 3e-5, 101, 0.54),
        run("grpo", 3e-5, 100, 0.5), run("grpo", 3e-5, 101, 0.5),
    ]  # fmt: skip
    out = readings.power(quiet, 3e-5)
    pooled = math.sqrt((0.1**2 + 0.1**2 + 0.01**2 + 0.01**2) / 2)
    assert out["sr-ppo - grpo"]["pooled_sd"] == pytest.approx(pooled) and out["sr-ppo - grpo"]["dof"] == 2
    assert out["sr-ppo - grpo"]["sd"] == pytest.approx(math.sqrt(2) * 0.01)  # at the chosen rate alone
    assert out["differences"] == pytest.approx([0.02, 0.04])
    sd_none, dof = paired_stats.pooled_sd([[1.0], []])
    assert dof == 0 and math.isnan(sd_none)  # no degree of freedom


def test_compare_differences_pair_by_seed_against_each_arms_reference():
    options = design.ARMS["lora-policy_lora"][1]
    lora = run("sr-ppo", 1e-4, 0, 0.5)
    lora["spec"]["options"] = [list(o) for o in options]
    assert readings.arm_of(lora) == "lora-policy_lora"
    groups = {
        "sr-ppo": [run("sr-ppo", 1e-4, 0, 0.50), run("sr-ppo", 1e-4, 1, 0.60), run("sr-ppo", 1e-4, 2, 0.55)],
        "sr-ppo-k1": [run("sr-ppo-pass1", 1e-4, 1, 0.70), run("sr-ppo-pass1", 1e-4, 0, 0.55)],  # seed 2 unfinished
        "grpo": [run("grpo", 1e-4, s, v, half=v - 0.2) for s, v in enumerate((0.4, 0.5, 0.45))],
        "lora-grpo": [run("grpo", 1e-4, 0, 0.3)],
        "lora-policy_lora": [lora],
    }
    out = readings.compare_differences(groups)
    assert out["sr-ppo-k1"]["differences"] == pytest.approx([0.05, 0.10])  # seeds 0 and 1, in seed order
    assert out["grpo"]["mean"] == pytest.approx(-0.1) and out["grpo"]["reference"] == "sr-ppo"
    assert out["lora-policy_lora"]["reference"] == "lora-grpo"
    assert out["lora-policy_lora"]["differences"] == pytest.approx([0.2])
    assert "sr-ppo" not in out and "lora-grpo" in out  # LoRA GRPO is compared with default SR-PPO
    at_half = readings.compare_differences(groups, arm_update=1)  # the arms at update 1, SR-PPO at its end
    assert at_half["grpo"]["differences"] == pytest.approx([-0.3, -0.3, -0.3])  # (v - 0.2) - (v + 0.1)
    assert at_half["sr-ppo-k1"]["seeds"] == 0  # no point at update 1: left out


def test_pilot_differences_from_the_committed_pilot():
    pilot = readings.pilot_differences(real_study_report.PILOT)
    runs = json.load(open(real_study_report.PILOT))["runs"]
    final = {(r["spec"]["method"], r["spec"]["seed"]): r["final"]["pass@1"] for r in runs}
    assert pilot["sr-ppo-pass1"]["differences"] == pytest.approx(
        [final[("sr-ppo-pass1", s)] - final[("sr-ppo", s)] for s in range(3)]
    )
    assert readings.pilot_differences("/nonexistent.json") == {}


@pytest.mark.slow
def test_smoke_study_end_to_end(tmp_path):
    model = tiny_model_folder(tmp_path / "model")
    out = tmp_path / "report"
    common = ["--smoke", "--model", str(model), "--workers", "1", "--output-dir", str(out)]
    common += ["--work-dir", str(tmp_path / "work")]
    assert real_study.main([*common, "--stage", "compare"]) == 1  # no schedule chosen yet: refused
    assert real_study.main([*common, "--stage", "mechanism"]) == 1
    assert real_study.main([*common, "--stage", "sweep"]) == 0  # the smoke's sweep seeds: 100
    results = json.loads((out / "results.json").read_text())
    assert results["chosen"] in design.SWEEP_LEARNING_RATES
    sweep_runs = list((out / "runs").glob("sweep-*/*.json"))
    assert len(sweep_runs) == len(design.SWEEP_LEARNING_RATES) * len(design.SWEEP_METHODS)
    for path in sweep_runs:  # the worker wrote each run slimmed: the reward per update kept, the logs left out
        run = json.loads(path.read_text())
        assert "logs" not in run and len(run["reward_by_update"]) == run["spec"]["updates"]
    assert real_study.main([*common, "--stage", "compare"]) == 1  # no critic rate chosen yet: refused
    assert real_study.main([*common, "--stage", "mechanism"]) == 0
    mechanism = json.loads((out / "results.json").read_text())["mechanism"]
    assert mechanism["spec"]["method"] == "sr-ppo" and mechanism["spec"]["learning_rate"] == results["chosen"]
    assert (tmp_path / "work").is_dir() and list((tmp_path / "work").glob("mechanism-*/checkpoint/critic/*.json"))
    assert sum(mechanism["bins"]["summary"]["bin_counts"].values()) == mechanism["prompts"] > 0
    assert set(mechanism["nsr"]["summary"]["batch"]) == {"weighted", "unweighted"}
    # The analysed run is the comparison's default SR-PPO run of that seed: the comparison reuses it.
    (reused,) = out.glob("runs/compare-*/sr-ppo_on_*_s0.json")
    assert json.loads(reused.read_text())["spec"] == mechanism["spec"]
    labelled = mechanism["critic-quality"]["summary"]["state_correct"]["num_labelled"]
    assert labelled == mechanism["critic-export"]["summary"]["num_sentences"] > 0  # every sentence labelled
    assert real_study_report.miniature_mechanism()["nsr"] in (out / "README.md").read_text()  # the miniature's column
    assert real_study.main([*common, "--stage", "critic"]) == 0
    critic = json.loads((out / "results.json").read_text())["critic"]
    assert critic["ratio"] in design.CRITIC_LR_RATIOS and set(critic["table"]) == {"1", "10", "30"}
    for path in out.glob("runs/critic-*/*.json"):  # the AUC against a brute force over the samples' pairs
        point = json.loads(path.read_text())["final"]
        values, counts, n = point["critic_s0"], point["correct_counts"], 2  # the smoke's validation samples
        assert len(values) == len(counts) == results["meta"]["sizes"]["val"]
        scored = [(v, 1) for v, c in zip(values, counts) for _ in range(c)]
        scored += [(v, 0) for v, c in zip(values, counts) for _ in range(n - c)]
        pairs = [(p, q) for p, y in scored if y for q, z in scored if not z]
        if pairs:
            expected = sum(1.0 if p > q else 0.5 if p == q else 0.0 for p, q in pairs) / len(pairs)
            assert point["critic_auc_s0"] == pytest.approx(expected)
        else:
            assert math.isnan(point["critic_auc_s0"])  # one class only
    assert real_study.main([*common, "--stage", "horizon"]) == 0
    horizon = json.loads((out / "results.json").read_text())["critic"]["horizon"]
    assert len(horizon) == len(design.HORIZON_RATIOS)
    for result in horizon:  # the smoke's 2 updates x HORIZON_FACTOR, the validation every 2
        assert [p["update"] for p in result["curve"]] == [2, 4, 6, 8]
        assert all(len(p["critic_s0"]) == results["meta"]["sizes"]["val"] for p in result["curve"])
    arms = ["sr-ppo", "grpo", "sampling-pass_at_k", "critic-policy_head", "critic-lora", "lora-policy_lora"]
    assert real_study.main([*common, "--stage", "compare", "--seeds", "0", "--arms", *arms]) == 0
    readme = (out / "README.md").read_text()
    assert "Over a longer run (stage `horizon`: seed 100, 8 updates, validation every 2)" in readme
    assert "## The critic's learning rate, on the validation split" in readme
    for label in arms:
        assert f"| {design.ARM_LABELS[label]} | 1 |" in readme
    stage2 = readme.split("## Stage 2")[1].split("### Per seed")[0]  # the arms' table: one row per arm
    rows = {line.split(" | ")[0][2:]: line for line in stage2.splitlines() if line.startswith("| ")}
    assert rows[design.ARM_LABELS["grpo"]].endswith("| n/a | n/a |")  # no critic
    phases = readme.split("### Seconds per update, by phase")[1]
    head_row = next(
        line for line in phases.splitlines() if line.startswith(f"| {design.ARM_LABELS['critic-policy_head']} | 1 |")
    )
    assert head_row.endswith(" (1) |")  # timed, and its critic phase paired with SR-PPO's on seed 0
    for label in ("sr-ppo", "critic-policy_head", "critic-lora", "lora-policy_lora"):
        assert "(1) |" in rows[design.ARM_LABELS[label]]  # every critic mode's AUC, on its one seed
    assert "Over the 5 runs above whose critic's values were recorded (k > 1)" in readme  # all but GRPO's
    assert "## Stage 1: the schedule, on the validation split" in readme and "**Chosen: learning rate" in readme
    assert "| batch NSR, without the Pass@k weight -> with it |" in readme
    assert "GRPO - SR-PPO at equal updates" in readme
    compare_runs = {json.loads(p.read_text())["name"]: json.loads(p.read_text()) for p in out.glob("runs/compare-*/*")}
    # The mechanism's run (the default critic rate) stays beside them when the critic stage chose another rate.
    assert len(compare_runs) == len(arms) + (critic["ratio"] != 1)
    for result in compare_runs.values():
        assert "logs" not in result and len(result["reward_by_update"]) == 2
        assert len(result["final"]["correct_counts"]) == results["meta"]["sizes"]["test"]
        has_critic = result["spec"]["method"] != "grpo"  # every critic mode values the held-out prompts
        assert ("critic_s0" in result["final"]) == has_critic
        assert not has_critic or len(result["final"]["critic_s0"]) == results["meta"]["sizes"]["test"]
    grpo = next(r for r in compare_runs.values() if r["spec"]["method"] == "grpo" and not r["spec"]["options"])
    assert [p["update"] for p in grpo["curve"]] == [1, 2]  # its equal-token point and the end
    # Finished runs are reused: nothing is trained again and the report is the same (but for its date and load).
    written = {p: p.stat().st_mtime_ns for p in out.glob("runs/*/*.json")}
    assert real_study.main([*common, "--stage", "compare", "--seeds", "0", "--arms", *arms]) == 0
    assert real_study.main([*common, "--stage", "mechanism"]) == 0
    assert {p: p.stat().st_mtime_ns for p in out.glob("runs/*/*.json")} == written

    def body(text):
        return [line for line in text.splitlines() if not line.startswith("Generated by")]

    assert body((out / "README.md").read_text()) == body(readme)
    assert real_study.main([*common, "--stage", "lora"]) == 1  # the stability stage has not chosen a schedule yet
    # The stability stage: every variant on the slow and control seeds the comparison's default runs give (seed 0).
    assert real_study.main([*common, "--stage", "stability"]) == 0
    stability = json.loads((out / "results.json").read_text())["stability"]
    assert sorted({*stability["slow"], *stability["controls"]}) == [0] and stability["variant"] is not None
    runs = [json.loads(p.read_text()) for p in out.glob("runs/stability-*/*.json")]
    assert sorted(r["spec"]["prompts_per_update"] for r in runs) == [4, 4, 4, 8]  # batch x2 doubles the smoke's 4
    assert all(len(r["final"]["correct_counts"]) == results["meta"]["sizes"]["val"] for r in runs)
    assert [len(v) for v in stability["table"].values()] == [5] * 4 and all(
        row["seeds"] == [0] for row in stability["table"].values()
    )
    section = (out / "README.md").read_text().split("## Stability")[1]
    # Its default schedule is the comparison's default run of seed 0 but for the held-out split: the same training.
    assert "the same at every update on 1 of 1 seeds" in section
    # The comparison then trains under the schedule the rule chose, and the report reads each schedule's runs apart.
    assert real_study.main([*common, "--stage", "compare", "--seeds", "0", "--arms", "sr-ppo", "grpo"]) == 0
    results = json.loads((out / "results.json").read_text())
    schedule, rate = tuple(results["stability"]["schedule"]), results["critic"]["rate"]
    assert results["critic"]["why"] != results["stability"]["why"]  # each stage's rule gives its own reason
    schedule = (schedule[0], tuple(map(tuple, schedule[1])))
    compare_runs = [json.loads(p.read_text()) for p in out.glob("runs/compare-*/*.json")]
    found = sorted(readings.arm_of(r, rate, schedule) or "" for r in compare_runs)
    assert [arm for arm in found if arm in ("sr-ppo", "grpo")] == ["grpo", "sr-ppo"]
    text = (out / "README.md").read_text()
    if results["stability"]["variant"] == "default":
        assert schedule == (4, ()) and "## Stage 2: the methods and critics" in text
    else:
        assert f"## Stage 2 under the chosen schedule, `{results['stability']['variant']}`" in text
        assert "## Stage 2 under the default schedule, before the stability stage chose" in text
    # The LoRA stage: both LoRA arms at every LoRA rate on the sweep's seeds, under that schedule, on the validation
    # split; the comparison then trains its LoRA arms at the rate the rule chose (the full model's until it chooses).
    assert "No LoRA stage run has finished yet" in text
    assert real_study.main([*common, "--stage", "lora"]) == 0
    results = json.loads((out / "results.json").read_text())
    lora_runs = [json.loads(p.read_text()) for p in out.glob("runs/lora-*/*.json")]
    found = sorted((r["spec"]["learning_rate"], r["spec"]["method"]) for r in lora_runs)
    assert found == sorted(product(design.LORA_LEARNING_RATES, ("sr-ppo", "grpo")))  # the smoke's one seed
    assert all(r["spec"]["prompts_per_update"] == schedule[0] for r in lora_runs)
    assert all(len(r["final"]["correct_counts"]) == results["meta"]["sizes"]["val"] for r in lora_runs)
    assert set(results["lora"]["table"]) == {str(lr) for lr in design.LORA_LEARNING_RATES}
    lora_rate = results["lora"]["rate"]
    assert lora_rate in (None, *design.LORA_LEARNING_RATES)
    assert real_study.main([*common, "--stage", "compare", "--seeds", "0", "--arms", *design.LORA_ARMS]) == 0
    compare_runs = [json.loads(p.read_text()) for p in out.glob("runs/compare-*/*.json")]
    lora_arms = [r for r in compare_runs if readings.arm_of(r, rate, schedule, lora_rate) in design.LORA_ARMS]
    expected = results["chosen"] if lora_rate is None else lora_rate
    assert sorted(r["spec"]["learning_rate"] for r in lora_arms) == [expected] * 2
    text = (out / "README.md").read_text()
    assert "## The LoRA policy's learning rate, on the validation split" in text
    assert ("**Chosen: learning rate" in text.split("## The LoRA policy's")[1]) == (lora_rate is not None)
    for arm in design.LORA_ARMS:
        assert f"| {design.ARM_LABELS[arm]} | 1 |" in text.split("## Stage 2")[1]
    # The probe: the base checkpoint's features of every test problem, probed on the base model's evaluation and on
    # each default SR-PPO run's (seed 0, under each schedule it trained).
    assert real_study.main([*common, "--stage", "probe"]) == 0
    probe = json.loads((out / "results.json").read_text())["probe"]
    assert probe["features"] == [results["meta"]["sizes"]["test"], 16]  # the tiny model's width
    defaults = [r["name"] for r in compare_runs if readings.arm_of(r, rate) == "sr-ppo"]
    assert defaults and sorted(r["name"] for r in probe["runs"]) == sorted(defaults)
    for entry in probe["runs"]:  # an AUC is undefined (JSON null) where every sample has one outcome
        counts = next(r for r in compare_runs if r["name"] == entry["name"])["final"]["correct_counts"]
        one_class = sum(counts) in (0, 2 * len(counts))  # the smoke's 2 test samples
        assert (entry["probe_auc"] is None) == one_class == (entry["oracle_auc"] is None)
        assert one_class or 0 <= entry["probe_auc"] <= entry["oracle_auc"] + 1e-12 <= 1 + 1e-12
    assert "## Could the critic tell the problems apart?" in (out / "README.md").read_text()
    # The head stage: default SR-PPO under the chosen schedule, without a head rate and with each of HEAD_RATES, on
    # the smoke's sweep seed, the validation split; the trainer got the rate.
    assert real_study.main([*common, "--stage", "head"]) == 0
    head_runs = [json.loads(p.read_text()) for p in out.glob("runs/head-*/*.json")]
    rates = sorted((r["config"]["critic_head_learning_rate"] or 0.0, r["spec"]["seed"]) for r in head_runs)
    assert rates == [(0.0, 100), *((h, 100) for h in real_study_head.HEAD_RATES)]
    assert all(r["spec"]["prompts_per_update"] == schedule[0] for r in head_runs)
    assert all(len(r["final"]["critic_s0"]) == results["meta"]["sizes"]["val"] for r in head_runs)
    head = json.loads((out / "results.json").read_text())["head"]
    assert {k: [r["seed"] for r in v] for k, v in head.items()} == {"None": [100], "0.001": [100], "0.003": [100]}
    assert "## A faster value head, on the validation split" in (out / "README.md").read_text()


def test_label_by_outcome_marks_every_sentence_with_its_solutions_verified_result(tmp_path):
    export, labelled = tmp_path / "export.jsonl", tmp_path / "labelled.jsonl"
    records = [
        {"prompt_id": 0, "reward": 1.0, "sentences": [{"id": 0, "state_correct": None, "sentence_correct": None}] * 2},
        {"prompt_id": 0, "reward": 0.0, "sentences": [{"id": 0, "state_correct": None, "sentence_correct": None}]},
        {"prompt_id": 1, "reward": None, "sentences": [{"id": 0, "state_correct": None, "sentence_correct": None}]},
    ]
    export.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert real_study.label_by_outcome(str(export), str(labelled)) == 4
    out = [json.loads(line) for line in labelled.read_text().splitlines()]
    assert [[s["state_correct"] for s in r["sentences"]] for r in out] == [[True, True], [False], [False]]
    assert all(s["sentence_correct"] is None for r in out for s in r["sentences"])  # left to a judge


def test_mechanism_rows_spread_over_the_test_split():
    rows = [{"problem": str(i)} for i in range(10)]
    assert [r["problem"] for r in real_study.mechanism_rows(rows, 4)] == ["0", "2", "5", "7"]  # i x 10 // 4
    assert len(real_study.mechanism_rows(rows, 20)) == 10


def test_equal_seconds_reads_an_arm_between_its_evaluations():
    slow = {"curve": [{"training_seconds": 100.0, "pass@1": 0.2}, {"training_seconds": 300.0, "pass@1": 0.6}]}
    assert readings.at_seconds(slow, 200.0) == pytest.approx(0.4)  # half-way in time: half-way in pass@1
    assert readings.at_seconds(slow, 300.0) == pytest.approx(0.6)
    assert readings.at_seconds(slow, 500.0) == pytest.approx(0.6)  # finished sooner: its last evaluation
    assert readings.at_seconds(slow, 50.0) is None
    srppo = run("sr-ppo", 1e-4, 0, 0.5)
    srppo["training_seconds"] = 250.0
    arm = run("sr-ppo", 1e-4, 0, 0.6)
    arm["curve"] = [
        {"update": 1, "training_seconds": 200.0, "pass@1": 0.3},
        {"update": 2, "training_seconds": 300.0, "pass@1": 0.6},
    ]
    out = readings.equal_seconds_differences({"sr-ppo": [srppo], "sampling-pass_at_k": [arm]}, "sampling-pass_at_k")
    assert out["differences"] == pytest.approx([0.45 - 0.5])


def test_against_grpo_reads_grpo_at_the_arms_completions_and_seconds_by_hand():
    def timed(method, seed, points, options=()):
        result = run(method, 3e-5, seed, points[-1][2], updates=points[-1][0])
        result["curve"] = [{"update": u, "training_seconds": t, "pass@1": v} for u, t, v in points]
        result["final"], result["training_seconds"] = result["curve"][-1], points[-1][1]
        result["spec"]["options"] = [list(o) for o in options]
        return result

    groups = {
        "grpo": [
            timed("grpo", 0, [(2, 100.0, 0.3), (4, 200.0, 0.7)]),
            timed("grpo", 1, [(2, 80.0, 0.5), (4, 160.0, 0.6)]),
        ],
        "sr-ppo-k1": [timed("sr-ppo-pass1", 0, [(4, 150.0, 0.4)]), timed("sr-ppo-pass1", 1, [(4, 300.0, 0.55)])],
        "lora-grpo": [timed("grpo", 0, [(4, 90.0, 0.2)], design.ARMS["lora-grpo"][1])],  # none at half
        "lora-policy_lora": [timed("sr-ppo", 0, [(4, 120.0, 0.25)], design.ARMS["lora-policy_lora"][1])],
    }
    assert readings.grpo_partner("sr-ppo-k1") == "grpo" and readings.grpo_partner("grpo") is None
    assert readings.grpo_partner("lora-policy_lora") == "lora-grpo"
    out = readings.against_grpo(groups, "sr-ppo-k1")
    # equal completions: GRPO at update 2 minus the arm at its last update (4), seed by seed
    assert out["completions"]["differences"] == pytest.approx([0.3 - 0.4, 0.5 - 0.55])
    # equal seconds: seed 0's GRPO at 150 s lies half-way from 0.3 (100 s) to 0.7 (200 s); seed 1's GRPO finished
    # sooner (160 s < 300 s): its last evaluation
    assert out["seconds"]["differences"] == pytest.approx([0.5 - 0.4, 0.6 - 0.55])
    lora = readings.against_grpo(groups, "lora-policy_lora")
    assert lora["completions"]["seeds"] == 0  # LoRA GRPO has no point at update 2: the seed is left out
    assert lora["seconds"]["differences"] == pytest.approx([0.2 - 0.25])  # LoRA GRPO finished sooner
    base = {"test": {"pass@1": 0.1, "pass@8": 0.4}}
    flat = [r for runs in groups.values() for r in runs]
    for r in flat:
        r["final"]["pass@8"] = min(1.0, 2 * r["final"]["pass@1"])
    lines = real_study_report.compare_lines(flat, base, 8)
    (line,) = [line for line in lines if line.startswith("- GRPO, 4 rollouts - SR-PPO k = 1 at equal completions")]
    assert line == (
        "- GRPO, 4 rollouts - SR-PPO k = 1 at equal completions (GRPO's update 2): -0.075 [-0.393, +0.243] "
        "(2 seeds), sign-flip p 0.500; at equal training seconds (SR-PPO k = 1's): +0.075 [-0.243, +0.393] "
        "(2 seeds), sign-flip p 0.500."
    )
    # its two readings adjusted together: the first p 0.5 x 2 = 1, and the running max lifts the second (0.5 x 1) to 1
    assert [line for line in lines if line.startswith("- The 2 readings of")] == [
        "- The 2 readings of GRPO, 4 rollouts - SR-PPO k = 1 together, sign-flip p adjusted by Holm's step-down "
        "rule: completions 1.000 (2 seeds), seconds 1.000 (2 seeds); none stays below 0.05."
    ]  # and none for the LoRA pair, whose equal-completions reading has no seed
    lora_line = "- LoRA policy (r 16), GRPO - LoRA policy (r 16), policy_lora critic at equal completions"
    assert [line for line in lines if line.startswith(lora_line)] == [
        lora_line + " (GRPO's update 2): n/a; at equal training seconds (LoRA policy (r 16), policy_lora critic's): "
        "-0.050 (1 seed), no interval."
    ]


def test_compare_specs_evaluate_where_the_comparisons_read():
    specs = dict(real_study.compare_specs(design.FULL, 3e-5, [0], list(design.ARMS)))
    assert specs["grpo"].eval_every == 8 and specs["lora-grpo"].eval_every == 8  # equal tokens: half the updates
    assert specs["sampling-pass_at_k"].eval_every == 12 and specs["sampling-near_half"].eval_every == 12
    assert specs["sr-ppo"].eval_every == specs["critic-lora"].eval_every == 16  # the end only
    assert len({spec.name for spec in specs.values()}) == len(design.ARMS)  # one cached result each


def critic_run(ratio, seed, final, auc, values=(0.2, 0.4)):
    out = run("sr-ppo", 3e-5, seed, final)
    rate = design.critic_rate(3e-5, ratio)
    out["spec"]["options"] = [] if rate is None else [["critic_learning_rate", rate]]  # as JSON reads them back
    out["final"].update(critic_auc_s0=auc, critic_s0=list(values))
    out["config"] = {"pass_at_k": 2}
    return out


def test_the_critic_stages_rule_takes_the_best_auc_only_when_it_gains_enough():
    assert design.critic_rate(3e-5, 1) is None  # the trainer's default: the option left out
    assert design.critic_rate(3e-5, 10) == 3e-4 and design.critic_rate(3e-5, 30) == 9e-4
    results = [
        critic_run(1, 100, 0.50, 0.52), critic_run(1, 101, 0.60, 0.54),  # mean AUC 0.53
        critic_run(10, 100, 0.55, 0.60), critic_run(10, 101, 0.45, 0.62),  # 0.61: +0.08
        critic_run(30, 100, 0.70, 0.80), critic_run(30, 101, 0.05, 0.70),  # 0.75, but a run below the base (0.10)
    ]  # fmt: skip
    table = real_study.critic_table(results, 3e-5, base_val=0.10)
    assert table[10]["mean_auc"] == pytest.approx(0.61) and table[10]["final"] == [0.55, 0.45]
    assert table[30]["below_base"] and not table[10]["below_base"]
    assert table[1]["value_sd"] == [pytest.approx(0.1)] * 2 and table[1]["value_mean"] == [pytest.approx(0.3)] * 2
    assert table[1]["rate"] == 3e-5 and table[30]["rate"] == 9e-4  # the rates the runs trained at
    assert table[1]["weight_ratio"] == [pytest.approx(1.6 / 1.2)] * 2  # 2 (1 - 0.2) over 2 (1 - 0.4)
    assert readings.weight_ratio([0.2, 0.4, 0.3], 3) == pytest.approx(3 * 0.8**2 / (3 * 0.6**2))
    assert readings.weight_ratio([0.3, 0.3], 2) == 1.0 and readings.weight_ratio([0.9, 0.1], 1) == 1.0
    ratio, why = real_study.choose_critic_ratio(table)
    assert ratio == 10 and "0.610" in why and "0.530" in why
    # A gain under CRITIC_MIN_GAIN (0.05) keeps the default, and says so.
    gain = [dict(r, final=dict(r["final"])) for r in results]
    gain[2]["final"]["critic_auc_s0"], gain[3]["final"]["critic_auc_s0"] = 0.56, 0.58  # mean 0.57: +0.04
    ratio, why = real_study.choose_critic_ratio(real_study.critic_table(gain, 3e-5, 0.10))
    assert ratio == 1 and "under 0.05" in why
    # A ratio with an undefined AUC (a run whose samples were all right or all wrong) is not a candidate.
    undefined = [dict(r, final=dict(r["final"])) for r in results]
    undefined[3]["final"]["critic_auc_s0"] = float("nan")
    assert real_study.choose_critic_ratio(real_study.critic_table(undefined, 3e-5, 0.10))[0] == 1
    undefined[0]["final"]["critic_auc_s0"] = float("nan")  # the default's too: nothing is eligible
    assert real_study.choose_critic_ratio(real_study.critic_table(undefined, 3e-5, 0.10))[0] == 1
    # Nothing is chosen before every ratio has every sweep seed.
    assert real_study.choose_critic_ratio(real_study.critic_table(results[:5], 3e-5, 0.10))[0] is None
    # Runs at another critic rate, or at another policy rate (even the default ratio's), belong to no ratio.
    other = critic_run(10, 100, 0.9, 0.99)
    other["spec"]["options"] = [["critic_learning_rate", 1e-3]]
    elsewhere = critic_run(1, 100, 0.9, 0.99)
    elsewhere["spec"]["learning_rate"] = 1e-5
    table = real_study.critic_table([other, elsewhere], 3e-5, 0.10)
    assert table[10]["seeds"] == [] and table[1]["seeds"] == []
    assert real_study.critic_table(results + [elsewhere], 3e-5, 0.10)[1]["seeds"] == [100, 101]


def test_the_comparison_trains_every_critic_at_the_chosen_critic_rate():
    specs = dict(real_study.compare_specs(design.FULL, 3e-5, [0], list(design.ARMS), rate=3e-4))
    for arm, spec in specs.items():
        rates = dict(spec.options).get("critic_learning_rate")
        assert rates == (None if design.ARMS[arm][0] == "grpo" else 3e-4), arm
    default = dict(real_study.compare_specs(design.FULL, 3e-5, [0], list(design.ARMS)))
    assert default["grpo"] == specs["grpo"] and default["sr-ppo"].name != specs["sr-ppo"].name
    as_json = {arm: json.loads(json.dumps({"spec": asdict(spec)})) for arm, spec in specs.items()}
    assert {arm: readings.arm_of(r, 3e-4) for arm, r in as_json.items()} == {a: a for a in specs}
    # A run at another critic rate (the default's, here) is in no arm; GRPO's runs are in theirs at any rate.
    old = json.loads(json.dumps({"spec": asdict(default["sr-ppo"])}))
    assert readings.arm_of(old, 3e-4) is None and readings.arm_of(old, None) == "sr-ppo"
    assert readings.arm_of(as_json["grpo"], None) == "grpo"


def test_t_quantiles_match_students_t():
    rng = np.random.default_rng(0)
    for df in (3, 5, 7, 11):
        draws = rng.standard_t(df, size=400_000)
        assert np.quantile(draws, 0.975) == pytest.approx(paired_stats.t_quantile(df, 0.975), abs=0.03)
        assert np.quantile(draws, 0.80) == pytest.approx(paired_stats.t_quantile(df, 0.80), abs=0.01)
    assert paired_stats.t_quantile(100, 0.975) == 1.960
    with pytest.raises(ValueError):
        paired_stats.t_quantile(0, 0.975)


def test_paired_t_interval_by_hand():
    out = paired_stats.paired_t([0.5, 0.7, 0.6, None], [0.4, 0.4, 0.5, 0.3])  # differences 0.1, 0.3, 0.1
    assert out["seeds"] == 3 and out["differences"] == pytest.approx([0.1, 0.3, 0.1])
    mean, sd = 0.5 / 3, math.sqrt(((0.1 - 0.5 / 3) ** 2 * 2 + (0.3 - 0.5 / 3) ** 2) / 2)
    half = 4.303 * sd / math.sqrt(3)
    assert (out["mean"], out["low"], out["high"]) == pytest.approx((mean, mean - half, mean + half))
    assert not paired_stats.excludes_zero(out)  # -0.12 .. 0.45
    one = paired_stats.paired_t([0.51], [0.50])
    assert one["seeds"] == 1 and math.isnan(one["low"]) and not paired_stats.excludes_zero(one)
    assert tables.fmt_difference(one) == "+0.010 (1 seed), no interval"
    tight = paired_stats.paired_t([0.6, 0.61, 0.62], [0.5, 0.5, 0.5])
    # all three differences positive: of the 8 sign patterns only all + and all - reach the observed |mean|
    assert paired_stats.excludes_zero(tight) and tables.fmt_difference(tight).endswith(
        "(3 seeds) *, sign-flip p 0.250"
    )
    assert paired_stats.detectable(0.1, 8) == pytest.approx((2.365 + 0.896) * 0.1 / math.sqrt(8))


def test_sign_flip_p_by_hand_and_against_enumeration():
    # [1, 2, 3]: mean 2; (+1 +2 +3) / 3 = 2 and its negation reach it, (-1 +2 +3) / 3 = 4/3 ... do not: 2 of 8
    assert paired_stats.sign_flip_p([1.0, 2.0, 3.0]) == pytest.approx(2 / 8)
    # [3, -1]: mean 1; patterns (3 - 1), (-3 + 1), (3 + 1), (-3 - 1) over 2: |1|, |1|, 2, 2: all 4 reach 1
    assert paired_stats.sign_flip_p([3.0, -1.0]) == 1.0
    assert paired_stats.sign_flip_p([0.0, 0.0]) == 1.0  # every pattern ties
    assert paired_stats.sign_flip_p([0.4]) == 1.0
    rng = np.random.default_rng(0)
    for n in (4, 7, 10):
        d = rng.normal(0.1, 0.2, size=n)
        brute = np.mean(
            [
                abs(sum(s * x for s, x in zip(signs, d))) / n >= abs(d.mean()) - 1e-12
                for signs in product((1, -1), repeat=n)
            ]
        )
        assert paired_stats.sign_flip_p(d) == pytest.approx(brute)
    with pytest.raises(ValueError, match="sign patterns"):
        paired_stats.sign_flip_p(np.ones(paired_stats.MAX_SIGN_FLIP_SEEDS + 1))
    with pytest.raises(ValueError, match="finite"):
        paired_stats.sign_flip_p([0.1, float("nan")])
    # Rounding: the observed signs and their negation always count (p >= 2 / 2^n), though the matrix product and
    # the mean round differently (with no tolerance 1 of these 500 draws falls below the floor).
    rng = np.random.default_rng(1)
    for _ in range(500):
        assert paired_stats.sign_flip_p(rng.normal(0.0, 0.02, size=8)) >= paired_stats.sign_flip_floor(8)
    assert math.isnan(paired_stats.paired_t([None], [0.1])["p_sign_flip"])  # no seed: no p-value


def test_holm_by_hand():
    # sorted 0.01, 0.02, 0.04 over m = 3: 3 x 0.01 = 0.03; max(0.03, 2 x 0.02) = 0.04; max(0.04, 1 x 0.04) = 0.04
    out = paired_stats.holm({"a": 0.04, "b": 0.01, "c": 0.02})
    assert out == pytest.approx({"a": 0.04, "b": 0.03, "c": 0.04})
    # each step multiplies by the hypotheses left: 3 x 0.001, 2 x 0.02, 1 x 0.9
    out = paired_stats.holm({"x": 0.001, "y": 0.02, "z": 0.9})
    assert out == pytest.approx({"x": 0.003, "y": 0.04, "z": 0.9})
    # the running max keeps the order: 2 x 0.01 = 0.02, then 1 x 0.012 = 0.012 would undercut it, so 0.02
    assert paired_stats.holm({"a": 0.01, "b": 0.012}) == pytest.approx({"a": 0.02, "b": 0.02})
    assert paired_stats.holm({"only": 0.3}) == {"only": 0.3}
    assert paired_stats.holm({"a": 0.6, "b": 0.7}) == pytest.approx({"a": 1.0, "b": 1.0})
    nan = paired_stats.holm({"a": 0.01, "b": float("nan")})  # a missing reading is left out of m
    assert nan["a"] == pytest.approx(0.01) and math.isnan(nan["b"])


def test_holm_keeps_the_familywise_error_at_5_percent_where_raw_p_does_not():
    # Three independent null readings, each p uniform: raw p finds one below 0.05 in 1 - 0.95^3 = 14% of the families;
    # Holm in at most 5%.
    rng = np.random.default_rng(0)
    families = rng.uniform(size=(4000, 3))
    raw = np.mean(families.min(axis=1) < 0.05)
    holm = np.mean([min(paired_stats.holm(dict(enumerate(f))).values()) < 0.05 for f in families])
    assert raw == pytest.approx(1 - 0.95**3, abs=0.015) and holm < 0.06


def test_the_reports_holm_line_adjusts_the_three_readings_of_grpo_against_sr_ppo():
    t = paired_stats.paired_t
    # 6 seeds all one way: p = 2 / 64 = 0.03125 raw, 3 x 0.03125 = 0.094 adjusted; 6 seeds mixed: p 1
    one_way, mixed = [0.1, 0.12, 0.11, 0.09, 0.1, 0.13], [0.1, -0.1, 0.05, -0.05, 0.0, 0.02]
    readings = {"updates": t(mixed, [0.0] * 6), "completions": t(one_way, [0.0] * 6), "seconds": t(mixed, [0.0] * 6)}
    assert readings["completions"]["p_sign_flip"] == pytest.approx(0.03125)  # raw: below 0.05
    line = real_study_report.holm_line(readings)
    assert line.endswith("completions 0.094 (6 seeds), seconds 1.000 (6 seeds); none stays below 0.05.")
    assert "updates 1.000 (6 seeds)" in line
    # 8 seeds all one way: p = 2 / 256, x 3 = 0.023: it stays below 0.05
    readings["completions"] = t([0.1] * 7 + [0.2], [0.0] * 8)
    assert real_study_report.holm_line(readings).endswith("below 0.05 after it: completions.")


def test_the_bootstrap_would_be_too_narrow_where_the_t_interval_holds():
    # Why the study uses t: with 4 seeds and no true difference, the 95% t interval excludes 0 about 5% of the time;
    # a percentile bootstrap of the same differences would do so far more often.
    from benchmarks.toy.prompt_sampling_study import paired_difference

    rng = np.random.default_rng(1)
    trials = 400
    t_misses = boot_misses = 0
    for _ in range(trials):
        diffs = rng.normal(0.0, 0.05, size=4).tolist()
        t_misses += paired_stats.excludes_zero(paired_stats.paired_t(diffs, [0.0] * 4))
        boot = paired_difference(diffs, [0.0] * 4, resamples=500)
        boot_misses += boot["low"] > 0 or boot["high"] < 0
    assert t_misses / trials < 0.09 and boot_misses / trials > 0.12


def test_the_mechanism_tables_miniature_column_is_read_from_the_miniatures_runs(tmp_path):
    def mid(without, weighted, shares_without, shares_with):
        return {
            "nsr": {"batch": {"unweighted": {"nsr": without}, "weighted": {"nsr": weighted}}},
            "weight_share": {
                "without_passk": {"prompt_weight": dict(zip(("easy", "medium", "hard"), shares_without))},
                "with_passk": {"prompt_weight": dict(zip(("easy", "medium", "hard"), shares_with))},
            },
        }

    runs = [
        {"mid": mid(4.0, 2.0, (0.5, 0.25, 0.25), (0.25, 0.25, 0.5))},  # NSR change -50%
        {"mid": mid(2.0, 1.5, (0.3, 0.3, 0.4), (0.2, 0.3, 0.5))},  # -25%
        {"mid": None},  # a run without the mid-training analysis is left out
    ]
    path = tmp_path / "results.json"
    other = [{"mid": mid(9.0, 9.0, (1, 0, 0), (1, 0, 0))}]  # another configuration: not read
    path.write_text(json.dumps({"runs": {"sr-ppo/off": runs, "grpo/off": other}}))
    cells = real_study_report.miniature_mechanism(str(path))
    # mean NSR (4 + 2) / 2 = 3.00 -> (2 + 1.5) / 2 = 1.75; changes -50% and -25%: mean -37.5%, sd 25 / sqrt(2) = 17.7%
    assert cells["nsr"] == "3.00 -> 1.75 (-37.5% ± 17.7% over 2 seeds, own rollouts)"
    assert cells["easy"] == "40.0% -> 22.5%"
    assert cells["medium"] == "27.5% -> 27.5%"
    assert cells["hard"] == "32.5% -> 50.0%"
    assert set(real_study_report.miniature_mechanism(str(tmp_path / "absent.json")).values()) == {"n/a"}
    assert real_study_report.miniature_mechanism()["nsr"].endswith("over 3 seeds, own rollouts)")  # the committed one


def test_the_report_checks_the_t_intervals_with_the_sign_flip_p_where_it_can():
    def lines_for(differences):
        runs = [run("sr-ppo", 3e-5, s, 0.5) for s in range(len(differences))]
        runs += [run("sr-ppo-pass1", 3e-5, s, 0.5 + d) for s, d in enumerate(differences)]
        base = {"test": {"pass@1": 0.1, "pass@8": 0.4}}
        return [line for line in real_study_report.compare_lines(runs, base, 8) if "sign-flip" in line]

    # 6 seeds, all higher: t interval excludes 0, p = 2 / 64 = 0.031: they agree
    (agree,) = lines_for([0.1, 0.12, 0.11, 0.09, 0.1, 0.13])[-1:]
    assert agree == "At equal updates, the sign-flip test agrees with the t intervals (p below 0.05 for SR-PPO k = 1)."
    # 6 seeds, one a hair below 0: the t interval [+0.040, +0.126] excludes 0, but flipping the small one reaches the
    # observed mean too, so p = 4 / 64 = 0.0625: they disagree
    (disagree,) = lines_for([0.1, 0.1, 0.1, 0.1, 0.1, -0.001])[-1:]
    assert disagree == "At equal updates, the t interval and the sign-flip p (below 0.05) disagree on: SR-PPO k = 1."
    (nothing,) = lines_for([0.1, -0.1, 0.05, -0.02, 0.0, 0.03])[-1:]
    assert nothing == "At equal updates, the sign-flip test agrees with the t intervals: no arm has p below 0.05."
    # 5 seeds: p >= 2 / 32 = 0.0625 whatever the differences: no check is claimed
    (floor,) = lines_for([0.1, 0.12, 0.11, 0.09, 0.1])[-1:]
    assert floor.startswith("The sign-flip p cannot check") and floor.endswith(": SR-PPO k = 1.")
    assert paired_stats.sign_flip_floor(5) == 0.0625 and paired_stats.sign_flip_floor(6) == 0.03125
    assert paired_stats.sign_flip_floor(1) == 1.0


def test_the_slimming_hook_travels_to_the_workers_by_name(tmp_path):
    import pickle

    assert pickle.loads(pickle.dumps(real_study.slim)) is real_study.slim
    spec = real_study.compare_specs(design.SMOKE, 1e-4, [0], ["sr-ppo"])[0][1]
    rows = {"train": [], "test": []}
    (job,) = real_study.pending_jobs([spec], str(tmp_path), "model", rows, design.SMOKE, "test", 2)[1]
    assert job["finish"] is real_study.slim


def test_per_seed_lines_by_hand():
    def with_rewards(result, rewards):
        return {**result, "reward_by_update": rewards}

    groups = {
        "sr-ppo": [with_rewards(run("sr-ppo", 3e-5, 0, 0.6), [0.2, 0.4, 0.6, 0.8]),
                   with_rewards(run("sr-ppo", 3e-5, 1, 0.1), [0.0, 0.1, 0.1, 0.0]),  # below 2 x 0.1: fell back
                   with_rewards(run("sr-ppo", 3e-5, 2, 0.7), [0.3, 0.3, 0.5, 0.5])],
        "grpo": [with_rewards(run("grpo", 3e-5, s, v), [0.2, 0.2, 0.4, 0.6]) for s, v in enumerate((0.5, 0.3, 0.9))],
    }  # fmt: skip
    lines = real_study_report.per_seed_lines(groups, base_pass1=0.1)
    assert "| 1 | 0.100 (0.05) | 0.300 (0.50) |" in lines  # second half of [0, 0.1, 0.1, 0]: 0.05
    fell = (
        "- Runs that fell back (test pass@1 below twice the base model's, 0.200): SR-PPO (defaults) 1 of 3 (seed 1); "
    )
    assert fell + "GRPO, 4 rollouts 0 of 3." in lines
    # fell back: [0, 0.1] -> [0.1, 0]: 0.05 -> 0.05; the other 5 runs: first halves 0.3, 0.3, 0.2 x 3 -> mean 0.24,
    # second halves 0.7, 0.5, 0.5 x 3 -> 0.54
    assert (
        "- Their training reward, first half -> second half of the updates: 0.05 -> 0.05 on average (1 run), against "
        "0.24 -> 0.54 for the other runs (5): they do not learn and then collapse, they never take off." in lines
    )
    # GRPO (0.5, 0.3, 0.9) against SR-PPO (0.6, 0.1, 0.7): Pearson r by hand
    x, y = np.array([0.6, 0.1, 0.7]), np.array([0.5, 0.3, 0.9])
    r = ((x - x.mean()) * (y - y.mean())).sum() / np.sqrt(((x - x.mean()) ** 2).sum() * ((y - y.mean()) ** 2).sum())
    correlation = f"- Correlation over seeds with SR-PPO's test pass@1: GRPO, 4 rollouts {r:+.2f} (3 seeds)."
    assert any(line.startswith(correlation) for line in lines)


def test_parted_at_and_its_line_by_hand():
    rewards = [0.0, 0.25, 0.5, 0.5]
    other = [0.0, 0.25, 0.375, 0.5]
    assert real_study_report.parted_at({"reward_by_update": rewards}, {"reward_by_update": other}) == 3
    assert real_study_report.parted_at({"reward_by_update": rewards}, {"reward_by_update": list(rewards)}) is None
    for ours, theirs in (
        ({}, {"reward_by_update": rewards}),
        ({"reward_by_update": rewards[:3]}, {"reward_by_update": rewards}),
    ):
        with pytest.raises(ValueError, match="cannot be compared"):  # not "never": nothing says the samples agreed
            real_study_report.parted_at(ours, theirs)

    def with_rewards(result, rewards):
        return {**result, "reward_by_update": rewards}

    groups = {
        "sr-ppo": [with_rewards(run("sr-ppo", 3e-5, 0, 0.6), rewards),
                   with_rewards(run("sr-ppo", 3e-5, 1, 0.5), rewards)],
        "sr-ppo-k1": [with_rewards(run("sr-ppo-pass1", 3e-5, 0, 0.65), list(rewards)),
                      with_rewards(run("sr-ppo-pass1", 3e-5, 1, 0.3), [0.0, 0.0, 0.5, 0.5])],
        "grpo": [with_rewards(run("grpo", 3e-5, 0, 0.5), rewards)],  # GRPO never samples SR-PPO's completions
        "lora-policy_lora": [with_rewards(run("sr-ppo", 3e-5, 0, 0.4), rewards)],  # a LoRA policy: another policy
    }  # fmt: skip
    lines = real_study_report.per_seed_lines(groups, base_pass1=0.1)
    assert (
        "- Where an arm's training reward first differs from SR-PPO's on the same seed (until then the two most "
        "likely sampled the same completions), and in brackets its test pass@1 minus SR-PPO's: SR-PPO k = 1: seed 0 "
        "never (+0.050), seed 1 update 2 (-0.200)." in lines
    )


def test_phase_lines_by_hand():
    def timed(result, **phases):
        return {**result, "phase_seconds": {name.replace("_", " "): v for name, v in phases.items()}}

    groups = {  # 2 updates a run (`run`'s default)
        "sr-ppo": [timed(run("sr-ppo", 3e-5, 0, 0.5), generation=4.0, critic=10.0),
                   timed(run("sr-ppo", 3e-5, 1, 0.5), generation=6.0, critic=20.0)],
        "grpo": [timed(run("grpo", 3e-5, 0, 0.5), generation=8.0)],  # no critic phase
        "critic-policy_head": [timed(run("sr-ppo", 3e-5, 1, 0.5), generation=6.0, critic=5.0),
                               timed(run("sr-ppo", 3e-5, 2, 0.5), generation=6.0, critic=9.0)],  # seed 2: no pair
    }  # fmt: skip
    lines = real_study_report.phase_lines(groups)
    assert "| arm | seeds | generation | critic | critic phase / SR-PPO's on the same seed (seeds) |" in lines
    # SR-PPO per update: generation 2, 3 -> 2.50 ± 0.71 (sd over 2 seeds); critic 5, 10 -> 7.50 ± 3.54
    assert "| SR-PPO (defaults) | 2 | 2.50 ± 0.71 | 7.50 ± 3.54 | - |" in lines
    assert "| GRPO, 4 rollouts | 1 | 4.00 | - | - |" in lines
    # the head: critic 2.5 and 4.5 per update; paired on seed 1 only: 5 / 20 = 0.25
    assert "| SR-PPO, policy_head critic | 2 | 3.00 ± 0.00 | 3.50 ± 1.41 | 0.25 (1) |" in lines
    assert real_study_report.phase_lines({"sr-ppo": [run("sr-ppo", 3e-5, 0, 0.5)]}) == []  # nothing timed


def test_time_spent_sums_the_runs_minutes():
    runs = [{"total_seconds": 600, "training_seconds": 240, "eval_seconds": 300},
            {"total_seconds": 1200, "training_seconds": 480, "eval_seconds": 660}]  # fmt: skip
    assert real_study_report.time_spent(runs) == (
        "2 runs, 30 worker-minutes (12 training, 16 evaluating the held-out problems, the rest loading)."
    )

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The real-model study's LoRA stage: the LoRA policy's learning rate, chosen on the validation split, then used by
the comparison's LoRA arms (and only by them)."""

import json
import os
from dataclasses import asdict

from benchmarks.real_study import design, readings
from benchmarks.real_study import report as real_study_report
from benchmarks.real_study import study as real_study
from benchmarks.real_study.design import DEFAULT, variants

SCHEDULE = variants(16, 8)["batch x2"]  # (16, ())


def as_run(spec, final: float, half: float | None = None) -> dict:
    """A finished run of `spec` as read back from its file, with validation pass@1 `final` at the last update."""
    curve = ([{"update": spec.updates // 2, "pass@1": half}] if half is not None else []) + [
        {"update": spec.updates, "pass@1": final}
    ]
    return json.loads(json.dumps({"spec": asdict(spec), "curve": curve, "final": curve[-1]}))


def test_the_stage_trains_both_lora_arms_at_every_rate_under_the_comparisons_schedule():
    specs = real_study.lora_specs(design.FULL, [100, 101], rate=3e-4, schedule=SCHEDULE)
    found = [(s.learning_rate, s.seed, s.method) for s in specs]
    assert found == [(lr, seed, m) for lr in (1e-4, 3e-4, 1e-3) for seed in (100, 101) for m in ("sr-ppo", "grpo")]
    assert all(s.prompts_per_update == 16 and s.eval_every == 8 for s in specs)
    assert all(s.eval_samples == design.FULL.val_samples for s in specs)  # the validation split's samples
    # The comparison's options for each arm: the LoRA policy, and for the SR-PPO arm its critic at the critic rate.
    arms = [readings.arm_of(as_run(s, 0.1), 3e-4, SCHEDULE) for s in specs]
    assert arms == ["lora-policy_lora", "lora-grpo"] * 6
    assert dict(specs[0].options)["critic_learning_rate"] == 3e-4 and "critic_learning_rate" not in dict(
        specs[1].options
    )
    assert real_study.lora_specs(design.FULL, [100])[0].prompts_per_update == 8  # no schedule: the study's batch


def test_the_stages_rule_is_the_sweeps_over_the_lora_rates():
    specs = real_study.lora_specs(design.FULL, [100, 101], schedule=SCHEDULE)
    # Validation pass@1 by rate (base 0.10): 1e-4 means 0.25; 3e-4 means 0.45 but one run ends below the base;
    # 1e-3 means 0.30. The rule takes 1e-3.
    finals = {1e-4: [0.2, 0.3, 0.2, 0.3], 3e-4: [0.8, 0.05, 0.5, 0.45], 1e-3: [0.3, 0.3, 0.3, 0.3]}
    counter = {lr: iter(values) for lr, values in finals.items()}
    runs = [as_run(s, next(counter[s.learning_rate])) for s in specs]
    state = real_study.lora_state(design.FULL, runs, None, SCHEDULE, 0.10)
    assert state["rate"] == 1e-3 and len(state["runs"]) == 12
    assert state["table"][3e-4]["below_base"] and state["table"][1e-4]["score"] == 0.25
    # Not every rate on every sweep seed: none yet. Runs of another schedule or critic rate are not the stage's.
    assert real_study.lora_state(design.FULL, runs[:-1], None, SCHEDULE, 0.10)["rate"] is None
    assert real_study.lora_state(design.FULL, runs, None, variants(16, 8)[DEFAULT], 0.10)["runs"] == []
    # At another critic rate the SR-PPO LoRA arm's runs are not the stage's (only GRPO's, which has no critic): none.
    assert real_study.lora_state(design.FULL, runs, 3e-4, SCHEDULE, 0.10)["rate"] is None
    assert real_study.lora_state(design.FULL, runs, None, None, 0.10) == {"runs": [], "table": {}, "rate": None}
    # Every rate with a run below the base model: none.
    assert real_study.lora_state(design.FULL, runs, None, SCHEDULE, 0.35)["rate"] is None


def test_the_comparison_trains_and_reads_the_lora_arms_at_the_lora_rate(tmp_path):
    arms = list(design.ARMS)
    chosen = dict(real_study.compare_specs(design.FULL, 3e-5, [0], arms, None, SCHEDULE, lora_rate=3e-4))
    before = dict(real_study.compare_specs(design.FULL, 3e-5, [0], arms, None, SCHEDULE))
    for arm in arms:
        lora = arm in design.LORA_ARMS
        assert chosen[arm].learning_rate == (3e-4 if lora else 3e-5), arm
        assert chosen[arm] == before[arm] if not lora else chosen[arm].options == before[arm].options
    # Files of the comparison: the LoRA arms at both rates, the others at the chosen rate and at a rate of none.
    stray = real_study.replace(before["sr-ppo"], learning_rate=1e-4)
    for name, spec in [*((f"{a}_new", s) for a, s in chosen.items()), ("lora-grpo_old", before["lora-grpo"]),
                       ("lora-policy_lora_old", before["lora-policy_lora"]), ("stray", stray)]:  # fmt: skip
        with open(os.path.join(tmp_path, f"{name}.json"), "w") as f:
            json.dump(as_run(spec, 0.5), f)
    rates = sorted(r["spec"]["learning_rate"] for r in real_study.compare_runs(str(tmp_path), 3e-5, 3e-4))
    assert rates == [3e-5] * (len(arms) - 2) + [3e-5] * 2 + [3e-4] * 2  # the stray rate's run left out
    assert len(real_study.compare_runs(str(tmp_path), 3e-5)) == len(arms)  # no LoRA rate: the chosen rate only
    # Under the chosen schedule the report reads the LoRA arms at the LoRA rate only; without one, at any rate.
    runs = real_study.compare_runs(str(tmp_path), 3e-5, 3e-4)
    found = sorted((readings.arm_of(r, None, SCHEDULE, 3e-4) or "", r["spec"]["learning_rate"]) for r in runs)
    assert [arm for arm, lr in found if lr == 3e-4] == ["lora-grpo", "lora-policy_lora"]
    assert [arm for arm, lr in found if arm in design.LORA_ARMS and lr == 3e-5] == []
    assert {readings.arm_of(as_run(before["lora-grpo"], 0.1), None, SCHEDULE)} == {"lora-grpo"}


def test_the_report_says_what_the_stage_chose():
    base = {"val": {"pass@1": 0.10}}
    assert "No LoRA stage run has finished yet" in "\n".join(real_study_report.lora_lines({}, base))
    specs = real_study.lora_specs(design.FULL, [100, 101], schedule=SCHEDULE)
    runs = [as_run(s, 0.2 if s.learning_rate == 3e-4 else 0.15, half=0.12) for s in specs]
    state = real_study.lora_state(design.FULL, runs, None, SCHEDULE, 0.10)
    text = "\n".join(real_study_report.lora_lines(state, base))
    assert "**Chosen: learning rate 0.0003** for the LoRA arms" in text
    assert (
        "| 0.0003 | s100: 0.120 -> 0.200, s101: 0.120 -> 0.200 | s100: 0.120 -> 0.200, s101: 0.120 -> 0.200 |" in text
    )
    assert "12 runs" in text
    waiting = real_study.lora_state(design.FULL, runs[:6], None, SCHEDULE, 0.10)
    assert "Chosen: none" in "\n".join(real_study_report.lora_lines(waiting, base))


def test_each_comparison_section_reads_the_lora_arms_at_its_own_rate():
    def compare_run(arm, seed, final, prompts, lr):
        options = [list(o) for o in design.ARMS[arm][1]]
        spec = {"method": design.ARMS[arm][0], "learning_rate": lr, "seed": seed, "updates": 4,
                "prompts_per_update": prompts, "options": options}  # fmt: skip
        curve = [{"update": u, "pass@1": final, "pass@8": final, "generated_tokens": 50 * u,
                  "training_seconds": 10.0 * u} for u in (2, 4)]  # fmt: skip
        return {"spec": spec, "curve": curve, "final": curve[-1], "training_seconds": 40.0}

    runs = [compare_run(arm, 0, 0.1, 8, 3e-5) for arm in ("sr-ppo", *design.LORA_ARMS)]  # the default schedule
    runs += [compare_run(arm, s, 0.5, 16, 3e-5) for arm in ("sr-ppo", *design.LORA_ARMS) for s in (0, 1)]
    runs += [compare_run(arm, s, 0.6, 16, 3e-4) for arm in design.LORA_ARMS for s in (0, 1, 2)]  # the LoRA rate
    base = {"test": {"pass@1": 0.1, "pass@8": 0.3}, "val": {"pass@1": 0.1}}
    study = {"test_samples": 8, "prompts_per_update": 8, "updates": 4}
    stage = {"table": {DEFAULT: {"seeds": []}}, "variant": "batch x2", "why": "...", "schedule": (16, ())}

    def seeds_per_arm(lines: list[str], heading: str) -> dict[str, str]:
        lines = lines + ["## end"]
        start = next(i for i, line in enumerate(lines) if line.startswith(heading))
        end = next(i for i, line in enumerate(lines) if i > start and line.startswith("## "))
        return {line.split(" | ")[0][2:]: line.split(" | ")[1] for line in lines[start:end] if line.startswith("| ")
                and " | " in line and line.split(" | ")[1].isdigit()}  # fmt: skip

    labels = design.ARM_LABELS
    chosen_heading = "## Stage 2 under the chosen schedule, `batch x2`"
    earlier_heading = "## Stage 2 under the default schedule"
    # The LoRA stage chose 3e-4: under the chosen schedule its 3 seeds, not the 2 at the full model's rate.
    lines = real_study_report.schedule_lines(runs, base, study, None, stage, {"rate": 3e-4}, 3e-5)
    assert seeds_per_arm(lines, chosen_heading) == {
        labels["sr-ppo"]: "2",
        **{labels[a]: "3" for a in design.LORA_ARMS},
    }
    assert seeds_per_arm(lines, earlier_heading) == {labels[a]: "1" for a in ("sr-ppo", *design.LORA_ARMS)}
    # No LoRA rate yet: the LoRA arms at the full model's rate.
    lines = real_study_report.schedule_lines(runs[:9], base, study, None, stage, {"rate": None}, 3e-5)
    assert seeds_per_arm(lines, chosen_heading) == {labels[a]: "2" for a in ("sr-ppo", *design.LORA_ARMS)}

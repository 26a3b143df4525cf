# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
import json
from dataclasses import asdict, replace

import pytest

from benchmarks.real_study import design, readings
from benchmarks.real_study import report as real_study_report
from benchmarks.real_study import stability as real_study_stability
from benchmarks.real_study import study as real_study
from benchmarks.real_study.design import DEFAULT, variants
from benchmarks.real_study.stability import choose_variant, stage_seeds, stage_table


def run(seed: int, final: float, rewards=(0.0, 0.0, 0.5, 0.5), prompts: int = 8, options=()) -> dict:
    return {
        "spec": {
            "method": "sr-ppo",
            "seed": seed,
            "updates": len(rewards),
            "prompts_per_update": prompts,
            "options": [list(o) for o in options],
        },  # fmt: skip
        "final": {"pass@1": final},
        "curve": [{"update": len(rewards) // 2, "pass@1": final / 2}, {"update": len(rewards), "pass@1": final}],
        "reward_by_update": list(rewards),
    }


def test_slow_seeds_are_read_from_the_first_half_of_the_training_reward():
    runs = [
        run(0, 0.4, (0.25, 0.5, 0.5, 0.5)),  # first half 0.375
        run(1, 0.5, (0.0, 0.125, 0.5, 0.5)),  # 0.0625: slow (the second half does not count)
        run(4, 0.1, (0.0, 0.0, 0.0, 0.0)),  # 0: slow
        run(6, 0.5, (0.125, 0.125, 0.0, 0.0)),  # 0.125: not slow (SLOW_REWARD 0.1)
    ]
    assert real_study_stability.first_half_reward(runs[1]) == pytest.approx(0.0625)
    assert real_study_stability.first_half_reward({"reward_by_update": [0.5]}) is None  # no first half
    assert stage_seeds(runs, control_seeds=(0, 1)) == ([1, 4], [0])  # a control seed that is slow is a slow seed
    assert stage_seeds(runs, control_seeds=(0, 1), requested=[4, 6]) == ([4], [6])
    assert stage_seeds(runs, control_seeds=(0,), requested=[9]) == ([], [9])  # no comparison run: a control


def test_the_variants_change_one_thing_each():
    found = variants(16, 8)
    assert found[DEFAULT] == (8, ())
    assert found["batch x2"] == (16, ())
    assert found["critic warm-up"] == (8, (("critic_warmup_steps", 4),))
    assert found["value head at 0.5"] == (8, (("critic_value_init", "zero"),))
    assert variants(2, 4)["critic warm-up"] == (4, (("critic_warmup_steps", 1),))  # at least one update
    # The specs: every variant on every seed, on the validation split's samples, at the critic stage's rate.
    specs = real_study.stability_specs(design.FULL, 3e-5, [4, 0], rate=3e-4)
    assert [(s.seed, s.prompts_per_update) for s in specs] == [(4, 8), (4, 16), (4, 8), (4, 8)] + [
        (0, 8), (0, 16), (0, 8), (0, 8)
    ]  # fmt: skip
    assert all(s.eval_every == 8 and s.eval_samples == design.FULL.val_samples for s in specs)
    assert all(dict(s.options)["critic_learning_rate"] == 3e-4 for s in specs)
    assert dict(specs[2].options)["critic_warmup_steps"] == 4 and len(specs[2].options) == 2
    assert specs[0].name == real_study.compare_specs(design.FULL, 3e-5, [4], ["sr-ppo"], 3e-4)[0][1].name


def test_the_table_matches_runs_to_variants_by_batch_and_options():
    rate = (("critic_learning_rate", 3e-4),)
    runs = [
        run(4, 0.1, options=rate),
        run(4, 0.3, prompts=16, options=rate),
        run(4, 0.2, options=(*rate, ("critic_value_init", "zero"))),
        run(4, 0.9),  # the default at another critic rate: no variant's
    ]
    runs = json.loads(json.dumps(runs))  # as read back from the runs' files
    table = stage_table(runs, variants(4, 8), 3e-4)
    assert table[DEFAULT]["final"] == [0.1] and table["batch x2"]["final"] == [0.3]
    assert table["value head at 0.5"]["final"] == [0.2] and table["critic warm-up"]["seeds"] == []
    assert table[DEFAULT]["half"] == [0.05] and table[DEFAULT]["reward_first_half"] == [0.0]


def table_of(finals: dict[str, dict[int, float]]) -> dict:
    return {name: {"seeds": list(by), "final": list(by.values())} for name, by in finals.items()}


def test_the_rule_by_hand():
    slow, controls = [4, 8], [0, 1]
    default = {4: 0.10, 8: 0.20, 0: 0.60, 1: 0.70}  # mean 0.40
    finals = {
        DEFAULT: default,
        "batch x2": {4: 0.30, 8: 0.40, 0: 0.58, 1: 0.66},  # above on both slow seeds, controls -0.03, mean +0.085
        "critic warm-up": {4: 0.50, 8: 0.15, 0: 0.90, 1: 0.90},  # seed 8 below the default's: out
        "value head at 0.5": {4: 0.40, 8: 0.50, 0: 0.40, 1: 0.50},  # controls -0.20: out (mean +0.05)
    }
    variant, why = choose_variant(table_of(finals), slow, controls)
    assert variant == "batch x2" and "+0.085" in why
    # A gain under MIN_GAIN (0.05) keeps the default, and every variant's reason is given.
    finals["batch x2"] = {4: 0.15, 8: 0.25, 0: 0.60, 1: 0.70}  # +0.025
    variant, why = choose_variant(table_of(finals), slow, controls)
    assert variant == DEFAULT
    assert "batch x2 gains +0.025" in why and "critic warm-up is not above" in why and "loses 0.200" in why
    # Among eligible variants, the highest mean; without control seeds the control condition cannot exclude.
    finals["critic warm-up"] = {4: 0.60, 8: 0.60, 0: 0.60, 1: 0.70}  # +0.225
    finals["value head at 0.5"] = {4: 0.30, 8: 0.30, 0: 0.60, 1: 0.70}  # +0.15
    assert choose_variant(table_of(finals), slow, controls)[0] == "critic warm-up"
    assert choose_variant(table_of({k: {4: v[4], 8: v[8]} for k, v in finals.items()}), slow, [])[0] == (
        "critic warm-up"
    )
    # Nothing is chosen before every variant has every stage seed (other seeds do not count).
    finals["value head at 0.5"] = {4: 0.30, 8: 0.30, 0: 0.60, 7: 0.1}
    assert choose_variant(table_of(finals), slow, controls) == (None, "not every variant has run on every stage seed")
    assert choose_variant(table_of(finals), [], [])[0] is None


def test_the_default_schedule_reproduces_the_comparisons_training_rewards():
    table = stage_table([run(4, 0.1, (0.0, 0.125, 0.0, 0.0)), run(8, 0.2)], variants(4, 8), None)
    comparison = [run(4, 0.3, (0.0, 0.125, 0.0, 0.0)), run(8, 0.3, (0.0, 0.0, 0.5, 0.25)), run(5, 0.5)]
    assert real_study_stability.same_rewards(table, comparison) == (1, 2)  # seed 8 parted; seed 5 has no stage run


def test_the_comparison_trains_every_arm_under_the_chosen_schedule():
    schedules = variants(16, 8)
    arms = list(design.ARMS)
    critic_arms = [arm for arm in arms if design.ARMS[arm][0] != "grpo"]
    batch = dict(real_study.compare_specs(design.FULL, 3e-5, [0], arms, 3e-4, schedules["batch x2"]))
    warmup = dict(real_study.compare_specs(design.FULL, 3e-5, [0], arms, 3e-4, schedules["critic warm-up"]))
    default = dict(real_study.compare_specs(design.FULL, 3e-5, [0], arms, 3e-4, schedules[DEFAULT]))
    assert default == dict(real_study.compare_specs(design.FULL, 3e-5, [0], arms, 3e-4))  # None: the default's
    # The batch for every arm, GRPO's too (its half as many prompts x 4 rollouts follow); the options unchanged.
    assert {s.prompts_per_update for s in batch.values()} == {16} and {
        s.prompts_per_update for s in default.values()
    } == {8}
    assert all(batch[a].options == default[a].options for a in arms)
    # The critic options for every arm with a critic, after its own; GRPO's runs are the default's.
    for arm in critic_arms:
        assert warmup[arm].options == (*default[arm].options, ("critic_warmup_steps", 4)), arm
    assert all(warmup[a] == default[a] for a in arms if a not in critic_arms)
    # Each run is in its arm under its own schedule only (as read back from the runs' files).
    as_json = {
        name: {arm: json.loads(json.dumps({"spec": asdict(s)})) for arm, s in specs.items()}
        for name, specs in (("batch x2", batch), ("critic warm-up", warmup), (DEFAULT, default))
    }
    arm_of = readings.arm_of
    for mine in as_json:
        for theirs, schedule in schedules.items():
            if theirs == "value head at 0.5":
                continue
            found = {arm: arm_of(r, 3e-4, schedule) for arm, r in as_json[mine].items()}
            if theirs == mine:
                assert found == {a: a for a in arms}, (mine, theirs)
            elif {mine, theirs} == {"critic warm-up", DEFAULT}:  # GRPO has no critic: the same runs
                assert found == {a: None if a in critic_arms else a for a in arms}, (mine, theirs)
            else:
                assert set(found.values()) == {None}, (mine, theirs)


def test_the_report_keeps_the_runs_of_the_default_schedule_apart_once_another_is_chosen():
    def compare_run(method, seed, final, prompts):
        spec = {"method": method, "learning_rate": 3e-5, "seed": seed, "updates": 4, "prompts_per_update": prompts,
                "options": []}  # fmt: skip
        curve = [{"update": u, "pass@1": final, "pass@8": final, "generated_tokens": 50 * u,
                  "training_seconds": 10.0 * u} for u in (2, 4)]  # fmt: skip
        return {"spec": spec, "curve": curve, "final": curve[-1], "training_seconds": 40.0}

    runs = [compare_run(m, s, f, 8) for m, s, f in (("sr-ppo", 0, 0.1), ("sr-ppo", 1, 0.2), ("grpo", 0, 0.3))]
    runs += [compare_run(m, s, f, 16) for m, s, f in (("sr-ppo", 0, 0.7), ("grpo", 0, 0.8), ("grpo", 1, 0.6))]
    base = {"test": {"pass@1": 0.1, "pass@8": 0.3}, "val": {"pass@1": 0.1}}
    study = {"test_samples": 8, "prompts_per_update": 8, "updates": 4}
    stage = {"table": {DEFAULT: {"seeds": []}}, "variant": "batch x2", "why": "...", "schedule": (16, ())}

    def rows(lines: list[str], heading: str) -> dict[str, str]:
        start = next(i for i, line in enumerate(lines) if line.startswith(heading))
        end = next(i for i, line in enumerate(lines) if i > start and line.startswith("## "))
        return {line.split(" | ")[0][2:]: line.split(" | ")[1] for line in lines[start:end] if line.startswith("| ")
                and " | " in line and line.split(" | ")[1].isdigit()}  # fmt: skip

    lines = real_study_report.schedule_lines(runs + [compare_run("sr-ppo", 2, 0.5, 16)], base, study, None, stage)
    chosen = rows(lines + ["## end"], "## Stage 2 under the chosen schedule, `batch x2` (16 prompts per update)")
    earlier = rows(lines + ["## end"], "## Stage 2 under the default schedule, before the stability stage chose")
    labels = design.ARM_LABELS
    assert chosen == {labels["sr-ppo"]: "2", labels["grpo"]: "2"}  # seeds per arm
    assert earlier == {labels["sr-ppo"]: "2", labels["grpo"]: "1"}
    # Until the rule chooses another, one comparison, of the default schedule's runs.
    for variant in (None, DEFAULT):
        lines = real_study_report.schedule_lines(runs, base, study, None, {**stage, "variant": variant})
        assert rows(lines + ["## end"], "## Stage 2: the methods") == {labels["sr-ppo"]: "2", labels["grpo"]: "1"}
        assert not any("chosen schedule" in line for line in lines)


def test_the_stages_state_gives_the_comparison_the_chosen_schedule(tmp_path):
    study = replace(design.FULL, updates=4, control_seeds=(0,))
    rate = (("critic_learning_rate", 3e-4),)
    comparison = [run(4, 0.1, (0.0, 0.0, 0.0, 0.0), options=rate), run(0, 0.5, (0.5, 0.5, 0.5, 0.5), options=rate)]
    comparison.append(run(4, 0.9, (0.5, 0.5, 0.5, 0.5), prompts=16, options=rate))  # another schedule's: not default
    finals = {DEFAULT: (0.1, 0.5), "batch x2": (0.6, 0.6), "critic warm-up": (0.2, 0.5), "value head at 0.5": (0, 0)}
    for name, (prompts, options) in variants(4, 8).items():
        for seed, final in zip((4, 0), finals[name]):
            (tmp_path / f"{name}_{seed}.json").write_text(json.dumps(run(seed, final, prompts=prompts,
                                                                          options=(*rate, *options))))  # fmt: skip
    state = real_study.stability_state(study, 3e-4, comparison, str(tmp_path))
    assert (state["slow"], state["controls"]) == ([4], [0]) and len(state["default_runs"]) == 2
    assert state["variant"] == "batch x2" and state["schedule"] == (16, ())
    # Before every variant has every seed: the default schedule.
    (tmp_path / "value head at 0.5_0.json").unlink()
    state = real_study.stability_state(study, 3e-4, comparison, str(tmp_path))
    assert state["variant"] is None and state["schedule"] == (8, ())

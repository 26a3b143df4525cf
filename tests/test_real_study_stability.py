# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
import json

import pytest

from benchmarks import real_study, real_study_stability
from benchmarks.real_study_stability import DEFAULT, choose_variant, stage_seeds, stage_table, variants


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
    specs = real_study.stability_specs(real_study.FULL, 3e-5, [4, 0], rate=3e-4)
    assert [(s.seed, s.prompts_per_update) for s in specs] == [(4, 8), (4, 16), (4, 8), (4, 8)] + [
        (0, 8), (0, 16), (0, 8), (0, 8)
    ]  # fmt: skip
    assert all(s.eval_every == 8 and s.eval_samples == real_study.FULL.val_samples for s in specs)
    assert all(dict(s.options)["critic_learning_rate"] == 3e-4 for s in specs)
    assert dict(specs[2].options)["critic_warmup_steps"] == 4 and len(specs[2].options) == 2
    assert specs[0].name == real_study.compare_specs(real_study.FULL, 3e-5, [4], ["sr-ppo"], 3e-4)[0][1].name


def test_the_table_matches_runs_to_variants_by_batch_and_options():
    rate = (("critic_learning_rate", 3e-4),)
    runs = [
        run(4, 0.1, options=rate),
        run(4, 0.3, prompts=16, options=rate),
        run(4, 0.2, options=(*rate, ("critic_value_init", "zero"))),
        run(4, 0.9),  # the default at another critic rate: no variant's
    ]
    runs = json.loads(json.dumps(runs))  # as read back from the runs' files
    table = stage_table(runs, variants(4, 8), rate)
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
    table = stage_table([run(4, 0.1, (0.0, 0.125, 0.0, 0.0)), run(8, 0.2)], variants(4, 8), ())
    comparison = [run(4, 0.3, (0.0, 0.125, 0.0, 0.0)), run(8, 0.3, (0.0, 0.0, 0.5, 0.25)), run(5, 0.5)]
    assert real_study_stability.same_rewards(table, comparison) == (1, 2)  # seed 8 parted; seed 5 has no stage run

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
import pytest

from benchmarks.real_study import design
from benchmarks.real_study import head as real_study_head
from benchmarks.real_study import study as real_study


def run(seed: int, head: float | None, values: list[float], final: float, half: float = 0.2) -> dict:
    options = [] if head is None else [["critic_head_learning_rate", head]]
    return {
        "spec": {"seed": seed, "updates": 4, "options": options},
        "curve": [{"update": 2, "pass@1": half}, {"update": 4, "pass@1": final}],
        "final": {"pass@1": final, "critic_s0": values, "critic_auc_s0": 0.6},
        "config": {"pass_at_k": 2},
        "training_seconds": 40.0,
    }


def test_head_specs_add_each_rate_to_the_schedules_options():
    specs = real_study_head.head_specs(design.FULL, 3e-5, (100, 101), None, (16, ()))
    found = sorted((dict(s.options).get("critic_head_learning_rate") or 0.0, s.seed) for s in specs)
    assert found == sorted((h, s) for h in (0.0, *real_study_head.HEAD_RATES) for s in (100, 101))
    assert {(s.method, s.prompts_per_update, s.learning_rate, s.eval_every) for s in specs} == {
        ("sr-ppo", 16, 3e-5, 8)
    }
    # The reference is the stability stage's run of that schedule (batch x2: 16 prompts, no option) on these seeds.
    batch_x2 = [s for s in real_study.stability_specs(design.FULL, 3e-5, (100, 101)) if s.prompts_per_update == 16]
    assert [s for s in specs if not s.options] == batch_x2


def test_head_table_by_hand():
    runs = [run(100, None, [0.5, 0.5], 0.30), run(100, 1e-3, [0.5, 0.9], 0.05), run(101, 1e-3, [0.2, 0.4], 0.40)]
    table = real_study_head.head_table(runs, base_val=0.087)
    assert [r["seed"] for r in table[None]] == [100] and [r["seed"] for r in table[1e-3]] == [100, 101]
    first = table[1e-3][0]
    assert first["weight_ratio"] == pytest.approx(1.0 / 0.2)  # 2 (1 - q): 1 and 0.2
    assert first["value_sd"] == pytest.approx(0.2) and first["value_mean"] == pytest.approx(0.7)
    assert first["below_base"] and not table[1e-3][1]["below_base"]
    assert first["half"] == 0.2 and first["seconds_per_update"] == 10.0
    text = "\n".join(real_study_head.head_lines(table, {"val": {"pass@1": 0.087}}, (16, ())))
    assert "| 0.001 | 100 | 0.200 -> 0.050 | 0.600 | 0.700 / 0.2000 | 5.0000 | 10.0 |" in text
    # Paired with the reference on seed 100 only (101 has none).
    assert "- Head rate 0.001 against the reference, on the same 1 seed(s): AUC 0.600 against 0.600" in text
    assert "runs below the base model: 1." in text
    assert "Head rate 0.003" not in text  # no run at that rate

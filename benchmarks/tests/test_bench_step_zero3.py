# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`python -m benchmarks.costs.sharded_step --quick` (`make test-sharded`): every variant launched under DeepSpeed
ZeRO-3 on 2 CPU processes trains or is refused at start with a message, the phases add up to the step on both
processes, the critic's shares lie in [0, 1] and the report is written. Behaviour only, never timings."""

import json

import pytest

from benchmarks.costs import sharded_step

pytestmark = pytest.mark.sharded


def test_quick_zero3_step_cost_times_every_critic_or_records_its_refusal(tmp_path):
    pytest.importorskip("deepspeed", reason="DeepSpeed is not installed (`pip install trl-srppo[deepspeed]`)")
    assert sharded_step.main(["--quick", "--output-dir", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "performance_zero3.json").read_text())
    assert set(result["seconds"]) | set(result["refused"]) == set(sharded_step.VARIANTS)
    assert not set(result["seconds"]) & set(result["refused"])
    # Refused at start: the policy LoRA critic beside a LoRA policy, whose adapter ZeRO-3 would partition.
    assert set(result["refused"]) == {"sr-ppo-policy-lora"}
    assert "policy_lora" in result["refused"]["sr-ppo-policy-lora"]
    assert result["critic_class"] == {
        "grpo": None,
        "sr-ppo": "DeepSpeedCritic",  # its own ZeRO-3 engine
        "sr-ppo-policy-head": "PolicyHeadCritic",
        "sr-ppo-lora-critic": "ReplicatedCritic",
    }

    for process in result["steps"]:
        assert set(process) == set(result["seconds"])
        for name, rounds in process.items():
            assert len(rounds) == 1 and len(rounds[0]) == 1, name  # one round of one timed step
            step = rounds[0][0]
            assert sum(v for k, v in step.items() if k != "step") == pytest.approx(step["step"]), name
            assert step["generation"] > 0 and step["policy log-probs"] > 0, name
    seconds = result["seconds"]
    assert seconds["grpo"]["critic values"] == seconds["grpo"]["critic update"] == 0.0
    for name in ("sr-ppo", "sr-ppo-policy-head", "sr-ppo-lora-critic"):
        assert seconds[name]["critic update"] > 0, name
    shares = result["critic_share"]
    assert shares["grpo"]["of_medians"] == 0.0
    assert all(0 <= share["of_medians"] <= 1 and 0 <= share["median"] <= 1 for share in shares.values())
    assert {"sr-ppo / grpo (equal completions)", "sr-ppo-policy-head / grpo (equal completions)"} <= set(
        result["ratios"]
    )

    report = (tmp_path / "performance_zero3.md").read_text()
    for section in (
        "**Quick mode**",
        "## Refused at start",
        "## Seconds per step",
        "## The critic's share",
        "Command:",
    ):
        assert section in report, section
    assert result["refused"]["sr-ppo-policy-lora"] in report

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`python -m benchmarks.step_cost --quick`: every variant trains, the phases add up and the report is written."""

import json

import pytest

from benchmarks import step_cost


def test_quick_step_cost_writes_report(tmp_path):
    assert step_cost.main(["--quick", "--output-dir", str(tmp_path)]) == 0
    report = (tmp_path / "performance.md").read_text()
    for section in ("**Quick mode**", "## Seconds per step", "## Ratios", "## Memory", "Command:", "Machine:"):
        assert section in report, section
    result = json.loads((tmp_path / "performance.json").read_text())
    assert set(result["seconds"]) == {
        "grpo",
        "grpo-paper",
        "sr-ppo",
        "sr-ppo-separate",
        "sr-ppo-lora-critic",
        "sr-ppo-policy-head",
        "grpo-lora",
        "sr-ppo-policy-lora",
    }
    assert [result["variants"][n]["completions"] for n in ("grpo", "grpo-paper", "sr-ppo")] == [8, 16, 8]

    for name, steps in result["steps"].items():
        assert len(steps) == 1, name  # one counted round of one step in quick mode
        for step in steps:
            phases = sum(v for k, v in step.items() if k != "step")
            assert phases == pytest.approx(step["step"]), name
            assert step["generation"] > 0 and step["policy log-probs"] > 0 and step["rewards"] > 0, name
    grpo, fused, separate = (result["steps"][n][0] for n in ("grpo", "sr-ppo", "sr-ppo-separate"))
    assert grpo["critic values"] == grpo["critic update"] == 0.0
    assert fused["critic values"] == 0.0 and fused["critic update"] > 0  # values come from the update's forward
    assert separate["critic values"] > 0 and separate["critic update"] > 0
    head = result["steps"]["sr-ppo-policy-head"][0]
    assert head["critic values"] == 0.0 and head["critic update"] > 0  # values from the policy's forward; the step

    floor = result["seconds"]["grpo"]["step"] + result["seconds"]["sr-ppo"]["critic update"]
    assert result["ratios"]["floor_seconds"] == pytest.approx(floor)
    ratio = result["ratios"]["sr-ppo / grpo (equal completions)"]
    assert ratio["median"] == pytest.approx(result["seconds"]["sr-ppo"]["step"] / result["seconds"]["grpo"]["step"])

    memory = result["memory"]
    grpo_state, srppo_state = memory["grpo"]["state_bytes"], memory["sr-ppo"]["state_bytes"]
    assert not any(key.startswith("critic") for key in grpo_state)
    # float32 AdamW: two moments per trainable value (and one step counter per tensor).
    gradients = grpo_state["policy gradients"]
    assert 0 < grpo_state["policy weights"] - 1024 < gradients <= grpo_state["policy weights"]  # weights: + buffers
    assert 2 * gradients <= grpo_state["policy optimizer"] < 2 * gradients + 4096
    assert srppo_state["critic weights"] > 0 and 2 * srppo_state["critic gradients"] <= srppo_state["critic optimizer"]
    policy_part = {k: v for k, v in srppo_state.items() if k.startswith("policy")}
    assert policy_part == {k: v for k, v in grpo_state.items() if k.startswith("policy")}
    assert srppo_state["total"] == sum(v for k, v in srppo_state.items() if k != "total")
    lora = memory["sr-ppo-lora-critic"]["state_bytes"]  # the critic's frozen backbone has no gradient or moments
    assert lora["critic weights"] > srppo_state["critic weights"]  # the backbone plus the adapters
    assert lora["critic gradients"] < srppo_state["critic gradients"]  # only the adapters and the head learn
    assert 2 * lora["critic gradients"] <= lora["critic optimizer"] < 2 * lora["critic gradients"] + 4096
    head_state = memory["sr-ppo-policy-head"]["state_bytes"]  # a linear head, hidden 32 in quick mode, float32
    assert head_state["critic weights"] == head_state["critic gradients"] == (32 + 1) * 4
    assert {k: v for k, v in head_state.items() if k.startswith("policy")} == policy_part
    grpo_lora, policy_lora = memory["grpo-lora"]["state_bytes"], memory["sr-ppo-policy-lora"]["state_bytes"]
    # The critic adapter lives in the policy's model (counted there once, with its gradients); the critic's own
    # weights and gradients are the linear head's, and the base is held once: below a full-model critic's state.
    assert policy_lora["critic weights"] == policy_lora["critic gradients"] == (32 + 1) * 4
    assert policy_lora["policy weights"] > grpo_lora["policy weights"]  # plus the critic adapter
    assert policy_lora["total"] - grpo_lora["total"] < srppo_state["total"] - grpo_state["total"]
    assert all(memory[n]["peak_rss_bytes"] > 2**20 for n in memory)

    # The report can be rewritten from the JSON alone, with the same figures.
    again = tmp_path / "again"
    assert step_cost.main(["--from-json", str(tmp_path / "performance.json"), "--output-dir", str(again)]) == 0
    assert json.loads((again / "performance.json").read_text())["ratios"] == result["ratios"]
    rewritten = (again / "performance.md").read_text()
    assert "rewritten from the run's JSON" in rewritten
    assert rewritten.split("## Seconds per step")[1] == report.split("## Seconds per step")[1]

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`python -m benchmarks.costs.sharded_memory --quick`: every configuration launches under ZeRO-3 on 2 CPU processes
and reports a peak per process, the partitions hold half of each model, and the report is written (behaviour, never
figures of this machine). The parameter count and the depth choice are checked without launching."""

import json

import pytest

from benchmarks.costs import sharded_memory

NO_DEEPSPEED = "DeepSpeed is not installed (`pip install trl-srppo[deepspeed]`)"


def test_the_parameter_count_is_qwen3_0_6bs():
    # Qwen3-0.6B's model card: 0.6B parameters, 0.44B of them outside the embedding.
    size = sharded_memory.QWEN3_0_6B
    total = sharded_memory.parameter_count(size)
    embedding = size["vocab_size"] * size["hidden_size"]
    assert 590e6 < total < 600e6 and 435e6 < total - embedding < 445e6
    assert sharded_memory.parameter_count(size, critic=True) == total + size["hidden_size"] + 1


def test_the_depth_is_the_most_that_fits_the_budget():
    size, tokens = sharded_memory.QWEN3_0_6B, 256
    layers = sharded_memory.deepest_fitting("separate", size, True, tokens, 12 * 2**30)
    assert 0 < layers < size["num_layers"]
    fits = sharded_memory.estimated_peak("separate", dict(size, num_layers=layers), True, tokens)
    over = sharded_memory.estimated_peak("separate", dict(size, num_layers=layers + 1), True, tokens)
    assert 2 * fits <= 12 * 2**30 < 2 * over
    assert sharded_memory.deepest_fitting("grpo", size, True, tokens, 64 * 2**30) == size["num_layers"]


@pytest.fixture(scope="module")
def quick_result(tmp_path_factory):
    pytest.importorskip("deepspeed", reason=NO_DEEPSPEED)
    folder = tmp_path_factory.mktemp("sharded_memory")
    assert sharded_memory.main(["--quick", "--output-dir", str(folder)]) == 0
    return folder, json.loads((folder / "sharded_memory.json").read_text())


@pytest.mark.sharded
def test_every_configuration_reports_a_peak_per_process_or_its_refusal(quick_result):
    folder, result = quick_result
    rows = {(r["case"], r["offload"]): r for r in result["rows"]}
    assert set(rows) == {(c, o) for c in sharded_memory.CASES for o in sharded_memory.OFFLOADS}
    for (case, offload), row in rows.items():
        summary = row["summary"]
        assert "failed" not in summary, (case, offload, summary)
        if case == "policy_lora" and "refused" in summary:  # refused beside a DeepSpeed policy
            assert "policy_lora" in summary["refused"]
            continue
        assert len(summary["step_peak_bytes"]) == sharded_memory.NPROC
        assert all(p > 0 for p in summary["step_peak_bytes"] + summary["process_peak_bytes"]), (case, offload)
        assert all(s <= p for s, p in zip(summary["step_peak_bytes"], summary["process_peak_bytes"]))
        assert summary["completion_tokens"] == [result["settings"]["completion_tokens"]]  # full-length completions
    report = (folder / "sharded_memory.md").read_text()
    for section in ("Command:", "Machine:", "Settings:", "| configuration | offload |"):
        assert section in report, section


@pytest.mark.sharded
def test_zero3_holds_half_of_each_sharded_model_per_process(quick_result):
    _, result = quick_result
    for row in result["rows"]:
        if "state_parts" not in row["summary"]:
            continue
        state = row["run"]["rank0"]["state_bytes"]
        sharded = ["policy"] + (["critic"] if row["case"] == "separate" else [])
        for name in sharded:
            part = state[name]
            assert 0.5 * part["elements_whole"] <= part["elements_local"] <= 0.51 * part["elements_whole"], row
            # AdamW's two float32 moments and the float32 master weights over this process's partition
            assert part["optimizer"] >= 8 * part["elements_local"] and part["master"] == 4 * part["elements_local"]
        if row["case"] in ("policy_head", "lora_critic"):  # a critic held whole on every process
            assert state["critic"]["elements_local"] == state["critic"]["elements_whole"] > 0

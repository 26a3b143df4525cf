# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`scripts/vllm_memory.py`, the memory table of docs/vllm.md: its parameter counts are transformers' own, and its
table is what the docs show."""

import importlib.util
import re
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("vllm_memory", ROOT / "scripts" / "vllm_memory.py")
vllm_memory = importlib.util.module_from_spec(spec)
spec.loader.exec_module(vllm_memory)


@pytest.mark.parametrize("name", ["Qwen3-1.7B", "Qwen3-8B"])  # a tied and an untied output head
def test_parameter_counts_are_transformers_counts(name):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    shape = vllm_memory.QWEN3[name]
    config = Qwen3Config(
        vocab_size=vllm_memory.VOCAB,
        hidden_size=shape["hidden"],
        intermediate_size=shape["intermediate"],
        num_hidden_layers=shape["layers"],
        num_attention_heads=shape["heads"],
        num_key_value_heads=shape["kv_heads"],
        head_dim=shape["head_dim"],
        tie_word_embeddings=shape["tied"],
    )
    with torch.device("meta"):
        model = Qwen3ForCausalLM(config)
    assert vllm_memory.parameter_count(shape) == sum(p.numel() for p in model.parameters())
    backbone = sum(p.numel() for p in model.model.parameters())
    assert vllm_memory.parameter_count(shape, output_head=False) == backbone


def test_budget_adds_up_and_the_docs_show_the_default_table():
    shape = vllm_memory.QWEN3["Qwen3-1.7B"]
    b = vllm_memory.budget(shape, gpu_gib=80, sequences=8, tokens=5120)
    assert b["kv_cache"] == pytest.approx(2 * 28 * 8 * 128 * 2 * 8 * 5120 / 2**30)
    assert b["vllm_total"] == pytest.approx(b["vllm_weights"] + b["kv_cache"] + 2.0)
    assert b["utilization"] >= b["vllm_total"] / 80 and b["utilization"] * 20 == round(b["utilization"] * 20)
    assert b["headroom"] == pytest.approx(80 * (1 - b["utilization"]) - b["policy"] - b["critic"])
    table = vllm_memory.table(80, 8, 5120)
    assert len(re.findall(r"^\| Qwen3-", table, flags=re.M)) == 4
    assert table in (ROOT / "docs" / "vllm.md").read_text(), "regenerate docs/vllm.md's table"

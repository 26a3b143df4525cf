# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`benchmarks.costs.checkpoint_size` against real checkpoints: a tiny Qwen3 trained one step and saved, in each
critic mode, with a full or LoRA policy, float32 or bfloat16: the tensors of each part of `checkpoint-1` hold exactly
the predicted bytes, and its files exceed them by headers alone (at most `HEADERS` bytes a part)."""

import glob
import os
import runpy
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from benchmarks.costs.checkpoint_size import checkpoint_size, count_parameters
from tests.helpers import toy_trainer
from trl_srppo.tasks.toy import build_model

# A part's files beyond its tensors: safetensors' JSON header, torch.save's zip records and pickled keys (a few hundred
# bytes a tensor), AdamW's one-number `step` per parameter.
HEADERS = 32 * 1024
LORA = dict(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])

# name -> (trainer overrides, LoRA policy, checkpoint_size arguments)
CASES = {
    "separate critic": ({}, False, {}),
    "bf16 policy": ({}, False, {"dtype": "bfloat16"}),
    "bf16 policy and critic": ({"critic_dtype": "bfloat16"}, False, {"dtype": "bfloat16", "critic_dtype": "bfloat16"}),
    "LoRA critic": (
        {"critic_use_peft": True, "critic_lora_r": 4},
        False,
        {"critic_use_peft": True, "critic_lora_r": 4},
    ),
    "policy_head": (
        {"critic_type": "policy_head"},
        False,
        {"critic_type": "policy_head"},
    ),
    "LoRA policy, separate critic": ({}, True, {}),
    "LoRA policy, policy_lora": ({"critic_type": "policy_lora"}, True, {"critic_type": "policy_lora"}),
    "save_only_model": ({"save_only_model": True}, False, {"save_only_model": True}),
}


def _moment_bytes(optimizer_state: dict) -> int:
    # AdamW's moments; its one-number `step` per parameter falls under the headers' allowance.
    return sum(
        t.numel() * t.element_size()
        for state in optimizer_state["state"].values()
        for key, t in state.items()
        if key in ("exp_avg", "exp_avg_sq")
    )


def _safetensors_bytes(paths) -> int:
    total = 0
    for path in paths:
        with safe_open(path, "pt") as f:
            total += sum(f.get_tensor(k).numel() * f.get_tensor(k).element_size() for k in f.keys())
    return total


def measured(folder: str) -> tuple[dict, dict]:
    """Per part of `checkpoint_size`: the bytes of the tensors in the checkpoint's files, and the files' sizes."""
    files = {
        "policy weights": glob.glob(os.path.join(folder, "*.safetensors")),
        "policy optimizer": glob.glob(os.path.join(folder, "optimizer.pt")),
        "critic weights": glob.glob(os.path.join(folder, "critic", "**", "*.safetensors"), recursive=True),
        "critic optimizer": glob.glob(os.path.join(folder, "critic", "critic_training_state.pt")),
    }
    tensors = {
        "policy weights": _safetensors_bytes(files["policy weights"]),
        "critic weights": _safetensors_bytes(files["critic weights"]),
    }
    for part, key in (("policy optimizer", None), ("critic optimizer", "optimizer")):
        state = [torch.load(path, map_location="cpu", weights_only=True) for path in files[part]]
        tensors[part] = sum(_moment_bytes(s if key is None else s[key]) for s in state)
    sizes = {part: sum(os.path.getsize(p) for p in paths) for part, paths in files.items()}
    return tensors, sizes


@pytest.mark.parametrize("case", list(CASES))
def test_checkpoint_size_predicts_the_tensors_and_files_of_a_real_checkpoint(toy, tmp_path, case):
    overrides, lora_policy, arguments = CASES[case]
    model = build_model(toy[0], hidden_size=128)  # 0.3M parameters: the tensors outweigh the headers
    if arguments.get("dtype") == "bfloat16":
        model = model.to(torch.bfloat16)
    peft_config = None
    if lora_policy:
        from peft import LoraConfig

        peft_config = LoraConfig(**LORA)
        arguments = {**arguments, "policy_lora_r": LORA["r"], "lora_target_modules": LORA["target_modules"]}
    counts = count_parameters(model.config)
    trainer = toy_trainer(
        toy,
        tmp_path,
        model=model,
        peft_config=peft_config,
        max_steps=1,
        save_strategy="steps",
        save_steps=1,
        **overrides,
    )
    trainer.train()

    predicted = checkpoint_size(counts, **arguments)
    tensors, sizes = measured(str(tmp_path / "checkpoint-1"))
    assert tensors == predicted
    for part, size in sizes.items():
        assert predicted[part] <= size <= predicted[part] + HEADERS, (part, size, predicted[part])


def test_counts_of_a_tied_and_an_untied_model():
    from transformers import Qwen3Config

    config = dict(
        vocab_size=100,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=8,
    )
    tied, untied = (count_parameters(Qwen3Config(**config, tie_word_embeddings=t)) for t in (True, False))
    assert untied.total - tied.total == untied.output_head == 100 * 16 and tied.output_head == 0
    # Per layer: q 16->16, k 16->8, v 16->8, o 16->16, gate and up 16->32, down 32->16.
    expected = {"q_proj": 64, "k_proj": 48, "v_proj": 48, "o_proj": 64, "gate_proj": 96, "up_proj": 96}
    assert tied.linear_sizes == {**expected, "down_proj": 96}
    assert tied.lora(4, ["q_proj", "v_proj"]) == 4 * (64 + 48)
    with pytest.raises(ValueError, match="No linear layer named \\['qkv'\\]"):
        tied.lora(4, ["qkv"])


def test_the_tables_of_the_docs_are_the_scripts_output():
    root = Path(__file__).resolve().parents[2]
    tables = runpy.run_path(str(root / "scripts" / "checkpoint_sizes.py"))["tables"]()
    doc = (root / "docs" / "checkpoints.md").read_text()
    start = doc.index("\n", doc.index("<!-- tables:")) + 1
    assert doc[start : doc.index("<!-- end of tables -->")] == tables, "run python -m scripts.checkpoint_sizes"

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Shared fixtures: the toy task, a tiny model and a CPU configuration. Nothing is downloaded."""

import os
import warnings

import pytest
import torch

torch.set_num_threads(1)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Tiny models gain nothing from a second thread, and on a machine whose other core is busy a second thread can make a
# step many times slower; subprocesses inherit the setting.
os.environ.setdefault("OMP_NUM_THREADS", "1")
warnings.filterwarnings("ignore", category=FutureWarning)


def cpu_config(output_dir, **overrides):
    """An SRPPOConfig for a CPU run of the toy task; `overrides` replace any field."""
    from trl_srppo import SRPPOConfig

    fields = dict(
        output_dir=str(output_dir),
        report_to=[],
        bf16=False,
        use_cpu=True,
        per_device_train_batch_size=8,
        max_completion_length=3,
        max_steps=2,
        learning_rate=3e-3,
        lr_scheduler_type="constant",
        critic_learning_rate=3e-3,
        logging_steps=1,
        save_strategy="no",
        gradient_checkpointing=False,
        disable_tqdm=True,
        seed=0,
    )
    fields.update(overrides)
    return SRPPOConfig(**fields)


@pytest.fixture
def toy():
    """(tokenizer, model factory, train dataset) for the toy task."""
    from trl_srppo.toy import build_model, build_tokenizer, make_dataset

    tokenizer = build_tokenizer()
    return tokenizer, (lambda seed=0: build_model(tokenizer, seed=seed)), make_dataset(64, seed=0)


def tiny_reward_model(tmp_path, tokenizer):
    """A one-layer Qwen3 sequence-classification reward model saved to `tmp_path / "rm"` (as a Hub reward model
    loads); returns the folder."""
    from transformers import Qwen3Config, Qwen3ForSequenceClassification

    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=8,
        num_labels=1,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen3ForSequenceClassification(config)
    model.save_pretrained(tmp_path / "rm")
    tokenizer.save_pretrained(tmp_path / "rm")
    return str(tmp_path / "rm")

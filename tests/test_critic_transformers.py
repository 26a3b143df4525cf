# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""What the critic takes from transformers, checked against the installed version: which architectures
`AutoModelForTokenClassification` builds (the others get a `ValueHeadCritic`), and the DeepSpeed config object that
transformers' ZeRO-3 checks read, set and unset by its exported functions and read by `hf_deepspeed_config`, the one
place that reads a private name of transformers (as 5.25.0 names it)."""

import pytest
from transformers import AutoModelForTokenClassification, CodeGenConfig, GPT2Config, LlamaConfig
from transformers.integrations import is_deepspeed_zero3_enabled, set_hf_deepspeed_config, unset_hf_deepspeed_config

from trl_srppo.method.critics.model import _outside_zero3_init, has_token_classification, hf_deepspeed_config


def test_has_token_classification_says_what_transformers_builds():
    small = {"vocab_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2}
    for config in (
        GPT2Config(n_embd=8, n_layer=1, n_head=2, vocab_size=32),
        LlamaConfig(hidden_size=8, intermediate_size=16, **small),
    ):
        assert has_token_classification(config)
        assert AutoModelForTokenClassification.from_config(config).config.num_labels == 2
    config = CodeGenConfig(vocab_size=32, n_embd=8, n_layer=1, n_head=2, rotary_dim=2)
    assert not has_token_classification(config)
    with pytest.raises(ValueError):
        AutoModelForTokenClassification.from_config(config)


class _Zero3:
    # What transformers' checks ask of the object `set_hf_deepspeed_config` takes.
    config = {"zero_optimization": {"stage": 3}}

    def is_zero3(self) -> bool:
        return True


def test_the_deepspeed_config_object_is_read_back_and_left_out_of_the_critic_s_build():
    unset_hf_deepspeed_config()
    try:
        assert hf_deepspeed_config() is None and not is_deepspeed_zero3_enabled()
        with _outside_zero3_init():  # nothing set: nothing restored
            assert hf_deepspeed_config() is None
        assert hf_deepspeed_config() is None
        zero3 = _Zero3()
        set_hf_deepspeed_config(zero3)
        assert hf_deepspeed_config() is zero3 and is_deepspeed_zero3_enabled()
        with _outside_zero3_init():
            assert hf_deepspeed_config() is None and not is_deepspeed_zero3_enabled()
        assert hf_deepspeed_config() is zero3 and is_deepspeed_zero3_enabled()
        del zero3  # a weak reference: gone with its object
        assert hf_deepspeed_config() is None and not is_deepspeed_zero3_enabled()
    finally:
        unset_hf_deepspeed_config()

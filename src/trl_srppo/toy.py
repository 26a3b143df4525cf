# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""A tiny verifiable task, tokenizer and model that train on a CPU in seconds, for tests and `make demo`.

The task, "repeat the last digit": a prompt is a few digits (for example `3 8 1`) and the completion is correct when
its first token is the prompt's last digit. A random tiny model succeeds about once in 12 tries, so the reward starts
low but not at zero, and the held-out prompts (digit strings never seen in training) test whether the policy learned
the rule rather than the prompts.

Nothing here is downloaded: the tokenizer is built with the `tokenizers` library and the model from a `Qwen3Config`.
"""

import random

from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

SPECIAL_TOKENS = ["<pad>", "<eos>"]
WORDS = [str(d) for d in range(10)]  # total vocabulary: 12 tokens


def build_tokenizer() -> PreTrainedTokenizerFast:
    """A word-level tokenizer over the digits, `<pad>` and `<eos>`; words are separated by spaces."""
    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS + WORDS)}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="<pad>", eos_token="<eos>")


def build_model(tokenizer: PreTrainedTokenizerFast, seed: int = 0, hidden_size: int = 32, num_layers: int = 2):
    """A randomly initialised two-layer Qwen3 causal LM sized for the toy vocabulary."""
    import torch

    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=hidden_size // 4,
        max_position_embeddings=64,
        tie_word_embeddings=False,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    model = Qwen3ForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


def make_dataset(
    num_prompts: int, num_digits: int = 3, seed: int = 0, exclude: set[str] | None = None, distinct: bool = True
) -> Dataset:
    """`num_prompts` prompts (`distinct` ones unless told otherwise) and their gold answers, drawn from `seed`."""
    rng = random.Random(seed)
    exclude = exclude or set()
    seen, rows = set(), []
    while len(rows) < num_prompts:
        digits = [str(rng.randrange(10)) for _ in range(num_digits)]
        prompt = " ".join(digits)
        if (distinct and prompt in seen) or prompt in exclude:
            continue
        seen.add(prompt)
        rows.append({"prompt": prompt, "answer": digits[-1]})
    return Dataset.from_list(rows)


def last_digit_reward(completions, answer, **kwargs) -> list[float]:
    """1.0 when the first word of the completion is the gold digit, else 0.0 (also for an empty completion)."""
    rewards = []
    for completion, gold in zip(completions, answer, strict=True):
        words = completion.split()
        rewards.append(1.0 if words and words[0] == gold else 0.0)
    return rewards

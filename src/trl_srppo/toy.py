# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""A tiny verifiable task, tokenizer and model that train on a CPU in seconds, for tests and `make demo`.

The task, "repeat the last digit": a prompt is a few digits (for example `3 8 1`) and the completion is correct when
its first token is the prompt's last digit. A random tiny model succeeds about once in 12 tries, so the reward starts
low but not at zero, and the held-out prompts (digit strings never seen in training) test whether the policy learned
the rule rather than the prompts.

Nothing here is downloaded: the tokenizer is built with the `tokenizers` library and the model from a `Qwen3Config`.
`python -m trl_srppo.toy outputs/toy` saves the model with its tokenizer to `outputs/toy/model` and the training
prompts to `outputs/toy/train.jsonl`, so the CPU recipe (`recipes/cpu/srppo_toy.yaml`) loads them through the same
code as a Hub model and dataset (the task is registered as `toy` in `trl_srppo.tasks`, its verifier as `last_digit`).
"""

import argparse
import json
import os
import random
import sys

from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

from .rewards.last_digit import last_digit_reward  # noqa: F401  (the toy task's verifier, importable from here)

SPECIAL_TOKENS = ["<pad>", "<eos>"]
WORDS = [str(d) for d in range(10)]  # total vocabulary: 12 tokens
# Conversational prompts (as `trl_srppo.data` builds them) render as their bare text: the toy model has no roles.
CHAT_TEMPLATE = "{% for message in messages %}{{ message['content'] }}{% endfor %}"


def build_tokenizer() -> PreTrainedTokenizerFast:
    """A word-level tokenizer over the digits, `<pad>` and `<eos>`; words are separated by spaces."""
    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS + WORDS)}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    wrapped = PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="<pad>", eos_token="<eos>")
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped


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


def save_toy(output_dir: str, num_prompts: int = 4800, seed: int = 0) -> tuple[str, str]:
    """Save the toy model and tokenizer to `<output_dir>/model` (safetensors) and `num_prompts` training prompts (with
    repeats, as a training stream has) to `<output_dir>/train.jsonl`, in the `toy` task's fields (`digits`, `answer`).
    Returns the two paths."""
    model_dir, data_file = os.path.join(output_dir, "model"), os.path.join(output_dir, "train.jsonl")
    tokenizer = build_tokenizer()
    build_model(tokenizer, seed=seed).save_pretrained(model_dir, safe_serialization=True)
    tokenizer.save_pretrained(model_dir)
    with open(data_file, "w", encoding="utf-8") as f:
        for row in make_dataset(num_prompts, seed=seed, distinct=False):
            f.write(json.dumps({"digits": row["prompt"], "answer": row["answer"]}) + "\n")
    return model_dir, data_file


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trl_srppo.toy", description="Write the toy model and training prompts for the CPU recipe."
    )
    parser.add_argument("output_dir", help="folder to write model/ and train.jsonl into (e.g. outputs/toy)")
    parser.add_argument("--num_prompts", type=int, default=4800, help="training prompts to write")
    parser.add_argument("--seed", type=int, default=0, help="seed of the model's weights and of the prompts")
    args = parser.parse_args(argv)
    model_dir, data_file = save_toy(args.output_dir, args.num_prompts, args.seed)
    print(f"model: {model_dir}\ndata: {data_file}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

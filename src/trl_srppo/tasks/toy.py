# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The CPU toy family: prompts of the `chain` task, a word-level tokenizer and a tiny Qwen3, nothing downloaded.

The `chain` task (registered in `trl_srppo.tasks.registry`, verifier `chain` in `trl_srppo.rewards.chain`): a prompt is
a start digit followed by `n` steps, each an operator and a digit, then `=`; the completion is the running value after
every step:

    prompt      7 max 5 min 3 max 9 =          (the default operators: running max / min)
    completion  7 3 9 <eos>

    prompt      7 + 5 * 3 - 9 =                (modular arithmetic, `+ - *` mod 10)
    completion  2 6 7 <eos>

The answer is `n` tokens, so it spans several tokens and an early slip spoils every later one (token-level credit
matters). The verifier gives 1.0 only when the completion is exactly the chain of running values. The number of steps
`n` sets the difficulty: a policy that gets each step right with probability `p` solves the prompt with probability
about `p ** n`.

This module holds the family's CPU pieces, used by the tests, the CPU recipe and the benchmarks (`benchmarks/`, which
add a warm-started base model and the train / validation / test splits of [`make_splits`]):

- [`make_split`] / [`make_splits`]: rows drawn deterministically from a seed ([`TaskSpec`] sets their shape);
- [`build_tokenizer`]: a word-level tokenizer over the 18 words of the task, with a chat template that renders a
  conversation as its bare text (the model has no roles);
- [`build_model`]: a randomly initialised two-layer Qwen3 sized for that vocabulary.

`python -m trl_srppo.tasks.toy outputs/toy` saves the model with its tokenizer to `outputs/toy/model` (safetensors) and
training rows to `outputs/toy/train.jsonl` (fields `chain`, `answer`), so the CPU recipe
(`recipes/cpu/srppo_toy.yaml`, `task: chain`) loads them through the same code as a Hub model and dataset.
"""

import argparse
import json
import os
import random
import sys
from dataclasses import dataclass

from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

from ..rewards.chain import OPERATORS, chain_reward, solve
from .registry import get_task

__all__ = [
    "CHAT_TEMPLATE",
    "OPERATORS",
    "SPECIAL_TOKENS",
    "TOY_SPEC",
    "WORDS",
    "TaskSpec",
    "build_model",
    "build_tokenizer",
    "chain_reward",
    "make_dataset",
    "make_split",
    "make_splits",
    "num_steps",
    "random_prompt",
    "save_toy",
    "solve",
]

CHAIN = get_task("chain")
SPECIAL_TOKENS = ("<pad>", "<eos>")
# The vocabulary, in id order after the special tokens (18 tokens). Changing the order changes the ids, and with them
# the benchmark's cached base model and its results.
WORDS = tuple(str(d) for d in range(10)) + OPERATORS + ("=",)
# Conversational prompts (as `trl_srppo.tasks.data` builds them) render as their bare text: the toy model has no roles.
CHAT_TEMPLATE = "{% for message in messages %}{{ message['content'] }}{% endfor %}"


@dataclass(frozen=True)
class TaskSpec:
    """The shape of the chain prompts.

    Args:
        min_steps (`int`): fewest steps in a prompt (easiest prompts).
        max_steps (`int`): most steps in a prompt (hardest prompts).
        operators (`tuple[str, ...]`): the operators prompts draw from (a subset of `OPERATORS`). The default,
            running max / min, is one a two-layer model learns partly in a short warm start; the modular `+ - *`
            chains need thousands of supervised steps before a tiny model learns them at all, so they are kept for
            other uses.
    """

    min_steps: int = 1
    max_steps: int = 6
    operators: tuple[str, ...] = ("max", "min")

    def __post_init__(self):
        if not 1 <= self.min_steps <= self.max_steps:
            raise ValueError(f"TaskSpec needs 1 <= min_steps <= max_steps, got {self.min_steps} and {self.max_steps}")
        unknown = [op for op in self.operators if op not in OPERATORS]
        if not self.operators or unknown:
            raise ValueError(f"TaskSpec.operators must be a non-empty subset of {OPERATORS}, got {self.operators}")

    @property
    def max_completion_tokens(self) -> int:
        """Answer tokens of the longest chain plus the end-of-sequence token."""
        return self.max_steps + 1


# The chains of the tests, the CPU recipe and `python -m trl_srppo.tasks.toy`: one or two running max / min steps, so a
# completion is at most three tokens (two values and `<eos>`) and a random tiny model is right now and then.
TOY_SPEC = TaskSpec(min_steps=1, max_steps=2)


def num_steps(prompt: str) -> int:
    """Number of steps of a chain prompt."""
    return (len(prompt.split()) - 2) // 2


def random_prompt(rng: random.Random, steps: int, operators: tuple[str, ...] = OPERATORS) -> str:
    """A prompt with `steps` steps drawn from `rng`."""
    words = [str(rng.randrange(10))]
    for _ in range(steps):
        words += [rng.choice(operators), str(rng.randrange(10))]
    return " ".join(words + ["="])


def make_split(
    num_prompts: int, spec: TaskSpec, seed: int, exclude: set[str] | frozenset = frozenset(), distinct: bool = True
) -> list[dict]:
    """`num_prompts` prompts (`distinct` ones unless told otherwise), step counts spread evenly over `spec`, none of
    them in `exclude`.

    Returns rows `{"prompt", "answer", "steps"}`; the same arguments always give the same rows.
    """
    rng = random.Random(seed)
    levels = list(range(spec.min_steps, spec.max_steps + 1))
    seen, rows = set(exclude), []
    attempts = 0
    while len(rows) < num_prompts:
        attempts += 1
        if attempts > 1000 * num_prompts + 10_000:
            raise ValueError(f"cannot draw {num_prompts} distinct prompts from {spec} outside the excluded ones")
        steps = levels[len(rows) % len(levels)]
        prompt = random_prompt(rng, steps, spec.operators)
        if prompt in seen:
            continue
        if distinct:
            seen.add(prompt)
        prepared = CHAIN.prepare({"chain": prompt, "answer": solve(prompt)})
        rows.append({"prompt": CHAIN.render(prepared), "answer": prepared["answer"], "steps": steps})
    rng.shuffle(rows)
    return rows


def make_splits(spec: TaskSpec, seed: int, num_train: int, num_val: int, num_test: int) -> dict[str, list[dict]]:
    """Disjoint `train`, `val` and `test` prompt sets from one seed (test first, so it never depends on the others).

    Held-out prompts are distinct; training prompts may repeat (the short chains have only a few hundred prompts).
    """
    test = make_split(num_test, spec, seed=seed * 3 + 1)
    val = make_split(num_val, spec, seed=seed * 3 + 2, exclude={r["prompt"] for r in test})
    held_out = {r["prompt"] for r in test} | {r["prompt"] for r in val}
    train = make_split(num_train, spec, seed=seed * 3 + 3, exclude=held_out, distinct=False)
    return {"train": train, "val": val, "test": test}


def make_dataset(num_prompts: int, spec: TaskSpec = TOY_SPEC, seed: int = 0, distinct: bool = True):
    """[`make_split`] as a `datasets.Dataset` with the columns `prompt`, `answer` and `steps` (what a trainer reads
    with the verifier `chain_reward`)."""
    from datasets import Dataset

    return Dataset.from_list(make_split(num_prompts, spec, seed=seed, distinct=distinct))


def build_tokenizer() -> PreTrainedTokenizerFast:
    """Word-level tokenizer over digits, operators, `=`, `<pad>` and `<eos>` (18 tokens), split on spaces, padding on
    the left, with a chat template that renders a conversation as its bare text."""
    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS + WORDS)}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token="<pad>", eos_token="<eos>", padding_side="left"
    )
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped


def build_model(
    tokenizer: PreTrainedTokenizerFast, seed: int = 0, hidden_size: int = 32, num_layers: int = 2
) -> Qwen3ForCausalLM:
    """A randomly initialised Qwen3 causal LM (two layers, 32 wide by default) sized for the tokenizer's vocabulary;
    the same `seed` gives the same weights."""
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


def save_toy(
    output_dir: str, num_prompts: int = 4800, seed: int = 0, spec: TaskSpec = TOY_SPEC, hidden_size: int = 32
) -> tuple[str, str]:
    """Save the toy model (`hidden_size` wide) and tokenizer to `<output_dir>/model` (safetensors) and `num_prompts`
    training rows of `spec` (with repeats, as a training stream has) to `<output_dir>/train.jsonl`, in the `chain`
    task's fields (`chain`, `answer`). Returns the two paths."""
    model_dir, data_file = os.path.join(output_dir, "model"), os.path.join(output_dir, "train.jsonl")
    tokenizer = build_tokenizer()
    build_model(tokenizer, seed=seed, hidden_size=hidden_size).save_pretrained(model_dir, safe_serialization=True)
    tokenizer.save_pretrained(model_dir)
    with open(data_file, "w", encoding="utf-8") as f:
        for row in make_split(num_prompts, spec, seed=seed, distinct=False):
            f.write(json.dumps({"chain": row["prompt"], "answer": row["answer"]}) + "\n")
    return model_dir, data_file


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trl_srppo.tasks.toy",
        description="Write the toy model and the chain task's training rows for the CPU recipe.",
    )
    parser.add_argument("output_dir", help="folder to write model/ and train.jsonl into (e.g. outputs/toy)")
    parser.add_argument("--num_prompts", type=int, default=4800, help="training rows to write")
    parser.add_argument("--seed", type=int, default=0, help="seed of the model's weights and of the rows")
    parser.add_argument("--min_steps", type=int, default=TOY_SPEC.min_steps, help="fewest steps in a chain")
    parser.add_argument("--max_steps", type=int, default=TOY_SPEC.max_steps, help="most steps in a chain")
    parser.add_argument(
        "--hidden_size",
        type=int,
        default=32,
        help="model width, a multiple of 4 (4 heads of hidden_size / 4); 128 gives heads of 32, the smallest vLLM's "
        "CPU build runs (`--use_vllm true`)",
    )
    args = parser.parse_args(argv)
    if args.hidden_size < 4 or args.hidden_size % 4:
        parser.error(f"--hidden_size must be a positive multiple of 4 (4 attention heads), got {args.hidden_size}")
    spec = TaskSpec(min_steps=args.min_steps, max_steps=args.max_steps)
    model_dir, data_file = save_toy(args.output_dir, args.num_prompts, args.seed, spec, args.hidden_size)
    print(f"model: {model_dir}\ndata: {data_file}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

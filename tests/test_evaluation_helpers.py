# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Shared helpers of the evaluation tests: a tiny tokenizer and model built offline, a scripted engine, and gold
completions in each verifier's format. (No tests here.)"""

from __future__ import annotations

import itertools
import json
from fractions import Fraction
from pathlib import Path

from helpers import FIXTURES_DIR

# The repository's problem-set fixtures: the public sets' file names and fields, a few rows each.
FIXTURES = Path(FIXTURES_DIR)

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n{% endif %}{% endif %}"
)

GPQA_ROWS = [
    {
        "Record ID": "rec-1",
        "Question": "Which particle carries the electromagnetic force?",
        "Correct Answer": "The photon",
        "Incorrect Answer 1": "The gluon",
        "Incorrect Answer 2": "The W boson",
        "Incorrect Answer 3": "The graviton",
    },
    {
        "Record ID": "rec-2",
        "Question": "What is the oxidation state of oxygen in H2O2?",
        "Correct Answer": "-1",
        "Incorrect Answer 1": "-2",
        "Incorrect Answer 2": "0",
        "Incorrect Answer 3": "+1",
    },
]


def write_gpqa_file(folder: Path) -> Path:
    path = folder / "gpqa_diamond.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in GPQA_ROWS), encoding="utf-8")
    return path


def make_tokenizer():
    """A byte-level BPE tokenizer trained on a few lines of text, with chat special tokens and a chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<|pad|>", "<|im_start|>", "<|im_end|>"]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    corpus = ["Please reason step by step, and put your final answer within \\boxed{}.", "knight knave answer"] * 5
    tokenizer.train_from_iterator(corpus, trainer=trainer)
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token="<|pad|>", eos_token="<|im_end|>", bos_token=None
    )
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped


def make_model(tokenizer, seed: int = 0):
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=4096,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
        tie_word_embeddings=True,
    )
    model = Qwen3ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model.eval()


def save_tiny_model(folder: Path) -> Path:
    tokenizer = make_tokenizer()
    model = make_model(tokenizer)
    model.save_pretrained(folder)  # safetensors
    tokenizer.save_pretrained(folder)
    return folder


# ------------------------------------------------------------------------------------------------ gold completions


def solve_countdown(nums: list[int], target: int) -> str | None:
    """Brute-force an expression using every number once (test helper, exact arithmetic)."""

    def search(items):
        if len(items) == 1:
            value, text = items[0]
            return text if value == target else None
        for i, j in itertools.permutations(range(len(items)), 2):
            (a, ta), (b, tb) = items[i], items[j]
            rest = [items[m] for m in range(len(items)) if m not in (i, j)]
            candidates = [(a + b, f"({ta} + {tb})"), (a - b, f"({ta} - {tb})"), (a * b, f"({ta} * {tb})")]
            if b != 0:
                candidates.append((a / b, f"({ta} / {tb})"))
            for value, text in candidates:
                found = search(rest + [(value, text)])
                if found:
                    return found
        return None

    return search([(Fraction(x), str(x)) for x in nums])


def gold_completion(verifier: str, columns: dict) -> str:
    """A correct completion for the verifier, in the format asked for by the benchmark's prompt."""
    if verifier == "math":
        return f"Working... so the final answer is \\boxed{{{columns['answer']}}}."
    if verifier == "countdown":
        expression = solve_countdown(columns["nums"], columns["target"])
        assert expression is not None, columns
        return f"Let me try combinations.\n<answer> {expression} </answer>"
    if verifier == "knights_knaves":
        lines = [
            f"({i}) {name} is a {'knight' if knight else 'knave'}"
            for i, (name, knight) in enumerate(zip(columns["names"], columns["solution"]), 1)
        ]
        return "Reasoning about each statement.\n<answer>\n" + "\n".join(lines) + "\n</answer>"
    if verifier == "multiple_choice":
        return f"After elimination, the answer is \\boxed{{{columns['answer']}}}."
    if verifier == "number":
        return f"Adding up, the answer is {columns['answer']}."
    raise ValueError(verifier)


def wrong_completion(verifier: str, columns: dict) -> str:
    """An incorrect completion in the right format."""
    if verifier == "math":
        return "Working... so the final answer is \\boxed{-123456789}."
    if verifier == "countdown":
        nums = columns["nums"]
        expression = " + ".join(str(x) for x in nums)
        if sum(nums) == columns["target"]:
            expression = " * ".join(str(x) for x in nums)
        return f"<answer> {expression} </answer>"
    if verifier == "knights_knaves":
        lines = [
            f"({i}) {name} is a {'knight' if (knight if i > 1 else not knight) else 'knave'}"
            for i, (name, knight) in enumerate(zip(columns["names"], columns["solution"]), 1)
        ]
        return "<answer>\n" + "\n".join(lines) + "\n</answer>"
    if verifier == "multiple_choice":
        wrong = next(letter for letter in "ABCD" if letter != columns["answer"])
        return f"The answer is \\boxed{{{wrong}}}."
    if verifier == "number":
        return "Adding up, the answer is -123456789."
    raise ValueError(verifier)


class ScriptedEngine:
    """A generation engine that returns fixed completions: for problem i of a benchmark, the first `correct[i]`
    samples are gold completions and the others wrong ones. Counts its calls."""

    name = "scripted"

    def __init__(self, tokenizer, benchmark, problems, correct: dict[str, int]):
        self.tokenizer = tokenizer
        self.benchmark = benchmark
        self.problems = problems
        self.correct = correct
        self.calls = 0
        self.samples_drawn = {p.id: 0 for p in problems}

    def _problem_for(self, ids):
        text = self.tokenizer.decode(ids)
        matches = [p for p in self.problems if p.prompt in text]
        assert len(matches) == 1, text
        return matches[0]

    def generate(self, prompt_ids, n, sampling, seed=None):
        from trl_srppo.evaluation.engines import Completion

        self.calls += 1
        out = []
        for ids in prompt_ids:
            problem = self._problem_for(ids)
            completions = []
            for _ in range(n):
                index = self.samples_drawn[problem.id]
                self.samples_drawn[problem.id] += 1
                good = index < self.correct[problem.id]
                maker = gold_completion if good else wrong_completion
                text = maker(self.benchmark.verifier, problem.columns)
                completions.append(Completion(text=text, num_tokens=len(text) // 4, finish_reason="stop"))
            out.append(completions)
        return out

    def close(self):
        pass

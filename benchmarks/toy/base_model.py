# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The benchmark's base model: a tiny Qwen3 given a short supervised warm start, built once and cached.

Like a pretrained model before RL, the warm-started model solves some prompts often, some sometimes and some rarely:
the supervised loop stops early (a few hundred steps), so short chains are mostly right and long chains mostly wrong.
Nothing is downloaded: the tokenizer and the untrained network are the package's toy family (`trl_srppo.tasks.toy`: a
word-level `tokenizers` model and a `Qwen3Config`). The cache lives under `.cache/bench/` (git-ignored), in
safetensors, keyed by a hash of every setting that shapes the model, so changing a setting builds a new one.
"""

import hashlib
import json
import os
import random
from dataclasses import asdict, dataclass

import torch
from transformers import PreTrainedTokenizerFast, Qwen3ForCausalLM

from trl_srppo.tasks.toy import build_model, build_tokenizer

from ..common.runs import REPO_ROOT
from .tasks import TaskSpec, make_split

DEFAULT_CACHE = os.path.join(REPO_ROOT, ".cache", "bench")

BUILD_VERSION = 1  # bump when the warm-start code changes in a way the settings below do not capture


@dataclass(frozen=True)
class WarmStartSpec:
    """Size of the network and length of its supervised warm start.

    Args:
        hidden_size (`int`): width of the transformer.
        num_layers (`int`): transformer blocks.
        sft_steps (`int`): optimizer steps of the supervised warm start.
        sft_batch_size (`int`): demonstrations per step.
        sft_learning_rate (`float`): AdamW learning rate (constant).
        num_demos (`int`): distinct demonstrations, drawn from the training split's distribution, never held out.
        seed (`int`): seed of the initial weights, the demonstrations and their order.
    """

    hidden_size: int = 32
    num_layers: int = 2
    sft_steps: int = 150
    sft_batch_size: int = 64
    sft_learning_rate: float = 3e-3
    num_demos: int = 4000
    seed: int = 0


def build_untrained_model(tokenizer: PreTrainedTokenizerFast, spec: WarmStartSpec) -> Qwen3ForCausalLM:
    """A randomly initialised Qwen3 causal LM of the given size (seeded): the package's tiny test model."""
    return build_model(tokenizer, seed=spec.seed, hidden_size=spec.hidden_size, num_layers=spec.num_layers)


def demonstration_batch(tokenizer, rows: list[dict]) -> dict[str, torch.Tensor]:
    """Left-padded `prompt completion <eos>` sequences with labels on the completion tokens only (-100 elsewhere)."""
    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    encoded = []
    for row in rows:
        prompt = tokenizer(row["prompt"], add_special_tokens=False)["input_ids"]
        answer = tokenizer(row["answer"], add_special_tokens=False)["input_ids"] + [eos]
        encoded.append((prompt, answer))
    width = max(len(p) + len(a) for p, a in encoded)
    input_ids = torch.full((len(rows), width), pad, dtype=torch.long)
    attention_mask = torch.zeros(len(rows), width, dtype=torch.long)
    labels = torch.full((len(rows), width), -100, dtype=torch.long)
    for i, (prompt, answer) in enumerate(encoded):
        start = width - len(prompt) - len(answer)
        input_ids[i, start:] = torch.tensor(prompt + answer)
        attention_mask[i, start:] = 1
        labels[i, width - len(answer) :] = torch.tensor(answer)
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


def warm_start(model, tokenizer, demos: list[dict], spec: WarmStartSpec) -> list[float]:
    """The supervised warm start: a plain PyTorch loop of `spec.sft_steps` AdamW steps on the demonstrations.

    Returns the loss of every step.
    """
    rng = random.Random(spec.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.sft_learning_rate, weight_decay=0.0)
    model.train()
    losses, order = [], []
    for _ in range(spec.sft_steps):
        if len(order) < spec.sft_batch_size:
            order = list(range(len(demos)))
            rng.shuffle(order)
        batch_rows = [demos[order.pop()] for _ in range(spec.sft_batch_size)]
        batch = demonstration_batch(tokenizer, batch_rows)
        loss = model(**batch, use_cache=False).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    model.eval()
    return losses


def cache_key(task: TaskSpec, spec: WarmStartSpec, held_out: list[str]) -> str:
    """A short hash of everything that shapes the base model (settings, held-out prompts, build version)."""
    payload = json.dumps(
        {"task": asdict(task), "spec": asdict(spec), "held_out": sorted(held_out), "version": BUILD_VERSION},
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:12]


def load_or_build_base_model(
    task: TaskSpec, spec: WarmStartSpec, held_out: list[str], cache_dir: str = DEFAULT_CACHE, log=print
) -> tuple[str, Qwen3ForCausalLM, PreTrainedTokenizerFast]:
    """The warm-started base model: loaded from `cache_dir` when built before, otherwise built and saved there.

    Args:
        task ([`TaskSpec`]): the task family.
        spec ([`WarmStartSpec`]): model size and warm start.
        held_out (`list[str]`): prompts the demonstrations must avoid (validation and test prompts).
        cache_dir (`str`): cache root; the model goes to `<cache_dir>/base-<key>/` (safetensors).
        log (`callable`): progress messages.

    Returns:
        `(path, model, tokenizer)`; the model is in eval mode.
    """
    tokenizer = build_tokenizer()
    path = os.path.join(cache_dir, f"base-{cache_key(task, spec, held_out)}")
    if os.path.isfile(os.path.join(path, "model.safetensors")):
        model = Qwen3ForCausalLM.from_pretrained(path, use_safetensors=True)
        model.eval()
        return path, model, tokenizer
    log(f"building the warm-started base model ({spec.sft_steps} supervised steps) -> {path}")
    model = build_untrained_model(tokenizer, spec)
    demos = make_split(spec.num_demos, task, seed=10_000 + spec.seed, exclude=set(held_out), distinct=False)
    losses = warm_start(model, tokenizer, demos, spec)
    tmp = f"{path}.tmp{os.getpid()}"
    model.save_pretrained(tmp, safe_serialization=True)
    with open(os.path.join(tmp, "warm_start.json"), "w") as f:
        json.dump({"task": asdict(task), "spec": asdict(spec), "sft_losses": losses}, f)
    os.makedirs(cache_dir, exist_ok=True)
    if os.path.isdir(path):  # another process finished first; keep its copy
        import shutil

        shutil.rmtree(tmp)
    else:
        os.replace(tmp, path)
    model = Qwen3ForCausalLM.from_pretrained(path, use_safetensors=True)
    model.eval()
    return path, model, tokenizer

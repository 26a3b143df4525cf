# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""One run of a benchmark, whatever its model: its spec (`RunSpec`: method, schedule, learning rate, seed, sizes and
config options; its `name` is the run's file name in every cache), the `GRPOConfig` / `SRPPOConfig` fields it sets
(`run_settings`, `run_options`) and the reward wrapper that counts generated tokens (`TokenCounter`).

- Single-rollout methods (`sr-ppo`, `sr-ppo-pass1`, `ppo`, `td`): `SRPPOTrainer`, one rollout per prompt,
  `prompts_per_update` prompts per policy update.
- `grpo`: TRL's own `GRPOTrainer`, 4 rollouts per prompt and half as many prompts per update (the paper's matching).
- `a2po`: TRL's `trl.experimental.a2po.A2POTrainer` (A*-PO), one rollout per prompt, `prompts_per_update` prompts
  per update, after its offline stage (samples of every training prompt from the starting policy).
- Schedule `on`: one update per generated batch. `off`: 4 updates per generated batch (`steps_per_generation=4`:
  the generated batch is split into 4 mini-batches of one update each).
"""

import hashlib
import json
from dataclasses import dataclass
from typing import Any

SINGLE_ROLLOUT_METHODS = ("sr-ppo", "sr-ppo-pass1", "ppo", "td")
METHODS = SINGLE_ROLLOUT_METHODS + ("grpo",)  # the toy grid's; the SmolLM2 harness also trains "a2po"
GRPO_ROLLOUTS = 4
LORA_RANK_OPTION = "lora_rank"  # a run option that is not a config field: the rank of a LoRA policy
OFF_POLICY_UPDATES_PER_BATCH = 4


@dataclass(frozen=True)
class RunSpec:
    """Everything that defines one run.

    Args:
        method (`str`): one of `METHODS`, or `"a2po"` (the SmolLM2 harness only).
        schedule (`str`): `"on"` (1 update per generated batch) or `"off"` (4).
        learning_rate (`float`): policy learning rate (the searched hyperparameter).
        seed (`int`): seed of the run (sampling, data order).
        updates (`int`): policy updates.
        prompts_per_update (`int`): prompts per update of the single-rollout methods; GRPO takes half as many, with
            4 rollouts each.
        eval_every (`int`): updates between held-out evaluations of the learning curve.
        eval_samples (`int`): samples per held-out prompt.
        critic_learning_rate (`float`, *optional*): the critic's learning rate for every critic method; `None` for
            the trainer's default (a multiple of the policy's).
        options (`tuple[tuple[str, Any], ...]`): config fields set for this run (over the defaults and the common
            settings), as `(name, value)` pairs; empty for the trainer's defaults. `(LORA_RANK_OPTION, r)` trains a
            LoRA policy of rank `r` instead of the whole model.
    """

    method: str
    schedule: str
    learning_rate: float
    seed: int
    updates: int
    prompts_per_update: int
    eval_every: int
    eval_samples: int = 8
    critic_learning_rate: float | None = None
    options: tuple[tuple[str, Any], ...] = ()

    @property
    def name(self) -> str:
        tag = ""
        if self.options:
            tag = "_" + hashlib.sha256(json.dumps(sorted(self.options)).encode()).hexdigest()[:6]
        return f"{self.method}{tag}_{self.schedule}_lr{self.learning_rate:g}_s{self.seed}"

    @property
    def updates_per_batch(self) -> int:
        return OFF_POLICY_UPDATES_PER_BATCH if self.schedule == "off" else 1

    @property
    def rollouts_per_prompt(self) -> int:
        return GRPO_ROLLOUTS if self.method == "grpo" else 1

    @property
    def completions_per_update(self) -> int:
        prompts = self.prompts_per_update // 2 if self.method == "grpo" else self.prompts_per_update
        return prompts * self.rollouts_per_prompt


def run_settings(spec: RunSpec, output_dir: str, max_completion_length: int) -> dict:
    """The `GRPOConfig` / `SRPPOConfig` fields of a benchmark run on the CPU: `spec`'s batch, schedule and seed, no
    checkpoint, no progress bar, a log line every update, sampling at temperature 1."""
    return {
        "output_dir": output_dir,
        "report_to": [],
        "bf16": False,
        "use_cpu": True,
        "save_strategy": "no",
        "disable_tqdm": True,
        "logging_steps": 1,
        "per_device_train_batch_size": spec.completions_per_update,
        "steps_per_generation": spec.updates_per_batch,
        "num_generations": spec.rollouts_per_prompt,
        "max_completion_length": max_completion_length,
        "max_steps": spec.updates,
        "learning_rate": spec.learning_rate,
        "lr_scheduler_type": "constant",
        "seed": spec.seed,
        "data_seed": spec.seed,
        "temperature": 1.0,
        "dataloader_num_workers": 0,
    }


def run_options(spec: RunSpec) -> tuple[dict, Any]:
    """The config fields `spec.options` sets, and the `peft_config` of the run: `None`, or with
    `(LORA_RANK_OPTION, r)` a LoRA policy of rank `r` on every linear layer, alpha = 2 x rank."""
    options = dict(spec.options)
    lora_rank = options.pop(LORA_RANK_OPTION, None)
    if lora_rank is None:
        return options, None
    from peft import LoraConfig

    return options, LoraConfig(r=lora_rank, lora_alpha=2 * lora_rank, target_modules="all-linear")


class TokenCounter:
    """Wraps the verifier to count generated completion tokens (the reward function sees every completion once).

    TRL's GRPO and SR-PPO pass each completion's token ids, end-of-sequence token included; a trainer that passes
    none (A*-PO) has its completions' text tokenized with `tokenizer`, which leaves out that end token (at most one
    token per completion fewer)."""

    def __init__(self, reward_func, tokenizer=None):
        self.reward_func = reward_func
        self.tokenizer = tokenizer
        self.tokens = 0
        self.completions = 0
        self.__name__ = getattr(reward_func, "__name__", "reward")

    def __call__(self, completions, completion_ids=None, **kwargs):
        if completion_ids is not None:
            self.tokens += sum(len(ids) for ids in completion_ids)
        elif self.tokenizer is not None:
            self.tokens += sum(len(self.tokenizer(c, add_special_tokens=False)["input_ids"]) for c in completions)
        self.completions += len(completions)
        return self.reward_func(completions=completions, **kwargs)

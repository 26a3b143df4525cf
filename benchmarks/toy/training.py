# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""One training run of the grid: a method, a schedule, a learning rate and a seed, from the cached base model.

- Single-rollout methods (`sr-ppo`, `sr-ppo-pass1`, `ppo`, `td`): `SRPPOTrainer`, one rollout per prompt,
  `prompts_per_update` prompts per policy update.
- `grpo`: TRL's own `GRPOTrainer`, 4 rollouts per prompt and half as many prompts per update (the paper's matching).
- Schedule `on`: one update per generated batch. `off`: 4 updates per generated batch (`steps_per_generation=4`:
  the generated batch is split into 4 mini-batches of one update each).

During the run a callback evaluates held-out pass@k every `eval_every` updates (in a forked random stream, so the run
itself is unchanged) and keeps a copy of the policy and critic at the mid-training update for the analyses.
"""

import copy
import os
import time
import warnings
from dataclasses import asdict

import numpy as np
import torch
from datasets import Dataset
from transformers import TrainerCallback

from ..common.runspec import (
    LORA_RANK_OPTION,
    RunSpec,
    TokenCounter,
    run_options,
    run_settings,
)
from .mid_analysis import analyse_checkpoint
from .scoring import critic_calibration, evaluate, sample_rollouts, summarize


def detached_copy(model):
    """A fresh model of the same class and config holding a copy of `model`'s weights, in eval mode.

    `copy.deepcopy` is not enough: Accelerate replaces `model.forward` by a wrapper whose closure still points at the
    original model, so a deep copy would keep computing with the live (still training) weights.
    """
    fresh = type(model)(copy.deepcopy(model.config))
    fresh.load_state_dict({k: v.detach().clone() for k, v in model.state_dict().items()})
    return fresh.eval()


class CurveCallback(TrainerCallback):
    """Held-out evaluation every `eval_every` updates; a snapshot of policy and critic at the mid-training update."""

    def __init__(self, runner, spec: RunSpec, snapshot: bool = True):
        self.runner, self.spec = runner, spec
        self.curve = []
        self.eval_seconds = 0.0
        self.mid_step = spec.updates // 2 if snapshot else -1
        self.mid_snapshot = None

    def on_step_end(self, args, state, control, **kwargs):
        step = state.global_step
        if step == self.mid_step:
            trainer = self.runner.trainer
            critic = getattr(trainer, "critic", None) if self.runner.separate_critic else None
            self.mid_snapshot = {
                "step": step,
                "policy": detached_copy(trainer.accelerator.unwrap_model(trainer.model)),
                "critic": None if critic is None else detached_copy(trainer.accelerator.unwrap_model(critic)),
                "tokens": self.runner.counter.tokens,
            }
        if step % self.spec.eval_every == 0 or step == self.spec.updates:
            self.curve.append(self.runner.evaluate_point(step))
        return control


class Runner:
    """Builds the trainer of one run, trains it and collects its results."""

    def __init__(
        self, spec: RunSpec, base_path: str, tokenizer, splits: dict, task, output_dir: str, analyses: bool = True
    ):
        self.spec, self.base_path, self.tokenizer, self.splits, self.task = spec, base_path, tokenizer, splits, task
        self.output_dir = output_dir
        from .tasks import chain_reward

        self.counter = TokenCounter(chain_reward)
        self.trainer = None
        self.train_start = None  # perf_counter() when training starts (the curve points' training seconds)
        # No snapshot, no mid-training analyses; nor for a LoRA policy (the analyses take a whole model).
        self.callback = CurveCallback(self, spec, snapshot=analyses and not self.lora_policy)

    @property
    def lora_policy(self) -> bool:
        """Whether the run trains a LoRA adapter rather than the whole policy."""
        return LORA_RANK_OPTION in dict(self.spec.options)

    @property
    def separate_critic(self) -> bool:
        """Whether the run's critic is a model of its own (the analyses read its prefix values); GRPO has none."""
        return self.spec.method != "grpo" and dict(self.spec.options).get("critic_type", "separate") == "separate"

    def common_config(self) -> dict:
        settings = run_settings(self.spec, self.output_dir, self.task.max_completion_tokens)
        return {**settings, "gradient_checkpointing": False}

    def build(self):
        from transformers import AutoModelForCausalLM

        spec = self.spec
        model = AutoModelForCausalLM.from_pretrained(self.base_path, use_safetensors=True)
        train = Dataset.from_list([{"prompt": r["prompt"], "answer": r["answer"]} for r in self.splits["train"]])
        options, peft_config = run_options(spec)
        if spec.method == "grpo":
            from trl import GRPOConfig, GRPOTrainer

            config, trainer_class = GRPOConfig(**{**self.common_config(), **options}), GRPOTrainer
        else:
            from trl_srppo import SRPPOConfig, SRPPOTrainer

            settings = {**self.common_config(), "srppo_method": spec.method}
            if spec.critic_learning_rate is not None:
                settings["critic_learning_rate"] = spec.critic_learning_rate
            config = SRPPOConfig(**{**settings, **options})
            trainer_class = SRPPOTrainer
        self.trainer = trainer_class(
            model=model,
            reward_funcs=self.counter,
            args=config,
            train_dataset=train,
            processing_class=self.tokenizer,
            callbacks=[self.callback],
            peft_config=peft_config,
        )
        from transformers.trainer_callback import PrinterCallback

        self.trainer.remove_callback(PrinterCallback)  # the logs are kept in `state.log_history`, not printed
        return self.trainer

    def evaluate_point(self, step: int) -> dict:
        """Held-out pass@1 / pass@n on the test prompts at the current update (curve point), with the training
        seconds spent so far (as the run's `train_seconds`: evaluations not counted)."""
        start = time.perf_counter()
        train_seconds = None if self.train_start is None else start - self.train_start - self.callback.eval_seconds
        model = self.trainer.accelerator.unwrap_model(self.trainer.model)
        was_training = model.training
        result = evaluate(
            model,
            self.tokenizer,
            self.splits["test"],
            self.spec.eval_samples,
            seed=1000 + step,
            max_new_tokens=self.task.max_completion_tokens,
        )
        model.train(was_training)
        self.tokenizer.padding_side = "left"
        self.callback.eval_seconds += time.perf_counter() - start
        return {
            "update": step,
            "generated_tokens": self.counter.tokens,
            "completions": self.counter.completions,
            "train_seconds": train_seconds,
            **{k: v for k, v in result.items() if k.startswith("pass@")},
        }

    def train(self) -> dict:
        """Train and return the run's results (final held-out evaluation, curve, timing, logged metrics)."""
        warnings.filterwarnings("ignore")
        torch.manual_seed(self.spec.seed)
        self.build()
        self.train_start = start = time.perf_counter()
        self.trainer.train()
        train_seconds = time.perf_counter() - start - self.callback.eval_seconds
        model = self.trainer.accelerator.unwrap_model(self.trainer.model).eval()
        n, width = self.spec.eval_samples, self.task.max_completion_tokens
        final = {"val": evaluate(model, self.tokenizer, self.splits["val"], n, seed=7, max_new_tokens=width)}
        test_rollouts = sample_rollouts(model, self.tokenizer, self.splits["test"], n, seed=7, max_new_tokens=width)
        final["test"] = summarize(test_rollouts, self.splits["test"])
        critic = getattr(self.trainer, "critic", None) if self.separate_critic else None
        head = getattr(self.trainer.args, "critic_head", None)
        if critic is not None:
            critic = self.trainer.accelerator.unwrap_model(critic)
            final["test"]["calibration"] = critic_calibration(
                critic, test_rollouts, head, np.asarray(final["test"]["counts"])
            )
        mid = None
        gae_lambda = getattr(self.trainer.args, "gae_lambda", None)  # SR-PPO's presets; GRPO has none
        snapshot = self.callback.mid_snapshot
        if snapshot is not None:
            mid = analyse_checkpoint(
                snapshot["policy"],
                snapshot["critic"],
                head,
                self.tokenizer,
                self.splits["analysis"],
                width,
                seed=11,
                gae_lambda=1.0 if gae_lambda is None else gae_lambda,
            )
            mid.update({"update": snapshot["step"], "generated_tokens": snapshot["tokens"]})
            # Kept for the analyses that pair runs (the paper's NSR: a GRPO run's rollouts, an SR-PPO run's critic).
            snapshot["policy"].save_pretrained(os.path.join(self.output_dir, "mid", "policy"))
            if snapshot["critic"] is not None:
                snapshot["critic"].save_pretrained(os.path.join(self.output_dir, "mid", "critic"))
        logs = [
            {k: v for k, v in entry.items() if isinstance(v, (int, float))}
            for entry in self.trainer.state.log_history
            if "loss" in entry or "reward" in entry
        ]
        return {
            "spec": asdict(self.spec),
            "name": self.spec.name,
            "final": final,
            "mid": mid,
            "curve": self.callback.curve,
            "train_seconds": train_seconds,
            "eval_seconds": self.callback.eval_seconds,
            "generated_tokens": self.counter.tokens,
            "completions": self.counter.completions,
            "logs": logs,
        }

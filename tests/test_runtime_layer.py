# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The runtime as one layer (`trl_srppo.runtime.mixin`): `trainer: grpo` gets it from the same place as SR-PPO, and
the method alone (`SRPPOMethodTrainer`) trains on TRL's own runtime. Which hooks each layer overrides is checked from
the MRO in `tests/test_trl_hooks.py`."""

import os

import pytest
import torch
from helpers import cpu_config, small_digit_reward, toy_grpo_trainer

from trl_srppo.runtime.checkpoints import CHECKPOINT_COMPLETE
from trl_srppo.runtime.mixin import grpo_trainer_class, with_runtime


def text_reward(completions, **kwargs):
    return ["1" for _ in completions]  # a string where a number belongs


def test_grpo_on_the_runtime_checks_reward_outputs_as_srppo_does(toy, tmp_path):
    trainer = toy_grpo_trainer(
        toy,
        tmp_path / "out",
        reward_funcs=text_reward,
        trainer_class=grpo_trainer_class(),
        num_generations=2,
        max_steps=1,
    )
    with pytest.raises(TypeError, match="text_reward"):
        trainer.train()


def test_with_runtime_keeps_the_trainers_name_and_puts_the_runtime_first():
    from trl import GRPOTrainer

    from trl_srppo.runtime.mixin import RuntimeMixin

    grpo = with_runtime(GRPOTrainer)
    assert grpo.__name__ == "GRPOTrainer" and grpo.__mro__[1] is RuntimeMixin and issubclass(grpo, GRPOTrainer)


def test_the_method_alone_trains_and_saves_on_trls_runtime(toy, tmp_path):
    from trl_srppo.method.srppo_trainer import SRPPOMethodTrainer

    tokenizer, build_model, dataset = toy
    trainer = SRPPOMethodTrainer(
        model=build_model(),
        reward_funcs=small_digit_reward,
        args=cpu_config(tmp_path / "out", max_steps=2, save_steps=2, save_strategy="steps"),
        train_dataset=dataset,
        processing_class=tokenizer,
    )
    before = {name: p.detach().clone() for name, p in trainer.critic.named_parameters()}
    trainer.train()
    moved = any(not torch.equal(before[name], p) for name, p in trainer.critic.named_parameters())
    assert moved, "the critic did not learn"
    checkpoint = tmp_path / "out" / "checkpoint-2"
    assert (checkpoint / "critic").is_dir(), "the method saves its critic in the checkpoint"
    # TRL's runtime: no completeness marker (trl-srppo's runtime writes one), and rewards unguarded.
    assert not os.path.exists(checkpoint / CHECKPOINT_COMPLETE)
    assert trainer.reward_funcs[0] is small_digit_reward


def slow_reward(completions, **kwargs):
    import time

    time.sleep(5)
    return [1.0 for _ in completions]


def test_grpo_on_the_runtime_gets_the_reward_deadline(toy, tmp_path):
    # `trainer: grpo` runs under the same deadline as SR-PPO (`reward_timeout`, a field of the runtime's config).
    from trl_srppo.runtime.reward_deadline import RewardTimeoutError

    trainer = toy_grpo_trainer(
        toy,
        tmp_path / "out",
        reward_funcs=slow_reward,
        trainer_class=grpo_trainer_class(),
        num_generations=2,
        max_steps=1,
        reward_timeout=0.5,
    )
    with pytest.raises(RewardTimeoutError, match="slow_reward"):
        trainer.train()


def test_the_runtime_refuses_a_config_without_its_settings(toy, tmp_path):
    from helpers import cpu_fields
    from trl import GRPOConfig

    tokenizer, build_model, dataset = toy
    with pytest.raises(TypeError, match="GRPORuntimeConfig"):
        grpo_trainer_class()(
            model=build_model(),
            reward_funcs=small_digit_reward,
            args=GRPOConfig(**cpu_fields(tmp_path / "out", num_generations=2)),
            train_dataset=dataset,
            processing_class=tokenizer,
        )

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""A pipeline written against TRL's old `PPOTrainer` on `srppo_method="ppo"` (`trl_srppo.method.ppo_settings`): what
maps to what, what is refused and why, and such a pipeline's settings and models (a reward model, a value model)
trained for two steps."""

import pytest
import torch
from conftest import tiny_reward_model
from helpers import cpu_fields

from trl_srppo import SRPPOTrainer
from trl_srppo.method.ppo_settings import PPO_FIELDS, PPO_REFUSED, srppo_config_from_ppo

# The settings of a typical pipeline for TRL's old PPOTrainer (its defaults, where they mean the same here).
PPO_PIPELINE = {
    "cliprange": 0.2,
    "cliprange_value": 0.2,
    "gamma": 1.0,
    "lam": 0.95,
    "kl_coef": 0.05,
    "kl_estimator": "k3",
    "num_ppo_epochs": 2,
    "whiten_rewards": False,
    "response_length": 3,
    "temperature": 0.7,
}


def test_each_ppo_setting_lands_on_its_field(tmp_path):
    args = srppo_config_from_ppo(PPO_PIPELINE, **cpu_fields(tmp_path, max_completion_length=3))
    assert args.srppo_method == "ppo" and args.critic_head == "linear" and args.critic_loss_type == "mse"
    assert (args.epsilon, args.critic_cliprange_value, args.gae_lambda, args.beta) == (0.2, 0.2, 0.95, 0.05)
    assert (args.num_iterations, args.max_completion_length, args.temperature) == (2, 3, 0.7)
    assert args.pass_at_k == 1  # PPO's objective: the expected reward
    assert set(PPO_FIELDS).isdisjoint(PPO_REFUSED)


def test_settings_without_a_counterpart_are_refused_with_the_reason(tmp_path):
    settings = {**PPO_PIPELINE, "vf_coef": 0.1, "gamma": 0.99, "kl_estimator": "k1", "total_episodes": 1000}
    with pytest.raises(ValueError) as error:
        srppo_config_from_ppo(settings, **cpu_fields(tmp_path))
    message = str(error.value)
    for name in ("vf_coef=0.1", "gamma=0.99", "kl_estimator='k1'", "total_episodes=1000: not a setting here"):
        assert name in message
    assert "critic_learning_rate" in message and "undiscounted" in message
    assert "cliprange" not in message and "lam" not in message  # only what has no counterpart


def test_a_ppo_pipeline_trains_with_its_reward_and_value_models(toy, tmp_path):
    tokenizer, build_model, dataset = toy
    reward_model = tiny_reward_model(tmp_path / "reward", tokenizer)  # the old trainer's `reward_model`
    value_model = tiny_reward_model(tmp_path / "value", tokenizer)  # its `value_model`: a one-label classifier
    build_model().save_pretrained(tmp_path / "sft")  # its `sft_model_path`: GRPO loads the reference from it
    tokenizer.save_pretrained(tmp_path / "sft")
    args = srppo_config_from_ppo(
        {**PPO_PIPELINE, "learning_rate": 3e-3},
        **cpu_fields(tmp_path / "out", max_completion_length=3, learning_rate=3e-3),
    )
    trainer = SRPPOTrainer(
        model=str(tmp_path / "sft"),
        reward_funcs=reward_model,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        critic_model=value_model,
    )
    from safetensors.torch import load_file

    value_weights = load_file(f"{value_model}/model.safetensors")
    backbone = {name: p for name, p in trainer.critic.state_dict().items() if name.startswith("model.")}
    assert backbone and all(torch.equal(value_weights[name], p) for name, p in backbone.items())  # its backbone
    before = {name: p.detach().clone() for name, p in trainer.critic.named_parameters()}
    trainer.train()
    losses = [entry["critic/loss"] for entry in trainer.state.log_history if "critic/loss" in entry]
    # num_ppo_epochs=2: the run's two policy steps are two passes over one generated batch; the critic learns once.
    assert trainer.state.global_step == 2 and len(losses) == 1 and all(torch.isfinite(torch.tensor(losses)))
    assert any(not torch.equal(before[name], p) for name, p in trainer.critic.named_parameters())
    assert any("kl" in entry for entry in trainer.state.log_history)  # beta > 0: GRPO's KL to the reference

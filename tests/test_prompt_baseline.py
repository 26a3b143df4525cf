# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The prompt-level baseline, `advantage_baseline="prompt"`: `A_t = w_k(s_0) * (Y - qhat(s_0))` on every token."""

import copy
import math

import pytest
import torch
from conftest import cpu_config
from helpers import small_digit_reward

from trl_srppo import SRPPOTrainer
from trl_srppo.method.core import prompt_baseline_advantages, srppo_advantages
from trl_srppo.method.critics.model import prefix_values

VALUES = torch.tensor([[0.2, 0.5, 0.9], [0.6, 0.3, 0.0], [0.4, 0.4, 0.4]])
REWARDS = torch.tensor([1.0, 0.0, math.nan])
MASK = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 0, 0]])


def test_prompt_baseline_hand_values():
    out = prompt_baseline_advantages(VALUES, REWARDS, MASK, pass_at_k=2)
    # w_2 = 2 (1 - q0): 1.6 and 0.8; A = w (Y - q0): 1.6 * 0.8 = 1.28 and 0.8 * (0 - 0.6) = -0.48; row 2 unscorable.
    expected = torch.tensor([[1.28, 1.28, 1.28], [-0.48, -0.48, 0.0], [0.0, 0.0, 0.0]])
    torch.testing.assert_close(out.advantages, expected)
    torch.testing.assert_close(out.weights[:2], torch.tensor([1.6, 0.8]))
    torch.testing.assert_close(out.returns, torch.tensor([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]))
    torch.testing.assert_close(out.mask, torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0], [0.0, 0.0, 0.0]]))


def test_prompt_baseline_is_the_prefix_advantage_at_the_first_token():
    prompt = prompt_baseline_advantages(VALUES, REWARDS, MASK, pass_at_k=4)
    prefix = srppo_advantages(VALUES, REWARDS, MASK, pass_at_k=4)
    torch.testing.assert_close(prompt.advantages[:, 0], prefix.advantages[:, 0])
    torch.testing.assert_close(prompt.returns, prefix.returns)  # Monte Carlo targets: Y on every token
    assert not torch.allclose(prompt.advantages, prefix.advantages)


def test_prompt_baseline_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="expected values"):
        prompt_baseline_advantages(VALUES, REWARDS[:2], MASK)


@pytest.mark.parametrize(
    "overrides,message",
    [
        (dict(advantage_baseline="token"), "advantage_baseline"),
        (dict(advantage_baseline="prompt", srppo_method="td"), "gae_lambda"),
        (dict(advantage_baseline="prompt", gae_lambda=0.9), "gae_lambda"),
    ],
)
def test_invalid_baseline_settings_name_the_field(tmp_path, overrides, message):
    with pytest.raises(ValueError, match=message):
        cpu_config(tmp_path, **overrides)


@pytest.mark.parametrize("fused", [True, False])
def test_trainer_uses_the_prompt_value_of_the_critic_before_its_update(toy, tmp_path, fused):
    tokenizer, build_model, dataset = toy
    trainer = SRPPOTrainer(
        model=build_model(),
        reward_funcs=small_digit_reward,
        args=cpu_config(
            tmp_path, advantage_baseline="prompt", critic_fused_forward=fused, per_device_train_batch_size=16
        ),
        train_dataset=dataset,
        processing_class=tokenizer,
    )
    head = trainer.critic.score
    with torch.no_grad():  # values that differ between prompts
        head.weight.copy_(torch.randn(head.weight.shape, generator=torch.Generator().manual_seed(7)))
    critic_before = copy.deepcopy(trainer.critic)
    trainer.create_optimizer_and_scheduler(num_training_steps=10)
    trainer.model.train()
    output = trainer._generate_and_score_completions([dataset[i] for i in range(16)])

    completions = tokenizer.batch_decode(output["completion_ids"], skip_special_tokens=True)
    rewards = torch.tensor(small_digit_reward(completions))
    assert 0 < rewards.sum() < len(rewards)
    input_ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
    attention_mask = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
    with torch.no_grad():
        q0 = torch.sigmoid(prefix_values(critic_before, input_ids, attention_mask, output["completion_ids"].size(1)))
        q0 = q0[:, 0]
    k = trainer.args.pass_at_k
    expected = (k * (1 - q0) ** (k - 1) * (rewards - q0)).unsqueeze(1) * output["completion_mask"]
    torch.testing.assert_close(output["advantages"], expected, atol=1e-5, rtol=1e-5)
    assert any(not torch.equal(v, critic_before.state_dict()[n]) for n, v in trainer.critic.state_dict().items())

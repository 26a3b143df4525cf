# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Where a fresh critic starts (`critic_value_init`) and the normalised Pass@k weight (`pass_at_k_normalize`)."""

import math

import pytest
import torch
from conftest import cpu_config
from helpers import small_digit_reward, toy_trainer
from peft import LoraConfig

from trl_srppo import SRPPOTrainer
from trl_srppo.method.core import batch_normalized, pass_at_k_weight, srppo_advantages
from trl_srppo.method.critics.model import critic_from_policy, start_value_head_at, value_output_layer


def low_digit_reward(completions, **kwargs) -> list[float]:
    """1 when the completion's first word is a digit 0-4: a random tiny model succeeds often enough that a batch of 16
    holds both outcomes."""
    return [1.0 if c.split() and c.split()[0] in "01234" else 0.0 for c in completions]


def first_batch(toy, tmp_path, peft_config=None, **overrides):
    """A trainer's first generated batch in training mode: (trainer, outputs, outcomes)."""
    tokenizer, _, dataset = toy
    fields = {"per_device_train_batch_size": 16, **overrides}
    trainer = toy_trainer(toy, tmp_path / "out", reward_funcs=low_digit_reward, peft_config=peft_config, **fields)
    trainer.create_optimizer_and_scheduler(num_training_steps=10)
    trainer.model.train()
    batch = [dataset[i] for i in range(16)]
    output = trainer._generate_and_score_completions(batch)
    completions = tokenizer.batch_decode(output["completion_ids"], skip_special_tokens=True)
    outcomes = torch.tensor(low_digit_reward(completions))
    assert 0 < outcomes.sum() < len(outcomes), "the batch needs both outcomes for these tests to discriminate"
    return trainer, output, outcomes


def constant_value_advantages(value: float, outcomes, mask, k: int):
    """A_t = w_k(q) (Y - q) on every valid token when the critic says q for every prefix."""
    return pass_at_k_weight(torch.tensor(value), k) * (outcomes.unsqueeze(1) - value) * mask


@pytest.mark.parametrize(
    "critic_type, fields",
    [
        ("separate", {}),
        ("policy_head", {}),
        ("policy_head", {"critic_fused_forward": False}),
        ("policy_lora", {}),
    ],
    ids=["separate", "policy_head", "policy_head-separate-passes", "policy_lora"],
)
def test_fresh_critic_starts_at_the_first_batch_success_rate(toy, tmp_path, critic_type, fields):
    peft_config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
    trainer, output, outcomes = first_batch(
        toy,
        tmp_path,
        peft_config=peft_config if critic_type == "policy_lora" else None,
        critic_type=critic_type,
        **fields,
    )
    rate = float(outcomes.mean())
    expected = constant_value_advantages(rate, outcomes, output["completion_mask"], trainer.args.pass_at_k)
    torch.testing.assert_close(output["advantages"], expected, atol=1e-5, rtol=1e-5)
    head = value_output_layer(trainer.accelerator.unwrap_model(trainer.critic))
    # The critic has learned from the batch since.
    assert head.bias.item() != pytest.approx(math.log(rate / (1 - rate)), abs=1e-6)


def test_zero_init_keeps_the_old_start_at_one_half(toy, tmp_path):
    trainer, output, outcomes = first_batch(toy, tmp_path, critic_value_init="zero")
    expected = constant_value_advantages(0.5, outcomes, output["completion_mask"], trainer.args.pass_at_k)
    torch.testing.assert_close(output["advantages"], expected, atol=1e-5, rtol=1e-5)


def test_linear_critic_starts_at_the_mean_outcome(toy, tmp_path):
    trainer, output, outcomes = first_batch(toy, tmp_path, srppo_method="ppo")
    expected = constant_value_advantages(float(outcomes.mean()), outcomes, output["completion_mask"], 1)
    torch.testing.assert_close(output["advantages"], expected, atol=1e-5, rtol=1e-5)


def test_a_trained_or_loaded_head_is_left_as_it_is(toy):
    _, build_model, _ = toy
    critic = critic_from_policy(build_model())
    head = value_output_layer(critic)
    assert head is critic.score
    assert start_value_head_at(critic, -1.5)  # fresh: every prefix now gets raw value -1.5
    assert head.bias.item() == pytest.approx(-1.5) and not head.weight.any()
    with torch.no_grad():
        head.weight[0, 0] = 0.25  # as after training, or as loaded from a saved critic
    before = {k: v.clone() for k, v in critic.state_dict().items()}
    assert not start_value_head_at(critic, 0.7)
    for name, value in critic.state_dict().items():
        torch.testing.assert_close(value, before[name], rtol=0, atol=0, msg=name)


def test_normalized_weights_divide_the_advantages_by_their_batch_mean(toy, tmp_path):
    plain, output, outcomes = first_batch(toy, tmp_path / "plain")
    normalized, output_n, outcomes_n = first_batch(toy, tmp_path / "normalized", pass_at_k_normalize=True)
    torch.testing.assert_close(outcomes_n, outcomes)  # same seed, same rollouts
    rate = float(outcomes.mean())
    k = plain.args.pass_at_k
    weight = float(pass_at_k_weight(torch.tensor(rate), k))  # every prompt has the same q at the first batch
    assert weight != pytest.approx(1.0)
    torch.testing.assert_close(output_n["advantages"], output["advantages"] / weight, atol=1e-6, rtol=1e-5)
    assert normalized._metrics["train"]["passk/weight_mean"][-1] == pytest.approx(1.0)
    assert plain._metrics["train"]["passk/weight_mean"][-1] == pytest.approx(weight)


def test_bad_critic_value_init_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="^critic_value_init must be 'success_rate' or 'zero', got 'half'.$"):
        cpu_config(tmp_path, critic_value_init="half")


def test_normalised_weights_average_one_over_the_rows_that_move_the_policy():
    # Rows: solved (q 0.9), failed (q 0.1), unscorable (q 0.5, NaN outcome), truncated and masked out of the policy
    # loss (q 0.3). Only the first two move the policy, so their weights average 1.
    values = torch.tensor([[0.9, 0.9], [0.1, 0.1], [0.5, 0.5], [0.3, 0.3]])  # (B, C)
    outcomes = torch.tensor([1.0, 0.0, float("nan"), 0.0])  # (B,)
    critic_mask = torch.ones(4, 2)
    policy_mask = torch.tensor([[1.0, 1.0], [1.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
    estimate = srppo_advantages(values, outcomes, critic_mask, pass_at_k=3)
    # w_3(q) = 3 (1 - q)^2: 0.03 and 2.43, mean 1.23 over the rows that move the policy
    torch.testing.assert_close(estimate.weights[:2], torch.tensor([0.03, 2.43]))
    normalized = batch_normalized(estimate, outcomes, policy_mask, gather=lambda t: t)
    torch.testing.assert_close(normalized.weights, estimate.weights / 1.23)
    assert normalized.weights[:2].mean().item() == pytest.approx(1.0)
    torch.testing.assert_close(normalized.advantages, estimate.advantages / 1.23)
    # Nothing moves the policy: the weights are left as they are.
    unchanged = batch_normalized(estimate, outcomes, torch.zeros(4, 2), gather=lambda t: t)
    torch.testing.assert_close(unchanged.weights, estimate.weights)


def test_a_first_batch_without_scorable_rollouts_leaves_the_start_to_the_next(toy, tmp_path):
    tokenizer, _, dataset = toy
    calls = []

    def unscorable_first(completions, **kwargs):  # a verifier that is down for the first batch
        calls.append(len(completions))
        return [None] * len(completions) if len(calls) == 1 else low_digit_reward(completions)

    trainer = toy_trainer(toy, tmp_path / "out", reward_funcs=unscorable_first, per_device_train_batch_size=16)
    trainer.create_optimizer_and_scheduler(num_training_steps=10)
    trainer.model.train()
    batch = [dataset[i] for i in range(16)]
    trainer._generate_and_score_completions(batch)
    head = value_output_layer(trainer.accelerator.unwrap_model(trainer.critic))
    assert not head.bias.any() and not head.weight.any()  # nothing to start from yet
    trainer.state.global_step = 1  # the next step's batch
    output = trainer._generate_and_score_completions(batch)
    completions = tokenizer.batch_decode(output["completion_ids"], skip_special_tokens=True)
    outcomes = torch.tensor(low_digit_reward(completions))
    assert 0 < outcomes.sum() < len(outcomes)
    rate = float(outcomes.mean())
    expected = constant_value_advantages(rate, outcomes, output["completion_mask"], trainer.args.pass_at_k)
    torch.testing.assert_close(output["advantages"], expected, atol=1e-5, rtol=1e-5)


def test_a_checkpoint_written_before_the_head_started_resumes_as_the_run_goes_on(toy, tmp_path):
    # The verifier is down for step 0's batch: the head is still fresh at checkpoint-1, and both the run that wrote it
    # and a run resumed from it start the head at step 1's batch.
    import shutil

    def down_at_step_0(completions, trainer_state, **kwargs):
        return [None] * len(completions) if trainer_state.global_step == 0 else small_digit_reward(completions)

    tokenizer, build_model, dataset = toy

    def run(output_dir, resume=None):
        trainer = SRPPOTrainer(
            model=build_model(),
            reward_funcs=down_at_step_0,
            args=cpu_config(
                output_dir, per_device_train_batch_size=16, max_steps=2, save_strategy="steps", save_steps=1
            ),
            train_dataset=dataset,
            processing_class=tokenizer,
        )
        trainer.train(resume_from_checkpoint=resume)
        return trainer

    full = run(tmp_path / "full")
    rates = [e["reward"] for e in full.state.log_history if "reward" in e]
    assert rates[-1] != 0.5  # step 1's head starts away from a fresh head's 0.5, so a missed start would show
    shutil.copytree(tmp_path / "full" / "checkpoint-1", tmp_path / "resumed" / "checkpoint-1")
    resumed = run(tmp_path / "resumed", resume=str(tmp_path / "resumed" / "checkpoint-1"))
    for name, tensor in full.critic.state_dict().items():
        assert torch.equal(resumed.critic.state_dict()[name], tensor), name

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The critic's offline warm start (`critic_warm_start_prompts`): its plan, the rollouts it samples through the run's
own generation and reward functions, the critic's steps on them before the first policy update (the policy does not
move), its cost in the logs, and a resume that does not warm start again."""

import pytest
import torch
from helpers import cpu_config, toy_trainer

from trl_srppo.method import srppo_trainer
from trl_srppo.method.warm_start import (
    run_warm_start,
    warm_start_critic_steps,
    warm_start_plan,
    warm_start_plan_from_args,
)


def test_the_plan_rounds_up_to_whole_batches_of_distinct_prompts():
    plan = warm_start_plan(num_rows=64, prompts=5, samples=3, generation_batch_size=8, seed=0)
    # 3 samples share no factor with 8: prompts come in eights (24 rollouts, 3 batches)
    assert len(plan.prompts) == 8 and len(set(plan.prompts)) == 8
    assert [len(batch) for batch in plan.batches] == [8, 8, 8]
    flat = [row for batch in plan.batches for row in batch]
    assert flat == [p for p in plan.prompts for _ in range(3)]
    # 4 samples into batches of 8: prompts in pairs
    assert len(warm_start_plan(64, 5, 4, 8, 0).prompts) == 6
    # the same seed draws the same prompts; the processes' slices make up each batch, in order
    assert warm_start_plan(64, 5, 3, 8, 0) == plan and warm_start_plan(64, 5, 3, 8, 1) != plan
    for batch in range(3):
        halves = [plan.local_rows(batch, p, 2) for p in range(2)]
        assert halves[0] + halves[1] == plan.batches[batch] and len(halves[0]) == 4
    assert warm_start_critic_steps(plan, epochs=2, steps_per_batch=3) == 18
    assert warm_start_plan(64, 0, 4, 8, 0).batches == []


def test_a_plan_larger_than_the_dataset_is_refused_with_the_fix():
    with pytest.raises(
        ValueError, match=r"rounded up to 16.*training dataset has 10.*Lower critic_warm_start_prompts"
    ):
        warm_start_plan(num_rows=10, prompts=9, samples=1, generation_batch_size=16, seed=0)


@pytest.mark.parametrize("field, value", [("critic_warm_start_prompts", -1), ("critic_warm_start_samples", 0)])
def test_bad_warm_start_settings_are_refused(tmp_path, field, value):
    with pytest.raises(ValueError, match=field):
        cpu_config(tmp_path, **{field: value})


def test_a_warm_start_from_a_dataset_without_indices_is_refused_with_the_fix(toy, tmp_path):
    streamed = toy[2].to_iterable_dataset()
    with pytest.raises(ValueError, match=r"by index, which a IterableDataset has not.*critic_warm_start_prompts=0"):
        toy_trainer(toy, tmp_path / "out", dataset=streamed, critic_warm_start_prompts=4)
    toy_trainer(toy, tmp_path / "plain", dataset=streamed)  # without a warm start it trains as before


def counting_reward(calls):
    def reward(completions, **kwargs):
        calls.append(list(kwargs["prompts"]))
        return [1.0 if c.split() and c.split()[0] in "0123456" else 0.0 for c in completions]

    return reward


@pytest.mark.parametrize("critic_type", ["separate", "policy_head"])
def test_the_warm_start_trains_the_critic_before_the_first_update_and_leaves_the_policy(toy, tmp_path, critic_type):
    calls = []
    fields = dict(critic_warm_start_prompts=6, critic_warm_start_samples=4, critic_warm_start_epochs=2, max_steps=1)
    fields["critic_type"] = critic_type
    trainer = toy_trainer(toy, tmp_path / "out", reward_funcs=counting_reward(calls), **fields)
    trainer.create_optimizer_and_scheduler(num_training_steps=1)
    plan = warm_start_plan_from_args(trainer.args, trainer.train_dataset)
    assert len(plan.prompts) == 6 and len(plan.batches) == 3  # 24 rollouts in batches of 8
    # the policy head's critic holds the policy: its own parameters are the trainable ones
    critic_params = dict(trainer.critic.named_parameters())
    trainable = {id(p) for p in trainer.critic_backend.trainable_parameters()}
    critic = {k: v.detach().clone() for k, v in critic_params.items() if id(v) in trainable}
    policy = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    trainer.model.train()
    run_warm_start(trainer)
    # every rollout of the plan was generated and scored through the run's reward function, batch by batch
    dataset = toy[2]
    assert [len(c) for c in calls] == [8, 8, 8]
    expected = [dataset[row]["prompt"] for batch in plan.batches for row in batch]
    assert [p for c in calls for p in c] == expected
    assert trainer.critic_backend.steps == 3 * 2  # one step per batch and pass
    assert all(torch.equal(v, policy[k]) for k, v in trainer.model.state_dict().items()), "the policy moved"
    assert any(not torch.equal(critic_params[k], v) for k, v in critic.items()), "the critic did not learn"
    logged = trainer._metrics["train"]
    assert sorted(logged) == sorted(
        f"critic/warm_start_{n}" for n in ("prompts", "completions", "tokens", "seconds", "loss")
    )
    assert logged["critic/warm_start_completions"] == [24] and logged["critic/warm_start_prompts"] == [6]
    assert 24 <= logged["critic/warm_start_tokens"][0] <= 24 * trainer.args.max_completion_length
    assert len(trainer._logs["prompt"]) == 0, "the warm start's completions are not the run's"


def test_the_warm_start_runs_once_is_logged_with_the_first_step_and_counts_in_the_critics_schedule(toy, tmp_path):
    fields = dict(critic_warm_start_prompts=4, critic_warm_start_samples=2, max_steps=2, lr_scheduler_type="linear")
    trainer = toy_trainer(toy, tmp_path / "out", **fields)
    trainer.train()
    assert trainer.critic_backend.steps == 1 + 2  # one warm-start batch (4 x 2 rollouts), then one per update
    first, second = trainer.state.log_history[0], trainer.state.log_history[1]
    assert first["critic/warm_start_completions"] == 8 and "critic/warm_start_completions" not in second
    # the linear schedule spans the warm start's step and the run's two: its last step's rate is a third of the start
    assert trainer.critic_lr_scheduler.get_last_lr()[0] == pytest.approx(0.0)
    assert second["critic/learning_rate"] == pytest.approx(trainer.args.critic_learning_rate / 3)


def test_a_resumed_run_does_not_warm_start_again_and_ends_as_the_uninterrupted_run(toy, tmp_path, monkeypatch):
    fields = dict(critic_warm_start_prompts=4, critic_warm_start_samples=2, save_strategy="steps", save_steps=1)
    full = toy_trainer(toy, tmp_path / "full", max_steps=3, **fields)
    full.train()
    resumed = toy_trainer(toy, tmp_path / "resumed", max_steps=3, **fields)
    warm_starts = []
    monkeypatch.setattr(srppo_trainer, "run_warm_start", lambda trainer: warm_starts.append(1))
    resumed.train(resume_from_checkpoint=str(tmp_path / "full" / "checkpoint-2"))
    assert warm_starts == []
    assert resumed.critic_backend.steps == full.critic_backend.steps == 1 + 3
    for name, tensor in full.critic.state_dict().items():
        assert torch.equal(resumed.critic.state_dict()[name], tensor), name
    for name, tensor in full.model.state_dict().items():
        assert torch.equal(resumed.model.state_dict()[name], tensor), name

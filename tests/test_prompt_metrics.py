# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The critic's view of the batch's prompts, logged every step: the spread of `qhat(s_0)` and its AUC against the
outcomes, checked against a brute-force count of pairs and against the critic's values recomputed by hand."""

import copy
import itertools

import pytest
import torch
from helpers import small_digit_reward, toy_trainer

from trl_srppo.method.batch_metrics import auc, prompt_value_metrics
from trl_srppo.method.core import critic_values
from trl_srppo.method.critics.model import prefix_values
from trl_srppo.method.srppo_trainer import VALUE_COLUMN


def brute_force_auc(scores, labels):
    """Over every (positive, negative) pair: 1 if the positive scores higher, 1/2 for a tie."""
    pairs = [(p, n) for p, n in itertools.product(range(len(scores)), repeat=2) if labels[p] == 1 and labels[n] == 0]
    wins = sum(1.0 if scores[p] > scores[n] else 0.5 if scores[p] == scores[n] else 0.0 for p, n in pairs)
    return wins / len(pairs)


def test_auc_matches_the_pairwise_count_with_ties():
    generator = torch.Generator().manual_seed(0)
    for _ in range(20):
        scores = torch.randint(0, 5, (12,), generator=generator).float().tolist()  # many ties
        labels = torch.randint(0, 2, (12,), generator=generator).tolist()
        if 0 < sum(labels) < len(labels):
            assert auc(scores, labels) == pytest.approx(brute_force_auc(scores, labels))


def test_prompt_metrics_by_hand_over_every_process_and_without_unscorable_rows():
    values = torch.tensor([0.2, 0.6, 0.4, 0.9])  # this process's prompts
    rewards = torch.tensor([0.0, 1.0, float("nan"), 1.0])  # the third is unscorable
    other = torch.tensor([[0.6, 0.0], [0.1, 0.0]])  # another process's (value, outcome) rows

    def gather(local):  # (B, 2) -> every process's rows
        return torch.cat([local, other])

    metrics = prompt_value_metrics(values, rewards, gather)
    kept_v, kept_y = [0.2, 0.6, 0.9, 0.6, 0.1], [0, 1, 1, 0, 0]
    mean = sum(kept_v) / 5
    assert metrics["critic/prompt_value_mean"] == pytest.approx(mean)
    assert metrics["critic/prompt_value_std"] == pytest.approx((sum((v - mean) ** 2 for v in kept_v) / 5) ** 0.5)
    assert metrics["critic/outcome_mean"] == pytest.approx(0.4)
    assert metrics["critic/prompt_value_trail"] == pytest.approx(0.4 - 0.48)  # the success rate minus the mean value
    # positives 0.6, 0.9 against negatives 0.2, 0.6, 0.1: 0.6 beats 2 and ties 1, 0.9 beats 3 -> 5.5 / 6
    assert metrics["critic/prompt_auc"] == pytest.approx(5.5 / 6)
    assert metrics["critic/prompt_auc"] == pytest.approx(brute_force_auc(kept_v, kept_y))
    # squared advantages 0.04 + 0.16 + 0.01 + 0.36 + 0.01 = 0.58; the batch's rate 0.4 would leave
    # 2 x 0.6^2 + 3 x 0.4^2 = 1.2: the critic leaves 0.58 / 1.2 of what the best constant would
    assert metrics["critic/prompt_baseline_ratio"] == pytest.approx(0.58 / 1.2)


def test_prompt_auc_is_left_out_when_every_outcome_is_one_class():
    metrics = prompt_value_metrics(torch.tensor([0.1, 0.5]), torch.tensor([1.0, 1.0]), lambda t: t)
    assert "critic/prompt_auc" not in metrics and "critic/prompt_baseline_ratio" not in metrics
    assert metrics["critic/prompt_value_std"] == pytest.approx(0.2)
    assert prompt_value_metrics(torch.tensor([0.3]), torch.tensor([float("nan")]), lambda t: t) == {}


def test_the_trainer_logs_the_prompts_values_from_before_the_critics_update(toy, tmp_path):
    # Unfused, so that `critic_backend.values` reads the values (the fused step's are the same: test_critic_fused)
    fields = dict(reward_funcs=small_digit_reward, per_device_train_batch_size=16, critic_fused_forward=False)
    trainer = toy_trainer(toy, tmp_path / "out", **fields)
    trainer.create_optimizer_and_scheduler(num_training_steps=10)
    trainer.model.train()
    # The first batch starts the fresh value head at its success rate (one value for every prompt) and trains it;
    # the second batch's prompts are valued by a critic that tells them apart. Copy the critic as it values them.
    trainer._generate_and_score_completions([toy[2][i] for i in range(16)])
    batch = [toy[2][i] for i in range(16, 32)]
    values_seen = []
    values = trainer.critic_backend.values

    def record(critic_batch, *args):
        values_seen.append(copy.deepcopy(trainer.critic))
        return values(critic_batch, *args)

    trainer.critic_backend.values = record
    output = trainer._generate_and_score_completions(batch)
    assert len(values_seen) == 1
    completions = trainer.processing_class.batch_decode(output["completion_ids"], skip_special_tokens=True)
    rewards = torch.tensor(small_digit_reward(completions))
    assert 0 < rewards.sum() < len(rewards), "the batch needs both outcomes"
    logged = list(trainer._logs["extra"][VALUE_COLUMN])
    # qhat(s_0) recomputed with the critic as it was before its update
    input_ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
    mask = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
    with torch.no_grad():
        raw = prefix_values(values_seen[0], input_ids, mask, output["completion_ids"].size(1))
    expected = critic_values(raw, "sigmoid")[:, 0]
    torch.testing.assert_close(torch.tensor(logged), expected, atol=1e-5, rtol=1e-5)
    assert expected.std() > 0, "a critic that gives every prompt one value would not test the AUC"
    metrics = {k: v[-1] for k, v in trainer._metrics["train"].items() if k.startswith("critic/")}
    assert metrics["critic/prompt_auc"] == pytest.approx(brute_force_auc(logged, rewards.long().tolist()))
    assert metrics["critic/prompt_value_std"] == pytest.approx(torch.tensor(logged).std(correction=0).item(), abs=1e-6)
    assert metrics["critic/outcome_mean"] == pytest.approx(rewards.mean().item())
    v = torch.tensor(logged, dtype=torch.float64)
    y = rewards.double()
    ratio = ((y - v) ** 2).sum() / ((y - y.mean()) ** 2).sum()
    assert metrics["critic/prompt_baseline_ratio"] == pytest.approx(ratio.item(), rel=1e-5)

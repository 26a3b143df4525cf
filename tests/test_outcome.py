# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The outcome of a rollout from several reward functions: the maths, the config, and pipelines that switch over."""

import math

import pytest
import torch
from conftest import cpu_config, tiny_reward_model
from helpers import toy_trainer

from trl_srppo.method.core import outcome_from_rewards
from trl_srppo.rewards import chain_reward

NAN = float("nan")


def assert_same(actual, expected):
    assert len(actual) == len(expected)
    for a, e in zip(actual.tolist(), expected, strict=True):
        assert (math.isnan(a) and math.isnan(e)) or a == pytest.approx(e), (actual, expected)


def test_weighted_sum_counts_none_as_zero_and_all_none_as_unscorable():
    rewards = torch.tensor([[1.0, 0.5], [NAN, 1.0], [NAN, NAN]])
    assert_same(outcome_from_rewards(rewards, torch.tensor([1.0, 2.0])), [2.0, 2.0, NAN])


def test_normalized_sum_divides_by_the_largest_possible_sum():
    rewards = torch.tensor([[1.0, 1.0], [0.0, 1.0], [1.0, 0.0], [0.0, 0.0], [NAN, NAN]])
    # weights 1 and 3, both functions in [0, 1]: maximum 4
    assert_same(outcome_from_rewards(rewards, torch.tensor([1.0, 3.0]), "normalized_sum"), [1.0, 0.75, 0.25, 0.0, NAN])
    # function 0 valued in [0, 2], function 1 in [0, 1], weights 1 each: maximum 3
    out = outcome_from_rewards(
        torch.tensor([[2.0, 1.0], [1.0, 0.5]]), torch.ones(2), "normalized_sum", reward_max=torch.tensor([2.0, 1.0])
    )
    assert_same(out, [1.0, 0.5])


def test_normalized_sum_with_a_penalty_maps_the_whole_range_onto_unit_interval():
    # Y = r0 - 0.5 r1 with both in [0, 1] ranges over [-0.5, 1]: (Y + 0.5) / 1.5
    rewards = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    out = outcome_from_rewards(rewards, torch.tensor([1.0, -0.5]), "normalized_sum")
    assert_same(out, [1.0, 0.0, (0.5 + 0.5) / 1.5])


def test_reward_func_takes_one_column_and_its_none_is_unscorable():
    rewards = torch.tensor([[3.0, 1.0], [-7.0, 0.0], [2.0, NAN]])
    assert_same(outcome_from_rewards(rewards, torch.ones(2), "reward_func", func_index=1), [1.0, 0.0, NAN])


def test_threshold_makes_any_score_binary():
    rewards = torch.tensor([[3.0], [-7.0], [0.5], [NAN]])
    assert_same(outcome_from_rewards(rewards, torch.ones(1), threshold=0.5), [1.0, 0.0, 1.0, NAN])
    two = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    assert_same(outcome_from_rewards(two, torch.ones(2), "normalized_sum", threshold=0.75), [1.0, 0.0])


UNKNOWN_OUTCOME = r"^srppo_outcome must be 'weighted_sum', 'normalized_sum' or 'reward_func', got 'mean'\.$"


def test_outcome_rejects_bad_arguments():
    with pytest.raises(ValueError, match="func_index"):
        outcome_from_rewards(torch.zeros(2, 2), torch.ones(2), "reward_func")
    with pytest.raises(ValueError, match=UNKNOWN_OUTCOME):
        outcome_from_rewards(torch.zeros(2, 2), torch.ones(2), "mean")
    with pytest.raises(ValueError, match="empty range"):
        outcome_from_rewards(torch.zeros(2, 2), torch.zeros(2), "normalized_sum")


def test_config_checks_the_outcome_fields(tmp_path):
    with pytest.raises(ValueError, match=UNKNOWN_OUTCOME):
        cpu_config(tmp_path, srppo_outcome="mean")
    with pytest.raises(ValueError, match="srppo_outcome_reward_func"):
        cpu_config(tmp_path, srppo_outcome="reward_func")
    with pytest.raises(ValueError, match="srppo_outcome='reward_func'"):
        cpu_config(tmp_path, srppo_outcome_reward_func="accuracy")
    with pytest.raises(ValueError, match="normalized_sum"):
        cpu_config(tmp_path, srppo_outcome_reward_max=[1.0])
    with pytest.raises(ValueError, match="> 0"):
        cpu_config(tmp_path, srppo_outcome="normalized_sum", srppo_outcome_reward_max=[0.0])


def format_reward(completions, **kwargs):
    """1.0 when the completion's first word is a digit from 0 to 4: succeeds often for a random tiny model."""
    return [1.0 if c.split() and c.split()[0] in "01234" else 0.0 for c in completions]


def make(toy, tmp_path, reward_funcs, **overrides):
    return toy_trainer(toy, tmp_path, reward_funcs=reward_funcs, **overrides)


def test_summed_rewards_name_the_outcome_options(toy, tmp_path):
    def always(completions, **kwargs):
        return [1.0] * len(completions)

    with pytest.warns(UserWarning, match=r"adds the reward functions \['format_reward', 'always'\] with weights"):
        trainer = make(toy, tmp_path, [format_reward, always])  # the sum lies in [1, 2]
    with pytest.raises(ValueError, match=r"outside \[0, 1\].*normalized_sum.*srppo_outcome_threshold.*reward_func"):
        trainer.train()


@pytest.mark.parametrize(
    ("funcs", "overrides", "warned"),
    [
        (2, {}, True),
        (1, {}, False),  # one function: a sum over 1 is that function's range, named at its first batch
        (2, {"reward_weights": [0.5, 0.5]}, False),  # the sum cannot pass 1
        (2, {"reward_weights": [1.0, -1.0]}, False),  # a penalty: the positive weights sum to 1
        (2, {"srppo_outcome": "normalized_sum"}, False),
        (2, {"srppo_outcome_threshold": 1.5}, False),
        (2, {"srppo_method": "ppo"}, False),  # the linear critic takes any sum
    ],
)
def test_a_sum_of_rewards_that_can_pass_one_is_named_at_construction(toy, tmp_path, recwarn, funcs, overrides, warned):
    make(toy, tmp_path, [format_reward, chain_reward][:funcs], **overrides)
    summed = [w for w in recwarn if "srppo_outcome='weighted_sum' adds" in str(w.message)]
    assert bool(summed) == warned


def test_rewards_of_plus_and_minus_one_under_normalized_sum_name_the_threshold(toy, tmp_path):
    def signed(completions, **kwargs):
        return [1.0 if r else -1.0 for r in format_reward(completions)]

    trainer = make(toy, tmp_path, [signed], srppo_outcome="normalized_sum")
    message = r"outside \[0, 1\].*takes each function's smallest value as 0.*negative rewards.*srppo_outcome_threshold"
    with pytest.raises(ValueError, match=message):
        trainer.train()


def test_pipeline_summing_two_unit_rewards_trains_with_normalized_sum(toy, tmp_path):
    trainer = make(toy, tmp_path, [format_reward, chain_reward], srppo_outcome="normalized_sum")
    critic_before = {k: v.clone() for k, v in trainer.critic.state_dict().items()}
    policy_before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    trainer.train()
    logs = {k for entry in trainer.state.log_history for k in entry}
    assert {"rewards/format_reward/mean", f"rewards/{chain_reward.__name__}/mean", "critic/loss"} <= logs
    assert any(not torch.equal(v, critic_before[k]) for k, v in trainer.critic.state_dict().items())
    assert any(not torch.equal(v, policy_before[k]) for k, v in trainer.model.state_dict().items())


def test_outcome_from_one_named_function(toy, tmp_path):
    trainer = make(
        toy,
        tmp_path,
        [format_reward, lambda completions, **kw: [5.0] * len(completions)],
        srppo_outcome="reward_func",
        srppo_outcome_reward_func="format_reward",
    )
    outcomes = []
    calculate = trainer._calculate_rewards

    def spy(*args):
        rewards_per_func = calculate(*args)
        outcomes.append(trainer._scoring.outcomes.clone())
        return rewards_per_func

    trainer._calculate_rewards = spy
    trainer.create_optimizer_and_scheduler(num_training_steps=2)
    batch = [toy[2][i] for i in range(8)]
    trainer._generate_and_score_completions(batch)
    completions = list(trainer._logs["completion"])
    assert outcomes[0].tolist() == format_reward(completions)
    assert 0 < sum(outcomes[0].tolist()) < len(completions), "the batch needs both outcomes to discriminate"
    assert trainer._metrics["train"]["reward"][-1] > 5.0  # GRPO still logs the weighted sum


def test_unknown_outcome_reward_func_is_refused_at_construction(toy, tmp_path):
    with pytest.raises(ValueError, match=r"'accuracy' is not among the reward functions \['format_reward'\]"):
        make(toy, tmp_path, format_reward, srppo_outcome="reward_func", srppo_outcome_reward_func="accuracy")
    with pytest.raises(ValueError, match=r"2 values for 1 reward functions \['format_reward'\].*one maximum per"):
        make(toy, tmp_path, format_reward, srppo_outcome="normalized_sum", srppo_outcome_reward_max=[1.0, 2.0])


def test_reward_model_is_refused_at_construction_with_the_sigmoid_critic(toy, tmp_path, monkeypatch):
    import trl

    path = tiny_reward_model(tmp_path, toy[0])
    loaded = []
    original = trl.trainer.grpo_trainer.AutoModelForSequenceClassification.from_pretrained
    monkeypatch.setattr(
        trl.trainer.grpo_trainer.AutoModelForSequenceClassification,
        "from_pretrained",
        lambda *a, **k: loaded.append(a) or original(*a, **k),
    )
    with pytest.raises(ValueError, match=r"reward model\(s\) \['rm'\].*srppo_outcome_threshold.*srppo_method='ppo'"):
        make(toy, tmp_path / "a", [format_reward, path])
    assert not loaded, "the error must come before the reward model is loaded"
    with pytest.raises(ValueError, match="reward model"):
        make(toy, tmp_path / "b", [format_reward, path], srppo_outcome="reward_func", srppo_outcome_reward_func="rm")


@pytest.mark.parametrize(
    "overrides",
    [
        dict(srppo_outcome_threshold=0.0),
        dict(srppo_outcome="reward_func", srppo_outcome_reward_func="format_reward"),
        dict(srppo_method="ppo"),
    ],
    ids=["threshold", "reward_func", "linear_critic"],
)
def test_reward_model_trains_with_an_outcome_option(toy, tmp_path, overrides):
    path = tiny_reward_model(tmp_path, toy[0])
    trainer = make(toy, tmp_path / "out", [format_reward, path], max_steps=1, **overrides)
    before = {k: v.clone() for k, v in trainer.critic.state_dict().items()}
    trainer.train()
    assert any(not torch.equal(v, before[k]) for k, v in trainer.critic.state_dict().items())
    assert any("rewards/rm/mean" in entry for entry in trainer.state.log_history)

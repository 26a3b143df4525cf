# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Difficulty bins and the update-weight share, checked against hand-worked numbers."""

import pytest
import torch

from trl_srppo.analysis.bins import update_weight_share
from trl_srppo.analysis.difficulty import bin_counts, bin_members, correct_counts, difficulty_bin, prompt_bins
from trl_srppo.analysis.rollouts import Rollouts
from trl_srppo.method.core import srppo_advantages


@pytest.mark.parametrize(
    "n, hard, medium, easy",
    [
        (8, [0, 1, 2], [3, 4, 5], [6, 7, 8]),  # the paper's rule
        (4, [0, 1], [2], [3, 4]),  # 8c >= 6n -> c >= 3; 8c <= 2n -> c <= 1
        (16, [0, 1, 2, 3, 4], list(range(5, 12)), [12, 13, 14, 15, 16]),
        (5, [0, 1], [2, 3], [4, 5]),  # 3.75 and 1.25 fall between counts
    ],
)
def test_difficulty_bin_thresholds_by_hand(n, hard, medium, easy):
    assert [difficulty_bin(c, n) for c in hard] == ["hard"] * len(hard)
    assert [difficulty_bin(c, n) for c in medium] == ["medium"] * len(medium)
    assert [difficulty_bin(c, n) for c in easy] == ["easy"] * len(easy)


def test_difficulty_bin_rejects_impossible_counts():
    with pytest.raises(ValueError):
        difficulty_bin(9, 8)
    with pytest.raises(ValueError):
        difficulty_bin(0, 0)


def test_prompt_bins_from_rollouts():
    # prompt 0: 7 of 8 correct, prompt 1: 4 of 8, prompt 2: 1 of 8
    correct = torch.tensor([1] * 7 + [0] + [1] * 4 + [0] * 4 + [1] + [0] * 7)
    index = torch.arange(3).repeat_interleave(8)
    assert correct_counts(correct, index, 3).tolist() == [7, 4, 1]
    assert prompt_bins(correct, index, 3) == ["easy", "medium", "hard"]


def test_update_weight_share_by_hand():
    weights = torch.tensor([3.0, 1.0, 0.5, 0.5])  # (B,)
    advantages = torch.tensor([[1.0, -1.0, 9.0], [2.0, 0.0, 0.0], [0.5, 0.5, 0.0], [-1.0, 0.0, 0.0]])  # (B, T)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 0], [1, 0, 0]])  # the 9.0 is padding
    shares = update_weight_share(weights, advantages, mask, ["hard", "medium", "easy", "easy"])
    assert shares["prompt_weight"] == pytest.approx({"hard": 3 / 5, "medium": 1 / 5, "easy": 1 / 5})
    # |A| mass: hard 2, medium 2, easy 1 + 1 = 2
    assert shares["advantage_mass"] == pytest.approx({"hard": 1 / 3, "medium": 1 / 3, "easy": 1 / 3})


def test_pass_at_k_weight_moves_share_to_hard_prompts():
    # two rollouts on a hard prompt (critic says q0 = 0.1) and two on an easy one (q0 = 0.9), one token each
    values = torch.tensor([[0.1], [0.1], [0.9], [0.9]])
    rewards = torch.tensor([0.0, 1.0, 1.0, 0.0])
    mask = torch.ones(4, 1)
    bins = ["hard", "hard", "easy", "easy"]
    without = srppo_advantages(values, rewards, mask, pass_at_k=1)
    with_k = srppo_advantages(values, rewards, mask, pass_at_k=4)
    share_without = update_weight_share(without.weights, without.advantages, without.mask, bins)
    share_with = update_weight_share(with_k.weights, with_k.advantages, with_k.mask, bins)
    assert share_without["prompt_weight"]["hard"] == pytest.approx(0.5)
    # w_4(0.1) = 4 * 0.9^3 = 2.916, w_4(0.9) = 4 * 0.1^3 = 0.004
    assert share_with["prompt_weight"]["hard"] == pytest.approx(2.916 / (2.916 + 0.004))
    # |A| without the weight: hard 0.1 + 0.9, easy 0.1 + 0.9 -> one half each
    assert share_without["advantage_mass"]["hard"] == pytest.approx(0.5)
    assert share_with["advantage_mass"]["easy"] == pytest.approx(0.004 / (2.916 + 0.004))


def test_prompt_bins_count_only_scorable_rollouts():
    # prompt 0: 5 correct of 5 scorable (3 unscorable) -> 5/5, easy (it would be 5/8, medium, counting all 8)
    # prompt 1: 1 correct of 2 scorable (6 unscorable) -> 1/2, medium; prompt 2: nothing scorable -> no bin
    # prompt 3: 2 correct of 8, all scorable -> hard, the paper's rule at n = 8
    nan = float("nan")
    rewards = torch.tensor(
        [1.0] * 5 + [nan] * 3 + [1.0, 0.0] + [nan] * 6 + [nan] * 8 + [1.0, 1.0] + [0.0] * 6
    )  # (32,)
    index = torch.arange(4).repeat_interleave(8)
    scorable = torch.isfinite(rewards)
    correct = torch.nan_to_num(rewards, nan=0.0) >= 1.0
    assert prompt_bins(correct, index, 4, scorable) == ["easy", "medium", None, "hard"]
    assert prompt_bins(correct, index, 4) == ["medium", "hard", "hard", "hard"]  # every rollout counted
    assert bin_counts(["easy", "medium", None, "hard"]) == {"easy": 1, "medium": 1, "hard": 1}
    assert bin_members(["hard", "medium", None, "hard"]) == {"easy": [], "medium": [1], "hard": [0, 3]}

    rollouts = Rollouts(
        prompts=["a", "b", "c", "d"],
        prompt_ids=torch.ones(32, 1, dtype=torch.long),
        prompt_mask=torch.ones(32, 1, dtype=torch.long),
        completion_ids=torch.ones(32, 2, dtype=torch.long),
        completion_mask=torch.ones(32, 2, dtype=torch.long),
        completions=[""] * 32,
        prompt_index=index,
        num_rollouts=8,
        rewards=rewards,
    )
    assert rollouts.prompt_bins() == ["easy", "medium", None, "hard"]
    assert rollouts.rollout_bins() == ["easy"] * 8 + ["medium"] * 8 + [None] * 8 + ["hard"] * 8


def test_update_weight_share_leaves_out_rollouts_without_valid_tokens():
    weights = torch.tensor([1.0, 1.0, 2.0, 2.0])  # (B,)
    advantages = torch.ones(4, 3)  # (B, T)
    mask = torch.ones(4, 3)
    mask[3] = 0  # rollout 3 is unscorable: no valid token, no gradient
    shares = update_weight_share(weights, advantages, mask, ["easy", "easy", "hard", "hard"])
    # prompt weight: easy 1 + 1, hard 2 (rollout 3 left out) -> one half each, not 2 / 6 and 4 / 6
    assert shares["prompt_weight"] == pytest.approx({"easy": 0.5, "medium": 0.0, "hard": 0.5})
    assert shares["advantage_mass"] == pytest.approx({"easy": 6 / 9, "medium": 0.0, "hard": 3 / 9})
    # A prompt without a bin (no scorable rollout) is in no share and not in the total.
    shares = update_weight_share(weights, advantages, torch.ones(4, 3), ["easy", "easy", "hard", None])
    assert shares["prompt_weight"] == pytest.approx({"easy": 0.5, "medium": 0.0, "hard": 0.5})
    # A NaN weight on a left-out rollout does not spread to the shares.
    nan_weight = torch.tensor([1.0, 1.0, 2.0, float("nan")])
    assert update_weight_share(nan_weight, advantages, mask, ["easy", "easy", "hard", "hard"])["prompt_weight"] == (
        pytest.approx({"easy": 0.5, "medium": 0.0, "hard": 0.5})
    )

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Prompt sampling by the critic's Pass@k weight (issue 33): the draw's maths against hand values, an exact
enumeration of every draw, and a Monte Carlo run of the sampler the trainer calls."""

import itertools

import pytest
import torch

from trl_srppo.method.core import (
    near_half_prompts,
    pass_at_k_weight,
    prompt_baseline_advantages,
    prompt_draw_probabilities,
    prompt_importance_ratios,
    prompt_importance_weights,
    sample_prompts,
    srppo_advantages,
)

# A pool of N = 6 prompts; k = 2, so w = 2 (1 - q0) = [1.8, 1.0, 0.5, 1.2, 0.2, 1.6], all > 0 (sum 6.3).
Q0 = torch.tensor([0.1, 0.5, 0.75, 0.4, 0.9, 0.2], dtype=torch.float64)
K = 2
B = 2  # draws
GRADS = torch.tensor(  # arbitrary fixed stand-ins g_i for the per-rollout gradients, one row per prompt
    [[1.0, -2.0, 0.5], [0.3, 0.7, -1.1], [-0.4, 2.5, 0.9], [1.7, 0.2, -0.6], [-2.2, -0.3, 1.4], [0.8, -1.5, -0.2]],
    dtype=torch.float64,
)


def pool_estimator(weights, grads):
    """SR-PPO's estimator over the whole pool, one rollout per prompt: `(1 / N) sum_i w_i g_i`."""
    return (weights.unsqueeze(1) * grads).mean(dim=0)


def exact_expectation(probabilities, importance_weights, grads, draws):
    """The expectation over every ordered draw of `draws` prompts with replacement of the drawn batch's estimator
    `(1 / B) sum_j IW_{i_j} g_{i_j}`, summed exactly (`N ** B` terms)."""
    total = torch.zeros(grads.size(1), dtype=torch.float64)
    for draw in itertools.product(range(len(probabilities)), repeat=draws):
        probability = torch.prod(probabilities[list(draw)])
        estimate = sum(importance_weights[i] * grads[i] for i in draw) / draws
        total += probability * estimate
    return total


def test_draw_probabilities_and_importance_weights_hand_values():
    weights = torch.tensor([2.0, 1.0, 0.5, 0.0], dtype=torch.float64)  # k = 2 at q0 = 0, 0.5, 0.75, 1; sum 3.5
    # eps = 0: p = w / 3.5, and every prompt of positive weight gets the pool's mean weight 3.5 / 4 = 0.875.
    assert torch.allclose(prompt_draw_probabilities(weights, 0.0), torch.tensor([4 / 7, 2 / 7, 1 / 7, 0.0]).double())
    assert torch.allclose(prompt_importance_weights(weights, 0.0), torch.tensor([0.875, 0.875, 0.875, 0.0]).double())
    # eps = 0.5: p = 0.5 w / 3.5 + 0.5 / 4; ratio 1 / (N p) = 1 / (4 w / 7 + 0.5).
    expected_p = torch.tensor([2 / 7 + 1 / 8, 1 / 7 + 1 / 8, 1 / 14 + 1 / 8, 1 / 8]).double()
    assert torch.allclose(prompt_draw_probabilities(weights, 0.5), expected_p)
    assert torch.allclose(
        prompt_importance_ratios(weights, 0.5), torch.tensor([14 / 23, 14 / 15, 14 / 11, 2.0]).double()
    )
    assert torch.allclose(
        prompt_importance_weights(weights, 0.5), torch.tensor([28 / 23, 14 / 15, 7 / 11, 0.0]).double()
    )
    # The prompt of weight 0 is never drawn at eps = 0: its ratio is infinite, its importance weight 0.
    assert torch.isinf(prompt_importance_ratios(weights, 0.0)[3])


def test_floor_one_is_the_uniform_draw_and_gives_back_the_pass_at_k_weights_exactly():
    weights = pass_at_k_weight(Q0, K)
    assert torch.equal(prompt_draw_probabilities(weights, 1.0), torch.full((6,), 1 / 6, dtype=torch.float64))
    assert torch.equal(prompt_importance_ratios(weights, 1.0), torch.ones(6, dtype=torch.float64))
    assert torch.equal(prompt_importance_weights(weights, 1.0), weights)  # today's estimator, to the bit
    draw = sample_prompts(Q0, 4, "pass_at_k", K, 1.0, torch.Generator().manual_seed(0))
    assert torch.equal(draw["ratios"], torch.ones(4, dtype=torch.float64))


def test_floor_zero_gives_every_drawn_rollout_the_pools_mean_weight():
    weights = pass_at_k_weight(Q0, K)
    assert torch.allclose(prompt_importance_weights(weights, 0.0), torch.full((6,), 6.3 / 6, dtype=torch.float64))


@pytest.mark.parametrize("floor", [0.0, 0.1, 0.5, 1.0])
def test_the_drawn_batch_is_unbiased_for_the_pool_by_enumeration(floor):
    weights = pass_at_k_weight(Q0, K)  # all > 0
    probabilities = prompt_draw_probabilities(weights, floor)
    assert torch.isclose(probabilities.sum(), torch.tensor(1.0, dtype=torch.float64))
    expectation = exact_expectation(probabilities, prompt_importance_weights(weights, floor), GRADS, B)
    assert torch.allclose(expectation, pool_estimator(weights, GRADS), atol=1e-12)


@pytest.mark.parametrize("floor", [0.0, 0.3])
def test_enumeration_with_a_prompt_of_weight_zero(floor):
    # q0 = 1 gives w = 0: at eps = 0 that prompt is never drawn, and it adds nothing to the pool's estimator either.
    q0 = torch.tensor([0.1, 1.0, 0.6, 0.3], dtype=torch.float64)
    weights = pass_at_k_weight(q0, 3)
    probabilities = prompt_draw_probabilities(weights, floor)
    expectation = exact_expectation(probabilities, prompt_importance_weights(weights, floor), GRADS[:4], 3)
    assert torch.allclose(expectation, pool_estimator(weights, GRADS[:4]), atol=1e-12)


def test_enumeration_catches_a_wrong_importance_weight():
    # The check above can fail: with the plain Pass@k weight on a Pass@k-weighted draw, the batch over-counts the
    # hard prompts (the weight enters twice).
    weights = pass_at_k_weight(Q0, K)
    probabilities = prompt_draw_probabilities(weights, 0.0)
    biased = exact_expectation(probabilities, weights, GRADS, B)
    assert not torch.allclose(biased, pool_estimator(weights, GRADS), atol=1e-3)


def test_monte_carlo_through_the_trainers_sampler():
    # What the trainer does: sample_prompts on the pool's qhat(s_0), then each drawn rollout's weight w_k(s_0) times
    # the returned ratio. Fixed seed; tolerance of 5 standard errors of the mean estimate, per coordinate.
    generator = torch.Generator().manual_seed(1234)
    weights = pass_at_k_weight(Q0, K)
    for floor in (0.0, 0.2):
        estimates, counts = [], torch.zeros(6)
        for _ in range(20000):
            draw = sample_prompts(Q0, B, "pass_at_k", K, floor, generator)
            idx = draw["indices"]
            counts += torch.bincount(idx, minlength=6)
            estimates.append(((weights[idx] * draw["ratios"]).unsqueeze(1) * GRADS[idx]).mean(dim=0))
        estimates = torch.stack(estimates)  # (R, 3)
        stderr = estimates.std(dim=0) / estimates.size(0) ** 0.5
        assert ((estimates.mean(dim=0) - pool_estimator(weights, GRADS)).abs() < 5 * stderr).all()
        frequencies = counts / counts.sum()
        assert torch.allclose(frequencies.double(), prompt_draw_probabilities(weights, floor), atol=0.01)


def test_sample_prompts_is_reproducible_from_the_generator_state():
    generator = torch.Generator().manual_seed(7)
    state = generator.get_state()
    first = sample_prompts(Q0, 5, "pass_at_k", K, 0.1, generator)["indices"]
    generator.set_state(state)
    assert torch.equal(sample_prompts(Q0, 5, "pass_at_k", K, 0.1, generator)["indices"], first)
    assert first.shape == (5,) and ((first >= 0) & (first < 6)).all()


def test_near_half_keeps_the_prompts_nearest_one_half_hand_values():
    q0 = torch.tensor([0.125, 0.375, 0.875, 0.625, 0.5, 0.25])  # exact distances 0.375, 0.125, 0.375, 0.125, 0, 0.25
    assert near_half_prompts(q0, 3).tolist() == [4, 1, 3]  # the tie 0.375 / 0.625 goes to the earlier prompt
    assert near_half_prompts(q0, 6).tolist() == [4, 1, 3, 5, 0, 2]
    draw = sample_prompts(q0, 2, "near_half", pass_at_k=4)
    assert draw["indices"].tolist() == [4, 1]
    assert torch.equal(draw["ratios"], torch.ones(2, dtype=torch.float64))  # each keeps its plain w_k
    assert draw["probabilities"].tolist() == [0.0, 1.0, 0.0, 0.0, 1.0, 0.0]
    with pytest.raises(ValueError, match="num_prompts must be in"):
        near_half_prompts(q0, 7)


def test_prompt_scale_multiplies_the_pass_at_k_weight():
    values = torch.tensor([[0.25, 0.5], [0.5, 0.75]])
    rewards = torch.tensor([1.0, 0.0])
    mask = torch.ones(2, 2)
    plain = srppo_advantages(values, rewards, mask, pass_at_k=2)
    scale = torch.tensor([2.0, 0.5], dtype=torch.float64)
    scaled = srppo_advantages(values, rewards, mask, pass_at_k=2, prompt_scale=scale)
    assert torch.allclose(scaled.weights, torch.tensor([1.5 * 2.0, 1.0 * 0.5]))  # w_2 = 2 (1 - q0)
    assert torch.allclose(scaled.advantages, plain.advantages * scale.float().unsqueeze(1))
    assert torch.equal(scaled.returns, plain.returns)
    ones = srppo_advantages(values, rewards, mask, pass_at_k=2, prompt_scale=torch.ones(2, dtype=torch.float64))
    assert torch.equal(ones.advantages, plain.advantages)
    prompt = prompt_baseline_advantages(values, rewards, mask, pass_at_k=2, prompt_scale=scale)
    assert torch.allclose(prompt.advantages[:, 0], torch.tensor([3.0 * 0.75, 0.5 * -0.5]))
    with pytest.raises(ValueError, match="prompt_scale must have shape"):
        srppo_advantages(values, rewards, mask, pass_at_k=2, prompt_scale=torch.ones(3))


@pytest.mark.parametrize(
    "weights,floor,match",
    [
        (torch.tensor([1.0, -0.5]), 0.0, "finite and >= 0"),
        (torch.tensor([1.0, float("nan")]), 0.0, "finite and >= 0"),
        (torch.tensor([1.0, 2.0]), 1.5, r"eps must be in \[0, 1\]"),
        (torch.tensor([]), 0.0, "non-empty"),
    ],
)
def test_the_draw_refuses_bad_inputs(weights, floor, match):
    with pytest.raises(ValueError, match=match):
        prompt_draw_probabilities(weights, floor)


def test_a_pool_of_zero_weights_is_drawn_uniformly():
    weights = torch.zeros(4, dtype=torch.float64)
    assert torch.equal(prompt_draw_probabilities(weights, 0.0), torch.full((4,), 0.25, dtype=torch.float64))
    assert torch.equal(prompt_importance_weights(weights, 0.0), weights)

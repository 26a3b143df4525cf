# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The SR-PPO maths against values worked out by hand and against a brute-force reference."""

import math

import pytest
import torch

from trl_srppo.method.core import (
    AdvantageEstimate,
    batch_normalized,
    critic_loss,
    gae_advantages,
    generated_mask,
    initial_value,
    normalized_weights,
    pass_at_k_weight,
    scorable_mask,
    srppo_advantages,
)

VALUES = torch.tensor(
    [[0.5, 0.6, 0.7], [0.2, 0.4, 0.9], [0.3, 0.0, 0.0]]
)  # the last two columns of row 1/2 are padding
MASK = torch.tensor([[1, 1, 1], [1, 1, 0], [0, 0, 0]])
REWARDS = torch.tensor([1.0, 0.0, 1.0])


def brute_force_gae(values, rewards, mask, gamma, lam):
    """GAE straight from its definition, one rollout and one token at a time."""
    advantages = torch.zeros_like(values)
    for b in range(values.shape[0]):
        length = int(mask[b].sum())
        v = [float(x) for x in values[b, :length]] + [0.0]  # V(s_0) .. V(s_{T-1}), V(s_T) = 0
        r = [0.0] * (length - 1) + [float(rewards[b])] if length else []
        deltas = [r[t] + gamma * v[t + 1] - v[t] for t in range(length)]
        for t in range(length):
            advantages[b, t] = sum((gamma * lam) ** i * deltas[t + i] for i in range(length - t))
    return advantages


def test_pass_at_k_weight_hand_values():
    q0 = torch.tensor([0.0, 0.25, 0.5, 1.0])
    assert torch.allclose(pass_at_k_weight(q0, 4), torch.tensor([4.0, 4 * 0.75**3, 4 * 0.5**3, 0.0]))
    assert torch.equal(pass_at_k_weight(q0, 1), torch.ones(4))


def test_pass_at_k_weight_is_derivative_of_pass_at_k():
    q0 = torch.linspace(0.05, 0.95, 7, dtype=torch.float64, requires_grad=True)
    (1 - (1 - q0) ** 5).sum().backward()
    assert torch.allclose(q0.grad, pass_at_k_weight(q0.detach(), 5))


def test_pass_at_k_weight_rejects_k_below_one():
    with pytest.raises(ValueError, match="k must be"):
        pass_at_k_weight(torch.tensor([0.5]), 0)


def test_gae_monte_carlo_is_outcome_minus_value_ragged():
    advantages, returns = gae_advantages(VALUES, REWARDS, MASK, gamma=1.0, lam=1.0)
    expected = torch.tensor([[0.5, 0.4, 0.3], [-0.2, -0.4, 0.0], [0.0, 0.0, 0.0]])
    assert torch.allclose(advantages, expected)
    assert torch.allclose(returns, torch.tensor([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]))


def test_gae_td_lambda_zero_hand_values():
    advantages, returns = gae_advantages(VALUES, REWARDS, MASK, gamma=1.0, lam=0.0)
    # row 0: 0.6 - 0.5, 0.7 - 0.6, Y - 0.7; row 1: 0.4 - 0.2, Y - 0.4 (the value 0.9 in padding is ignored)
    assert torch.allclose(advantages, torch.tensor([[0.1, 0.1, 0.3], [0.2, -0.4, 0.0], [0.0, 0.0, 0.0]]))
    assert torch.allclose(returns, torch.tensor([[0.6, 0.7, 1.0], [0.4, 0.0, 0.0], [0.0, 0.0, 0.0]]))


def test_gae_intermediate_lambda_and_gamma_hand_values():
    advantages, _ = gae_advantages(VALUES[:1], REWARDS[:1], MASK[:1], gamma=1.0, lam=0.5)
    assert torch.allclose(advantages, torch.tensor([[0.225, 0.25, 0.3]]))
    advantages, _ = gae_advantages(VALUES[:1], REWARDS[:1], MASK[:1], gamma=0.9, lam=1.0)
    assert torch.allclose(advantages, torch.tensor([[0.31, 0.3, 0.3]]))


@pytest.mark.parametrize("gamma,lam", [(1.0, 1.0), (1.0, 0.0), (1.0, 0.7), (0.95, 0.9)])
def test_gae_matches_brute_force_on_random_ragged_batches(gamma, lam):
    generator = torch.Generator().manual_seed(0)
    values = torch.rand(6, 9, generator=generator, dtype=torch.float64)
    lengths = torch.tensor([9, 0, 1, 4, 7, 2])
    mask = (torch.arange(9).unsqueeze(0) < lengths.unsqueeze(1)).long()
    rewards = torch.randint(0, 2, (6,), generator=generator).double()
    advantages, returns = gae_advantages(values, rewards, mask, gamma=gamma, lam=lam)
    expected = brute_force_gae(values, rewards, mask, gamma, lam)
    assert torch.allclose(advantages, expected)
    assert torch.allclose(returns, (expected + values) * mask)


def test_gae_rejects_mask_with_holes_and_bad_shapes():
    with pytest.raises(ValueError, match="valid tokens followed by padding"):
        gae_advantages(VALUES, REWARDS, torch.tensor([[1, 0, 1], [1, 1, 0], [0, 0, 0]]))
    with pytest.raises(ValueError, match="expected values"):
        gae_advantages(VALUES, REWARDS[:2], MASK)


def test_srppo_advantages_weights_by_prompt_value_and_drops_unscorable():
    values = torch.tensor([[0.25, 0.5], [0.5, 0.5], [0.1, 0.2]])
    mask = torch.ones(3, 2)
    rewards = torch.tensor([1.0, 0.0, float("nan")])
    out = srppo_advantages(values, rewards, mask, pass_at_k=4)
    w0, w1 = 4 * 0.75**3, 4 * 0.5**3
    assert torch.allclose(out.weights[:2], torch.tensor([w0, w1]))
    expected = torch.tensor([[w0 * 0.75, w0 * 0.5], [w1 * -0.5, w1 * -0.5], [0.0, 0.0]])
    assert torch.allclose(out.advantages, expected)
    assert torch.equal(out.mask, torch.tensor([[1.0, 1.0], [1.0, 1.0], [0.0, 0.0]]))
    assert torch.allclose(out.returns[:2], torch.tensor([[1.0, 1.0], [0.0, 0.0]]))  # unweighted targets


def test_scorable_mask_drops_the_rows_without_a_finite_outcome():
    mask = torch.tensor([[1, 1], [1, 0], [1, 1]])
    rewards = torch.tensor([1.0, 0.0, float("nan")])
    assert torch.equal(scorable_mask(rewards, mask, torch.float32), torch.tensor([[1.0, 1.0], [1.0, 0.0], [0.0, 0.0]]))
    kept = scorable_mask(rewards, mask)  # the mask's own dtype
    assert kept.dtype == torch.int64 and torch.equal(kept, torch.tensor([[1, 1], [1, 0], [0, 0]]))


def test_generated_mask_keeps_each_completions_own_tokens():
    like = torch.zeros(3, 4, dtype=torch.int64)  # (B, C): GRPO's completion mask, zeroed for truncated ones
    mask = generated_mask(torch.tensor([1, 4, 0]), like)
    assert mask.dtype == torch.int64 and torch.equal(mask, torch.tensor([[1, 0, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]]))


def test_advantage_estimate_replace_and_cat():
    estimate = srppo_advantages(VALUES, REWARDS, MASK, pass_at_k=2)
    halved = estimate.replace(weights=estimate.weights / 2)
    assert torch.equal(halved.weights, estimate.weights / 2) and halved.advantages is estimate.advantages
    parts = [
        srppo_advantages(VALUES[rows], REWARDS[rows], MASK[rows], pass_at_k=2) for rows in (slice(0, 1), slice(1, 3))
    ]
    whole = AdvantageEstimate.cat(parts)
    for name in ("advantages", "returns", "weights", "mask"):
        assert torch.equal(getattr(whole, name), getattr(estimate, name)), name


def test_srppo_pass1_equals_plain_monte_carlo():
    out = srppo_advantages(VALUES, REWARDS, MASK, pass_at_k=1)
    advantages, _ = gae_advantages(VALUES, REWARDS, MASK)
    assert torch.allclose(out.advantages, advantages)


def test_critic_loss_hand_values():
    zero = torch.zeros(1, 1)
    one = torch.ones(1, 1)
    # sigmoid(0) = 0.5 against 1: BCE ln 2 plus squared error 0.25
    assert math.isclose(critic_loss(zero, one, one).item(), math.log(2) + 0.25, rel_tol=1e-6)
    assert math.isclose(critic_loss(zero, one, one, loss_type="bce").item(), math.log(2), rel_tol=1e-6)
    assert math.isclose(critic_loss(zero, one, one, mse_coef=2.0).item(), math.log(2) + 0.5, rel_tol=1e-6)
    linear = critic_loss(torch.tensor([[0.3]]), one, one, head="linear", loss_type="mse")
    assert math.isclose(linear.item(), 0.49, rel_tol=1e-6)


def test_critic_loss_is_token_mean_over_mask():
    raw = torch.tensor([[0.0, 0.0, 5.0]])
    returns = torch.tensor([[1.0, 0.0, 123.0]])
    mask = torch.tensor([[1, 1, 0]])
    loss = critic_loss(raw, returns, mask, head="linear", loss_type="mse")
    assert math.isclose(loss.item(), 0.5, rel_tol=1e-6)  # (1 + 0) / 2, the padded token ignored
    empty = critic_loss(raw, returns, torch.zeros(1, 3))
    assert empty.item() == 0.0


def test_critic_loss_value_clipping_keeps_larger_loss():
    raw = torch.tensor([[2.0]])  # sigmoid = 0.8808
    one = torch.ones(1, 1)
    old = torch.tensor([[0.5]])
    loss = critic_loss(raw, one, one, old_values=old, cliprange_value=0.1)
    clipped = -math.log(0.6) + 0.4**2  # the value clipped to 0.5 + 0.1
    assert math.isclose(loss.item(), clipped, rel_tol=1e-5)
    with pytest.raises(ValueError, match="old_values"):
        critic_loss(raw, one, one, cliprange_value=0.1)


def test_critic_loss_with_bootstrapped_targets_and_value_clipping_on_a_saturated_critic():
    # Saturated values: the targets A_t + V(s_{t-1}) come back from float64 advantages and round to just outside
    # [0, 1] (1.0000001, -6e-8), which the clipped branch's probability-space BCE refuses unless they are clamped.
    torch.manual_seed(0)
    raw = 3 * torch.randn(256, 6)  # (B, T)
    values = torch.sigmoid(raw)
    outcome = torch.randint(0, 2, (256,)).float()
    mask = torch.ones(256, 6)
    _, returns = gae_advantages(values, outcome, mask, gamma=1.0, lam=1.0)
    assert returns.max() > 1 or returns.min() < 0  # the case this test is about
    loss = critic_loss(raw, returns, mask, old_values=values, cliprange_value=0.2)
    # The clipped branch equals the unclipped one here (old values = new values), so the loss is the plain one on
    # targets clamped into [0, 1].
    clamped = returns.clamp(0, 1)
    expected = torch.nn.functional.binary_cross_entropy_with_logits(raw, clamped) + ((values - clamped) ** 2).mean()
    assert torch.isfinite(loss) and torch.allclose(loss, expected, atol=1e-5)


def test_critic_loss_refuses_bce_on_linear_head():
    with pytest.raises(ValueError, match="sigmoid head"):
        critic_loss(torch.zeros(1, 1), torch.ones(1, 1), torch.ones(1, 1), head="linear", loss_type="bce_mse")


def test_monte_carlo_gae_is_exact_over_long_completions():
    generator = torch.Generator().manual_seed(1)
    values = torch.rand(4, 9182, generator=generator)  # float32, the paper's response length
    mask = torch.ones(4, 9182)
    mask[1, 5000:] = 0
    rewards = torch.tensor([1.0, 0.0, 1.0, 0.0])
    advantages, _ = gae_advantages(values, rewards, mask)
    torch.testing.assert_close(advantages, (rewards.unsqueeze(1) - values) * mask, atol=1e-6, rtol=0)


def test_initial_value_is_the_logit_of_the_success_rate_hand_values():
    assert initial_value(torch.tensor([1.0, 0.0, 0.0, 0.0]), "sigmoid") == pytest.approx(math.log(1 / 3))  # p = 1/4
    # No success in 4 rollouts: the rate is kept at 1 / (2 * 4) = 1/8, logit log(1/7); all successes: 7/8.
    assert initial_value(torch.zeros(4), "sigmoid") == pytest.approx(math.log(1 / 7))
    assert initial_value(torch.ones(4), "sigmoid") == pytest.approx(math.log(7))
    assert initial_value(torch.tensor([0.0, 3.0]), "linear") == pytest.approx(1.5)  # the mean itself, unclamped
    assert torch.sigmoid(torch.tensor(initial_value(torch.tensor([1.0, 1.0, 0.0]), "sigmoid"))) == pytest.approx(2 / 3)
    # Unscorable rollouts (NaN) are left out: the rate of [1, NaN, 0, NaN] is 1/2; none scorable gives None.
    assert initial_value(torch.tensor([1.0, float("nan"), 0.0, float("nan")]), "sigmoid") == pytest.approx(0.0)
    assert initial_value(torch.full((3,), float("nan")), "sigmoid") is None


def test_normalized_weights_have_batch_mean_one_hand_values():
    weights = torch.tensor([2.0, 1.0, 1.0])  # mean 4/3
    torch.testing.assert_close(normalized_weights(weights, weights.mean()), torch.tensor([1.5, 0.75, 0.75]))
    # The mean is over the whole batch (every process), not the local rows: [2, 1] of a batch whose mean is 2.
    torch.testing.assert_close(normalized_weights(torch.tensor([2.0, 1.0]), 2.0), torch.tensor([1.0, 0.5]))
    with pytest.raises(ValueError, match="must be > 0"):
        normalized_weights(torch.zeros(2), 0.0)


def test_batch_normalized_divides_by_the_mean_weight_of_the_rows_that_move_the_policy_hand_values():
    from trl_srppo.method.core import AdvantageEstimate

    # Rows: a scorable rollout (weight 3), an unscorable one (NaN: weight 9, left out of the mean), a scorable one
    # whose tokens the policy's loss masks entirely (weight 5, left out), and a scorable one (weight 1).
    weights = torch.tensor([3.0, 9.0, 5.0, 1.0])
    advantages = torch.tensor([[0.6, 0.3], [0.0, 0.0], [1.0, 1.0], [-0.4, -0.2]])
    estimate = AdvantageEstimate(advantages, torch.zeros(4, 2), weights, torch.ones(4, 2))
    rewards = torch.tensor([1.0, float("nan"), 0.0, 0.0])
    policy_mask = torch.tensor([[1, 1], [1, 1], [0, 0], [1, 0]])
    out = batch_normalized(estimate, rewards, policy_mask, gather=lambda t: t)  # mean of 3 and 1: 2
    torch.testing.assert_close(out.weights, torch.tensor([1.5, 4.5, 2.5, 0.5]))
    torch.testing.assert_close(out.advantages, advantages / 2.0)
    # Two processes: the other's rows (weight 5, moving) enter the mean, (3 + 1 + 5) / 3 = 3.
    other = torch.tensor([5.0, 1.0])
    out = batch_normalized(estimate, rewards, policy_mask, gather=lambda t: torch.cat([t, other]))
    torch.testing.assert_close(out.weights, weights / 3.0)
    # No row moves the policy: unchanged.
    same = batch_normalized(estimate, torch.full((4,), float("nan")), policy_mask, gather=lambda t: t)
    assert same is estimate

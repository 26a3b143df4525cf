# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The critic and advantage metrics of a generated batch, over every process's rollouts.

Each process reduces its rows to sums and extremes; `gather` stacks every process's; the metrics are made from the
totals, so they are those of the global batch whatever its split (every process calls this with tensors of the same
shape).
"""

from collections.abc import Callable

import torch


def batch_metrics(
    values: torch.Tensor,
    rewards: torch.Tensor,
    estimate: dict,
    advantages: torch.Tensor,
    policy_mask: torch.Tensor,
    head: str,
    gather: Callable[[torch.Tensor], torch.Tensor],
) -> dict[str, float]:
    """The batch's metrics, by name.

    Args:
        values (`torch.Tensor` of shape `(B, C)`):
            The critic's values `qhat(s_0) .. qhat(s_{C-1})` before its update.
        rewards (`torch.Tensor` of shape `(B,)`):
            The outcomes `Y` (NaN: unscorable).
        estimate (`dict`):
            The advantage estimate: `mask` `(B, C)` (tokens of scorable rollouts the critic sees), `returns` `(B, C)`
            (the value targets `G_t`), `weights` `(B,)` (the Pass@k weights).
        advantages (`torch.Tensor` of shape `(B, C)`):
            The policy's advantages.
        policy_mask (`torch.Tensor` of shape `(B, C)`):
            The tokens of the policy's loss.
        head (`str`):
            `"sigmoid"` (the values are probabilities: their squared error to `Y` is a Brier score) or `"linear"`.
        gather (`Callable`):
            Stacks a `(1, n)` tensor of every process along the first dimension (`accelerate.utils.gather`).

    Returns:
        `dict[str, float]`; a metric whose rows or tokens are none in the batch is left out.
    """
    mask = estimate["mask"]  # (B, C)
    scorable = torch.isfinite(rewards)  # (B,)
    y = torch.where(scorable, rewards, torch.zeros_like(rewards))  # (B,)
    returns = estimate["returns"]  # (B, C)
    adv_mask = policy_mask * scorable.unsqueeze(1)  # (B, C), tokens that carry a policy advantage
    weights = estimate["weights"]  # (B,)
    sums = torch.stack(
        [
            mask.sum(),
            (values * mask).sum(),
            ((values - y.unsqueeze(1)) ** 2 * mask).sum(),  # squared error of every prefix's value to Y
            scorable.sum(),
            ((values[:, 0] - y) ** 2 * scorable).sum(),  # squared error of qhat(s_0) to Y
            (returns * mask).sum(),
            (returns**2 * mask).sum(),
            ((returns - values) * mask).sum(),
            ((returns - values) ** 2 * mask).sum(),
            adv_mask.sum(),
            (advantages * adv_mask).sum(),
            (advantages**2 * adv_mask).sum(),
            (weights * scorable).sum(),
        ]
    ).double()
    totals = gather(sums.reshape(1, -1)).sum(0).tolist()
    n_tok, s_v, s_err, n_seq, s_err0, s_g, s_g2, s_e, s_e2, n_adv, s_a, s_a2, s_w = totals
    inf = torch.tensor(float("inf"), device=values.device, dtype=torch.float32)
    extremes = torch.stack(
        [
            torch.where(adv_mask.bool(), advantages, inf).min(),
            -torch.where(adv_mask.bool(), advantages, -inf).max(),
            torch.where(scorable, weights, inf).min(),
            -torch.where(scorable, weights, -inf).max(),
        ]
    )
    a_min, neg_a_max, w_min, neg_w_max = gather(extremes.reshape(1, -1)).min(0).values.tolist()

    # Under the sigmoid head the values are probabilities of Y = 1, and their squared error is the Brier score.
    error = "brier" if head == "sigmoid" else "squared_error"
    metrics = {}
    if n_tok > 0:
        metrics["critic/value_mean"] = s_v / n_tok
        metrics[f"critic/{error}_tokens"] = s_err / n_tok
        var_g = s_g2 / n_tok - (s_g / n_tok) ** 2  # the variance of the returns G_t
        if var_g > 1e-12:  # undefined when every return in the batch is the same
            var_e = s_e2 / n_tok - (s_e / n_tok) ** 2  # the variance of G_t - qhat(s_t)
            metrics["critic/explained_variance"] = 1.0 - var_e / var_g
    if n_seq > 0:
        metrics[f"critic/{error}"] = s_err0 / n_seq
        metrics["passk/weight_mean"] = s_w / n_seq
        metrics["passk/weight_min"] = w_min
        metrics["passk/weight_max"] = -neg_w_max
    if n_adv > 0:
        mean = s_a / n_adv
        metrics["advantages/mean"] = mean
        metrics["advantages/std"] = max(s_a2 / n_adv - mean**2, 0.0) ** 0.5
        metrics["advantages/min"] = a_min
        metrics["advantages/max"] = -neg_a_max
    return metrics

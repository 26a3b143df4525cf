# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The critic and advantage metrics of a generated batch, over every process's rollouts.

Each process reduces its rows to sums and extremes; `gather` stacks every process's; the metrics are made from the
totals, so they are those of the global batch whatever its split (every process calls this with tensors of the same
shape). The prompts' values `qhat(s_0)` are gathered whole, for their spread and their AUC against the outcomes: how
well the critic tells the batch's prompts apart before it has seen their rollouts, which is what the Pass@k weight
acts on.
"""

from collections.abc import Callable

import torch

from .core import CRITIC_HEADS, AdvantageEstimate, scorable_mask, scored_outcomes

# The sums each process reduces its rows to, in the order they are stacked and gathered.
_SUMS = (
    "tokens",  # tokens of scorable rollouts (the critic's loss mask)
    "value",  # their values qhat(s_{t-1})
    "error",  # squared error of every prefix's value to Y
    "rows",  # scorable rollouts
    "error_s0",  # squared error of qhat(s_0) to Y
    "return",  # the value targets G_t
    "return_sq",
    "residual",  # G_t - qhat(s_{t-1})
    "residual_sq",
    "policy_tokens",  # tokens that carry a policy advantage
    "advantage",
    "advantage_sq",
    "weight",  # Pass@k weights of the scorable rollouts
)


def batch_metrics(
    values: torch.Tensor,
    rewards: torch.Tensor,
    estimate: AdvantageEstimate,
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
        estimate ([`~trl_srppo.method.core.AdvantageEstimate`]):
            The advantage estimate: its `mask` `(B, C)` (tokens of scorable rollouts the critic sees), `returns`
            `(B, C)` (the value targets `G_t`) and `weights` `(B,)` (the Pass@k weights) are read.
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
    totals = _gathered_totals(values, rewards, estimate, advantages, policy_mask, gather)
    # Under the sigmoid head the values are probabilities of Y = 1, and their squared error is the Brier score.
    error = "brier" if CRITIC_HEADS[head].logits else "squared_error"
    prompts = prompt_value_metrics(values[:, 0], rewards, gather)
    return {**_critic_metrics(totals, error), **prompts, **_weight_metrics(totals), **_advantage_metrics(totals)}


def prompt_value_metrics(
    prompt_values: torch.Tensor, rewards: torch.Tensor, gather: Callable[[torch.Tensor], torch.Tensor]
) -> dict[str, float]:
    """The critic's values of the batch's prompts, `qhat(s_0)` before its update, against the rollouts' outcomes,
    over the scorable rollouts of every process.

    Args:
        prompt_values (`torch.Tensor` of shape `(B,)`):
            `qhat(s_0)` of each rollout's prompt.
        rewards (`torch.Tensor` of shape `(B,)`):
            The outcomes `Y` (NaN: unscorable).
        gather (`Callable`):
            Stacks every process's `(B, 2)` tensor along the first dimension.

    Returns:
        `dict[str, float]`: `critic/prompt_value_mean` and `critic/outcome_mean` (the critic's mean value of the
        prompts and their success rate), `critic/prompt_value_trail` (the success rate minus that mean: how far the
        critic's mean trails the batch's success rate, positive while it lags a rising one),
        `critic/prompt_value_std` (the values' population standard deviation: 0 for a critic that gives every prompt
        one value, so that every Pass@k weight is the same) and
        `critic/prompt_auc` (the AUC of `qhat(s_0)` against `Y >= 0.5`: 0.5 for a critic that tells no prompt from
        another; left out when the batch's outcomes are all of one class) and `critic/prompt_baseline_ratio`
        (`sum (Y - qhat(s_0))^2 / sum (Y - Ybar)^2`: the squared advantage of the first tokens over what the batch's
        own success rate `Ybar`, the best single value, would leave; below 1 when the critic is a better baseline for
        these prompts than any constant, and left out with the AUC). Empty when no rollout is scorable.
    """
    pairs = gather(torch.stack([prompt_values.float(), rewards.float()], dim=1))  # (N, 2) over every process
    pairs = pairs[torch.isfinite(pairs[:, 1])].double().cpu()  # the scorable rollouts
    if len(pairs) == 0:
        return {}
    v, y = pairs[:, 0], pairs[:, 1]
    metrics = {
        "critic/prompt_value_mean": v.mean().item(),
        "critic/prompt_value_std": v.std(correction=0).item(),
        "critic/outcome_mean": y.mean().item(),
        "critic/prompt_value_trail": (y.mean() - v.mean()).item(),
    }
    area = auc(v.tolist(), (y >= 0.5).long().tolist())
    if area == area:  # NaN when every outcome is of one class
        metrics["critic/prompt_auc"] = area
        metrics["critic/prompt_baseline_ratio"] = ((y - v) ** 2).sum().item() / ((y - y.mean()) ** 2).sum().item()
    return metrics


def _gathered_totals(values, rewards, estimate, advantages, policy_mask, gather) -> dict[str, float]:
    """The sums of `_SUMS` over every process's rows, and the extremes of the advantages (over the tokens that carry
    one) and of the Pass@k weights (over the scorable rollouts): one gather of each."""
    scorable = torch.isfinite(rewards)  # (B,)
    y = scored_outcomes(rewards)  # (B,)
    mask, returns, weights = estimate.mask, estimate.returns, estimate.weights  # (B, C), (B, C), (B,)
    adv_mask = scorable_mask(rewards, policy_mask)  # (B, C), tokens that carry a policy advantage
    sums = torch.stack(
        [
            mask.sum(),
            (values * mask).sum(),
            ((values - y.unsqueeze(1)) ** 2 * mask).sum(),
            scorable.sum(),
            ((values[:, 0] - y) ** 2 * scorable).sum(),
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
    totals = dict(zip(_SUMS, gather(sums.reshape(1, -1)).sum(0).tolist()))
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
    return {
        **totals,
        "advantage_min": a_min,
        "advantage_max": -neg_a_max,
        "weight_min": w_min,
        "weight_max": -neg_w_max,
    }


def _critic_metrics(totals: dict[str, float], error: str) -> dict[str, float]:
    """The critic's values against the outcomes and the targets: token means, and `qhat(s_0)`'s error per rollout."""
    metrics = {}
    n_tok, n_seq = totals["tokens"], totals["rows"]
    if n_tok > 0:
        metrics["critic/value_mean"] = totals["value"] / n_tok
        metrics[f"critic/{error}_tokens"] = totals["error"] / n_tok
        var_g = totals["return_sq"] / n_tok - (totals["return"] / n_tok) ** 2  # the variance of the returns G_t
        if var_g > 1e-12:  # undefined when every return in the batch is the same
            var_e = totals["residual_sq"] / n_tok - (totals["residual"] / n_tok) ** 2  # of G_t - qhat(s_t)
            metrics["critic/explained_variance"] = 1.0 - var_e / var_g
    if n_seq > 0:
        metrics[f"critic/{error}"] = totals["error_s0"] / n_seq
    return metrics


def _weight_metrics(totals: dict[str, float]) -> dict[str, float]:
    """The Pass@k weights of the scorable rollouts: mean, min and max."""
    if totals["rows"] <= 0:
        return {}
    return {
        "passk/weight_mean": totals["weight"] / totals["rows"],
        "passk/weight_min": totals["weight_min"],
        "passk/weight_max": totals["weight_max"],
    }


def _advantage_metrics(totals: dict[str, float]) -> dict[str, float]:
    """The policy's advantages over the tokens that carry one: mean, standard deviation, min and max."""
    n_adv = totals["policy_tokens"]
    if n_adv <= 0:
        return {}
    mean = totals["advantage"] / n_adv
    return {
        "advantages/mean": mean,
        "advantages/std": max(totals["advantage_sq"] / n_adv - mean**2, 0.0) ** 0.5,
        "advantages/min": totals["advantage_min"],
        "advantages/max": totals["advantage_max"],
    }


def auc(scores: list[float], labels: list[int]) -> float:
    """Probability that a random positive outscores a random negative, ties counting half (NaN if a class is empty).

    Computed from average ranks (Mann-Whitney U), `O(m log m)`. NaN scores have no rank: a `ValueError` is raised,
    leave the unscored items out first (as [`critic_quality`] does).
    """
    scores_t = torch.as_tensor(scores, dtype=torch.float64)
    labels_t = torch.as_tensor(labels, dtype=torch.bool)
    num_nan = int(torch.isnan(scores_t).sum())
    if num_nan:
        raise ValueError(
            f"auc: {num_nan} of {len(scores)} scores are NaN and cannot be ranked; leave those items out first."
        )
    num_pos, num_neg = int(labels_t.sum()), int((~labels_t).sum())
    if num_pos == 0 or num_neg == 0:
        return float("nan")
    order = torch.argsort(scores_t, stable=True)
    sorted_scores = scores_t[order]
    ranks = torch.empty_like(scores_t)
    i, m = 0, len(scores)
    while i < m:  # average rank (1-based) over each run of ties
        j = i
        while j + 1 < m and sorted_scores[j + 1] == sorted_scores[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    u = float(ranks[labels_t].sum()) - num_pos * (num_pos + 1) / 2
    return u / (num_pos * num_neg)

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The SR-PPO estimator as pure tensor functions.

Notation follows the paper (see `docs/method.md`): a prompt `x`, completion tokens `y_1 .. y_T`, prefix
states `s_t = (x, y_1 .. y_t)`, a binary outcome `Y` for the whole completion and a prefix critic `qhat(s)`.

Alignment used everywhere in this module: for a completion padded to `T` positions, column `t - 1` of a `(B, T)`
tensor belongs to completion token `t`, and `values[:, t - 1]` is the critic's value of the prefix *before* that
token, `V(s_{t-1})`. So `values[:, 0]` is `qhat(s_0)`, the value of the prompt alone.

Every function here is free of model, trainer and distributed state, so it can be checked against hand-computed
numbers (see `tests/test_core.py`) and reused by the analysis tools.
"""

import torch
import torch.nn.functional as F

CRITIC_HEADS = ("sigmoid", "linear")
CRITIC_LOSSES = ("bce_mse", "bce", "mse")


def pass_at_k_weight(q0: torch.Tensor, k: int) -> torch.Tensor:
    """Pass@k prompt weight `w_k(s_0) = k * (1 - q(s_0)) ** (k - 1)`, elementwise.

    It is the derivative of `Pass@k = 1 - (1 - q) ** k` with respect to `q`: near `k` for prompts the policy never
    solves (`q ~ 0`) and near 0 for prompts it always solves (`q ~ 1`). `k = 1` gives weight 1 everywhere.

    Args:
        q0 (`torch.Tensor`):
            Success probability of each prompt, any shape, values in `[0, 1]`.
        k (`int`):
            The k of the Pass@k objective, `k >= 1`.

    Returns:
        `torch.Tensor`: the weights, same shape as `q0`.
    """
    if k < 1:
        raise ValueError(f"pass_at_k_weight: k must be an integer >= 1, got {k}.")
    return k * (1.0 - q0) ** (k - 1)


def normalized_weights(weights: torch.Tensor, batch_mean: torch.Tensor | float) -> torch.Tensor:
    """Pass@k weights divided by their batch mean, `w_k(s_0) / mean_batch w_k`, so that they re-weight prompts without
    changing the size of the policy's step (their mean over the batch is 1).

    Args:
        weights (`torch.Tensor` of shape `(B,)`):
            The Pass@k weights of the local rows.
        batch_mean (`torch.Tensor` or `float`):
            Mean of the weights over the whole generated batch (every process), `> 0`.

    Returns:
        `torch.Tensor` of shape `(B,)`.
    """
    batch_mean = torch.as_tensor(batch_mean, dtype=weights.dtype, device=weights.device)
    if not batch_mean > 0:
        raise ValueError(f"normalized_weights: the batch mean of the Pass@k weights must be > 0, got {batch_mean}.")
    return weights / batch_mean


def initial_value(outcomes: torch.Tensor, head: str) -> float | None:
    """The raw output a fresh value head starts at so that every prefix's value is the batch's success rate.

    For the sigmoid head, the logit of the mean outcome kept within `[1 / (2N), 1 - 1 / (2N)]` (`N` scorable
    outcomes), so that a batch with no success (or no failure) gives a finite logit; for the linear head, the mean
    outcome itself. Unscorable rollouts (NaN outcomes) are left out; `None` when none is scorable.

    Args:
        outcomes (`torch.Tensor` of shape `(N,)`):
            Outcomes `Y` of the first generated batch, every process's rollouts (NaN: unscorable).
        head (`str`):
            `"sigmoid"` or `"linear"`.
    """
    outcomes = outcomes.float()
    outcomes = outcomes[torch.isfinite(outcomes)]  # (N',) scorable rollouts
    if outcomes.numel() == 0:
        return None
    mean = outcomes.mean()
    if head == "linear":
        return float(mean)
    eps = 0.5 / outcomes.numel()
    rate = mean.clamp(eps, 1.0 - eps)
    return float(torch.log(rate) - torch.log1p(-rate))


def gae_advantages(
    values: torch.Tensor, rewards: torch.Tensor, mask: torch.Tensor, gamma: float = 1.0, lam: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized advantage estimation with the outcome as the only, terminal, reward.

    For completion token `t` of a rollout with `T` valid tokens:
    `delta_t = r_t + gamma * V(s_t) - V(s_{t-1})`, with `r_t = 0` except `r_T = Y` and `V(s_T) = 0` (terminal), and
    `A_t = sum_{l >= 0} (gamma * lam) ** l * delta_{t + l}`. The value target is `A_t + V(s_{t-1})`.

    With `gamma = lam = 1` this is the Monte Carlo advantage `A_t = Y - V(s_{t-1})` of SR-PPO: the critic only acts as
    a baseline. With `lam = 0` it is the one-step TD advantage `V(s_t) - V(s_{t-1})` (and `Y - V(s_{T-1})` at the last
    token), the paper's TD ablation.

    Args:
        values (`torch.Tensor` of shape `(B, T)`):
            `values[:, t - 1] = V(s_{t-1})`, the critic's value of the prefix before completion token `t`.
        rewards (`torch.Tensor` of shape `(B,)`):
            The outcome `Y` of each completion, given to its last valid token.
        mask (`torch.Tensor` of shape `(B, T)`):
            1 for valid completion tokens, 0 for padding. The valid tokens of a row must come first (right padding);
            rows may have different lengths, including 0.
        gamma (`float`, *optional*, defaults to `1.0`):
            Discount factor.
        lam (`float`, *optional*, defaults to `1.0`):
            GAE lambda.

    Returns:
        `tuple[torch.Tensor, torch.Tensor]`: `(advantages, returns)`, both `(B, T)` and zero on padding.
    """
    if values.shape != mask.shape or rewards.shape != values.shape[:1]:
        raise ValueError(
            f"gae_advantages: expected values (B, T), rewards (B,) and mask (B, T); got {tuple(values.shape)}, "
            f"{tuple(rewards.shape)} and {tuple(mask.shape)}."
        )
    mask = mask.to(values.dtype)  # (B, T)
    if (mask[:, 1:] > mask[:, :-1]).any():
        raise ValueError("gae_advantages: every row of `mask` must be its valid tokens followed by padding.")
    next_mask = F.pad(mask[:, 1:], (0, 1))  # (B, T), 1 where token t + 1 exists
    next_values = F.pad(values[:, 1:], (0, 1)) * next_mask  # (B, T), V(s_t), 0 after the last token
    terminal = mask * (1.0 - next_mask)  # (B, T), 1 at the last valid token
    token_rewards = terminal * rewards.to(values.dtype).unsqueeze(1)  # (B, T), r_t
    deltas = (token_rewards + gamma * next_values - values) * mask  # (B, T)

    decay = gamma * lam
    if decay == 1.0:  # A_t = sum of the remaining deltas (Monte Carlo): a reverse cumulative sum, no loop over T
        advantages = deltas.double().flip(1).cumsum(1).flip(1).to(values.dtype)  # (B, T), float64 sum over long T
    elif decay == 0.0:  # A_t = delta_t (one-step TD)
        advantages = deltas
    else:  # A_t = delta_t + decay * A_{t+1}, right to left
        advantages = torch.zeros_like(values)  # (B, T)
        running = torch.zeros_like(rewards, dtype=values.dtype)  # (B,), A_{t+1}
        for t in reversed(range(values.shape[1])):
            running = deltas[:, t] + decay * next_mask[:, t] * running
            advantages[:, t] = running
    advantages = advantages * mask
    returns = (advantages + values) * mask
    return advantages, returns


def srppo_advantages(
    values: torch.Tensor,
    rewards: torch.Tensor,
    mask: torch.Tensor,
    pass_at_k: int = 1,
    gamma: float = 1.0,
    lam: float = 1.0,
) -> dict[str, torch.Tensor]:
    """Token-level SR-PPO advantages: `A_t = w_k(qhat(s_0)) * GAE_t`, with `GAE_t = Y - qhat(s_{t-1})` at `lam = 1`.

    A rollout whose reward is NaN (every reward function returned `None`) is unscorable: its advantages are 0 and it
    is dropped from the valid mask, so it also leaves the critic's loss.

    Args:
        values (`torch.Tensor` of shape `(B, T)`):
            Critic values `V(s_{t-1})`, computed by the critic *before* it is updated on this batch.
        rewards (`torch.Tensor` of shape `(B,)`):
            Outcome of each rollout; NaN marks an unscorable rollout.
        mask (`torch.Tensor` of shape `(B, T)`):
            Valid completion tokens (right padding).
        pass_at_k (`int`, *optional*, defaults to `1`):
            The k of the Pass@k weight; 1 disables the weight.
        gamma (`float`, *optional*, defaults to `1.0`):
            Discount factor of GAE.
        lam (`float`, *optional*, defaults to `1.0`):
            Lambda of GAE.

    Returns:
        `dict[str, torch.Tensor]` with keys `advantages` `(B, T)` (weighted), `returns` `(B, T)` (the critic's
        targets, unweighted), `weights` `(B,)` (the Pass@k weight of each prompt) and `mask` `(B, T)` (valid tokens of
        scorable rollouts).
    """
    scorable = torch.isfinite(rewards)  # (B,)
    mask = mask.to(values.dtype) * scorable.unsqueeze(1)  # (B, T)
    rewards = torch.where(scorable, rewards, torch.zeros_like(rewards))  # (B,)
    advantages, returns = gae_advantages(values, rewards, mask, gamma=gamma, lam=lam)
    weights = pass_at_k_weight(values[:, 0].clamp(0.0, 1.0), pass_at_k)  # (B,), from qhat(s_0)
    return {"advantages": advantages * weights.unsqueeze(1), "returns": returns, "weights": weights, "mask": mask}


def prompt_baseline_advantages(
    values: torch.Tensor, rewards: torch.Tensor, mask: torch.Tensor, pass_at_k: int = 1
) -> dict[str, torch.Tensor]:
    """Advantages with one baseline per prompt: `A_t = w_k(qhat(s_0)) * (Y - qhat(s_0))` for every token.

    The critic's value of the prompt alone, `qhat(s_0)`, is the baseline of every token of the rollout (the prompt's
    difficulty), instead of the value of each prefix. At the first token this is the SR-PPO advantage of
    [`srppo_advantages`]. The critic's targets stay the Monte Carlo returns: the outcome `Y` on every valid token.
    Unscorable rollouts (NaN reward) get no advantage and leave the mask, as in [`srppo_advantages`].

    Args:
        values (`torch.Tensor` of shape `(B, T)`):
            Critic values `V(s_{t-1})` before the critic's update; only column 0, `qhat(s_0)`, enters the advantage.
        rewards (`torch.Tensor` of shape `(B,)`):
            Outcome of each rollout; NaN marks an unscorable rollout.
        mask (`torch.Tensor` of shape `(B, T)`):
            Valid completion tokens.
        pass_at_k (`int`, *optional*, defaults to `1`):
            The k of the Pass@k weight; 1 disables the weight.

    Returns:
        `dict[str, torch.Tensor]` with the keys of [`srppo_advantages`]: `advantages` `(B, T)`, `returns` `(B, T)`,
        `weights` `(B,)` and `mask` `(B, T)`.
    """
    if values.shape != mask.shape or rewards.shape != values.shape[:1]:
        raise ValueError(
            f"prompt_baseline_advantages: expected values (B, T), rewards (B,) and mask (B, T); got "
            f"{tuple(values.shape)}, {tuple(rewards.shape)} and {tuple(mask.shape)}."
        )
    scorable = torch.isfinite(rewards)  # (B,)
    mask = mask.to(values.dtype) * scorable.unsqueeze(1)  # (B, T)
    rewards = torch.where(scorable, rewards, torch.zeros_like(rewards)).to(values.dtype)  # (B,)
    q0 = values[:, 0]  # (B,), qhat(s_0)
    weights = pass_at_k_weight(q0.clamp(0.0, 1.0), pass_at_k)  # (B,)
    advantages = (weights * (rewards - q0)).unsqueeze(1) * mask  # (B, T), the same on every valid token
    returns = rewards.unsqueeze(1) * mask  # (B, T)
    return {"advantages": advantages, "returns": returns, "weights": weights, "mask": mask}


def critic_values(raw: torch.Tensor, head: str) -> torch.Tensor:
    """Turn the critic's raw head output into values: `sigmoid` for the SR-PPO critic, identity for a linear one."""
    if head == "sigmoid":
        return torch.sigmoid(raw)
    if head == "linear":
        return raw
    raise ValueError(f"critic head must be one of {CRITIC_HEADS}, got {head!r}.")


def critic_loss(
    raw: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    head: str = "sigmoid",
    loss_type: str = "bce_mse",
    mse_coef: float = 1.0,
    old_values: torch.Tensor | None = None,
    cliprange_value: float | None = None,
) -> torch.Tensor:
    """The critic's loss, a mean over the valid tokens of the batch.

    - `bce_mse` (SR-PPO): `BCE(qhat, target) + mse_coef * (qhat - target) ** 2` with `qhat = sigmoid(raw)`.
    - `bce`: the binary cross-entropy term alone.
    - `mse` (PPO baseline with a `linear` head, or a sigmoid critic without BCE): `mse_coef * (V - target) ** 2`.

    With `cliprange_value`, each term is also computed at `old_values + clip(V - old_values, -c, c)` and the larger
    of the clipped and unclipped losses is kept per token, as in PPO's value clipping.

    Args:
        raw (`torch.Tensor` of shape `(B, T)`):
            Raw head output for the states `s_0 .. s_{T-1}` (logits for a sigmoid head).
        returns (`torch.Tensor` of shape `(B, T)`):
            Targets, `A_t + V(s_{t-1})` from [`gae_advantages`] (the outcome `Y` at `lam = 1`).
        mask (`torch.Tensor` of shape `(B, T)`):
            Tokens that enter the loss.
        head (`str`, *optional*, defaults to `"sigmoid"`):
            `"sigmoid"` or `"linear"`.
        loss_type (`str`, *optional*, defaults to `"bce_mse"`):
            One of `"bce_mse"`, `"bce"`, `"mse"`; the BCE terms need a sigmoid head.
        mse_coef (`float`, *optional*, defaults to `1.0`):
            Weight of the squared-error term.
        old_values (`torch.Tensor` of shape `(B, T)`, *optional*):
            Values before the update; required with `cliprange_value`.
        cliprange_value (`float`, *optional*):
            Half-width of the value clipping range, in value units (probability for a sigmoid head).

    Returns:
        `torch.Tensor`: scalar loss (0 when the mask is empty, still attached to the graph).
    """
    if loss_type not in CRITIC_LOSSES:
        raise ValueError(f"critic loss_type must be one of {CRITIC_LOSSES}, got {loss_type!r}.")
    if "bce" in loss_type and head != "sigmoid":
        raise ValueError(
            f"critic loss_type={loss_type!r} needs the sigmoid head; use loss_type='mse' with a linear one."
        )
    mask = mask.to(raw.dtype)
    returns = returns.to(raw.dtype)
    values = critic_values(raw, head)  # (B, T)
    # BCE targets are probabilities; `A_t + V(s_{t-1})` from float64 advantages can leave [0, 1] by a rounding error.
    bce_targets = returns.clamp(0.0, 1.0) if "bce" in loss_type else returns  # (B, T)

    def per_token(values_: torch.Tensor, logits_: torch.Tensor | None) -> torch.Tensor:  # (B, T)
        loss = torch.zeros_like(values_)
        if "bce" in loss_type:
            if logits_ is not None:
                loss = loss + F.binary_cross_entropy_with_logits(logits_, bce_targets, reduction="none")
            else:  # clipped probabilities have no logits of their own
                loss = loss + F.binary_cross_entropy(values_.clamp(1e-6, 1 - 1e-6), bce_targets, reduction="none")
        if "mse" in loss_type:
            loss = loss + mse_coef * (values_ - returns) ** 2
        return loss

    losses = per_token(values, raw if head == "sigmoid" else None)  # (B, T)
    if cliprange_value is not None:
        if old_values is None:
            raise ValueError("critic_loss: `old_values` is required when `cliprange_value` is set.")
        clipped = old_values + (values - old_values).clamp(-cliprange_value, cliprange_value)  # (B, T)
        losses = torch.maximum(losses, per_token(clipped, None))
    return (losses * mask).sum() / mask.sum().clamp(min=1.0)


OUTCOME_MODES = ("weighted_sum", "normalized_sum", "reward_func")


def outcome_from_rewards(
    rewards_per_func: torch.Tensor,
    weights: torch.Tensor,
    mode: str = "weighted_sum",
    reward_max: torch.Tensor | None = None,
    func_index: int | None = None,
    threshold: float | None = None,
) -> torch.Tensor:
    """The outcome `Y` of each rollout from the scores of the reward functions.

    - `weighted_sum`: `Y = sum_f w_f r_f`, GRPO's `sum_then_normalize` sum, not normalised.
    - `normalized_sum`: the weighted sum mapped from its possible range to `[0, 1]`, for reward functions valued in
      `[0, reward_max_f]`: `Y = (sum_f w_f r_f - lo) / (hi - lo)` with `hi = sum_{w_f > 0} w_f reward_max_f` and
      `lo = sum_{w_f < 0} w_f reward_max_f`. With non-negative weights this is the weighted sum over its maximum.
    - `reward_func`: `Y = r_f` of the one function `func_index` (the others are logged by GRPO, not trained on).

    A function that returned `None` (NaN here) counts as 0 in the sums; a rollout every function scores NaN (or, in
    `reward_func` mode, that the chosen function scores NaN) is unscorable and gets `Y = NaN`. With `threshold`, the
    outcome becomes binary: `Y = 1` where the value above is `>= threshold`, else 0 (NaN stays NaN).

    Args:
        rewards_per_func (`torch.Tensor` of shape `(N, F)`):
            Score of every reward function for every rollout; NaN where a function returned `None`.
        weights (`torch.Tensor` of shape `(F,)`):
            `reward_weights`.
        mode (`str`, *optional*, defaults to `"weighted_sum"`):
            One of `"weighted_sum"`, `"normalized_sum"`, `"reward_func"`.
        reward_max (`torch.Tensor` of shape `(F,)`, *optional*):
            Largest value of each function for `normalized_sum`; 1 for every function when omitted.
        func_index (`int`, *optional*):
            Column of the success signal, required for `reward_func`.
        threshold (`float`, *optional*):
            Success threshold applied last.

    Returns:
        `torch.Tensor` of shape `(N,)`: the outcomes, NaN for unscorable rollouts.
    """
    if rewards_per_func.dim() != 2 or weights.shape != rewards_per_func.shape[1:]:
        raise ValueError(
            f"outcome_from_rewards: expected rewards_per_func (N, F) and weights (F,); got "
            f"{tuple(rewards_per_func.shape)} and {tuple(weights.shape)}."
        )
    weights = weights.to(rewards_per_func)  # (F,)
    if mode == "reward_func":
        if func_index is None:
            raise ValueError("outcome_from_rewards: mode='reward_func' needs `func_index`.")
        outcome = rewards_per_func[:, func_index].clone()  # (N,)
    elif mode in ("weighted_sum", "normalized_sum"):
        unscorable = torch.isnan(rewards_per_func).all(dim=1)  # (N,)
        outcome = (rewards_per_func * weights.unsqueeze(0)).nansum(dim=1)  # (N,)
        if mode == "normalized_sum":
            if reward_max is None:
                reward_max = torch.ones_like(weights)
            extremes = weights * reward_max.to(weights)  # (F,), w_f * reward_max_f
            hi = extremes.clamp(min=0).sum()
            lo = extremes.clamp(max=0).sum()
            if hi - lo <= 0:
                raise ValueError(
                    "outcome_from_rewards: the weighted sum has an empty range (every weight or maximum is 0)."
                )
            outcome = (outcome - lo) / (hi - lo)
        outcome[unscorable] = torch.nan
    else:
        raise ValueError(f"outcome mode must be one of {OUTCOME_MODES}, got {mode!r}.")
    if threshold is not None:
        outcome = torch.where(torch.isnan(outcome), outcome, (outcome >= threshold).to(outcome.dtype))
    return outcome

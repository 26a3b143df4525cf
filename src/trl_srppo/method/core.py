# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The SR-PPO estimator as pure tensor functions.

Notation follows the paper (see `docs/method.md`): a prompt `x`, completion tokens `y_1 .. y_T`, prefix
states `s_t = (x, y_1 .. y_t)`, a binary outcome `Y` for the whole completion and a prefix critic `qhat(s)`.

Alignment used everywhere in this module: for a completion padded to `T` positions, column `t - 1` of a `(B, T)`
tensor belongs to completion token `t`, and `values[:, t - 1]` is the critic's value of the prefix *before* that
token, `V(s_{t-1})`. So `values[:, 0]` is `qhat(s_0)`, the value of the prompt alone.

Every function here is free of model, trainer and distributed state, so it can be checked against hand-computed
numbers (see `tests/test_core.py`) and reused by the analysis tools.

The method's choices are registries ([`~trl_srppo.method.registry.Registry`]), each name bound to what runs it:
`ADVANTAGE_BASELINES` (`advantage_baseline`), `CRITIC_HEADS` (`critic_head`), `CRITIC_LOSSES` (`critic_loss_type`),
`OUTCOME_MODES` (`srppo_outcome`) and `PROMPT_SAMPLING_MODES` (`prompt_sampling`). `SRPPOConfig` checks a value once
against its registry; the functions below look it up. A new choice is an entry registered under its name: what runs
it, and what it asks of the run (the flags that the config's checks and the trainer read, rather than its name).
"""

import dataclasses
from collections.abc import Callable

import torch
import torch.nn.functional as F

from .registry import Registry


@dataclasses.dataclass(frozen=True)
class AdvantageEstimate:
    """The advantage estimate of a batch of rollouts, what [`srppo_advantages`] and [`prompt_baseline_advantages`]
    return: the policy's advantages and the critic's targets, row by row.

    Args:
        advantages (`torch.Tensor` of shape `(B, T)`):
            Token advantages `A_t`, Pass@k-weighted, 0 on padding and on unscorable rollouts.
        returns (`torch.Tensor` of shape `(B, T)`):
            The critic's targets `G_t` (unweighted), 0 where `mask` is.
        weights (`torch.Tensor` of shape `(B,)`):
            The Pass@k weight of each rollout's prompt (times its importance ratio under prompt sampling).
        mask (`torch.Tensor` of shape `(B, T)`):
            The tokens of scorable rollouts ([`scorable_mask`]): what enters the critic's loss.
    """

    advantages: torch.Tensor
    returns: torch.Tensor
    weights: torch.Tensor
    mask: torch.Tensor

    def replace(self, **changes: torch.Tensor) -> "AdvantageEstimate":
        """A copy with the fields named in `changes` replaced (e.g. normalised `weights` and `advantages`)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def cat(cls, parts: list["AdvantageEstimate"]) -> "AdvantageEstimate":
        """The estimates of consecutive row blocks as one, every field concatenated along the rows."""
        return cls(**{f.name: torch.cat([getattr(part, f.name) for part in parts]) for f in dataclasses.fields(cls)})


def generated_mask(lengths: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """The mask of the tokens each completion really generated, `(B, C)` in the dtype and device of `like`, from their
    numbers `lengths` (`(B,)`): a completion cut short (a `rollout_func`, stop strings, a context limit) keeps its pad
    positions masked."""
    positions = torch.arange(like.size(1), device=like.device)  # (C,)
    return (positions.unsqueeze(0) < lengths.to(like.device).unsqueeze(1)).to(like.dtype)  # (B, C)


def scorable_mask(rewards: torch.Tensor, mask: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """The tokens of scorable rollouts: `mask` with the rows whose outcome is not finite (NaN: unscorable) zeroed.

    Args:
        rewards (`torch.Tensor` of shape `(B,)`):
            The outcome `Y` of each rollout, NaN where it is unscorable.
        mask (`torch.Tensor` of shape `(B, T)`):
            A token mask of the rollouts (the critic's, or the policy loss's).
        dtype (`torch.dtype`, *optional*):
            The dtype `mask` is cast to first; `mask`'s own (promoted with `bool`) when omitted.

    Returns:
        `torch.Tensor` of shape `(B, T)`: `mask * isfinite(rewards)`, row by row.
    """
    if dtype is not None:
        mask = mask.to(dtype)
    return mask * torch.isfinite(rewards).unsqueeze(1)


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


def batch_normalized(
    estimate: AdvantageEstimate, rewards: torch.Tensor, policy_mask: torch.Tensor, gather: Callable
) -> AdvantageEstimate:
    """`pass_at_k_normalize`: `estimate` with its Pass@k weights divided by their mean over the rows, of every process,
    that move the policy: a scorable outcome and a token in the policy's loss mask (none for a truncated completion
    under `mask_truncated_completions`). `A_t = w_k GAE_t`, so the advantages are divided by the same mean. Unchanged
    when no such row has a positive weight.

    Args:
        estimate ([`AdvantageEstimate`]):
            The local rows' estimate: `weights` `(B,)`, `advantages` `(B, T)`.
        rewards (`torch.Tensor` of shape `(B,)`):
            The outcome `Y` of each local rollout, NaN where it is unscorable.
        policy_mask (`torch.Tensor` of shape `(B, T)`):
            The policy's loss mask.
        gather (`Callable`):
            Concatenates a tensor over the processes (`accelerate.utils.gather`; the identity on one process).
    """
    moves = scorable_mask(rewards, policy_mask).bool().any(dim=1)  # (B,)
    weights = estimate.weights  # (B,)
    local = torch.stack([(weights * moves).sum(), moves.sum().to(weights.dtype)])  # (2,)
    weight_sum, rows = gather(local).view(-1, 2).sum(dim=0).tolist()  # every process's rows
    if rows == 0 or weight_sum <= 0:  # nothing moves the policy (or every such prompt has weight 0)
        return estimate
    batch_mean = weight_sum / rows
    return estimate.replace(
        weights=normalized_weights(weights, batch_mean),  # (B,)
        advantages=estimate.advantages / batch_mean,  # (B, T)
    )


def prompt_draw_probabilities(weights: torch.Tensor, floor: float) -> torch.Tensor:
    """Probabilities of drawing each prompt of a candidate pool: `p_i = (1 - eps) w_i / sum_j w_j + eps / N`.

    `eps` (`floor`) mixes in the uniform draw so that every prompt stays reachable: `eps = 1` is the uniform draw,
    `eps = 0` draws in proportion to the weights alone. A pool whose weights are all 0 is drawn uniformly (every term
    of the estimator is 0 then, whatever is drawn).

    Args:
        weights (`torch.Tensor` of shape `(N,)`):
            Non-negative, finite weights of the `N` candidate prompts (the Pass@k weights `w_k(s_0)`).
        floor (`float`):
            `eps`, in `[0, 1]`.

    Returns:
        `torch.Tensor` of shape `(N,)`, float64, summing to 1.
    """
    weights = _pool_weights(weights, floor)  # (N,) float64
    total = weights.sum()
    if total <= 0:
        return torch.full_like(weights, 1.0 / weights.numel())
    return (1.0 - floor) * weights / total + floor / weights.numel()


def prompt_importance_ratios(weights: torch.Tensor, floor: float) -> torch.Tensor:
    """`1 / (N p_i)` for every prompt of the pool: what a drawn rollout's Pass@k weight is multiplied by.

    Drawing `B` prompts with replacement from the pool with probabilities `p` ([`prompt_draw_probabilities`]) and
    giving each drawn rollout the weight `w_i / (N p_i)` makes `(1 / B) sum_draws w_i / (N p_i) g_i` an unbiased
    estimate of `(1 / N) sum_pool w_i g_i`, the SR-PPO estimator over the whole pool, for any vectors `g_i`, as long as
    `p_i > 0` wherever `w_i > 0` (always with `eps > 0`). Written as `1 / ((1 - eps) N w_i / sum_j w_j + eps)`, so that
    `eps = 1` gives exactly 1 (today's estimator) and `eps = 0` gives `mean_j w_j / w_i`. `inf` where `p_i = 0` (a
    prompt that is never drawn).

    Args:
        weights (`torch.Tensor` of shape `(N,)`):
            Non-negative, finite weights of the candidate prompts.
        floor (`float`):
            `eps`, in `[0, 1]`.

    Returns:
        `torch.Tensor` of shape `(N,)`, float64.
    """
    weights = _pool_weights(weights, floor)  # (N,) float64
    total = weights.sum()
    if total <= 0:
        return torch.ones_like(weights)
    return 1.0 / ((1.0 - floor) * weights.numel() * weights / total + floor)


def prompt_importance_weights(weights: torch.Tensor, floor: float) -> torch.Tensor:
    """The importance weight `w_i / (N p_i)` of each prompt of the pool, which a drawn rollout gets in place of its
    Pass@k weight `w_i` ([`prompt_importance_ratios`] times `w_i`; 0 for a prompt of weight 0). `eps = 1`: `w_i`;
    `eps = 0`: the pool's mean weight for every prompt of positive weight.

    Args:
        weights (`torch.Tensor` of shape `(N,)`):
            Non-negative, finite weights of the candidate prompts.
        floor (`float`):
            `eps`, in `[0, 1]`.

    Returns:
        `torch.Tensor` of shape `(N,)`, float64.
    """
    ratios = prompt_importance_ratios(weights, floor)  # (N,)
    weights = weights.double()
    return torch.where(weights > 0, weights * ratios, torch.zeros_like(weights))


def near_half_prompts(q0: torch.Tensor, num_prompts: int) -> torch.Tensor:
    """The `num_prompts` prompts of a pool whose `qhat(s_0)` is nearest 0.5, nearest first (ties: the earlier
    prompt), without replacement: a biased selection in the spirit of prompt curriculum learning, which generates
    where a single rollout's outcome is least predictable (the outcome's variance `q (1 - q)` is largest at 0.5).

    Args:
        q0 (`torch.Tensor` of shape `(N,)`):
            The critic's value of each candidate prompt.
        num_prompts (`int`):
            How many to keep, `1 <= num_prompts <= N`.

    Returns:
        `torch.Tensor` of shape `(num_prompts,)`: indices into the pool.
    """
    if not 1 <= num_prompts <= q0.numel():
        raise ValueError(f"near_half_prompts: num_prompts must be in [1, {q0.numel()}], got {num_prompts}.")
    distance = (q0.double() - 0.5).abs()  # (N,)
    return torch.sort(distance, stable=True).indices[:num_prompts]


@dataclasses.dataclass(frozen=True)
class PromptSampling:
    """What a `prompt_sampling` choice ([`PROMPT_SAMPLING_MODES`]) runs, and what it asks of the run.

    Args:
        draw (`Callable`):
            `(q0 (N,) float64, num_prompts, pass_at_k, floor, generator)` to the dict [`sample_prompts`] describes.
        draws (`bool`):
            Whether it draws the prompts from a pool of `prompt_pool_factor` batches, valued by the critic; `False`
            for the one that generates for every prompt of the batch, as SR-PPO.
        min_pool_factor (`int`, *optional*, defaults to `1`):
            The smallest `prompt_pool_factor` it can draw from.
        small_pool (`str`, *optional*, defaults to `""`):
            The refusal of a `prompt_pool_factor` below `min_pool_factor`, naming the fix.
    """

    draw: Callable[..., dict[str, torch.Tensor]]
    draws: bool
    min_pool_factor: int = 1
    small_pool: str = ""


# `prompt_sampling`: which prompts of a candidate pool to generate for, each name bound to a [`PromptSampling`].
PROMPT_SAMPLING_MODES = Registry("prompt_sampling")


def _kept_prompts(q0: torch.Tensor, indices: torch.Tensor) -> dict[str, torch.Tensor]:
    """A draw that keeps the prompts `indices` (`(B,)`) of the pool `q0` (`(N,)`) for certain: probability 1 each,
    factor 1."""
    probabilities = torch.zeros_like(q0).index_fill_(0, indices, 1.0)  # (N,)
    ratios = torch.ones(len(indices), dtype=torch.float64)  # (B,)
    return {"indices": indices, "ratios": ratios, "probabilities": probabilities}


def draw_every_prompt(
    q0: torch.Tensor,
    num_prompts: int,
    pass_at_k: int = 1,
    floor: float = 0.0,
    generator: torch.Generator | None = None,
) -> dict[str, torch.Tensor]:
    """No draw: the pool's first `num_prompts` prompts in order, factor 1 (a pool of one batch: all of it, SR-PPO)."""
    if not 1 <= num_prompts <= q0.numel():
        raise ValueError(f"draw_every_prompt: num_prompts must be in [1, {q0.numel()}], got {num_prompts}.")
    return _kept_prompts(q0, torch.arange(num_prompts))


def draw_by_pass_at_k(
    q0: torch.Tensor,
    num_prompts: int,
    pass_at_k: int = 1,
    floor: float = 0.0,
    generator: torch.Generator | None = None,
) -> dict[str, torch.Tensor]:
    """`num_prompts` draws with replacement by the Pass@k weights `w_k(qhat(s_0))`, each with factor `1 / (N p_i)`."""
    weights = pass_at_k_weight(q0.clamp(0.0, 1.0), pass_at_k)  # (N,)
    probabilities = prompt_draw_probabilities(weights, floor)  # (N,)
    indices = torch.multinomial(probabilities, num_prompts, replacement=True, generator=generator)  # (B,)
    ratios = prompt_importance_ratios(weights, floor)[indices]  # (B,)
    return {"indices": indices, "ratios": ratios, "probabilities": probabilities}


def draw_near_half(
    q0: torch.Tensor,
    num_prompts: int,
    pass_at_k: int = 1,
    floor: float = 0.0,
    generator: torch.Generator | None = None,
) -> dict[str, torch.Tensor]:
    """The `num_prompts` prompts nearest `qhat(s_0) = 0.5` ([`near_half_prompts`]), each with factor 1."""
    return _kept_prompts(q0, near_half_prompts(q0, num_prompts))


PROMPT_SAMPLING_MODES.register("none", PromptSampling(draw_every_prompt, draws=False))
PROMPT_SAMPLING_MODES.register("pass_at_k", PromptSampling(draw_by_pass_at_k, draws=True))
PROMPT_SAMPLING_MODES.register(
    "near_half",
    PromptSampling(
        draw_near_half,
        draws=True,
        min_pool_factor=2,
        small_pool=(
            "prompt_sampling='near_half' keeps the batch's prompts nearest qhat(s_0) = 0.5 out of a pool of "
            "prompt_pool_factor batches; with prompt_pool_factor=1 it keeps every prompt. Set prompt_pool_factor "
            ">= 2."
        ),
    ),
)


def sample_prompts(
    q0: torch.Tensor,
    num_prompts: int,
    mode: str = "pass_at_k",
    pass_at_k: int = 1,
    floor: float = 0.0,
    generator: torch.Generator | None = None,
) -> dict[str, torch.Tensor]:
    """Which prompts of a candidate pool to generate for, and the factor each drawn rollout's Pass@k weight gets: the
    draw [`PROMPT_SAMPLING_MODES`] binds to `mode`.

    - `pass_at_k`: `num_prompts` draws with replacement, `p_i` from the Pass@k weights `w_k(qhat(s_0))`
      ([`prompt_draw_probabilities`]); factor `1 / (N p_i)` ([`prompt_importance_ratios`]), so the rollout's weight
      becomes the importance weight `w_i / (N p_i)`.
    - `near_half`: the `num_prompts` prompts nearest `qhat(s_0) = 0.5` ([`near_half_prompts`]); factor 1 (each keeps
      its plain `w_k`): biased, no importance weight corrects it.
    - `none`: no draw, the first `num_prompts` prompts of the pool, factor 1.

    Args:
        q0 (`torch.Tensor` of shape `(N,)`):
            The critic's `qhat(s_0)` of each candidate prompt (clamped to `[0, 1]` for the weight).
        num_prompts (`int`):
            `B`, prompts to generate for.
        mode (`str`, *optional*, defaults to `"pass_at_k"`):
            A name of [`PROMPT_SAMPLING_MODES`]: `"pass_at_k"`, `"near_half"` or `"none"`.
        pass_at_k (`int`, *optional*, defaults to `1`):
            The k of the weight.
        floor (`float`, *optional*, defaults to `0.0`):
            `eps` of [`prompt_draw_probabilities`].
        generator (`torch.Generator`, *optional*):
            The (CPU) generator of the draw.

    Returns:
        `dict[str, torch.Tensor]`: `indices` `(B,)` into the pool, `ratios` `(B,)` float64 (the factor of each drawn
        rollout), `probabilities` `(N,)` float64 (the draw's; for `near_half` and `none`, 1 for a kept prompt and 0
        otherwise).
    """
    draw = PROMPT_SAMPLING_MODES[mode].draw
    return draw(q0.detach().double().cpu(), num_prompts, pass_at_k, floor, generator)  # q0: (N,) float64


def _pool_weights(weights: torch.Tensor, floor: float) -> torch.Tensor:
    # The checks shared by the draw's functions; the weights in float64.
    if not 0.0 <= floor <= 1.0:
        raise ValueError(f"prompt sampling: the floor eps must be in [0, 1], got {floor}.")
    if weights.dim() != 1 or weights.numel() == 0:
        raise ValueError(f"prompt sampling: expected a non-empty (N,) tensor of weights, got {tuple(weights.shape)}.")
    weights = weights.double()
    if not (torch.isfinite(weights).all() and (weights >= 0).all()):
        raise ValueError("prompt sampling: the pool's weights must be finite and >= 0.")
    return weights


@dataclasses.dataclass(frozen=True)
class CriticHead:
    """What a `critic_head` choice ([`CRITIC_HEADS`]) runs.

    Args:
        values (`Callable`):
            The head's raw output `(...)` to values `(...)`.
        start (`Callable`):
            `(mean outcome (), number of outcomes)` to the raw output whose value is that mean ([`initial_value`]).
        logits (`bool`):
            Whether the raw output is the logit of a probability (what the BCE losses of [`CRITIC_LOSSES`] read).
    """

    values: Callable[[torch.Tensor], torch.Tensor]
    start: Callable[[torch.Tensor, int], float]
    logits: bool


def _logit_start(mean: torch.Tensor, count: int) -> float:
    # The logit of the mean outcome kept within [1 / (2N), 1 - 1 / (2N)]: finite for a batch of all 0 (or all 1).
    eps = 0.5 / count
    rate = mean.clamp(eps, 1.0 - eps)
    return float(torch.log(rate) - torch.log1p(-rate))


def _identity(raw: torch.Tensor) -> torch.Tensor:
    return raw


def _mean_start(mean: torch.Tensor, count: int) -> float:
    return float(mean)


# `critic_head`: probabilities `qhat = sigmoid(f(s))` (SR-PPO) or unconstrained values (the PPO baseline).
CRITIC_HEADS = Registry("critic_head")
CRITIC_HEADS.register("sigmoid", CriticHead(values=torch.sigmoid, start=_logit_start, logits=True))
CRITIC_HEADS.register("linear", CriticHead(values=_identity, start=_mean_start, logits=False))


def initial_value(outcomes: torch.Tensor, head: str) -> float | None:
    """The raw output a fresh value head starts at so that every prefix's value is the batch's success rate.

    For the sigmoid head, the logit of the mean outcome kept within `[1 / (2N), 1 - 1 / (2N)]` (`N` scorable
    outcomes), so that a batch with no success (or no failure) gives a finite logit; for the linear head, the mean
    outcome itself. Unscorable rollouts (NaN outcomes) are left out; `None` when none is scorable.

    Args:
        outcomes (`torch.Tensor` of shape `(N,)`):
            Outcomes `Y` of the first generated batch, every process's rollouts (NaN: unscorable).
        head (`str`):
            A name of [`CRITIC_HEADS`]: `"sigmoid"` or `"linear"`.
    """
    start = CRITIC_HEADS[head].start
    outcomes = outcomes.float()
    outcomes = outcomes[torch.isfinite(outcomes)]  # (N',) scorable rollouts
    if outcomes.numel() == 0:
        return None
    return start(outcomes.mean(), outcomes.numel())


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


@dataclasses.dataclass(frozen=True)
class AdvantageBaseline:
    """What an `advantage_baseline` choice ([`ADVANTAGE_BASELINES`]) runs; called as its estimator is.

    Args:
        estimate (`Callable`):
            `(values (B, T), rewards (B,), mask (B, T), pass_at_k, lam=gae_lambda, prompt_scale=(B,) or None)` to an
            [`AdvantageEstimate`].
        monte_carlo (`bool`):
            Whether its advantage is the Monte Carlo one whatever `gae_lambda` says, so that it needs
            `gae_lambda=1.0`.
    """

    estimate: Callable[..., AdvantageEstimate]
    monte_carlo: bool

    def __call__(self, *args, **kwargs) -> AdvantageEstimate:
        return self.estimate(*args, **kwargs)


# `advantage_baseline`: the estimators of the advantages and the critic's targets, each name bound to an
# [`AdvantageBaseline`].
ADVANTAGE_BASELINES = Registry("advantage_baseline")


def srppo_advantages(
    values: torch.Tensor,
    rewards: torch.Tensor,
    mask: torch.Tensor,
    pass_at_k: int = 1,
    gamma: float = 1.0,
    lam: float = 1.0,
    prompt_scale: torch.Tensor | None = None,
) -> AdvantageEstimate:
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
        prompt_scale (`torch.Tensor` of shape `(B,)`, *optional*):
            A factor on each prompt's Pass@k weight: the importance ratio `1 / (N p_i)` of a rollout whose prompt was
            drawn from a pool ([`sample_prompts`]), so that its weight is the importance weight `w_i / (N p_i)`.

    Returns:
        [`AdvantageEstimate`]: `advantages` `(B, T)` (weighted), `returns` `(B, T)` (the critic's targets,
        unweighted), `weights` `(B,)` (the Pass@k weight of each prompt) and `mask` `(B, T)` (valid tokens of scorable
        rollouts).
    """
    mask = scorable_mask(rewards, mask, values.dtype)  # (B, T)
    rewards = scored_outcomes(rewards)  # (B,)
    advantages, returns = gae_advantages(values, rewards, mask, gamma=gamma, lam=lam)
    weights = _scaled(pass_at_k_weight(values[:, 0].clamp(0.0, 1.0), pass_at_k), prompt_scale)  # (B,), qhat(s_0)
    return AdvantageEstimate(advantages * weights.unsqueeze(1), returns, weights, mask)


def prompt_baseline_advantages(
    values: torch.Tensor,
    rewards: torch.Tensor,
    mask: torch.Tensor,
    pass_at_k: int = 1,
    prompt_scale: torch.Tensor | None = None,
    lam: float = 1.0,
) -> AdvantageEstimate:
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
        prompt_scale (`torch.Tensor` of shape `(B,)`, *optional*):
            A factor on each prompt's Pass@k weight, as in [`srppo_advantages`].
        lam (`float`, *optional*, defaults to `1.0`):
            Lambda of GAE, taken for the estimators' common call: the advantage is the Monte Carlo one, so it must be
            1.0.

    Returns:
        [`AdvantageEstimate`], as [`srppo_advantages`]: `advantages` `(B, T)`, `returns` `(B, T)`, `weights` `(B,)`
        and `mask` `(B, T)`.
    """
    if values.shape != mask.shape or rewards.shape != values.shape[:1]:
        raise ValueError(
            f"prompt_baseline_advantages: expected values (B, T), rewards (B,) and mask (B, T); got "
            f"{tuple(values.shape)}, {tuple(rewards.shape)} and {tuple(mask.shape)}."
        )
    if lam != 1.0:
        raise ValueError(
            f"prompt_baseline_advantages: the prompt's baseline gives the Monte Carlo advantage Y - qhat(s_0), so lam "
            f"must be 1.0, got {lam}."
        )
    mask = scorable_mask(rewards, mask, values.dtype)  # (B, T)
    rewards = scored_outcomes(rewards).to(values.dtype)  # (B,)
    q0 = values[:, 0]  # (B,), qhat(s_0)
    weights = _scaled(pass_at_k_weight(q0.clamp(0.0, 1.0), pass_at_k), prompt_scale)  # (B,)
    advantages = (weights * (rewards - q0)).unsqueeze(1) * mask  # (B, T), the same on every valid token
    returns = rewards.unsqueeze(1) * mask  # (B, T)
    return AdvantageEstimate(advantages, returns, weights, mask)


ADVANTAGE_BASELINES.register("prefix", AdvantageBaseline(srppo_advantages, monte_carlo=False))
ADVANTAGE_BASELINES.register("prompt", AdvantageBaseline(prompt_baseline_advantages, monte_carlo=True))


def scored_outcomes(rewards: torch.Tensor) -> torch.Tensor:
    """The outcomes `(B,)` with an unscorable one (NaN) as 0: the rows [`scorable_mask`] keeps are unchanged."""
    return torch.where(torch.isfinite(rewards), rewards, torch.zeros_like(rewards))


def _scaled(weights: torch.Tensor, scale: torch.Tensor | None) -> torch.Tensor:
    # `weights * scale` in the weights' dtype, or the weights alone without a scale; `(B,)`.
    if scale is None:
        return weights
    if scale.shape != weights.shape:
        raise ValueError(f"prompt_scale must have shape {tuple(weights.shape)}, got {tuple(scale.shape)}.")
    return weights * scale.to(device=weights.device, dtype=weights.dtype)


def critic_values(raw: torch.Tensor, head: str) -> torch.Tensor:
    """Turn the critic's raw head output `(...)` into values `(...)`, as the head [`CRITIC_HEADS`] binds to `head`
    does: `sigmoid` for the SR-PPO critic, identity for a linear one."""
    return CRITIC_HEADS[head].values(raw)


@dataclasses.dataclass(frozen=True)
class CriticLoss:
    """What a `critic_loss_type` choice ([`CRITIC_LOSSES`]) runs.

    Args:
        per_token (`Callable`):
            `(values (B, T), logits (B, T) or None, returns (B, T), mse_coef)` to the loss of each token `(B, T)`;
            `logits` is `None` where the values have none of their own (a linear head, clipped values).
        probabilities (`bool`):
            Whether the loss reads the values as probabilities (binary cross-entropy): it needs a head with logits.
    """

    per_token: Callable[[torch.Tensor, torch.Tensor | None, torch.Tensor, float], torch.Tensor]
    probabilities: bool


def _bce(values: torch.Tensor, logits: torch.Tensor | None, returns: torch.Tensor) -> torch.Tensor:  # (B, T)
    # BCE targets are probabilities; `A_t + V(s_{t-1})` from float64 advantages can leave [0, 1] by a rounding error.
    targets = returns.clamp(0.0, 1.0)  # (B, T)
    if logits is not None:
        return F.binary_cross_entropy_with_logits(logits, targets, reduction="none")
    # clipped probabilities have no logits of their own
    return F.binary_cross_entropy(values.clamp(1e-6, 1 - 1e-6), targets, reduction="none")


def bce_mse_loss(
    values: torch.Tensor, logits: torch.Tensor | None, returns: torch.Tensor, mse_coef: float
) -> torch.Tensor:
    """SR-PPO's per-token loss `BCE(qhat, target) + mse_coef * (qhat - target) ** 2`, `(B, T)`."""
    return _bce(values, logits, returns) + mse_coef * (values - returns) ** 2


def bce_loss(
    values: torch.Tensor, logits: torch.Tensor | None, returns: torch.Tensor, mse_coef: float
) -> torch.Tensor:
    """The per-token binary cross-entropy `BCE(qhat, target)` alone, `(B, T)` (`mse_coef` unused)."""
    return _bce(values, logits, returns)


def mse_loss(
    values: torch.Tensor, logits: torch.Tensor | None, returns: torch.Tensor, mse_coef: float
) -> torch.Tensor:
    """The per-token squared error `mse_coef * (V - target) ** 2`, `(B, T)` (`logits` unused)."""
    return mse_coef * (values - returns) ** 2


# `critic_loss_type`: the critic's per-token losses.
CRITIC_LOSSES = Registry("critic_loss_type")
CRITIC_LOSSES.register("bce_mse", CriticLoss(bce_mse_loss, probabilities=True))
CRITIC_LOSSES.register("bce", CriticLoss(bce_loss, probabilities=True))
CRITIC_LOSSES.register("mse", CriticLoss(mse_loss, probabilities=False))


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
            A name of [`CRITIC_HEADS`]: `"sigmoid"` or `"linear"`.
        loss_type (`str`, *optional*, defaults to `"bce_mse"`):
            A name of [`CRITIC_LOSSES`]: `"bce_mse"`, `"bce"` or `"mse"`; the BCE terms need a sigmoid head.
        mse_coef (`float`, *optional*, defaults to `1.0`):
            Weight of the squared-error term.
        old_values (`torch.Tensor` of shape `(B, T)`, *optional*):
            Values before the update; required with `cliprange_value`.
        cliprange_value (`float`, *optional*):
            Half-width of the value clipping range, in value units (probability for a sigmoid head).

    Returns:
        `torch.Tensor`: scalar loss (0 when the mask is empty, still attached to the graph).
    """
    loss = CRITIC_LOSSES[loss_type]
    critic_head = CRITIC_HEADS[head]
    if loss.probabilities and not critic_head.logits:
        raise ValueError(
            f"critic loss_type={loss_type!r} needs the sigmoid head; use loss_type='mse' with a linear one."
        )
    mask = mask.to(raw.dtype)
    returns = returns.to(raw.dtype)
    values = critic_head.values(raw)  # (B, T)
    losses = loss.per_token(values, raw if critic_head.logits else None, returns, mse_coef)  # (B, T)
    if cliprange_value is not None:
        if old_values is None:
            raise ValueError("critic_loss: `old_values` is required when `cliprange_value` is set.")
        clipped = old_values + (values - old_values).clamp(-cliprange_value, cliprange_value)  # (B, T)
        losses = torch.maximum(losses, loss.per_token(clipped, None, returns, mse_coef))  # (B, T)
    return (losses * mask).sum() / mask.sum().clamp(min=1.0)


@dataclasses.dataclass(frozen=True)
class OutcomeMode:
    """What an `srppo_outcome` choice ([`OUTCOME_MODES`]) runs, and what it asks of the run.

    Args:
        outcome (`Callable`):
            `(rewards_per_func (N, F), weights (F,), reward_max (F,) or None, func_index or None)` to the outcomes
            `(N,)`, NaN for an unscorable rollout.
        needs_reward_func (`bool`):
            Whether the outcome is the score of the one reward function `srppo_outcome_reward_func` names.
        reads_reward_max (`bool`):
            Whether it reads each function's largest value, `srppo_outcome_reward_max`.
        adds_scores (`bool`):
            Whether the outcome is the weighted sum of the scores as it is, so that several functions that score on
            one rollout can take it past 1.
        range_fix (`str`):
            What an outcome outside `[0, 1]` means under it, before the fixes every mode shares.
    """

    outcome: Callable[..., torch.Tensor]
    needs_reward_func: bool
    reads_reward_max: bool
    adds_scores: bool
    range_fix: str


# `srppo_outcome`: how a rollout's outcome `Y` is made from the reward functions' scores, each name bound to an
# [`OutcomeMode`].
OUTCOME_MODES = Registry("srppo_outcome")


def weighted_sum_outcome(
    rewards_per_func: torch.Tensor, weights: torch.Tensor, reward_max=None, func_index=None
) -> torch.Tensor:
    """`Y = sum_f w_f r_f` `(N,)`, a NaN score counted as 0; NaN where every function scored NaN."""
    unscorable = torch.isnan(rewards_per_func).all(dim=1)  # (N,)
    outcome = (rewards_per_func * weights.unsqueeze(0)).nansum(dim=1)  # (N,)
    outcome[unscorable] = torch.nan
    return outcome


def normalized_sum_outcome(
    rewards_per_func: torch.Tensor, weights: torch.Tensor, reward_max: torch.Tensor | None = None, func_index=None
) -> torch.Tensor:
    """The weighted sum mapped from its possible range onto `[0, 1]` `(N,)` (`reward_max` `(F,)`: 1 each if `None`)."""
    if reward_max is None:
        reward_max = torch.ones_like(weights)
    extremes = weights * reward_max.to(weights)  # (F,), w_f * reward_max_f
    hi = extremes.clamp(min=0).sum()
    lo = extremes.clamp(max=0).sum()
    if hi - lo <= 0:
        raise ValueError("outcome_from_rewards: the weighted sum has an empty range (every weight or maximum is 0).")
    return (weighted_sum_outcome(rewards_per_func, weights) - lo) / (hi - lo)  # (N,), NaN stays NaN


def reward_func_outcome(
    rewards_per_func: torch.Tensor, weights: torch.Tensor, reward_max=None, func_index: int | None = None
) -> torch.Tensor:
    """`Y = r_f` `(N,)` of the one function `func_index`, NaN where it scored NaN."""
    if func_index is None:
        raise ValueError("outcome_from_rewards: mode='reward_func' needs `func_index`.")
    return rewards_per_func[:, func_index].clone()


OUTCOME_MODES.register(
    "weighted_sum",
    OutcomeMode(
        weighted_sum_outcome,
        needs_reward_func=False,
        reads_reward_max=False,
        adds_scores=True,
        range_fix=(
            "A weighted sum passes 1 where several reward functions score on one rollout, and a reward function "
            "valued outside [0, 1] passes it alone: srppo_outcome='normalized_sum' divides the sum by its maximum, "
            "for functions valued in [0, 1] or in [0, srppo_outcome_reward_max]. "
        ),
    ),
)
OUTCOME_MODES.register(
    "normalized_sum",
    OutcomeMode(
        normalized_sum_outcome,
        needs_reward_func=False,
        reads_reward_max=True,
        adds_scores=False,
        range_fix=(
            "srppo_outcome='normalized_sum' takes each function's smallest value as 0 and its largest as 1 (or its "
            "srppo_outcome_reward_max): a function with negative rewards, or above its maximum, is outside that "
            "range. "
        ),
    ),
)
OUTCOME_MODES.register(
    "reward_func",
    OutcomeMode(
        reward_func_outcome,
        needs_reward_func=True,
        reads_reward_max=False,
        adds_scores=False,
        range_fix="srppo_outcome='reward_func' trains on the chosen function's score as it is. ",
    ),
)


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
            A name of [`OUTCOME_MODES`]: `"weighted_sum"`, `"normalized_sum"` or `"reward_func"`.
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
    outcome_of = OUTCOME_MODES[mode].outcome
    outcome = outcome_of(rewards_per_func, weights.to(rewards_per_func), reward_max, func_index)  # (N,)
    if threshold is not None:
        outcome = torch.where(torch.isnan(outcome), outcome, (outcome >= threshold).to(outcome.dtype))
    return outcome

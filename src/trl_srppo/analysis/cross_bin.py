# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Cross-bin effects: how an update made from one difficulty bin's rollouts moves the others.

- `logprob_change[i][j]`: after one plain gradient-ascent step on the SR-PPO surrogate of bin `i`'s rollouts
  (`theta + lr * g_i`, on a temporary copy of the weights that is discarded afterwards), the change in the mean
  log-probability of the *correct* completions of bin `j`. A completion's log-probability is the sum of its tokens'
  log-probabilities, `log pi(y | x)`; the mean is over the bin's correct rollouts (NaN when it has none).
- `cosine[i][j]`: cosine similarity of the bins' surrogate gradients `g_i`, `g_j` (NaN when either is zero).

The surrogate and its gradient are those of [`trl_srppo.analysis.policy`], with or without the Pass@k weight.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import torch

from ..evaluation.markdown import markdown_table
from .config import RolloutAnalysisConfig
from .difficulty import BINS, bin_counts, bin_members
from .policy import completion_logprobs, surrogate_gradients, trainable_parameters
from .report import heatmap_figure, write_outputs
from .rollouts import Rollouts, load_analysis_critic, load_policy, rollout_advantages, sample_rollouts


@torch.no_grad()
def mean_sequence_logprob(
    model, rollouts: Rollouts, rows: list[int], batch_size: int = 8, temperature: float = 1.0
) -> float:
    """Mean over `rows` of `log pi(y | x)`, the summed token log-probabilities of the completion (NaN if no rows)."""
    if not rows:
        return float("nan")
    device = trainable_parameters(model)[0].device
    rows_t = torch.as_tensor(rows, dtype=torch.long)
    width = rollouts.completion_ids.shape[1]
    total = 0.0
    for start in range(0, len(rows), batch_size):
        chunk = rows_t[start : start + batch_size]
        logps = completion_logprobs(
            model, rollouts.input_ids[chunk].to(device), rollouts.attention_mask[chunk].to(device), width, temperature
        )  # (b, C)
        total += float((logps * rollouts.completion_mask[chunk].to(device)).sum())
    return total / len(rows)


def cosine_matrix(vectors: dict[str, torch.Tensor]) -> list[list[float]]:
    """Pairwise cosine similarities of flat vectors, NaN where a vector is zero."""
    names = list(vectors)
    norms = {n: float(vectors[n].double().norm()) for n in names}
    out = []
    for a in names:
        row = []
        for b in names:
            if norms[a] == 0 or norms[b] == 0:
                row.append(float("nan"))
            else:
                row.append(float(vectors[a].double() @ vectors[b].double()) / (norms[a] * norms[b]))
        out.append(row)
    return out


def cross_bin_effects(
    model,
    rollouts: Rollouts,
    pass_at_k: int,
    learning_rate: float = 1e-3,
    normalize_step: bool = False,
    gae_lambda: float = 1.0,
    batch_size: int = 8,
    temperature: float = 1.0,
) -> dict:
    """The 3x3 log-probability-change and gradient-cosine matrices, with and without the Pass@k weight.

    Args:
        model (`PreTrainedModel`):
            The policy; its weights are restored after every trial step.
        rollouts ([`Rollouts`]):
            Scored rollouts with critic values.
        pass_at_k (`int`):
            The k of the weighted estimator.
        learning_rate (`float`, *optional*, defaults to `1e-3`):
            Step size of the trial step.
        normalize_step (`bool`, *optional*, defaults to `False`):
            Step `lr * g / ||g||` instead of `lr * g`, so that every bin moves the weights by the same distance.
        gae_lambda (`float`, *optional*, defaults to `1.0`):
            GAE lambda of the advantages.
        batch_size (`int`, *optional*, defaults to `8`):
            Rows per forward pass.
        temperature (`float`, *optional*, defaults to `1.0`):
            Sampling temperature of the rollouts (the policy is `softmax(logits / temperature)`).

    Returns:
        `dict`: `bins` (row/column order), `bin_sizes` (prompts per bin), and for `weighted` and `unweighted`:
        `logprob_change` and `cosine` (3x3 lists, row = bin whose data made the update) and `grad_norm` per bin.
    """
    variants = ("weighted", "unweighted")
    sets = [rollout_advantages(rollouts, k, gae_lambda).advantages for k in (pass_at_k, 1)]  # in `variants` order
    rows = bin_members(rollouts.rollout_bins())  # {bin: rows of its prompts' rollouts}
    correct = rollouts.correct.tolist()
    correct_rows = {b: [i for i in rows[b] if correct[i]] for b in BINS}
    grads = bin_gradients(model, rollouts, rows, sets, variants, batch_size, temperature)

    def logprobs() -> dict[str, float]:
        return {b: mean_sequence_logprob(model, rollouts, correct_rows[b], batch_size, temperature) for b in BINS}

    params = trainable_parameters(model)
    backup = torch.nn.utils.parameters_to_vector(params).detach().clone()
    before = logprobs()
    out = {
        "bins": list(BINS),
        "bin_sizes": bin_counts(rollouts.prompt_bins()),
        "learning_rate": learning_rate,
        "normalize_step": normalize_step,
        "logprob_before": before,
    }
    try:
        for name in variants:
            # one step at a time: each is as large as the model
            steps = (trial_step(grads[name][b], learning_rate, normalize_step) if rows[b] else None for b in BINS)
            out[name] = {
                "logprob_change": _logprob_changes(params, backup, steps, logprobs, before),
                "cosine": cosine_matrix(grads[name]),
                "grad_norm": {b: float(grads[name][b].norm()) for b in BINS},
            }
    finally:
        with torch.no_grad():
            torch.nn.utils.vector_to_parameters(backup, params)
    return out


def _logprob_changes(
    params: list[torch.nn.Parameter],
    backup: torch.Tensor,
    steps: Iterable[torch.Tensor | None],
    logprobs: Callable[[], dict[str, float]],
    before: dict[str, float],
) -> list[list[float]]:
    """The `logprob_change` matrix: row `i` is the change of `logprobs()` (each bin's mean log-probability of its
    correct completions) after the `i`-th trial step `(num_trainable_parameters,)` from the weights `backup`, a NaN
    row where there is no step (`None`). The weights are set back to `backup` after each step."""
    matrix = []
    for step in steps:
        if step is None:
            matrix.append([float("nan")] * len(BINS))
            continue
        with torch.no_grad():
            torch.nn.utils.vector_to_parameters((backup + step.to(backup.dtype)).to(backup.dtype), params)
        after = logprobs()
        matrix.append([after[b] - before[b] for b in BINS])
        with torch.no_grad():
            torch.nn.utils.vector_to_parameters(backup, params)
    return matrix


def bin_gradients(
    model,
    rollouts: Rollouts,
    rows: dict[str, list[int]],
    advantage_sets: list[torch.Tensor],
    variants: tuple[str, ...],
    batch_size: int = 8,
    temperature: float = 1.0,
) -> dict[str, dict[str, torch.Tensor]]:
    """The surrogate gradient of each bin's rollouts (see [`~analysis.policy.surrogate_gradients`]), one per
    advantage set.

    Returns:
        `dict[str, dict[str, torch.Tensor]]`: `{variant: {bin: flat gradient (num_trainable_parameters,)}}`, the
        variants naming `advantage_sets` in order; the gradient of a bin without rollouts is zero.
    """
    grads = {name: {} for name in variants}
    for b in BINS:
        bin_grads = surrogate_gradients(model, rollouts, rows[b], advantage_sets, batch_size, temperature)
        for name, grad in zip(variants, bin_grads):
            grads[name][b] = grad
    return grads


def trial_step(grad: torch.Tensor, learning_rate: float, normalize_step: bool) -> torch.Tensor | None:
    """The weight change of one gradient-ascent trial step along `grad` `(num_trainable_parameters,)`.

    Returns:
        `torch.Tensor` or `None`: `learning_rate * grad`, or `learning_rate * grad / ||grad||` with `normalize_step`,
        of the shape of `grad`; `None` when `grad` is zero (no step to take).
    """
    norm = float(grad.norm())
    if norm == 0:
        return None
    return learning_rate * (grad / norm if normalize_step else grad)


# ---- the `cross-bin` analysis ---------------------------------------------------------------------------------------


@dataclass
class CrossBinConfig(RolloutAnalysisConfig):
    r"""
    Settings of `trl-srppo analyze cross-bin` (on top of [`RolloutAnalysisConfig`]; the critic is required).

    Args:
        learning_rate (`float`, *optional*, defaults to `1e-3`):
            Step size of the trial step on each bin.
        normalize_step (`bool`, *optional*, defaults to `False`):
            Step `learning_rate * g / ||g||` (the same length for every bin).
    """

    learning_rate: float = field(default=1e-3, metadata={"help": "Step size of the trial step on each bin."})
    normalize_step: bool = field(
        default=False, metadata={"help": "Step lr * g / ||g|| (the same length for every bin)."}
    )


def cross_bin_table(results: dict) -> str:
    """The markdown report of [`run_cross_bin`]'s results: one 3x3 table per matrix."""
    sizes = ", ".join(f"{b} {n}" for b, n in results["bin_sizes"].items())
    md = f"# Cross-bin effects (lr = {results['learning_rate']}, Pass@{results['pass_at_k']})\n\n"
    md += f"prompts per bin: {sizes}"
    for name in ("weighted", "unweighted"):
        for key, title in (("logprob_change", "change in mean log pi(correct) of column bin"), ("cosine", "cosine")):
            md += f"\n\n## {name}: {title} (row: bin of the update)\n\n"
            md += markdown_table(["from \\ to", *BINS], [[b, *row] for b, row in zip(BINS, results[name][key])])
    return md


def cross_bin_figure(results: dict):
    """The four matrices as heatmaps."""
    matrices = {
        f"{name} {key}": results[name][key]
        for name in ("weighted", "unweighted")
        for key in ("logprob_change", "cosine")
    }
    return heatmap_figure(matrices, list(BINS), "Cross-bin effects")


def run_cross_bin(config: CrossBinConfig) -> dict:
    """`trl-srppo analyze cross-bin`: sample, score and value the rollouts, then [`cross_bin_effects`]."""
    model, tokenizer = load_policy(config)
    rollouts = sample_rollouts(config, "cross-bin", model, tokenizer, load_analysis_critic(config, "cross-bin", model))
    results = cross_bin_effects(
        model,
        rollouts,
        config.pass_at_k,
        config.learning_rate,
        config.normalize_step,
        config.gae_lambda,
        config.batch_size,
        config.temperature,
    )
    results["pass_at_k"] = config.pass_at_k
    write_outputs("cross-bin", config, results, cross_bin_table(results), cross_bin_figure(results))
    return results

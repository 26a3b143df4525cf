# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The safe region of the pretrained weights, and where an update's realised changes fall.

For every 2-D weight matrix `W` (`m x n`) of the pretrained model:

- the principal mask is the `fraction` (30%) of entries with the largest `|W_r|`, where `W_r` is the rank-`r`
  truncated-SVD reconstruction of `W` (the rank is not given by the paper; default 16, capped at `min(m, n)`);
- the low-magnitude mask is the `fraction` (30%) of entries with the smallest `|W|`;
- safe = not principal, or low-magnitude.

A mask of `fraction` holds exactly `round(fraction * m * n)` entries (ties are broken by `torch.topk`).

For an update `W_before -> W_after`, an entry has a *realised* change when its stored bf16 value changes,
`bf16(W_after) != bf16(W_before)`; the changed-weight safe-region rate is the fraction of realised changes that lie in
the safe region. It is NaN (reported as "no realised change") when nothing changes.
"""

import re
from dataclasses import dataclass, field

import torch

from ..evaluation.markdown import fmt, markdown_table
from .config import RolloutAnalysisConfig
from .difficulty import BINS
from .policy import surrogate_gradients
from .report import bar_figure, write_outputs
from .rollouts import load_analysis_critic, load_policy, rollout_advantages, sample_rollouts

DEFAULT_EXCLUDE = (r"embed", r"lm_head", r"score", r"classifier")


def _top_mask(values: torch.Tensor, count: int, largest: bool) -> torch.Tensor:
    mask = torch.zeros(values.numel(), dtype=torch.bool, device=values.device)
    if count > 0:
        mask[torch.topk(values.reshape(-1), count, largest=largest, sorted=False).indices] = True
    return mask.reshape(values.shape)


def low_rank_reconstruction(weight: torch.Tensor, rank: int) -> torch.Tensor:
    """The rank-`rank` truncated-SVD reconstruction of a matrix, in float32 (`rank` capped at `min(m, n)`)."""
    w = weight.detach().float()
    u, s, vh = torch.linalg.svd(w, full_matrices=False)
    r = max(0, min(rank, s.numel()))
    return (u[:, :r] * s[:r]) @ vh[:r]


def safe_region_masks(weight: torch.Tensor, rank: int = 16, fraction: float = 0.3) -> dict[str, torch.Tensor]:
    """Principal, low-magnitude and safe masks of one pretrained matrix.

    Args:
        weight (`torch.Tensor` of shape `(m, n)`):
            The pretrained matrix.
        rank (`int`, *optional*, defaults to `16`):
            Rank of the reconstruction that defines the principal mask.
        fraction (`float`, *optional*, defaults to `0.3`):
            Share of entries in the principal and in the low-magnitude mask.

    Returns:
        `dict[str, torch.Tensor]`: boolean `(m, n)` masks `principal`, `low_magnitude` and `safe`.
    """
    if weight.dim() != 2:
        raise ValueError(f"safe_region_masks: expected a matrix, got shape {tuple(weight.shape)}.")
    if not 0 <= fraction <= 1:
        raise ValueError(f"safe_region_masks: fraction must be in [0, 1], got {fraction}.")
    count = int(round(fraction * weight.numel()))
    principal = _top_mask(low_rank_reconstruction(weight, rank).abs(), count, largest=True)
    low_magnitude = _top_mask(weight.detach().float().abs(), count, largest=False)
    return {"principal": principal, "low_magnitude": low_magnitude, "safe": ~principal | low_magnitude}


def realised_changes(before: torch.Tensor, after: torch.Tensor) -> torch.Tensor:
    """Boolean mask of entries whose stored bf16 value differs between `before` and `after`."""
    return before.detach().to(torch.bfloat16) != after.detach().to(torch.bfloat16)


def realised_safe_fraction(safe: torch.Tensor, before: torch.Tensor, after: torch.Tensor) -> dict:
    """Number of realised (bf16) changes and how many of them lie in the safe region.

    Returns:
        `dict`: `num_changed`, `num_changed_safe` and `fraction` (NaN when nothing changed).
    """
    changed = realised_changes(before, after)
    num_changed = int(changed.sum())
    num_safe = int((changed & safe.to(changed.device)).sum())
    return {
        "num_changed": num_changed,
        "num_changed_safe": num_safe,
        "fraction": num_safe / num_changed if num_changed else float("nan"),
    }


def matrix_names(model, exclude: tuple[str, ...] = DEFAULT_EXCLUDE) -> list[str]:
    """Names of the model's 2-D weight matrices, leaving out those matching any regular expression of `exclude`
    (by default the embeddings and output heads, which are lookup tables rather than linear maps of the residual
    stream)."""
    return [
        name
        for name, p in model.named_parameters()
        if p.dim() == 2 and name.endswith("weight") and not any(re.search(pattern, name) for pattern in exclude)
    ]


def compute_safe_masks(model, rank: int = 16, fraction: float = 0.3, names: list[str] | None = None) -> dict:
    """Safe masks of every considered matrix of a (pretrained) model: `{name: (m, n) bool}` on the CPU."""
    params = dict(model.named_parameters())
    names = matrix_names(model) if names is None else names
    return {name: safe_region_masks(params[name], rank, fraction)["safe"].cpu() for name in names}


def safe_region_share(masks: dict[str, torch.Tensor]) -> float:
    """Share of the considered parameters that lie in the safe region."""
    total = sum(m.numel() for m in masks.values())
    return sum(int(m.sum()) for m in masks.values()) / total if total else float("nan")


def update_safe_fraction(
    masks: dict[str, torch.Tensor], before: dict[str, torch.Tensor], after: dict[str, torch.Tensor]
) -> dict:
    """Realised-change safe-region rate of an update over all considered matrices.

    Args:
        masks (`dict[str, torch.Tensor]`):
            Safe masks of the pretrained matrices.
        before (`dict[str, torch.Tensor]`), after (`dict[str, torch.Tensor]`):
            The matrices before and after the update (same names).

    Returns:
        `dict`: totals as [`realised_safe_fraction`] and `per_matrix` results.
    """
    per_matrix = {
        name: realised_safe_fraction(mask, before[name].cpu(), after[name].cpu()) for name, mask in masks.items()
    }
    changed = sum(r["num_changed"] for r in per_matrix.values())
    safe = sum(r["num_changed_safe"] for r in per_matrix.values())
    return {
        "num_changed": changed,
        "num_changed_safe": safe,
        "fraction": safe / changed if changed else float("nan"),
        "per_matrix": per_matrix,
    }


def gradient_step(grad: torch.Tensor, learning_rate: float, optimizer: str = "adam", eps: float = 1e-8):
    """The first step of an optimizer along an ascent direction `grad` (flat).

    `sgd`: `lr * g`. `adam`: Adam's first step after bias correction, `lr * g / (|g| + eps)` (about `lr * sign(g)`),
    the step a fresh AdamW optimizer takes at the start of training.
    """
    if optimizer == "sgd":
        return learning_rate * grad
    if optimizer == "adam":
        return learning_rate * grad / (grad.abs() + eps)
    raise ValueError(f"optimizer must be 'sgd' or 'adam', got {optimizer!r}.")


# ---- the `safe-region` analysis -------------------------------------------------------------------------------------

OPTIMIZERS = ("adam", "sgd")


@dataclass
class SafeRegionConfig(RolloutAnalysisConfig):
    r"""
    Settings of `trl-srppo analyze safe-region` (on top of [`RolloutAnalysisConfig`], whose rollout fields and critic
    are needed only without `updated_model_name_or_path`).

    Args:
        updated_model_name_or_path (`str`, *optional*):
            A trained checkpoint: measure its update from `model_name_or_path` (no rollouts needed). Without it, one
            step is taken on each bin's rollouts.
        rank (`int`, *optional*, defaults to `16`):
            Rank of the reconstruction for the principal mask (not given by the paper).
        fraction (`float`, *optional*, defaults to `0.3`):
            Share of the entries in each mask.
        learning_rate (`float`, *optional*, defaults to `1e-6`):
            Step size of the per-bin update.
        optimizer (`str`, *optional*, defaults to `"adam"`):
            The per-bin update is the first step of this optimizer: `"adam"` or `"sgd"`.
    """

    updated_model_name_or_path: str | None = field(
        default=None, metadata={"help": "A trained checkpoint: measure its update (no rollouts needed)."}
    )
    rank: int = field(default=16, metadata={"help": "Rank of the reconstruction for the principal mask."})
    fraction: float = field(default=0.3, metadata={"help": "Share of the entries in each mask."})
    learning_rate: float = field(default=1e-6, metadata={"help": "Step size of the per-bin update."})
    optimizer: str = field(default="adam", metadata={"help": "First step of this optimizer: adam or sgd."})

    def __post_init__(self):
        super().__post_init__()
        if self.rank < 1:
            raise ValueError(f"rank must be at least 1, got {self.rank}.")
        if not 0 < self.fraction <= 1:
            raise ValueError(f"fraction must be in (0, 1], got {self.fraction}.")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}.")


def _named_views(model, flat: torch.Tensor) -> dict[str, torch.Tensor]:
    views, offset = {}, 0
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        views[name] = flat[offset : offset + p.numel()].view_as(p)
        offset += p.numel()
    return views


def safe_region_table(results: dict) -> str:
    """The markdown report of [`run_safe_region`]'s results."""
    rows = [
        [k, v["num_changed"], v["num_changed_safe"], v["fraction"] if v["num_changed"] else "no realised change"]
        for k, v in results["updates"].items()
    ]
    return (
        f"# Safe region (rank {results['rank']}, {results['fraction']:.0%} masks)\n\n"
        f"safe region share of parameters: {fmt(results['safe_region_share'])} over {results['num_matrices']} "
        "matrices\n\n" + markdown_table(["update", "realised changes", "in safe region", "fraction safe"], rows)
    )


def safe_region_figure(results: dict):
    """The safe region's share of the parameters beside the share of each update's realised changes inside it."""
    return bar_figure(
        ["safe share", *results["updates"]],
        {"fraction": [results["safe_region_share"], *[v["fraction"] for v in results["updates"].values()]]},
        "Safe region share and realised changes inside it",
        "fraction",
    )


def run_safe_region(config: SafeRegionConfig) -> dict:
    """`trl-srppo analyze safe-region`: the safe masks of the policy's matrices, and the share of an update's realised
    bf16 changes inside them, for a trained checkpoint or for one step on each bin's rollouts."""
    model, tokenizer = load_policy(config)
    names = matrix_names(model)
    masks = compute_safe_masks(model, config.rank, config.fraction, names)
    params = dict(model.named_parameters())
    before = {n: params[n].detach() for n in names}
    updates = {}
    if config.updated_model_name_or_path:
        from ..evaluation.models import load_model, resolve_model

        source = resolve_model(config.updated_model_name_or_path)
        other = dict(load_model(source, "float32", "cpu", config.trust_remote_code).named_parameters())
        updates["checkpoint"] = update_safe_fraction(masks, before, {n: other[n].detach() for n in names})
    else:
        critic = load_analysis_critic(config, "safe-region without updated_model_name_or_path", model)
        rollouts = sample_rollouts(config, "safe-region without updated_model_name_or_path", model, tokenizer, critic)
        row_bins = rollouts.rollout_bins()
        sets = [rollout_advantages(rollouts, config.pass_at_k, config.gae_lambda).advantages]
        for b in BINS:
            rows = [i for i, rb in enumerate(row_bins) if rb == b]
            if not rows:
                updates[b] = {"num_changed": 0, "num_changed_safe": 0, "fraction": float("nan"), "per_matrix": {}}
                continue
            (grad,) = surrogate_gradients(model, rollouts, rows, sets, config.batch_size, config.temperature)
            step = _named_views(model, gradient_step(grad, config.learning_rate, config.optimizer))
            after = {n: before[n].float() + step[n].to(before[n].device) for n in names}
            updates[b] = update_safe_fraction(masks, before, after)
    results = {
        "rank": config.rank,
        "fraction": config.fraction,
        "num_matrices": len(names),
        "num_parameters": sum(m.numel() for m in masks.values()),
        "safe_region_share": safe_region_share(masks),
        "updates": {k: {kk: vv for kk, vv in v.items() if kk != "per_matrix"} for k, v in updates.items()},
        "per_matrix": {k: v["per_matrix"] for k, v in updates.items()},
    }
    write_outputs("safe-region", config, results, safe_region_table(results), safe_region_figure(results))
    return results

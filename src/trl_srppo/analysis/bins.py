# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`trl-srppo analyze bins`: each difficulty bin's share of the total update weight, with and without the Pass@k
weight. The bins themselves (the paper's rule, scaled to any number of rollouts) are in
`trl_srppo.analysis.difficulty`."""

from dataclasses import dataclass

import torch

from ..evaluation.markdown import markdown_table
from .config import RolloutAnalysisConfig
from .difficulty import BINS, bin_counts, correct_counts
from .report import bar_figure, write_outputs
from .rollouts import load_analysis_critic, load_policy, rollout_advantages, sample_rollouts


def update_weight_share(
    prompt_weights: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    rollout_bins: list[str | None],
) -> dict[str, dict[str, float]]:
    """Each difficulty bin's share of the total update weight of a batch.

    Two definitions are reported; `prompt_weight` is the one the paper's "share of the total update weight" describes:

    - `prompt_weight`: the sum of the rollouts' prompt weights in the bin over the sum for the batch. With the Pass@k
      weight a rollout weighs `w_k(qhat(s_0))`; without it every rollout weighs 1 and the share is the bin's share of
      the rollouts. This isolates what the Pass@k weight does to the training distribution.
    - `advantage_mass`: the sum over the bin's rollouts and tokens of `|A_t|` over the same sum for the batch. It also
      reflects how far the critic's baseline is from the outcome, so it differs from `prompt_weight` even at `k = 1`.

    A rollout without valid tokens in `mask` (an unscorable one) contributes no gradient, so it is left out of both
    definitions, from the bins' parts and from the batch total; so is a rollout whose prompt has no bin.

    Args:
        prompt_weights (`torch.Tensor` of shape `(B,)`):
            Weight of each rollout's prompt (`srppo_advantages(...).weights`; all 1 without the Pass@k weight).
        advantages (`torch.Tensor` of shape `(B, T)`):
            Token advantages of the same estimator.
        mask (`torch.Tensor` of shape `(B, T)`):
            Valid tokens of scorable rollouts.
        rollout_bins (`list[str | None]` of length `B`):
            Difficulty bin of each rollout's prompt (`None`: no bin, see [`prompt_bins`]).

    Returns:
        `dict[str, dict[str, float]]`: `{"prompt_weight": {bin: share}, "advantage_mass": {bin: share}}`; shares of a
        definition sum to 1 over the bins (NaN everywhere when the batch total is 0).
    """
    binned = torch.tensor([b in BINS for b in rollout_bins], dtype=torch.bool)  # (B,)
    valid = (mask != 0).any(dim=1).cpu() & binned  # (B,) rollouts that take part in the update
    weights = prompt_weights.detach().double().cpu()  # (B,)
    mass = (advantages.detach().abs() * mask).double().sum(dim=1).cpu()  # (B,)
    weights, mass = (torch.where(valid, x, torch.zeros_like(x)) for x in (weights, mass))
    out = {}
    for name, per_rollout in (("prompt_weight", weights), ("advantage_mass", mass)):
        total = per_rollout.sum().item()
        out[name] = {}
        for bin_name in BINS:
            members = torch.tensor([b == bin_name for b in rollout_bins], dtype=torch.bool)
            part = per_rollout[members].sum().item()
            out[name][bin_name] = part / total if total > 0 else float("nan")
    return out


# ---- the `bins` analysis --------------------------------------------------------------------------------------------


@dataclass
class BinsConfig(RolloutAnalysisConfig):
    r"""
    Settings of `trl-srppo analyze bins`: the fields of [`RolloutAnalysisConfig`]; the critic
    (`critic_model_name_or_path`) gives the Pass@k weight.
    """


def bins_table(results: dict) -> str:
    """The markdown report of [`run_bins`]'s results."""
    k, shares = results["pass_at_k"], results["update_weight_share"]
    rows = [
        [
            b,
            results["bin_counts"][b],
            shares["unweighted"]["prompt_weight"][b],
            shares["weighted"]["prompt_weight"][b],
            shares["unweighted"]["advantage_mass"][b],
            shares["weighted"]["advantage_mass"][b],
        ]
        for b in BINS
    ]
    header = ["bin", "prompts", "weight share k=1", f"weight share k={k}"]
    header += ["abs-advantage share k=1", f"abs-advantage share k={k}"]
    return (
        f"# Difficulty bins (n = {results['num_rollouts']}, Pass@{k} weight)\n\n"
        + markdown_table(header, rows)
        + "\nweight share: sum of the rollouts' prompt weights w_k(qhat(s_0)) (1 each without the weight); "
        "abs-advantage share: sum of |A_t| over tokens. Prompts are binned by their scorable rollouts; unscorable "
        f"rollouts are left out of the shares. Prompts without a scorable rollout (in no bin): "
        f"{results.get('num_unbinned', 0)}.\n"
    )


def bins_figure(results: dict):
    """Each bin's share of the update weight, with and without the Pass@k weight."""
    shares = results["update_weight_share"]
    return bar_figure(
        list(BINS),
        {
            "without weight": [shares["unweighted"]["prompt_weight"][b] for b in BINS],
            f"Pass@{results['pass_at_k']} weight": [shares["weighted"]["prompt_weight"][b] for b in BINS],
        },
        "Share of the total update weight",
        "share",
    )


def run_bins(config: BinsConfig) -> dict:
    """`trl-srppo analyze bins`: sample and score the rollouts, bin the prompts, and measure each bin's share of the
    update weight with (`k = pass_at_k`) and without (`k = 1`) the Pass@k weight."""
    model, tokenizer = load_policy(config)
    rollouts = sample_rollouts(config, "bins", model, tokenizer, load_analysis_critic(config, "bins", model))
    bins, row_bins = rollouts.prompt_bins(), rollouts.rollout_bins()
    counts = correct_counts(rollouts.correct, rollouts.prompt_index, rollouts.num_prompts)
    shares = {}
    for name, k in (("weighted", config.pass_at_k), ("unweighted", 1)):
        estimate = rollout_advantages(rollouts, k, config.gae_lambda)
        shares[name] = update_weight_share(estimate.weights, estimate.advantages, estimate.mask, row_bins)
    scorable = correct_counts(rollouts.scorable, rollouts.prompt_index, rollouts.num_prompts)
    results = {
        "num_rollouts": rollouts.num_rollouts,
        "pass_at_k": config.pass_at_k,
        "bin_counts": bin_counts(bins),
        "num_unbinned": bins.count(None),  # prompts without a scorable rollout
        "per_prompt": [
            {"prompt": p, "num_correct": int(c), "num_scorable": int(n), "bin": b}
            for p, (c, n, b) in enumerate(zip(counts, scorable, bins))
        ],
        "update_weight_share": shares,
    }
    write_outputs("bins", config, results, bins_table(results), bins_figure(results))
    return results

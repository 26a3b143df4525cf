# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The paper's analyses (section 5.5, appendices C and D) as pure functions, and the `trl-srppo analyze` command.

- [`bins`]: difficulty bins and each bin's share of the update weight.
- [`trl_srppo.method.noise`] (re-exported here): streaming gradient noise-to-signal ratio, optionally on a random
  sketch; the trainer measures it during training too (`gradient_nsr_steps`).
- [`policy`]: SR-PPO policy-gradient replicas and the NSR measurement per prompt, bin and batch.
- [`cross_bin`]: cross-bin log-probability changes and gradient cosines.
- [`critic_quality`]: sentence splitting, labelling export/import, within-prompt and pooled AUC, values by bin.
- [`safe_region`]: principal / low-magnitude masks and the bf16-realised-change safe-region rate.
- [`config`], [`difficulty`], [`rollouts`], [`report`], [`cli`]: the settings shared by the analyses, the difficulty
  bins of prompts, sampling and scoring, writing run_config.json / summary.json / results.md / the figure, the command
  line (parsing and dispatch only).

Each analysis module holds its `trl-srppo analyze` run: its config dataclass (`BinsConfig`, `NSRConfig`, ...), its
`run_*` function, its markdown table and its figure.
"""

from ..method.noise import NSRAccumulator, NSRResult, RandomSketch, noise_to_signal
from .bins import BinsConfig, run_bins, update_weight_share
from .config import AnalysisConfig, MissingSetting, RolloutAnalysisConfig
from .critic_quality import (
    CriticExportConfig,
    CriticQualityConfig,
    auc,
    critic_quality,
    export_for_labelling,
    pooled_auc,
    read_labelled,
    run_critic_export,
    run_critic_quality,
    sentence_scores,
    sentence_token_spans,
    split_sentences,
    values_by_bin,
    within_prompt_auc,
)
from .cross_bin import CrossBinConfig, cosine_matrix, cross_bin_effects, mean_sequence_logprob, run_cross_bin
from .difficulty import BINS, bin_counts, correct_counts, difficulty_bin, prompt_bins
from .policy import NSRConfig, completion_logprobs, measure_nsr, run_nsr, surrogate_gradients
from .rollouts import (
    Rollouts,
    critic_rollout_values,
    generate_rollouts,
    load_analysis_critic,
    load_policy,
    load_prompts,
    resolve_reward_func,
    rollout_advantages,
    sample_rollouts,
    score_rollouts,
)
from .safe_region import (
    SafeRegionConfig,
    compute_safe_masks,
    gradient_step,
    low_rank_reconstruction,
    realised_changes,
    realised_safe_fraction,
    run_safe_region,
    safe_region_masks,
    safe_region_share,
    update_safe_fraction,
)

__all__ = [
    "AnalysisConfig",
    "BINS",
    "BinsConfig",
    "CriticExportConfig",
    "CriticQualityConfig",
    "CrossBinConfig",
    "MissingSetting",
    "NSRAccumulator",
    "NSRConfig",
    "NSRResult",
    "RandomSketch",
    "RolloutAnalysisConfig",
    "Rollouts",
    "SafeRegionConfig",
    "auc",
    "bin_counts",
    "completion_logprobs",
    "compute_safe_masks",
    "correct_counts",
    "cosine_matrix",
    "critic_quality",
    "critic_rollout_values",
    "cross_bin_effects",
    "difficulty_bin",
    "export_for_labelling",
    "generate_rollouts",
    "gradient_step",
    "load_analysis_critic",
    "load_policy",
    "load_prompts",
    "low_rank_reconstruction",
    "mean_sequence_logprob",
    "measure_nsr",
    "noise_to_signal",
    "pooled_auc",
    "prompt_bins",
    "read_labelled",
    "realised_changes",
    "realised_safe_fraction",
    "resolve_reward_func",
    "rollout_advantages",
    "run_bins",
    "run_critic_export",
    "run_critic_quality",
    "run_cross_bin",
    "run_nsr",
    "run_safe_region",
    "safe_region_masks",
    "safe_region_share",
    "sample_rollouts",
    "score_rollouts",
    "sentence_scores",
    "sentence_token_spans",
    "split_sentences",
    "surrogate_gradients",
    "update_safe_fraction",
    "update_weight_share",
    "values_by_bin",
    "within_prompt_auc",
]

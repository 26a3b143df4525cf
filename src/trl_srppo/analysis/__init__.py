# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The paper's analyses (section 5.5, appendices C and D) as pure functions, and the `trl-srppo analyze` command.

- [`bins`]: difficulty bins and each bin's share of the update weight.
- [`noise`]: streaming gradient noise-to-signal ratio, optionally on a random sketch.
- [`policy`]: SR-PPO policy-gradient replicas and the NSR measurement per prompt, bin and batch.
- [`cross_bin`]: cross-bin log-probability changes and gradient cosines.
- [`critic_quality`]: sentence splitting, labelling export/import, within-prompt and pooled AUC, values by bin.
- [`safe_region`]: principal / low-magnitude masks and the bf16-realised-change safe-region rate.
- [`rollouts`], [`report`], [`cli`]: sampling and scoring, writing json/md/png, the command line.
"""

from .bins import BINS, correct_counts, difficulty_bin, prompt_bins, update_weight_share
from .critic_quality import (
    auc,
    critic_quality,
    export_for_labelling,
    pooled_auc,
    read_labelled,
    sentence_scores,
    sentence_token_spans,
    split_sentences,
    values_by_bin,
    within_prompt_auc,
)
from .cross_bin import cosine_matrix, cross_bin_effects, mean_sequence_logprob
from .noise import NSRAccumulator, NSRResult, RandomSketch, noise_to_signal
from .policy import completion_logprobs, measure_nsr, surrogate_gradients
from .rollouts import (
    Rollouts,
    critic_rollout_values,
    generate_rollouts,
    load_prompts,
    resolve_reward_func,
    rollout_advantages,
    score_rollouts,
)
from .safe_region import (
    compute_safe_masks,
    gradient_step,
    low_rank_reconstruction,
    realised_changes,
    realised_safe_fraction,
    safe_region_masks,
    safe_region_share,
    update_safe_fraction,
)

__all__ = [
    "BINS",
    "NSRAccumulator",
    "NSRResult",
    "RandomSketch",
    "Rollouts",
    "auc",
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
    "safe_region_masks",
    "safe_region_share",
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

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Analyses at the mid-training checkpoint, with `trl_srppo.analysis` (docs/method.md, "What the paper measures").

On held-out analysis prompts, 8 rollouts each from the mid-training policy:

- difficulty bins from the 8 rollouts (easy >= 6 correct, medium 3-5, hard <= 2);
- critic calibration: mean `qhat(s_0)` per bin against the bin's empirical success rate (critic methods);
- batch gradient noise-to-signal ratio of the SR-PPO policy gradient with the Pass@k weight (k = 4) and without it
  (k = 1), from the 8 one-rollout-per-prompt replicas of the batch (`trl_srppo.analysis.measure_nsr`; sigmoid critics);
- each bin's share of the total update weight with and without the Pass@k weight
  (`trl_srppo.analysis.update_weight_share`, "prompt_weight" definition).
"""

import math

from trl_srppo.analysis import measure_nsr, rollout_advantages, update_weight_share

from .scoring import correct_per_prompt, critic_calibration, sample_rollouts

ANALYSIS_K = 4
ANALYSIS_ROLLOUTS = 8


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def analyse_checkpoint(
    policy,
    critic,
    critic_head: str | None,
    tokenizer,
    rows: list[dict],
    max_new_tokens: int,
    seed: int,
    gae_lambda: float = 1.0,
):
    """All mid-training analyses of one checkpoint; `critic=None` (GRPO) gives the bins only.

    `gae_lambda` is the run's own (0 for the TD ablation), so its gradients are those of the estimator it trains with.
    """
    rollouts = sample_rollouts(policy, tokenizer, rows, ANALYSIS_ROLLOUTS, seed, max_new_tokens)
    counts = correct_per_prompt(rollouts)
    bins = rollouts.prompt_bins()
    out = {"num_prompts": len(rows), "bins": {b: bins.count(b) for b in ("easy", "medium", "hard")}}
    if critic is None:
        return out
    out["calibration"] = critic_calibration(critic, rollouts, critic_head, counts)
    if critic_head != "sigmoid":
        return out  # the Pass@k weight reads a probability: only defined for the sigmoid critics
    rollout_bins = rollouts.rollout_bins()
    shares = {}
    for name, k in (("with_passk", ANALYSIS_K), ("without_passk", 1)):
        est = rollout_advantages(rollouts, k, gae_lambda)
        shares[name] = update_weight_share(est["weights"], est["advantages"], est["mask"], rollout_bins)
    out["weight_share"] = shares
    nsr = measure_nsr(policy, rollouts, pass_at_k=ANALYSIS_K, gae_lambda=gae_lambda, batch_size=64)
    out["nsr"] = {
        "batch": {name: {k: _finite(v) for k, v in res.items()} for name, res in nsr["batch"].items()},
        "per_bin": {
            b: {name: _finite(v["pooled"]["nsr"]) for name, v in per.items()} for b, per in nsr["per_bin"].items()
        },
    }
    return out

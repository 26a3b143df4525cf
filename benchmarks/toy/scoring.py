# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Held-out evaluation: `n` sampled completions per prompt, unbiased pass@k, difficulty bins, critic calibration.

Sampling runs inside `torch.random.fork_rng`, so evaluating during training leaves the training run's random stream
exactly as it was.
"""

import numpy as np
import torch

from trl_srppo.analysis import BINS, critic_rollout_values, generate_rollouts, score_rollouts

from ..common.scoring import bin_shares, bins_of, correct_per_prompt, pass_at
from .tasks import chain_reward


def sample_rollouts(model, tokenizer, rows: list[dict], num_samples: int, seed: int, max_new_tokens: int):
    """`num_samples` completions (temperature 1) of each prompt in `rows`, scored by the verifier.

    Returns the [`trl_srppo.analysis.Rollouts`] (prompt-major, rewards filled in).
    """
    with torch.random.fork_rng(devices=[]):
        rollouts = generate_rollouts(
            model,
            tokenizer,
            [r["prompt"] for r in rows],
            num_rollouts=num_samples,
            temperature=1.0,
            max_new_tokens=max_new_tokens,
            seed=seed,
            batch_size=256,
            columns={"answer": [r["answer"] for r in rows]},
        )
    score_rollouts(rollouts, chain_reward)
    return rollouts


def summarize(rollouts, rows: list[dict]) -> dict:
    """Pass@1 and pass@n, the bin shares, mean success per step count and the correct counts of scored rollouts."""
    num_samples = rollouts.num_rollouts
    counts = correct_per_prompt(rollouts)
    out = pass_at(counts, num_samples, ks=sorted({1, num_samples}))
    out["bins"] = bin_shares(bins_of(counts, num_samples))
    steps = sorted({r["steps"] for r in rows})
    out["success_by_steps"] = {
        str(s): float(np.mean([c / num_samples for c, r in zip(counts, rows) if r["steps"] == s])) for s in steps
    }
    out["counts"] = counts.tolist()
    return out


def evaluate(model, tokenizer, rows: list[dict], num_samples: int, seed: int, max_new_tokens: int) -> dict:
    """Held-out pass@1 and pass@n, the bin shares and mean success per step count (see [`summarize`])."""
    return summarize(sample_rollouts(model, tokenizer, rows, num_samples, seed, max_new_tokens), rows)


def critic_calibration(critic, rollouts, head: str, counts: np.ndarray) -> dict:
    """Mean `qhat(s_0)` (the critic's value of the prompt alone) per difficulty bin, next to the bin's success rate.

    `qhat(s_0)` is read at the last prompt token, column 0 of the critic's prefix values
    (`trl_srppo.method.critics.model.prefix_values`), the same value the trainer turns into the Pass@k weight.
    """
    values = critic_rollout_values(critic, rollouts, head=head, batch_size=256)  # (B, C)
    n = rollouts.num_rollouts
    q0 = values[:, 0].reshape(rollouts.num_prompts, n).mean(dim=1).numpy()  # identical across a prompt's rows
    bins = bins_of(counts, n)
    out = {}
    for b in BINS:
        idx = [i for i, x in enumerate(bins) if x == b]
        out[b] = {
            "num_prompts": len(idx),
            "mean_qhat_s0": float(np.mean(q0[idx])) if idx else float("nan"),
            "success_rate": float(np.mean(counts[idx] / n)) if idx else float("nan"),
        }
    # Squared error against the prompt's success rate over its `n` samples (not a Brier score, which compares with
    # each 0/1 outcome and adds the outcomes' own variance, mean p (1 - p), to this).
    out["sq_error_s0"] = float(np.mean((q0 - counts / n) ** 2))
    return out

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Analyses at the mid-training checkpoint, with `trl_srppo.analysis` (docs/method.md, "What the paper measures").

On held-out analysis prompts, 8 rollouts each from the mid-training policy:

- difficulty bins from the 8 rollouts (easy >= 6 correct, medium 3-5, hard <= 2);
- critic calibration: mean `qhat(s_0)` per bin against the bin's empirical success rate (critic methods);
- batch gradient noise-to-signal ratio of the SR-PPO policy gradient with the Pass@k weight (the default SR-PPO's k)
  and without it (k = 1), from the 8 one-rollout-per-prompt replicas of the batch (`trl_srppo.analysis.measure_nsr`;
  sigmoid critics);
- each bin's share of the total update weight with and without the Pass@k weight
  (`trl_srppo.analysis.update_weight_share`, "prompt_weight" definition).

`nsr_on_other_rollouts` measures the NSR the paper's way instead: rollouts from a GRPO-trained policy, the SR-PPO
checkpoint's critic and policy gradients.
"""

import math
import os

from trl_srppo.analysis import critic_rollout_values, measure_nsr, rollout_advantages, update_weight_share
from trl_srppo.method.srppo_config import METHOD_PRESETS

from ..common.scoring import correct_per_prompt
from .scoring import critic_calibration, sample_rollouts

ANALYSIS_K = METHOD_PRESETS["sr-ppo"]["pass_at_k"]  # the weight of the default SR-PPO
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
        shares[name] = update_weight_share(est.weights, est.advantages, est.mask, rollout_bins)
    out["weight_share"] = shares
    out["nsr"] = _nsr_summary(
        measure_nsr(policy, rollouts, pass_at_k=ANALYSIS_K, gae_lambda=gae_lambda, batch_size=64)
    )
    return out


def _nsr_summary(nsr: dict) -> dict:
    """Batch NSR results and each bin's pooled NSR, with and without the Pass@k weight (infinite -> None)."""
    return {
        "batch": {name: {k: _finite(v) for k, v in res.items()} for name, res in nsr["batch"].items()},
        "per_bin": {
            b: {name: _finite(v["pooled"]["nsr"]) for name, v in per.items()} for b, per in nsr["per_bin"].items()
        },
    }


def nsr_on_other_rollouts(
    behaviour_policy, policy, critic, tokenizer, rows: list[dict], max_new_tokens: int, seed: int
) -> dict:
    """The batch and per-bin NSR as the paper measures it: the rollouts (8 per prompt) are sampled from another policy
    (`behaviour_policy`, a GRPO-trained one), the advantages come from the SR-PPO `critic` of a mid-training checkpoint
    and the gradients are those of that checkpoint's `policy`. Returns the NSR summary and the rollouts' bins."""
    rollouts = sample_rollouts(behaviour_policy, tokenizer, rows, ANALYSIS_ROLLOUTS, seed, max_new_tokens)
    bins = rollouts.prompt_bins()
    critic_rollout_values(critic, rollouts, head="sigmoid", batch_size=256)
    nsr = measure_nsr(policy, rollouts, pass_at_k=ANALYSIS_K, gae_lambda=1.0, batch_size=64)
    return {"bins": {b: bins.count(b) for b in ("easy", "medium", "hard")}, **_nsr_summary(nsr)}


def paper_way_nsr(runs: dict, run_folder, tokenizer, rows: list[dict], max_new_tokens: int, seed: int = 13) -> dict:
    """[`nsr_on_other_rollouts`] for every Monte Carlo SR-PPO configuration (`sr-ppo*` with a sigmoid critic) and
    seed, on the rollouts of the off-policy GRPO run of the same seed, both at their mid-training snapshots.

    `runs` maps a configuration to its results per seed (`Grid.search_and_seeds()["runs"]`); `run_folder(name)` is
    the output folder of a run, where [`Runner.train`] saved the snapshot under `mid/`. Returns
    `{configuration: [summary per seed]}`; a run without a saved snapshot is left out.
    """
    from transformers import AutoModelForCausalLM

    from trl_srppo.method.critics.model import load_critic

    def load(name: str, what: str):
        folder = os.path.join(run_folder(name), "mid", what)
        if not os.path.isdir(folder):
            return None
        if what == "critic":
            return load_critic(folder).eval()
        return AutoModelForCausalLM.from_pretrained(folder, use_safetensors=True).eval()

    behaviours = [load(r["name"], "policy") for r in runs.get("grpo/off", [])]
    out = {}
    for config, results in runs.items():
        spec = results[0]["spec"]
        if (
            not spec["method"].startswith("sr-ppo")
            or dict(spec.get("options") or ()).get("critic_type", "separate") != "separate"
        ):
            continue
        per_seed = []
        for result, behaviour in zip(results, behaviours):
            policy, critic = load(result["name"], "policy"), load(result["name"], "critic")
            if behaviour is None or policy is None or critic is None:
                continue
            summary = nsr_on_other_rollouts(behaviour, policy, critic, tokenizer, rows, max_new_tokens, seed)
            per_seed.append({"seed": result["spec"]["seed"], **summary})
        if per_seed:
            out[config] = per_seed
    return out

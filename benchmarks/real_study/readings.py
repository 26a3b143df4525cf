# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""What the SmolLM2 study's stages and its report read from finished runs: a run's arm (`arm_of`), its final metric
and training-reward halves, the Pass@k weight's spread, the sweep's power, and the paired differences of the
comparison (against default SR-PPO, at equal seconds, against GRPO at equal work). It imports the design and the
shared layer, never a stage."""

import json
import os

import numpy as np

from ..common.curves import point_at, read_between
from ..common.stats import detectable, paired_t, pooled_sd
from .design import ARMS, LORA_ARMS, REFERENCES, SEED_CHOICES, SWEEP_METHODS, TARGET_DIFFERENCE, arm_options


def arm_of(
    result: dict, rate: float | None = None, schedule: tuple | None = None, lora_rate: float | None = None
) -> str | None:
    """The comparison arm a run belongs to (its method and options) at the critic stage's `critic_learning_rate`
    `rate` (`None`: the trainer's default) under the stability stage's `schedule`, `(prompts per update, options)`
    (`None`: any batch, no option), a LoRA arm only at the LoRA stage's `lora_rate` where one is given; `None` for
    none (a run with another critic rate, schedule or LoRA rate included)."""
    spec = result["spec"]
    prompts, schedule_options = schedule or (None, ())
    if prompts is not None and spec["prompts_per_update"] != prompts:
        return None
    options = sorted(tuple(o) for o in spec.get("options", ()))
    matches = (arm for arm, (m, _) in ARMS.items() if m == spec["method"]
               and sorted(arm_options(arm, rate, schedule_options)) == options)  # fmt: skip
    arm = next(matches, None)
    if arm in LORA_ARMS and lora_rate is not None and spec["learning_rate"] != lora_rate:
        return None
    return arm


def half_rewards(result: dict) -> tuple[float, float] | None:
    """The run's mean training reward over the first and over the second half of its updates (`None` without the
    per-update rewards)."""
    rewards = [r for r in result.get("reward_by_update", []) if r is not None]
    half = len(rewards) // 2
    return (float(np.mean(rewards[:half])), float(np.mean(rewards[half:]))) if half else None


def final_metric(result: dict, metric: str = "pass@1") -> float:
    return float(result["final"][metric])


def weight_ratio(values: list[float], k: int) -> float:
    """The largest Pass@k weight `k (1 - q)^(k - 1)` over the smallest among the problems' `qhat(s_0)` `values`: 1
    when the weight is the same for every problem (SR-PPO's update is then k = 1's times a factor common to the
    batch)."""
    weights = k * (1.0 - np.asarray(values, dtype=np.float64)) ** (k - 1)  # (N,)
    return float(weights.max() / weights.min())


def power(results: list[dict], learning_rate: float) -> dict:
    """The seeds' spread of each method's validation pass@1 and of the SR-PPO - GRPO paired difference: at
    `learning_rate`, and pooled over the sweep's rates (each around its own mean: more degrees of freedom for the
    same runs); the differences the pooled spread lets `SEED_CHOICES` seeds detect, and the seeds planned for the
    comparison: the fewest whose detectable paired difference is at most `TARGET_DIFFERENCE` (the most otherwise)."""
    groups: dict[str, dict[float, list[float]]] = {"sr-ppo": {}, "grpo": {}, "sr-ppo - grpo": {}}
    for lr in sorted({r["spec"]["learning_rate"] for r in results}):
        at = [r for r in results if r["spec"]["learning_rate"] == lr]
        by = {m: {r["spec"]["seed"]: final_metric(r) for r in at if r["spec"]["method"] == m} for m in SWEEP_METHODS}
        for method in SWEEP_METHODS:
            groups[method][lr] = list(by[method].values())
        groups["sr-ppo - grpo"][lr] = [
            by["sr-ppo"][s] - by["grpo"][s] for s in sorted(set(by["sr-ppo"]) & set(by["grpo"]))
        ]
    out = {"differences": groups["sr-ppo - grpo"].get(learning_rate, []), "rates": len(groups["sr-ppo"])}
    for name, by_rate in groups.items():
        chosen = by_rate.get(learning_rate, [])
        pooled, dof = pooled_sd(list(by_rate.values()))
        out[name] = {
            "sd": float(np.std(chosen, ddof=1)) if len(chosen) > 1 else float("nan"),
            "pooled_sd": pooled,
            "dof": dof,
            "detectable": {n: detectable(pooled, n) for n in SEED_CHOICES},
        }
    found = out["sr-ppo - grpo"]["detectable"]
    out["planned_seeds"] = next((n for n in SEED_CHOICES if found[n] <= TARGET_DIFFERENCE), SEED_CHOICES[-1])
    return out


def pilot_differences(path: str) -> dict:
    """The pilot's (`make bench-real`, 3 seeds, 24 test problems) per-seed test pass@1 differences against default
    SR-PPO: how much the seed's shared randomness cancels between methods."""
    if not os.path.isfile(path):
        return {}
    with open(path) as f:
        pilot = json.load(f)
    runs = pilot["runs"]
    final = {(r["spec"]["method"], r["spec"]["seed"]): r["final"]["pass@1"] for r in runs}
    seeds = sorted({s for _, s in final})
    out = {}
    for method in sorted({m for m, _ in final} - {"sr-ppo"}):
        diffs = [final[(method, s)] - final[("sr-ppo", s)] for s in seeds if (method, s) in final]
        out[method] = {"differences": diffs, "sd": float(np.std(diffs, ddof=1)) if len(diffs) > 1 else float("nan")}
    out["sr-ppo seeds"] = [final[("sr-ppo", s)] for s in seeds]
    out["base"] = pilot["base"]["test"]["pass@1"]
    out["sr-ppo curves"] = {
        str(r["spec"]["seed"]): [(p["update"], p["pass@1"]) for p in r["curve"]]
        for r in runs
        if r["spec"]["method"] == "sr-ppo"
    }
    return out


def compare_differences(results: dict[str, list[dict]], metric: str = "pass@1", arm_update: int | None = None) -> dict:
    """Per arm: the per-seed differences of test `metric` against the arm's reference (default SR-PPO, or
    `REFERENCES`) at their last updates, with the t interval and the sign-flip p-value; with `arm_update`, the arm is
    read at that update instead (GRPO at half its updates: SR-PPO's completions), a seed without that point
    left out."""

    def value(result: dict, update: int | None) -> float | None:
        return final_metric(result, metric) if update is None else point_at(result, update, metric)

    out = {}
    for arm, runs in results.items():
        reference = REFERENCES.get(arm, "sr-ppo")
        if arm == reference or reference not in results:
            continue
        mine = {r["spec"]["seed"]: value(r, arm_update) for r in runs}
        theirs = {r["spec"]["seed"]: value(r, None) for r in results[reference]}
        seeds = sorted(set(mine) & set(theirs))
        out[arm] = {"reference": reference, **paired_t([mine[s] for s in seeds], [theirs[s] for s in seeds])}
    return out


def at_seconds(result: dict, seconds: float, metric: str = "pass@1") -> float | None:
    """The run's `metric` after `seconds` of training, linear between its evaluations (by their training seconds);
    its last evaluation when `seconds` is past it (a faster run is not extrapolated: its value is a lower bound), and
    `None` before its first."""
    return read_between(result, "training_seconds", seconds, metric)


def equal_seconds_differences(
    results: dict[str, list[dict]], arm: str, metric: str = "pass@1", reference: str = "sr-ppo"
) -> dict:
    """`arm` read at `reference`'s (default SR-PPO's) training seconds on the same seed, minus `reference`'s last
    evaluation."""
    reference = {r["spec"]["seed"]: r for r in results[reference]}
    mine = {r["spec"]["seed"]: r for r in results[arm]}
    seeds = sorted(set(reference) & set(mine))
    values = [at_seconds(mine[s], reference[s]["training_seconds"], metric) for s in seeds]
    return paired_t(values, [final_metric(reference[s], metric) for s in seeds])


def grpo_partner(arm: str) -> str | None:
    """The GRPO arm a single-rollout `arm` is read against at equal work: LoRA GRPO beside a LoRA policy, else GRPO;
    `None` for a GRPO arm."""
    if ARMS[arm][0] == "grpo":
        return None
    return "lora-grpo" if arm in LORA_ARMS else "grpo"


def against_grpo(results: dict[str, list[dict]], arm: str, metric: str = "pass@1") -> dict[str, dict]:
    """Its GRPO partner (`grpo_partner`) minus single-rollout `arm` on the seeds both finished, at equal work:
    `completions`, GRPO at half its updates (half as many prompts, 4 rollouts each: the completions of the arm's
    last update; a seed without that point left out), and `seconds`, GRPO read at the arm's training seconds
    (`equal_seconds_differences` with the arm as the reference)."""
    partner = grpo_partner(arm)
    grpo = {r["spec"]["seed"]: r for r in results[partner]}
    mine = {r["spec"]["seed"]: r for r in results[arm]}
    seeds = sorted(set(grpo) & set(mine))
    at_half = [point_at(grpo[s], grpo[s]["spec"]["updates"] // 2, metric) for s in seeds]
    return {
        "completions": paired_t(at_half, [final_metric(mine[s], metric) for s in seeds]),
        "seconds": equal_seconds_differences(results, partner, metric, reference=arm),
    }

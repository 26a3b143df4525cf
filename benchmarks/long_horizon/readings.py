# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""What the long-horizon study reads from its finished runs, and its rules (`study.py`'s docstring): the base model's
pass@k, the seeds the pilot's spread asks for, a run's collapse, the paired differences at equal updates, generated
tokens and seconds, the decisions on `pass_at_k` and on the critic, and the mechanism's early and late readings.
Pure functions of the runs' JSON."""

import math

import numpy as np

from ..cold_start.readings import paired_finals
from ..common.curves import read_between
from ..common.scoring import pass_at
from ..common.stats import detectable, paired_t, pooled_sd, t_quantile
from .design import FULL_KS, SEED_CHOICES, TARGET_DIFFERENCE

RULE_LEVEL = 0.95  # the rules' intervals: two-sided 90% (the t quantile at 0.95)
RULE_METRICS = ("pass@1", "pass@32")  # the final test measures the rules read
COLLAPSE_WINDOW = 20  # the updates of logged metrics the report shows before a collapse
HEAD_RATE_MARGIN = -0.02  # `k2 head` - `k2`: the mean final pass@1 at or above which the head's rate becomes default
DIFFICULTY_BINS = ((0.05, "hard"), (0.25, "medium"), (math.inf, "easy"))  # the base model's test success below each


def base_pass(base: dict, samples: int, ks=FULL_KS) -> dict:
    """The base model's test pass@k for each of `ks` from its correct counts out of `samples` per problem."""
    return pass_at(np.asarray(base["test"]["correct_counts"]), samples, ks)


def planned_seeds(pilot: dict) -> dict:
    """The comparison's seeds from the pilot (`pilot`: arm -> runs, `k2 head` and `k1 head`): the sd of their
    per-seed differences in final test pass@1, the difference each of `SEED_CHOICES` detects at 80% power (5%,
    two-sided) and the fewest that detect `TARGET_DIFFERENCE`, else the most; the fewest without a spread."""
    d = paired_finals(pilot.get("k2 head", []), pilot.get("k1 head", []), "pass@1")
    sd, dof = pooled_sd([d["differences"]])
    if not dof:
        return {"sd": sd, "dof": dof, "detectable": {}, "seeds": SEED_CHOICES[0]}
    found = {n: detectable(sd, n) for n in SEED_CHOICES}
    seeds = next((n for n in SEED_CHOICES if found[n] <= TARGET_DIFFERENCE), SEED_CHOICES[-1])
    return {"sd": sd, "dof": dof, "detectable": found, "seeds": seeds}


def collapse_update(curve: list[dict], base_pass1: float) -> int | None:
    """Rule 1: the first evaluation point from which the run's test pass@1 stays below the base model's
    `base_pass1` or below half of its own peak so far at every later point (the end included), or `None`."""
    points = sorted(curve, key=lambda p: p["update"])
    peak, low = -math.inf, []
    for p in points:
        peak = max(peak, p["pass@1"])
        low.append(p["pass@1"] < base_pass1 or p["pass@1"] < peak / 2)
    first = None
    for point, is_low in zip(points, low):
        first = (first or point["update"]) if is_low else None
    return first


def collapses(runs: list[dict], base_pass1: float) -> int:
    """How many of `runs` collapsed (`collapse_update`)."""
    return sum(collapse_update(r["curve"], base_pass1) is not None for r in runs)


def collapse_window(run: dict, update: int, width: int = COLLAPSE_WINDOW) -> list[dict]:
    """The run's per-update logs of the `width` updates up to its collapse at `update`."""
    return [e for e in run.get("by_update", []) if update - width < e["step"] <= update]


def windows(run: dict, keys, width: int = COLLAPSE_WINDOW) -> list[dict]:
    """The run's path, `width` updates at a time: for each window (updates 1 .. width, then on), its last update and
    the mean of each logged `keys` over it (NaN where never logged)."""
    rows, updates = [], run["spec"]["updates"]
    for start in range(0, updates, width):
        end = min(start + width, updates)
        logged = collapse_window(run, end, end - start)
        means = {k: [e[k] for e in logged if e.get(k) is not None] for k in keys}
        rows.append({"update": end, **{k: float(np.mean(v)) if v else float("nan") for k, v in means.items()}})
    return rows


def paired(runs: list[dict], reference: list[dict], metric: str) -> dict:
    """`runs`' final `metric` minus `reference`'s, paired by seed, with the rules' 90% interval."""
    return paired_finals(runs, reference, metric, RULE_LEVEL)


def at_budget(run: dict, reference: dict, axis: str, metric: str) -> float | None:
    """`run`'s `metric` where `reference` ended on `axis` (`"update"`, `"generated_tokens"`, `"training_seconds"`),
    linear between `run`'s evaluations that have the metric (its last past them)."""
    points = [p for p in run["curve"] if metric in p]
    return read_between({"curve": points}, axis, reference["final"][axis], metric) if points else None


def paired_at_budget(runs: list[dict], reference: list[dict], axis: str, metric: str) -> dict:
    """`runs`' `metric` at each paired `reference` run's final `axis` value (`at_budget`) minus that run's final
    `metric`, with the rules' 90% interval (a reference run whose final evaluation lacks `metric` is left out)."""
    by_seed = {r["spec"]["seed"]: r for r in reference if metric in r["final"]}
    pairs = [(at_budget(r, by_seed[r["spec"]["seed"]], axis, metric), by_seed[r["spec"]["seed"]]["final"][metric])
             for r in runs if r["spec"]["seed"] in by_seed]  # fmt: skip
    return paired_t([a for a, _ in pairs], [b for _, b in pairs], RULE_LEVEL)


def above(d: dict) -> bool:
    return d["low"] > 0  # False for a NaN bound


def below(d: dict) -> bool:
    return d["high"] < 0


def decide_k(differences: dict, k2_collapses: int, k1_collapses: int) -> dict:
    """Rule 2, on `differences` (critic -> metric -> `paired`'s k2 - k1, for the critics `default` and `head`, the
    metrics `RULE_METRICS`) and the collapsed seeds at k = 2 and k = 1 over both critics; the clauses in order:

    - k = 2 stays when, for either critic, an interval lies above 0, or k = 1 collapses in more seeds;
    - k = 1 becomes the default when, for both critics, an interval lies below 0, or k = 2 collapses in more seeds;
    - otherwise k = 2 stays and the weight showed no measured effect.

    Returns `{"k", "effect", "why"}`."""
    if any(above(d) for by_metric in differences.values() for d in by_metric.values()):
        return {"k": 2, "effect": True, "why": "k2 - k1 has a 90% interval above 0"}
    if k1_collapses > k2_collapses:
        return {"k": 2, "effect": True, "why": f"k = 1 collapsed in {k1_collapses} seeds, k = 2 in {k2_collapses}"}
    if len(differences) == 2 and all(any(below(d) for d in m.values()) for m in differences.values()):
        return {"k": 1, "effect": True, "why": "k2 - k1 has a 90% interval below 0 for both critics"}
    if k2_collapses > k1_collapses:
        return {"k": 1, "effect": True, "why": f"k = 2 collapsed in {k2_collapses} seeds, k = 1 in {k1_collapses}"}
    return {"k": 2, "effect": False, "why": "no separation and equal collapses: the weight showed no measured effect"}


def decide_critic(vs_policy_head: dict, separate_collapses: int, policy_head_collapses: int,
                  head_minus_default: float, head_collapses: int, default_collapses: int) -> dict:  # fmt: skip
    """Rule 3, on `vs_policy_head` (metric -> `paired`'s better separate-critic arm - `policy head k2`, at equal
    updates), the collapsed seeds of those two, the mean final pass@1 of `k2 head` - `k2` and their collapsed seeds:

    - the separate critic stays when an interval lies above 0 or the policy head collapses in more seeds, and then
      `critic_head_learning_rate=3e-3` becomes the default when `k2 head` - `k2` >= `HEAD_RATE_MARGIN` and the head
      collapses no more often;
    - otherwise `critic_type="policy_head"` becomes the default (the head's rate is then not read: `None`).

    Returns `{"critic_type", "head_rate", "why"}`."""
    if any(above(d) for d in vs_policy_head.values()) or policy_head_collapses > separate_collapses:
        head_rate = head_minus_default >= HEAD_RATE_MARGIN and head_collapses <= default_collapses
        why = "the separate critic beats the policy head (a 90% interval above 0, or fewer collapses)"
        return {"critic_type": "separate", "head_rate": head_rate, "why": why}
    return {"critic_type": "policy_head", "head_rate": None,
            "why": "the separate critic does not beat the policy head: its cost buys no measured gain"}  # fmt: skip


def better_separate(compare: dict) -> str:
    """`k2 head` or `k2`, whichever has the higher mean final test pass@1 (`k2 head` on a tie or with no runs)."""
    means = {arm: np.mean([r["final"]["pass@1"] for r in compare.get(arm, [])] or [-1.0]) for arm in ("k2 head", "k2")}
    return "k2" if means["k2"] > means["k2 head"] else "k2 head"


def mean_final(runs: list[dict], metric: str = "pass@1") -> float:
    values = [r["final"][metric] for r in runs if r["final"].get(metric) is not None]
    return float(np.mean(values)) if values else float("nan")


def decisions(compare: dict, base_pass1: float) -> dict:
    """Rules 2 and 3 on the comparison's runs (arm -> runs): their inputs and outcomes."""
    k_diffs = {critic: {m: paired(compare.get(k2, []), compare.get(k1, []), m) for m in RULE_METRICS}
               for critic, (k2, k1) in (("default", ("k2", "k1")), ("head", ("k2 head", "k1 head")))}  # fmt: skip
    counted = {arm: collapses(compare.get(arm, []), base_pass1) for arm in ("k2", "k1", "k2 head", "k1 head",
                                                                           "policy head k2")}  # fmt: skip
    k = decide_k(k_diffs, counted["k2"] + counted["k2 head"], counted["k1"] + counted["k1 head"])
    best = better_separate(compare)
    vs_head = {m: paired(compare.get(best, []), compare.get("policy head k2", []), m) for m in RULE_METRICS}
    head_minus = paired_finals(compare.get("k2 head", []), compare.get("k2", []), "pass@1")["mean"]
    critic = decide_critic(vs_head, counted[best], counted["policy head k2"], head_minus, counted["k2 head"],
                           counted["k2"])  # fmt: skip
    return {"k_differences": k_diffs, "collapses": counted, "k": k, "separate_arm": best,
            "vs_policy_head": vs_head, "head_minus_default": head_minus, "critic": critic}  # fmt: skip


# ---- the mechanism: early (first quarter) against late (last quarter) -----------------------------------------------


def quarters(updates: int) -> tuple[range, range]:
    """The updates (1-based) of the run's first and last quarters."""
    quarter = max(1, updates // 4)
    return range(1, quarter + 1), range(updates - quarter + 1, updates + 1)


def early_late(run: dict, key: str) -> tuple[float, float]:
    """The mean of the logged `key` over the run's first and last quarters of updates (NaN where never logged)."""
    out = []
    for span in quarters(run["spec"]["updates"]):
        values = [e[key] for e in run.get("by_update", []) if e["step"] in span and e.get(key) is not None]
        out.append(float(np.mean(values)) if values else float("nan"))
    return out[0], out[1]


def quarter_spans(updates: int) -> list[range]:
    """The updates (1-based) of the run's four quarters, the last one holding any remainder."""
    quarter = max(1, updates // 4)
    return [range(i * quarter + 1, (i + 1) * quarter + 1) for i in range(3)] + [range(3 * quarter + 1, updates + 1)]


def pooled_nsr(runs: list[dict], span: range, suffix: str = "") -> dict:
    """The batch NSR of `runs` (the seeds of one arm) over the updates of `span`: the summed
    `policy/gradient_noise<suffix>` over the summed `policy/gradient_signal<suffix>` of every batch measured there,
    all seeds pooled. A batch's signal is an unbiased estimate that falls to 0 or below when the noise swamps it
    (its own ratio is then infinite, and so would the mean of the ratios be); the sums are the estimate that stays
    unbiased. `nsr_low` bounds the ratio from below where the signal is not resolved: the summed noise over the
    summed signal's one-sided 95% upper bound (t over the batches' spread, as if they were draws of one
    distribution; the policy moves within a quarter, so it is a rough bound).
    Returns `{"measured", "noise", "signal", "nsr", "nsr_low"}`: `nsr` NaN where none was measured, infinite where
    the summed signal is not positive (not resolved); `nsr_low` NaN with fewer than 2 batches."""
    logged = [e for r in runs for e in r.get("by_update", [])
              if e["step"] in span and f"policy/gradient_noise{suffix}" in e]  # fmt: skip
    signals = [float(e[f"policy/gradient_signal{suffix}"]) for e in logged]
    noise, signal = float(sum(e[f"policy/gradient_noise{suffix}"] for e in logged)), float(sum(signals))
    nsr = float("nan") if not logged else noise / signal if signal > 0 else math.inf
    nsr_low = float("nan")
    if len(signals) >= 2:
        high = signal + t_quantile(len(signals) - 1, 0.95) * float(np.std(signals, ddof=1)) * math.sqrt(len(signals))
        nsr_low = noise / high if high > 0 else float("nan")
    return {"measured": len(logged), "noise": noise, "signal": signal, "nsr": nsr, "nsr_low": nsr_low}


def clip_key(run: dict) -> str | None:
    """The run's logged clip fraction: its first `clip_ratio/` metric with `region_mean` preferred."""
    keys = sorted({k for e in run.get("by_update", []) for k in e if k.startswith("clip_ratio/")})
    return next((k for k in keys if k.endswith("region_mean")), keys[0] if keys else None)


def weight_shares(run: dict, span: range, weighted: bool) -> dict:
    """Each prompt level's share of the update's weight over the run's training batches generated in `span`: a
    rollout weighs `|Y - qhat(s_0)|` (its first token's advantage), times its Pass@k weight `k (1 - qhat)^(k-1)`
    when `weighted` (k from the run's resolved config)."""
    k = int(run.get("config", {}).get("pass_at_k") or 1)
    totals = {}
    for batch in run.get("prompt_values", []):
        if batch["update"] not in span:
            continue
        for q, y, level in zip(batch["values"], batch["outcomes"], batch["levels"]):
            w = abs(y - q) * (k * (1.0 - q) ** (k - 1) if weighted else 1.0)
            totals[level] = totals.get(level, 0.0) + w
    whole = sum(totals.values())
    return {level: w / whole for level, w in totals.items()} if whole > 0 else {}


def difficulty(base_by_level: dict) -> dict:
    """Each level's difficulty bin (`DIFFICULTY_BINS`) from the base model's test success on it (`base_by_level`)."""
    return {level: next(name for bound, name in DIFFICULTY_BINS if success < bound)
            for level, success in base_by_level.items()}  # fmt: skip


def binned(shares: dict, bins: dict) -> dict:
    """`weight_shares`' level -> share summed by the levels' bins (`difficulty`); a level with no bin is left out."""
    out = {}
    for level, share in shares.items():
        if level in bins:
            out[bins[level]] = out.get(bins[level], 0.0) + share
    return out


def peak_growth(run: dict, after: int) -> tuple[int, int, float] | None:
    """How far the run's peak resident memory rose from update `after` to its end: (first update, last update, MiB).
    Read in runs trained in one process only (`None` for a resumed run, whose new process starts its peak afresh and
    sets it again with its first save and evaluation); those before `after` set the peak's level once."""
    logged = [(e["step"], e["memory/peak_rss_mib"]) for e in run.get("by_update", [])
              if e.get("memory/peak_rss_mib") is not None and e["step"] >= after]  # fmt: skip
    if run.get("sessions", 1) > 1 or not logged:
        return None
    return logged[0][0], logged[-1][0], logged[-1][1] - logged[0][1]


def rss_reading(run: dict) -> tuple[float, float, float]:
    """The run's resident memory in MiB: the mean `memory/rss_mib` over its first and last quarters of updates
    (`early_late`), and the highest `memory/peak_rss_mib` logged (a process's high-water mark: it starts afresh in
    each resumed session and holds the evaluations' and the NSR measurements' peaks, so it is no growth reading)."""
    peaks = [e["memory/peak_rss_mib"] for e in run.get("by_update", []) if e.get("memory/peak_rss_mib") is not None]
    return (*early_late(run, "memory/rss_mib"), float(max(peaks)) if peaks else float("nan"))

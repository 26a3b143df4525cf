# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""What the cold-start study reads from a finished run: how well its critic tells prompts apart on the training
batches (before their rollouts) and on held-out problems, how closely its mean value follows the batch's success,
what its option cost in generated tokens, and the options stage's rule. Pure functions of the run's JSON."""

import math

import numpy as np

from trl_srppo.method.batch_metrics import auc

from ..common.curves import read_between
from ..common.stats import detectable, paired_t, pooled_sd
from ..real_study.probe import sample_auc
from .design import MIN_SPREAD, OPTIONS, SEED_CHOICES, SWEEP_METHODS, SWEEP_RATES, TARGET_DIFFERENCE, TOKEN_BUDGET

TRACKING_TOLERANCE = 0.1  # the goal: the critic's mean value within this of the batch's success rate


def slim_run(result: dict) -> dict:
    """A run's result as the study keeps it (the worker's `finish`): the trainer's log lines replaced by the numbers
    the study reads per update (the reward, the completions' mean length and every `critic/` metric)."""
    out = {k: v for k, v in result.items() if k != "logs"}
    out["by_update"] = [
        {k: v for k, v in entry.items() if k.startswith("critic/") or k in ("reward", "completions/mean_length")}
        for entry in result.get("logs", [])
        if "reward" in entry or any(k.startswith("critic/warm_start") for k in entry)
    ]
    return out


def training_auc(result: dict, first: int, last: int) -> float:
    """The AUC of `qhat(s_0)` against the outcomes (`>= 0.5`) over the training batches of updates `first` ..
    `last` (1-based, inclusive), pooled: NaN without both outcomes or without recorded values."""
    batches = result.get("prompt_values", [])[first - 1 : last]
    values = [v for b in batches for v in b["values"]]
    labels = [int(y >= 0.5) for b in batches for y in b["outcomes"]]
    return auc(values, labels) if values else float("nan")


def quarter_aucs(result: dict) -> list[float]:
    """`training_auc` over each quarter of the run's updates (the batches' prompts valued before their rollouts)."""
    updates = len(result.get("prompt_values", []))
    bounds = [round(q * updates / 4) for q in range(5)]
    return [training_auc(result, lo + 1, hi) if hi > lo else float("nan") for lo, hi in zip(bounds, bounds[1:])]


def calibrated_within(values, tolerance: float = TRACKING_TOLERANCE) -> float:
    """The chance that a batch's success rate lands within `tolerance` of the mean of `values` (n,) if each value were
    its prompt's true chance of success: the Poisson-binomial law of the successes, built one prompt at a time. What
    even a calibrated critic reaches on the tracking goal with one rollout per prompt."""
    q = np.asarray(values, dtype=np.float64)  # (n,)
    pmf = np.ones(1)  # (k + 1,): P(k successes among the prompts so far)
    for p in q:
        pmf = np.concatenate([pmf * (1 - p), [0.0]]) + np.concatenate([[0.0], pmf * p])
    rates = np.arange(q.size + 1) / q.size  # (n + 1,)
    return float(pmf[np.abs(rates - q.mean()) <= tolerance + 1e-12].sum())


def tracking(result: dict) -> dict:
    """How the critic's mean `qhat(s_0)` follows each training batch's success rate: the mean absolute gap over the
    updates, the gap at the first update, the share of updates within `TRACKING_TOLERANCE`, and the share a
    calibrated critic with these values would expect (`calibrated_within`, mean over the updates)."""
    batches = result.get("prompt_values", [])
    gaps = [abs(float(np.mean(b["values"])) - float(np.mean(b["outcomes"]))) for b in batches]
    if not gaps:
        return {"mean_gap": float("nan"), "first_gap": float("nan"), "within": float("nan"),
                "calibrated": float("nan")}  # fmt: skip
    return {"mean_gap": float(np.mean(gaps)), "first_gap": gaps[0],
            "within": float(np.mean([g <= TRACKING_TOLERANCE for g in gaps])),
            "calibrated": float(np.mean([calibrated_within(b["values"]) for b in batches]))}  # fmt: skip


def held_out_aucs(result: dict, counts: list[int], samples: int) -> list[dict]:
    """Per recorded point of the critic's `critic_curve` (its `qhat(s_0)` of every held-out problem): the update, the
    AUC against the held-out outcomes `counts` of `samples` each (the base model's: the same labels for every run),
    and the values' sd over the problems."""
    return [
        {
            "update": p["update"],
            "auc": sample_auc(p["critic_s0"], counts, samples),
            "sd": float(np.std(p["critic_s0"])),
        }  # fmt: skip
        for p in result.get("critic_curve", [])
    ]


def weight_ratio(values, k: int = 2) -> float:
    """How far apart the Pass@k weights `k (1 - q)^(k-1)` of `values` (each problem's `qhat(s_0)`) are: the 90th
    percentile's over the 10th's (1.0: every problem weighted alike)."""
    weights = k * (1.0 - np.clip(np.asarray(values, dtype=float), 0.0, 1.0)) ** (k - 1)
    low, high = np.percentile(weights, [10, 90])
    return float(high / low) if low > 0 else float("inf")


def final_test_auc(final: dict) -> float:
    """The AUC of the last evaluation's `qhat(s_0)` of every test problem against that evaluation's outcomes, the
    values rounded to 1e-6 first: a running mean's one value comes out of the sigmoid differing by a float32 ulp
    between problems, which is no ranking (unrounded, it read as an AUC of 0.40 on one seed)."""
    samples = max(int(key.removeprefix("pass@")) for key in final if key.startswith("pass@"))
    values = np.round(np.asarray(final["critic_s0"], dtype=float), 6)
    return sample_auc(values, final["correct_counts"], samples)


def squared_advantage(result: dict) -> dict:
    """The squared advantage of each training rollout's first token, `(Y - qhat(s_0))^2`, the variance a baseline is
    there to cut: its mean over every training batch's prompts, and its sum over the sum of `(Y - Ybar)^2`, with
    `Ybar` each batch's own success rate, the best constant a batch could have had (below 1: the critic tells the
    batch's prompts apart better than any one value for them; a constant baseline is at 1 or above)."""
    batches = [(np.asarray(b["outcomes"], dtype=float), np.asarray(b["values"], dtype=float))
               for b in result.get("prompt_values", [])]  # fmt: skip
    if not batches:
        return {"mean": float("nan"), "relative": float("nan")}
    left = sum(float(((y - v) ** 2).sum()) for y, v in batches)
    best_constant = sum(float(((y - y.mean()) ** 2).sum()) for y, _ in batches)
    return {"mean": left / sum(y.size for y, _ in batches),
            "relative": left / best_constant if best_constant > 0 else float("nan")}  # fmt: skip


def critic_summary(result: dict) -> dict:
    """What a trained run's critic knew: the training batches' AUC per quarter, how its mean followed the batches'
    success, the squared advantage it left at `s_0` ([`squared_advantage`]), and at the last evaluation its test
    `qhat(s_0)`'s AUC against the run's own test outcomes, their sd and the spread of their Pass@2 weights
    ([`weight_ratio`])."""
    final = result["final"]
    return {
        "training": quarter_aucs(result),
        "tracking": tracking(result),
        "squared_advantage": squared_advantage(result),
        "test_auc": final_test_auc(final),
        "test_sd": float(np.std(final["critic_s0"])),
        "weight_ratio": weight_ratio(final["critic_s0"]),
    }


def warm_start_tokens(result: dict) -> float:
    """The generated tokens of the run's warm start (0 without one)."""
    return float(sum(e.get("critic/warm_start_tokens", 0.0) for e in result.get("by_update", [])))


def extra_tokens(result: dict) -> float:
    """The generated tokens that moved no policy: the warm start's, those of the critic-only updates
    (`critic_warmup_steps`, each its batch's completions times their mean length) and A*-PO's offline stage's."""
    if "offline_tokens" in result:
        return float(result["offline_tokens"])
    options = dict(map(tuple, result["spec"].get("options", ())))
    warmup = int(options.get("critic_warmup_steps", 0))
    lengths = [e["completions/mean_length"] for e in result.get("by_update", []) if "completions/mean_length" in e]
    per_update = result["spec"]["prompts_per_update"]
    return warm_start_tokens(result) + float(sum(lengths[:warmup])) * per_update


def start_cost(result: dict, axis: str) -> float | None:
    """What the run spent on `axis` (`"generated_tokens"`, `"training_seconds"`) before its first policy update, while
    its policy was still the base model: A*-PO's offline stage, a warm start, critic-only updates (0 without any);
    `None` where it is not recorded (the seconds of critic-only updates)."""
    if axis == "generated_tokens":
        return extra_tokens(result)
    if "offline values" in result.get("phase_seconds", {}):
        return float(result["phase_seconds"]["offline values"])
    if dict(map(tuple, result["spec"].get("options", ()))).get("critic_warmup_steps", 0):
        return None
    return float(sum(e.get("critic/warm_start_seconds", 0.0) for e in result.get("by_update", [])))


def read_from_base(result: dict, axis: str, x: float, base: float, metric: str = "pass@1") -> float | None:
    """The run's `metric` at `x` on `axis`, its curve started at the base model's `base`: flat through what the
    run spent before its first policy update (`start_cost`), then linear to its first evaluation, between its
    evaluations, and its last evaluation past them (a lower bound); without a recorded start cost, `None` before its
    first evaluation."""
    start = start_cost(result, axis)
    if start is None:
        return read_between(result, axis, x, metric)
    points = [{axis: 0.0, metric: base}, {axis: start, metric: base}, *result["curve"]]
    return read_between({"curve": points}, axis, x, metric)


def token_share(result: dict) -> float:
    """`extra_tokens` as a share of the tokens of the updates that moved the policy."""
    extra = extra_tokens(result)
    policy = result["generated_tokens"] - extra
    return extra / policy if policy > 0 else math.inf


def option_of(result: dict) -> str | None:
    """The options stage's option a run trained with (`None`: another)."""
    options = sorted(tuple(o) for o in result["spec"].get("options", ()))
    return next((name for name, opts in OPTIONS.items() if sorted(opts) == options), None)


def option_table(runs: list[dict], base: dict, samples: int) -> dict:
    """Per option: its runs' seeds and, per run, the held-out AUC per quarter (against the base model's validation
    outcomes), the training-batch AUC per quarter, the tracking of the success rate, the token share, the final
    validation pass@1 and whether it ends below the base model's; the option's score (the rule's: the mean over its
    runs and their held-out points of the AUC)."""
    counts = base["val"]["correct_counts"]
    table = {}
    for name in OPTIONS:
        mine = sorted((r for r in runs if option_of(r) == name), key=lambda r: r["spec"]["seed"])
        rows = []
        for r in mine:
            held = held_out_aucs(r, counts, samples)
            rows.append({
                "seed": r["spec"]["seed"], "held_out": held, "training": quarter_aucs(r), "tracking": tracking(r),
                "token_share": token_share(r), "extra_tokens": extra_tokens(r), "final": float(r["final"]["pass@1"]),
                "below_base": float(r["final"]["pass@1"]) < base["val"]["pass@1"],
                "seconds": r["training_seconds"], "tokens": r["generated_tokens"],
            })  # fmt: skip
        points = [p["auc"] for row in rows for p in row["held_out"] if math.isfinite(p["auc"])]
        table[name] = {"runs": rows, "score": float(np.mean(points)) if points else float("nan")}
    return table


def final_spread(row: dict) -> float:
    """The mean over an option's runs of the sd of its critic's validation `qhat(s_0)` at the last recorded point."""
    spreads = [r["held_out"][-1]["sd"] for r in row["runs"] if r.get("held_out")]
    return float(np.mean(spreads)) if spreads else float("nan")


def goals(row: dict, ceiling: float) -> dict:
    """The issue's three goals for one option (`option_table`'s `row`), each met by every run: its critic's mean
    value within `TRACKING_TOLERANCE` of the batch's success rate at every update; its training-batch AUC over the
    first quarter of the run at or above `ceiling` (the ridge probe's held-out AUC on the base model's outcomes); at
    most `TOKEN_BUDGET` extra generated tokens."""
    runs = row["runs"]
    return {
        "tracks": bool(runs) and all(r["tracking"]["within"] == 1.0 for r in runs),
        "ceiling": bool(runs) and all(r["training"][0] >= ceiling for r in runs),
        "tokens": bool(runs) and all(r["token_share"] <= TOKEN_BUDGET for r in runs),
    }


def choose_option(table: dict, seeds) -> tuple[str | None, str]:
    """The options stage's rule (`study.py`'s docstring) over the options of `table` (`option_table`'s, `default`
    among them): `(option, why)`, `(None, why)` until every option has a run on every one of `seeds`."""
    wanted = sorted(seeds)
    if "default" not in table or any(sorted(r["seed"] for r in row["runs"]) != wanted for row in table.values()):
        return None, "not every option has run on every seed of the stage"
    eligible = {
        name: row for name, row in table.items()
        if all(r["token_share"] <= TOKEN_BUDGET and not r["below_base"] for r in row["runs"])
        and math.isfinite(row["score"]) and final_spread(row) >= MIN_SPREAD
    }  # fmt: skip
    if not eligible:
        return "default", (
            f"no option spreads its values by {MIN_SPREAD} within the token budget with every run above the base "
            "model: the default"
        )
    best = max(eligible, key=lambda name: eligible[name]["score"])
    return best, (
        f"the highest mean held-out AUC within {TOKEN_BUDGET:.0%} extra tokens, {eligible[best]['score']:.3f} "
        f"(the default's: {table['default']['score']:.3f})"
    )


def sweep_table(runs: list[dict], base_val: float) -> dict:
    """Per method and policy rate: the seeds, the final validation pass@1 of each, their mean, and whether any run
    ends below the base model's validation pass@1."""
    table = {}
    for method in SWEEP_METHODS:
        for rate in SWEEP_RATES:
            mine = sorted((r for r in runs if r["spec"]["method"] == method and r["spec"]["learning_rate"] == rate),
                          key=lambda r: r["spec"]["seed"])  # fmt: skip
            finals = [float(r["final"]["pass@1"]) for r in mine]
            table.setdefault(method, {})[rate] = {
                "seeds": [r["spec"]["seed"] for r in mine], "final": finals,
                "mean": float(np.mean(finals)) if finals else float("nan"),
                "below_base": any(v < base_val for v in finals),
            }  # fmt: skip
    return table


def choose_rates(table: dict, seeds) -> tuple[dict | None, str]:
    """The sweep stage's rule (`study.py`'s docstring): per method, the rate with the highest mean validation pass@1
    among those where no run ends below the base model (the highest mean if every rate has one); `(None, why)` until
    every method has every rate on every one of `seeds`."""
    wanted = sorted(seeds)
    if any(sorted(row["seeds"]) != wanted for rates in table.values() for row in rates.values()):
        return None, "not every method has run at every rate on every seed of the stage"
    chosen = {}
    for method, rates in table.items():
        eligible = {rate: row for rate, row in rates.items() if not row["below_base"]} or rates
        chosen[method] = max(eligible, key=lambda rate: eligible[rate]["mean"])
    return chosen, "the highest mean validation pass@1 of each method among its rates with no run below the base"


def planned_seeds(table: dict) -> dict:
    """The comparison's seeds from the sweep's spread: the per-seed differences of SR-PPO's and GRPO's validation
    pass@1 at each rate (`sweep_table`'s), their sd pooled over the rates (each around its own mean), the difference
    each of `SEED_CHOICES` detects at 80% power, and the fewest that detect `TARGET_DIFFERENCE` (the most
    otherwise; the fewest without a spread)."""
    groups = []
    for rate in SWEEP_RATES:
        mine, theirs = table["sr-ppo"][rate], table["grpo"][rate]
        by_seed = dict(zip(theirs["seeds"], theirs["final"]))
        groups.append([v - by_seed[s] for s, v in zip(mine["seeds"], mine["final"]) if s in by_seed])
    sd, dof = pooled_sd(groups)
    if not dof:
        return {"sd": sd, "dof": dof, "detectable": {}, "seeds": SEED_CHOICES[0]}
    found = {n: detectable(sd, n) for n in SEED_CHOICES}
    seeds = next((n for n in SEED_CHOICES if found[n] <= TARGET_DIFFERENCE), SEED_CHOICES[-1])
    return {"sd": sd, "dof": dof, "detectable": found, "seeds": seeds}


DECISION_METRICS = ("pass@1", "pass@8")  # the held-out measures the defaults decision reads, at equal updates
NON_INFERIORITY = TARGET_DIFFERENCE  # a cheaper critic matches when its 95% lower bound loses no more than this
CHEAPER_CRITICS = ("running mean k=1", "best k=1")  # k = 1's critics, cheapest first: no network, then the option's


def paired_finals(runs: list[dict], reference: list[dict], metric: str, level: float = 0.975) -> dict:
    """`runs`' last `metric` minus `reference`'s on the seeds both have it (`paired_t`, its interval at `level`):
    equal updates."""
    theirs = {r["spec"]["seed"]: r["final"].get(metric) for r in reference}
    mine = [(theirs[r["spec"]["seed"]], r["final"].get(metric)) for r in runs if r["spec"]["seed"] in theirs]
    return paired_t([m for _, m in mine], [t for t, _ in mine], level)


def decide_defaults(compare: dict, seeds: int) -> dict:
    """The defaults decision from the comparison's runs (`compare`: arm -> runs), once each arm it reads has `seeds`
    seeds (the planned count). Rule, written after 9 of the 12 seeds of the other arms and 4 of the control's had
    been read, and before the rest ran; differences at equal updates, test pass@1 and pass@8, 95% t intervals:

    - the chosen option pays when its arm at k = 2 minus default SR-PPO has an interval above 0 on one measure and
      below 0 on none: it becomes the default;
    - the Pass@k weight pays when the chosen option at k = 2 minus the same at k = 1 has an interval above 0 on one
      measure;
    - if it does not, the recommendation is k = 1 with the cheapest critic of `CHEAPER_CRITICS` whose difference to
      default SR-PPO has a lower bound at or above `-NON_INFERIORITY` on both measures (the difference the
      comparison was planned to detect); with none, k = 1 with the default critic.

    Returns `{"decided": False, "why"}` until then, else the rule's readings, `option_pays`, `weight_pays`, `matches`
    (arm -> bool) and `critic` (the arm recommended at k = 1, or None)."""
    k2 = "best" if compare.get("best") else "sr-ppo head"
    arms = ("sr-ppo", k2, "best k=1", *CHEAPER_CRITICS)
    short = {arm: len(compare.get(arm, [])) for arm in dict.fromkeys(arms) if len(compare.get(arm, [])) < seeds}
    if short:
        return {"decided": False, "why": f"waits for {seeds} seeds of every arm it reads; so far " + ", ".join(
            f"{arm} {n}" for arm, n in short.items())}  # fmt: skip

    def against(arm: str, reference: str) -> dict:
        return {m: paired_finals(compare[arm], compare[reference], m) for m in DECISION_METRICS}

    option, weight = against(k2, "sr-ppo"), against(k2, "best k=1")
    cheaper = {arm: against(arm, "sr-ppo") for arm in CHEAPER_CRITICS}
    matches = {arm: all(d["low"] >= -NON_INFERIORITY for d in cheaper[arm].values()) for arm in CHEAPER_CRITICS}
    return {
        "decided": True,
        "option": option,
        "option_pays": any(d["low"] > 0 for d in option.values()) and all(d["high"] >= 0 for d in option.values()),
        "weight": weight,
        "weight_pays": any(d["low"] > 0 for d in weight.values()),
        "cheaper": cheaper,
        "matches": matches,
        "critic": next((arm for arm in CHEAPER_CRITICS if matches[arm]), None),
    }

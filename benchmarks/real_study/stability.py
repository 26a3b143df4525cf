# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The stability stage of `benchmarks.real_study.study`: why do some seeds of default SR-PPO never take off?

In the comparison, default SR-PPO's training reward stayed near the base model's success rate for a whole run on some
seeds (over the first half of the updates: 0.03 on seed 4 and 0.09 on seed 8, against 0.11 to 0.55 on the seven
others), while GRPO, which sees 16 rollouts per update against SR-PPO's 8, took off on every seed. The stage trains
default SR-PPO and one-change variants of its schedule on those seeds and on control seeds that took off, and reads
the validation split only:

- `batch x2`: twice the prompts per update (16: GRPO's rollouts per update);
- `critic warm-up`: the first quarter of the updates train the critic only (`critic_warmup_steps`);
- `value head at 0.5`: the fresh value head starts at 0.5 (`critic_value_init="zero"`), not at the first batch's
  success rate, so that a failed rollout's advantage starts at -0.5 instead of about -0.1.

The stage's seeds: the comparison's seeds whose default SR-PPO run had a mean training reward below `SLOW_REWARD`
over the first half of its updates (slow seeds, read from the comparison's training rewards, not from its test
split), and the study's control seeds (`Study.control_seeds`) that are not slow.

**Rule, fixed before the stage ran:** no variant is chosen until every variant has run on every stage seed. A
variant replaces the default only if its validation pass@1 at the last update is above the default's on every slow
seed, its mean over the control seeds is at most `MAX_CONTROL_LOSS` below the default's, and its mean over all the
stage's seeds is at least `MIN_GAIN` above the default's; among such variants, the one with the highest mean.
The comparison then retrains every method under the chosen schedule (the batch for GRPO too, the critic options for
every arm with a critic); under the default, its runs stand.
"""

import math

import numpy as np

from ..common.curves import point_at
from ..common.tables import table as markdown_table
from .design import DEFAULT
from .readings import arm_of, half_rewards

SLOW_REWARD = 0.1  # the mean training reward over the first half of the updates under which a seed is slow
MIN_GAIN = 0.05  # validation pass@1, mean over the stage's seeds
MAX_CONTROL_LOSS = 0.05  # validation pass@1, mean over the control seeds


def first_half_reward(result: dict) -> float | None:
    """The run's mean training reward over the first half of its updates (`None` without per-update rewards)."""
    halves = half_rewards(result)
    return None if halves is None else halves[0]


def stage_seeds(default_runs: list[dict], control_seeds, requested=None) -> tuple[list[int], list[int]]:
    """(slow seeds, control seeds). Slow: among the seeds of the comparison's default SR-PPO `default_runs` (only
    `requested`'s, when given), those whose first-half training reward is below `SLOW_REWARD`. Control: the
    `control_seeds` (or the `requested` seeds) that are not slow."""
    rewards = {r["spec"]["seed"]: first_half_reward(r) for r in default_runs}
    candidates = sorted(rewards) if requested is None else sorted(requested)
    slow = [s for s in candidates if rewards.get(s) is not None and rewards[s] < SLOW_REWARD]
    controls = [s for s in (control_seeds if requested is None else candidates) if s not in slow]
    return slow, sorted(controls)


def stage_table(results: list[dict], variant_options: dict[str, tuple[int, tuple]], rate: float | None) -> dict:
    """Per variant: its runs' seeds, validation pass@1 at half the updates and at the end, and first-half training
    reward, matched to the variant by prompts per update and options (`readings.arm_of` at the critic stage's
    `critic_learning_rate`, `rate`, shared)."""
    table = {}
    for name, schedule in variant_options.items():
        runs = sorted((r for r in results if arm_of(r, rate, schedule) == "sr-ppo"), key=lambda r: r["spec"]["seed"])
        half = max(1, runs[0]["spec"]["updates"] // 2) if runs else None
        table[name] = {
            "seeds": [r["spec"]["seed"] for r in runs],
            "final": [float(r["final"]["pass@1"]) for r in runs],
            "half": [point_at(r, half) for r in runs],
            "reward_first_half": [first_half_reward(r) for r in runs],
            "reward_by_update": [r.get("reward_by_update") for r in runs],
        }
    return table


def choose_variant(table: dict, slow: list[int], controls: list[int]) -> tuple[str | None, str]:
    """The stage's rule (the module's docstring): `(variant, why)`, `(None, why)` until every variant has run on
    every stage seed."""
    seeds = sorted({*slow, *controls})
    if not seeds:
        return None, "the stage has no seeds"
    if any(not set(seeds) <= set(row["seeds"]) for row in table.values()):
        return None, "not every variant has run on every stage seed"
    by_seed = {name: dict(zip(row["seeds"], row["final"])) for name, row in table.items()}
    default = by_seed[DEFAULT]

    def mean(values: dict, which) -> float:
        return float(np.mean([values[s] for s in which])) if which else float("nan")

    gains, reasons = {}, []
    for name, values in by_seed.items():
        if name == DEFAULT:
            continue
        if not all(values[s] > default[s] for s in slow):
            reasons.append(f"{name} is not above the default on every slow seed")
            continue
        loss = mean(default, controls) - mean(values, controls)
        if math.isfinite(loss) and loss > MAX_CONTROL_LOSS:
            reasons.append(f"{name} loses {loss:.3f} on the control seeds")
            continue
        gain = mean(values, seeds) - mean(default, seeds)
        if gain < MIN_GAIN:
            reasons.append(f"{name} gains {gain:+.3f} over the default: under {MIN_GAIN}")
            continue
        gains[name] = gain
    if not gains:
        return DEFAULT, "; ".join(reasons) or "no variant"
    best = max(gains, key=gains.get)
    return best, f"{best} gains {gains[best]:+.3f} mean validation pass@1 over the default"


def same_rewards(table: dict, default_runs: list[dict]) -> tuple[int, int]:
    """(seeds whose stage default run had the comparison's default run's training reward at every update, seeds
    both have): the same spec but for the held-out split, so the training should be the same."""
    theirs = {r["spec"]["seed"]: r.get("reward_by_update") for r in default_runs}
    row = table.get(DEFAULT, {"seeds": [], "reward_by_update": []})
    pairs = [(mine, theirs[s]) for s, mine in zip(row["seeds"], row["reward_by_update"]) if s in theirs]
    return sum(bool(a) and a == b for a, b in pairs), len(pairs)


def stability_lines(stage: dict, base: dict) -> list[str]:
    """The report's section: each variant's validation pass@1 per seed, the rule's choice."""
    lines = ["## Stability: the seeds that never take off, on the validation split", ""]
    rows_by_variant = stage.get("table") or {}
    if not any(row["seeds"] for row in rows_by_variant.values()):
        return lines + ["No run of the stability stage has finished yet (`--stage stability`).", ""]
    slow, controls = stage["slow"], stage["controls"]
    seeds = sorted({*slow, *controls})
    default = dict(zip(rows_by_variant[DEFAULT]["seeds"], rows_by_variant[DEFAULT]["final"]))
    rows = []
    for name, row in rows_by_variant.items():
        finals = dict(zip(row["seeds"], row["final"]))
        halves = dict(zip(row["seeds"], row["half"]))
        rewards = dict(zip(row["seeds"], row["reward_first_half"]))
        cells = [
            "-"
            if s not in finals
            else (f"{halves[s]:.3f} -> " if halves[s] is not None else "")
            + f"{finals[s]:.3f}"
            + (f" ({rewards[s]:.2f})" if rewards[s] is not None else "")
            for s in seeds
        ]
        shared = [s for s in seeds if s in finals and s in default]
        diff = float(np.mean([finals[s] - default[s] for s in shared])) if shared and name != DEFAULT else None
        rows.append([name, *cells, "reference" if name == DEFAULT else (f"{diff:+.3f}" if diff is not None else "-")])
    header = [f"seed {s} ({'slow' if s in slow else 'control'})" for s in seeds]
    lines += markdown_table(["schedule", *header, "mean minus the default's, same seeds"], rows)
    matched, both = same_rewards(rows_by_variant, stage.get("default_runs") or [])
    lines += [
        "",
        f"Validation pass@1 at half the updates -> at the last; in brackets the mean training reward over the first "
        f"half of the updates. `batch x2` at half its updates has generated as many completions as the default at "
        f"its last. Slow seeds: the comparison's default SR-PPO runs with a first-half training reward below "
        f"{SLOW_REWARD}. The base model's validation pass@1 is {base['val']['pass@1']:.3f}.",
        "",
        f"The default schedule here trains as the comparison's default run of the same seed (only the held-out split "
        f"differs): the training reward was the same at every update on {matched} of {both} seeds.",
        "",
    ]
    if stage.get("variant") is None:
        lines.append(f"No schedule is chosen yet: {stage.get('why')}.")
    elif stage["variant"] == DEFAULT:
        lines.append(f"The rule keeps the default schedule ({stage['why']}): the comparison's runs stand.")
    else:
        lines.append(
            f"**The rule chooses `{stage['variant']}`** ({stage['why']}): the comparison is to be retrained under it, "
            "every method alike."
        )
    return lines + [""]

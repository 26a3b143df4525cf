# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`reports/real_study/README.md` and `results.json` from `benchmarks.real_study.study`'s finished runs.

Every sentence that reads a number is computed from the runs: a stage with no finished run says so.
"""

import json
import math
import os

import numpy as np

from ..common.runs import REPO_ROOT, finite_json
from ..common.stats import excludes_zero, holm, sign_flip_floor
from ..common.tables import cell, fmt_difference, table
from .design import (
    ARM_LABELS,
    ARMS,
    CRITIC_MIN_GAIN,
    DEFAULT,
    DEFAULT_RATIO,
    LORA_ARMS,
    LORA_LEARNING_RATES,
    REFERENCES,
    SWEEP_METHODS,
    variants,
)
from .head import head_lines
from .probe import probe_lines
from .readings import (
    against_grpo,
    arm_of,
    compare_differences,
    equal_seconds_differences,
    grpo_partner,
    half_rewards,
    pilot_differences,
    power,
    weight_ratio,
)
from .stability import stability_lines

REPORTS = os.path.join(REPO_ROOT, "reports")
PILOT = os.path.join(REPORTS, "real_model", "results.json")
MINIATURE = os.path.join(REPORTS, "mini_repro", "results.json")  # `make bench`'s runs, for the mechanism's column


def horizon_lines(runs: list[dict]) -> list[str]:
    """The horizon stage: the critic at every validation evaluation of a longer run."""
    if not runs:
        return []
    rows = []
    for run in runs:
        rate = run["config"]["critic_learning_rate"]  # as the trainer resolved it (the option, or its default)
        for point in run["curve"]:
            values = np.asarray(point["critic_s0"])
            rows.append([
                f"{rate:.0e}", str(point["update"]), f"{point['pass@1']:.3f}", f"{np.mean(values):.3f}",
                f"{np.std(values):.4f}", f"{point['critic_auc_s0']:.3f}",
                f"{weight_ratio(point['critic_s0'], run['config']['pass_at_k']):.4f}",
            ])  # fmt: skip
    spec = runs[0]["spec"]
    return [
        f"Over a longer run (stage `horizon`: seed {spec['seed']}, {spec['updates']} updates, validation every "
        f"{spec['eval_every']}):",
        "",
        *table(
            [
                "critic rate",
                "update",
                "val pass@1",
                "qhat(s_0) mean",
                "qhat(s_0) sd",
                "AUC of qhat(s_0)",
                "largest / smallest Pass@k weight",
            ],
            rows,
        ),  # fmt: skip
        "",
    ]


def critic_lines(stage: dict, base: dict) -> list[str]:
    lines = ["## The critic's learning rate, on the validation split", ""]
    critic = stage.get("table") or {}
    if not critic:
        return lines + ["No run of the critic stage has finished yet (`--stage critic`).", ""]
    rows = []
    for ratio, row in critic.items():
        rows.append([
            f"{ratio} ({row['rate']:.0e})",
            ", ".join(str(s) for s in row["seeds"]) or "none",
            ", ".join(f"{v:.3f}" for v in row["final"]) or "n/a",
            ", ".join(f"{v:.3f}" for v in row["auc"]) or "n/a",
            ", ".join(f"{m:.3f} / {sd:.4f}" for m, sd in zip(row["value_mean"], row["value_sd"])) or "n/a",
            ", ".join(f"{v:.4f}" for v in row["weight_ratio"]) or "n/a",
            "yes" if row["below_base"] else "no",
        ])  # fmt: skip
    lines += table(
        ["critic rate / policy rate", "seeds", "val pass@1", "AUC of qhat(s_0)", "qhat(s_0) mean / sd",
         "largest / smallest Pass@k weight", "a run below base"],
        rows,
    )  # fmt: skip
    lines += [
        "",
        f"Per seed, at the last update. The base model's validation pass@1 is {base['val']['pass@1']:.3f}. The AUC "
        "scores every validation sample by its problem's `qhat(s_0)` and labels it by its verified outcome, pooled "
        "over the problems: 0.5 is a critic that tells no problem from another. The sd is over the problems; the "
        "weight ratio compares the Pass@k weights `k (1 - qhat(s_0))^(k - 1)` of the problems (1: the same weight "
        "for every prompt: the update is then k = 1's times a factor common to the batch).",
        "",
    ]
    ratios = [v for row in critic.values() for v in row["weight_ratio"]]
    if ratios:
        lines += [
            f"Over every run of this stage the problems' Pass@k weights differ by at most a factor of "
            f"{max(ratios):.4f}.",
            "",
        ]
    lines += horizon_lines(stage.get("horizon") or [])
    if stage.get("ratio") is None:
        lines.append(f"No critic rate is chosen yet: {stage.get('why')}.")
    else:
        lines.append(
            f"The rule (the highest mean AUC among ratios with no run below the base model, if it beats ratio "
            f"{DEFAULT_RATIO} by at least {CRITIC_MIN_GAIN}) chooses ratio {stage['ratio']}: {stage['why']}. "
            "Every arm with a critic trains at that critic rate in the comparison."
        )
    return lines + [""]


def sweep_lines(table_by_lr: dict, chosen, base: dict, sweep: list[dict]) -> list[str]:
    lines = ["## Stage 1: the schedule, on the validation split", ""]
    if not table_by_lr:
        return lines + ["No sweep run has finished yet (`python -m benchmarks.real_study.study --stage sweep`).", ""]
    lines += rate_table_lines(table_by_lr, base, sweep)
    if chosen is None:
        lines.append(
            "Chosen: none yet (the rule waits for every rate with both methods on every sweep seed, and takes only a "
            "rate where no run ends below the base model)."
        )
    else:
        lines.append(f"**Chosen: learning rate {chosen:g}** (the rule in `benchmarks/real_study/study.py`).")
    return lines + [""]


def lora_lines(lora: dict, base: dict) -> list[str]:
    """The LoRA stage: the LoRA arms' validation pass@1 by learning rate, and the rule's rate."""
    lines = ["## The LoRA policy's learning rate, on the validation split", ""]
    if not lora.get("table"):
        return lines + [
            "No LoRA stage run has finished yet (`python -m benchmarks.real_study.study --stage lora`).",
            "",
        ]
    arms = " and ".join(f"{ARM_LABELS[arm]} (`{ARMS[arm][0]}` below)" for arm in LORA_ARMS)
    lines += [f"The LoRA arms: {arms}, under the comparison's schedule.", ""]
    lines += rate_table_lines(lora["table"], base, lora["runs"])
    rates = ", ".join(f"{lr:g}" for lr in LORA_LEARNING_RATES)
    if lora["rate"] is None:
        lines.append(
            f"Chosen: none (the rule waits for every rate of {rates} with both LoRA arms on every sweep seed, and "
            "takes only a rate where no run ends below the base model). The comparison's LoRA arms train at the full "
            "model's rate until it chooses."
        )
    else:
        lines.append(
            f"**Chosen: learning rate {lora['rate']:g}** for the LoRA arms "
            "(the rule in `benchmarks/real_study/study.py`); "
            "the comparison's LoRA arms under the chosen schedule are read at it."
        )
    return lines + [""]


def rate_table_lines(table_by_lr: dict, base: dict, runs: list[dict]) -> list[str]:
    """A `sweep_table` by learning rate: each method's validation pass@1 per seed, the mean, whether a run ends below
    the base model; then the seeds' spread and the runs that fell over their second half."""
    lines, rows = [], []
    for lr, row in sorted(table_by_lr.items()):
        cells = [f"{lr:g}"]
        for method in SWEEP_METHODS:
            m = row["methods"][method]
            per_seed = ", ".join(
                f"s{s}: {h:.3f} -> {e:.3f}" if h is not None else f"s{s}: {e:.3f}"
                for s, h, e in zip(m["seeds"], m["half"], m["final"])
            )
            cells.append(per_seed or "n/a")
        cells += [f"{row['score']:.3f}", "yes" if row["below_base"] else "no"]
        rows.append(cells)
    header = ["learning rate", *(f"{m}: val pass@1 per seed, half -> end" for m in SWEEP_METHODS)]
    lines += table(header + ["mean of both methods", "a run ends below the base model"], rows)
    minutes = sum(r.get("total_seconds", 0.0) for r in runs) / 60
    lines += [
        "",
        f"Base model, validation pass@1: {base['val']['pass@1']:.3f}. {len(runs)} runs, {minutes:.0f} worker-minutes.",
        "",
    ]
    for method in SWEEP_METHODS:
        spreads = {
            lr: max(row["methods"][method]["final"]) - min(row["methods"][method]["final"])
            for lr, row in sorted(table_by_lr.items())
            if len(row["methods"][method]["final"]) > 1
        }
        if spreads:
            lines.append(
                f"- {method}: the seeds' spread of validation pass@1 at the last update (highest - lowest), by rate: "
                + ", ".join(f"{lr:g} {v:.3f}" for lr, v in spreads.items())
                + "."
            )
    falling = {
        lr: sum(h is not None and e < h for m in row["methods"].values() for h, e in zip(m["half"], m["final"]))
        for lr, row in sorted(table_by_lr.items())
    }
    lines.append(
        "- Runs whose validation pass@1 fell over their second half, by rate: "
        + ", ".join(
            f"{lr:g} {n} of {sum(len(m['final']) for m in table_by_lr[lr]['methods'].values())}"
            for lr, n in falling.items()
        )  # fmt: skip
        + "."
    )
    return lines + [""]


def pilot_lines(pilot: dict) -> list[str]:
    if not pilot:
        return []
    lines = [
        "### The pilot's pairing",
        "",
        "Test pass@1 of `make bench-real`'s runs (3 seeds, 24 problems), per seed:",
    ]
    lines.append(f"default SR-PPO {', '.join(f'{v:.3f}' for v in pilot['sr-ppo seeds'])}.")
    curves = "; ".join(
        f"seed {seed}: " + ", ".join(f"{p1:.3f} at update {u}" for u, p1 in points)
        for seed, points in pilot["sr-ppo curves"].items()
    )
    lines.append(f"SR-PPO's test pass@1 along its runs (base model {pilot.get('base', float('nan')):.3f}): {curves}.")
    for method, info in pilot.items():
        if method in ("sr-ppo seeds", "sr-ppo curves", "base"):
            continue
        diffs = ", ".join(f"{d:+.3f}" for d in info["differences"])
        lines.append(f"- {method} - SR-PPO per seed: {diffs} (sd {info['sd']:.3f}).")
    seeds_sd = float(np.std(pilot["sr-ppo seeds"], ddof=1))
    methods = {m: info for m, info in pilot.items() if m not in ("sr-ppo seeds", "sr-ppo curves", "base")}
    cancels = [m for m, info in methods.items() if info["sd"] < seeds_sd / 2]
    lines += [
        "",
        f"SR-PPO's own seeds spread by sd {seeds_sd:.3f}. Where a method's per-seed differences spread by less than "
        "half that, pairing cancels most of the seed's randomness: "
        + (", ".join(cancels) if cancels else "none")
        + ".",
        "",
    ]
    return lines


def power_lines(power: dict | None) -> list[str]:
    if not power:
        return []
    lines = ["### Power of the comparison, from the sweep", ""]
    rows = []
    for name in ("sr-ppo", "grpo", "sr-ppo - grpo"):
        info = power[name]
        paired = name == "sr-ppo - grpo"  # the detectable differences are those of a paired difference
        found = [f"{v:.3f}" if paired else "-" for v in info["detectable"].values()]
        rows.append([name, f"{info['sd']:.3f}", f"{info['pooled_sd']:.3f} ({info['dof']})", *found])
    n_cols = [f"detectable at {n} seeds" for n in power["sr-ppo"]["detectable"]]
    lines += table(["validation pass@1", "sd at the chosen rate", "sd pooled over rates (dof)", *n_cols], rows)
    lines += [
        "",
        f"Pooled over the sweep's {power['rates']} rates, each around its own mean. Detectable: "
        "`(t_{n-1, 0.975} + t_{n-1, 0.80}) sd / sqrt(n)`, a paired difference found at 80% power and the 5% level. "
        "The spread comes from few seeds, on the validation split (fewer problems and samples than the test's), "
        "pooled over rates that may behave differently: the plan is itself uncertain.",
        "",
        f"**Planned: {power['planned_seeds']} seeds per arm** (the fewest of the choices whose detectable SR-PPO - "
        "GRPO difference is at most 0.05 pass@1, or the most).",
        "",
    ]
    return lines


def time_spent(runs: list[dict]) -> str:
    """How long the runs took, summed over runs (each on one worker): in all, training and evaluating."""
    total, training, evaluating = (sum(r.get(key, 0.0) for r in runs) / 60
                                   for key in ("total_seconds", "training_seconds", "eval_seconds"))  # fmt: skip
    return (f"{len(runs)} runs, {total:.0f} worker-minutes ({training:.0f} training, {evaluating:.0f} evaluating the "
            "held-out problems, the rest loading).")  # fmt: skip


def reference_cell(arm: str, groups: dict) -> str:
    """The difference cell of an arm without a difference: the reference itself, or a reference not run yet."""
    reference = REFERENCES.get(arm, "sr-ppo")
    if arm == "sr-ppo" or (arm in REFERENCES.values() and "sr-ppo" not in groups):
        return "reference"
    return f"n/a (no {reference} runs)"


def compare_lines(
    compare: list[dict], base: dict, samples: int, rate: float | None = None, schedule: tuple | None = None,
    heading: str = "## Stage 2: the methods and critics, on the test split", lora_rate: float | None = None,
) -> list[str]:  # fmt: skip
    """The comparison's section from its runs under `schedule`, the LoRA arms' at `lora_rate` (`arm_of`)."""
    lines = [heading, ""]
    groups: dict[str, list[dict]] = {}
    for result in compare:
        arm = arm_of(result, rate, schedule, lora_rate)
        if arm is not None:
            groups.setdefault(arm, []).append(result)
    if not groups:
        return lines + [
            "No comparison run has finished yet (`python -m benchmarks.real_study.study --stage compare`).",
            "",
        ]
    top = f"pass@{samples}"  # every sample of a problem
    diffs1, diffs8 = compare_differences(groups, "pass@1"), compare_differences(groups, top)
    rows = []
    for arm in ARMS:
        runs = groups.get(arm)
        if not runs:
            continue
        d1, d8 = diffs1.get(arm), diffs8.get(arm)
        per_update = [r["training_seconds"] / r["spec"]["updates"] for r in runs]
        critic = [r["final"] for r in runs if "critic_s0" in r["final"]]  # runs before the critic's record: none
        rows.append([
            ARM_LABELS[arm],
            str(len(runs)),
            cell([r["final"]["pass@1"] for r in runs]),
            cell([r["final"][top] for r in runs]),
            fmt_difference(d1) if d1 else reference_cell(arm, groups),
            fmt_difference(d8) if d8 else reference_cell(arm, groups),
            cell(per_update),
            f"{cell([p['critic_auc_s0'] for p in critic])} ({len(critic)})" if critic else "n/a",
            cell([float(np.std(p["critic_s0"])) for p in critic], digits=4) if critic else "n/a",
        ])  # fmt: skip
    lines += table(
        ["arm", "seeds", "test pass@1", f"test {top}", "pass@1 - reference", f"{top} - reference", "s / update",
         "critic AUC of qhat(s_0) (seeds)", "qhat(s_0) sd over problems"],
        rows,
    )  # fmt: skip
    lines += [
        "",
        f"Base model: test pass@1 {base['test']['pass@1']:.3f}, "
        f"{top} {base['test'][top]:.3f}. {time_spent([r for runs in groups.values() for r in runs])} "
        "Reference: default SR-PPO, except the LoRA policy with the policy_lora critic, against LoRA GRPO. "
        "Differences: mean of the per-seed differences with its 95% Student-t interval over the seeds both arms "
        "finished, `*` where it excludes 0 (no interval below 2 seeds), and, from 2 to 16 seeds, the exact two-sided "
        "sign-flip p-value of the mean (`benchmarks.common.stats.sign_flip_p`: it does not assume normal "
        "differences, which a seed that falls back in one arm only breaks). The critic's columns read its `qhat(s_0)` "
        "of every test problem at the last update (`real_bench.critic_point`; runs trained before it was recorded "
        "are left out of them): the AUC pools the evaluation's samples, each scored by its problem's value, and "
        "0.5 is a critic that tells no problem from another.",
        "",
    ]
    ratios = [weight_ratio(r["final"]["critic_s0"], r["config"]["pass_at_k"]) for runs in groups.values()
              for r in runs if "critic_s0" in r["final"] and r["config"].get("pass_at_k", 1) > 1]  # fmt: skip
    if ratios:
        reading = (
            ": the weight, and the prompt sampling that draws by it, hardly tell the problems apart"
            if max(ratios) < 1.1
            else ""
        )
        lines += [
            f"Over the {len(ratios)} runs above whose critic's values were recorded (k > 1), the test problems' "
            f"Pass@k weights at the last update differ by at most a factor of {max(ratios):.4f}{reading}.",
            "",
        ]
    if "grpo" in groups and "sr-ppo" in groups:
        half = groups["grpo"][0]["spec"]["updates"] // 2
        pair = {"sr-ppo": groups["sr-ppo"], "grpo": groups["grpo"]}
        updates, tokens = compare_differences(pair)["grpo"], compare_differences(pair, arm_update=half)["grpo"]
        grpo_tokens = [p["generated_tokens"] for r in groups["grpo"] for p in r["curve"] if p["update"] == half]
        srppo_tokens = [r["final"]["generated_tokens"] for r in groups["sr-ppo"]]
        lines.append(
            f"- GRPO - SR-PPO at equal updates: {fmt_difference(updates)}; at equal completions (GRPO's update "
            f"{half}, {np.mean(grpo_tokens):.0f} generated tokens against SR-PPO's {np.mean(srppo_tokens):.0f}): "
            f"{fmt_difference(tokens)}."
        )
    seconds = {}
    for arm in ("grpo", "sampling-pass_at_k", "sampling-near_half"):
        if arm in groups and "sr-ppo" in groups:
            seconds[arm] = d = equal_seconds_differences(groups, arm)
            lines.append(f"- {ARM_LABELS[arm]} - SR-PPO at equal training seconds (SR-PPO's): {fmt_difference(d)}.")
    if "grpo" in seconds:
        lines.append(holm_line({"updates": updates, "completions": tokens, "seconds": seconds["grpo"]}))
    for arm in ARMS:  # every other single-rollout arm against its GRPO, at equal work
        partner = grpo_partner(arm)
        if arm == "sr-ppo" or arm not in groups or partner not in groups:
            continue
        d, half = against_grpo(groups, arm), groups[partner][0]["spec"]["updates"] // 2
        lines.append(
            f"- {ARM_LABELS[partner]} - {ARM_LABELS[arm]} at equal completions (GRPO's update {half}): "
            f"{fmt_difference(d['completions'])}; at equal training seconds ({ARM_LABELS[arm]}'s): "
            f"{fmt_difference(d['seconds'])}."
        )
        if all(math.isfinite(r.get("p_sign_flip", float("nan"))) for r in d.values()):
            lines.append(holm_line(d, f"{ARM_LABELS[partner]} - {ARM_LABELS[arm]}"))
    lines += [
        "",
        "Equal training seconds reads an arm between its evaluations at SR-PPO's training seconds on the same seed "
        "(its last evaluation where it finished sooner); GRPO against another single-rollout arm, at that arm's "
        "seconds, leaving out a seed where the arm finished before GRPO's first evaluation. Two runs share the 2 "
        "cores, so these seconds carry the other run's load too.",
        "",
    ]
    separated = [ARM_LABELS[a] for a, d in diffs1.items() if excludes_zero(d)]
    if separated:
        lines.append("At equal updates, separated from their reference on test pass@1: " + ", ".join(separated) + ".")
    else:
        lines.append("At equal updates, no arm is separated from its reference on test pass@1 by the runs finished.")
    checkable = {a: d for a, d in diffs1.items() if math.isfinite(d.get("p_sign_flip", float("nan")))
                 and sign_flip_floor(d["seeds"]) < 0.05}  # fmt: skip
    if checkable:
        labels = {a: ARM_LABELS[a] for a in checkable}
        below = {labels[a] for a, d in checkable.items() if d["p_sign_flip"] < 0.05}
        disagree = sorted(below ^ {labels[a] for a, d in checkable.items() if excludes_zero(d)})
        if disagree:
            verdict = "the t interval and the sign-flip p (below 0.05) disagree on: " + ", ".join(disagree) + "."
        elif below:
            verdict = f"the sign-flip test agrees with the t intervals (p below 0.05 for {', '.join(sorted(below))})."
        else:
            verdict = "the sign-flip test agrees with the t intervals: no arm has p below 0.05."
        lines.append("At equal updates, " + verdict)
    unchecked = sorted(ARM_LABELS[a] for a in diffs1 if a not in checkable)
    if unchecked:
        lines.append(
            "The sign-flip p cannot check (at 5 seeds or fewer its floor 2 / 2^n is at least 0.0625; above 16 seeds "
            "it is not computed): " + ", ".join(unchecked) + "."
        )  # fmt: skip
    return lines + [""] + per_seed_lines(groups, base["test"]["pass@1"]) + phase_lines(groups)


def holm_line(readings: dict[str, dict], pair: str = "GRPO - SR-PPO") -> str:
    """One `pair` of arms read several ways (`readings`: name -> `paired_t`'s result), their sign-flip p adjusted
    together by Holm's step-down rule: one reading below 0.05 alone is not evidence once several were looked at."""
    adjusted = holm({name: d.get("p_sign_flip", float("nan")) for name, d in readings.items()})
    cells = ", ".join(
        f"{name} {p:.3f} ({readings[name]['seeds']} seeds)" if math.isfinite(p) else f"{name} n/a"
        for name, p in adjusted.items()
    )
    below = [name for name, p in adjusted.items() if p < 0.05]
    verdict = f"below 0.05 after it: {', '.join(below)}" if below else "none stays below 0.05"
    return (
        f"- The {len(readings)} readings of {pair} together, sign-flip p adjusted by Holm's step-down rule: "
        f"{cells}; {verdict}."
    )


def phase_lines(groups: dict[str, list[dict]]) -> list[str]:
    """Each arm's training seconds per update by phase (`real_bench`'s `phase_seconds`), mean ± sd over its seeds, and
    the mean over the seeds it shares with default SR-PPO of its critic phase's ratio to SR-PPO's on the same seed."""
    arms = [arm for arm in ARMS if any("phase_seconds" in r for r in groups.get(arm, []))]
    if not arms:
        return []
    phases = list(dict.fromkeys(name for arm in arms for r in groups[arm] for name in r.get("phase_seconds", {})))
    reference = {r["spec"]["seed"]: r for r in groups.get("sr-ppo", [])}

    def per_update(result: dict, phase: str) -> float | None:
        seconds = result.get("phase_seconds", {}).get(phase)
        return None if seconds is None else seconds / result["spec"]["updates"]

    def critic_ratio(result: dict) -> float | None:
        theirs = reference.get(result["spec"]["seed"])
        ours, base = per_update(result, "critic"), theirs and per_update(theirs, "critic")
        return ours / base if ours is not None and base else None

    rows = []
    for arm in arms:
        runs = [r for r in groups[arm] if "phase_seconds" in r]
        cells = []
        for phase in phases:
            values = [v for v in (per_update(r, phase) for r in runs) if v is not None]
            cells.append(cell(values, digits=2) if values else "-")
        ratios = [] if arm == "sr-ppo" else [q for q in map(critic_ratio, runs) if q is not None]
        rows.append(
            [ARM_LABELS[arm], str(len(runs)), *cells, f"{np.mean(ratios):.2f} ({len(ratios)})" if ratios else "-"]
        )
    return [
        "### Seconds per update, by phase",
        "",
        *table(["arm", "seeds", *phases, "critic phase / SR-PPO's on the same seed (seeds)"], rows),
        "",
        "Training seconds per update, mean ± sd over the arm's seeds (`real_bench`'s phases: the critic's are its "
        "values and its update). Two runs share the 2 cores, so each carries the other's load; the ratio pairs seeds.",
        "",
    ]


def count_runs(n: int) -> str:
    return f"{n} run" + ("" if n == 1 else "s")


def parted_at(result: dict, reference: dict) -> int | None:
    """The first update (from 1) whose training reward differs between two runs of the same seed, `None` where every
    update agrees: until then the two policies most likely sampled the same completions. Runs without a reward for
    every one of the same updates cannot be compared: an error."""
    ours, theirs = result.get("reward_by_update") or [], reference.get("reward_by_update") or []
    if not ours or len(ours) != len(theirs):
        raise ValueError(
            f"Training rewards of {len(ours)} and {len(theirs)} updates cannot be compared update by update."
        )
    return next((update for update, (a, b) in enumerate(zip(ours, theirs), 1) if a != b), None)


def per_seed_lines(groups: dict[str, list[dict]], base_pass1: float) -> list[str]:
    """Every arm's test pass@1 per seed with its training reward over the second half of its updates; the runs that
    end below twice the base model's pass@1 (fell back); each arm's correlation over seeds with SR-PPO's."""
    arms = [arm for arm in ARMS if groups.get(arm)]
    by_seed = {arm: {r["spec"]["seed"]: r for r in groups[arm]} for arm in arms}
    seeds = sorted({seed for runs in by_seed.values() for seed in runs})

    def entry(result: dict | None) -> str:
        if result is None:
            return "-"
        halves = half_rewards(result)
        return f"{result['final']['pass@1']:.3f}" + (f" ({halves[1]:.2f})" if halves is not None else "")

    lines = ["### Per seed", ""]
    lines += table(["seed", *(ARM_LABELS[a] for a in arms)], [[str(s), *(entry(by_seed[a].get(s)) for a in arms)]
                                                              for s in seeds])  # fmt: skip
    threshold = 2 * base_pass1
    fell = {a: [s for s, r in sorted(by_seed[a].items()) if r["final"]["pass@1"] < threshold] for a in arms}
    counts = [f"{ARM_LABELS[a]} {len(fell[a])} of {len(by_seed[a])}" + (f" (seed{'s' if len(fell[a]) > 1 else ''} "
              f"{', '.join(map(str, fell[a]))})" if fell[a] else "") for a in arms]  # fmt: skip
    lines += [
        "",
        "Test pass@1 at the last update; in brackets the mean training reward over the second half of the updates "
        "(one rollout per prompt, GRPO's four).",
        "",
        f"- Runs that fell back (test pass@1 below twice the base model's, {threshold:.3f}): "
        + "; ".join(counts)
        + ".",
    ]
    halves = {True: [], False: []}  # fell back or not: (first half, second half) per run
    for a in arms:
        for r in by_seed[a].values():
            if half_rewards(r) is not None:
                halves[r["final"]["pass@1"] < threshold].append(half_rewards(r))
    if halves[True] and halves[False]:
        (fell_early, fell_late), (other_early, other_late) = (np.mean(halves[k], axis=0) for k in (True, False))
        reading = (
            ": they do not learn and then collapse, they never take off"
            if fell_late >= fell_early - 0.05 and fell_late < other_late
            else ""
        )
        lines.append(
            f"- Their training reward, first half -> second half of the updates: {fell_early:.2f} -> {fell_late:.2f} "
            f"on average ({count_runs(len(halves[True]))}), against {other_early:.2f} -> {other_late:.2f} for the "
            f"other runs ({len(halves[False])}){reading}."
        )
    if "sr-ppo" in by_seed:
        parts = []
        for a in arms:
            common = sorted(set(by_seed[a]) & set(by_seed["sr-ppo"]))
            if a == "sr-ppo" or len(common) < 3:
                continue
            x = [by_seed["sr-ppo"][s]["final"]["pass@1"] for s in common]
            y = [by_seed[a][s]["final"]["pass@1"] for s in common]
            r = float(np.corrcoef(x, y)[0, 1]) if np.std(x) > 0 and np.std(y) > 0 else float("nan")
            parts.append(f"{ARM_LABELS[a]} {r:+.2f} ({len(common)} seeds)")
        if parts:
            lines.append(
                "- Correlation over seeds with SR-PPO's test pass@1: " + "; ".join(parts) + ". Where it is positive "
                "the seed (data order and sampling stream) moves both arms together, and pairing narrows the "
                "difference's spread."
            )
        parts = []
        for a in arms:
            # GRPO samples 4 rollouts of half the prompts (never the same), and an arm with its own reference (a LoRA
            # policy) is another policy
            if a == "sr-ppo" or ARMS[a][0] == "grpo" or a in REFERENCES:
                continue
            common = sorted(set(by_seed[a]) & set(by_seed["sr-ppo"]))
            cells = []
            for seed in common:
                ours, theirs = by_seed[a][seed], by_seed["sr-ppo"][seed]
                try:
                    update = parted_at(ours, theirs)
                except ValueError:
                    continue
                gap = ours["final"]["pass@1"] - theirs["final"]["pass@1"]
                cells.append(f"seed {seed} {'never' if update is None else f'update {update}'} ({gap:+.3f})")
            if cells:
                parts.append(f"{ARM_LABELS[a]}: " + ", ".join(cells))
        if parts:
            lines.append(
                "- Where an arm's training reward first differs from SR-PPO's on the same seed (until then the two "
                "most likely sampled the same completions), and in brackets its test pass@1 minus SR-PPO's: "
                + "; ".join(parts)
                + "."
            )
    return lines + [""]


def share(summary: dict, weighting: str, bin_name: str) -> float:
    return 100 * summary["update_weight_share"][weighting]["prompt_weight"][bin_name]


def miniature_mechanism(path: str = MINIATURE, config: str = "sr-ppo/off") -> dict[str, str]:
    """The miniature's cells of the mechanism table, read from `make bench`'s `results.json`: the batch NSR without
    and with the Pass@k weight (means over seeds) and the per-seed relative change (mean ± sd), and each bin's share
    of the update weight without -> with (means over seeds), all measured at mid-training on each run's own rollouts.
    Every cell is "n/a" when the file or its runs are missing."""
    bins = ("hard", "medium", "easy")
    missing = {"nsr": "n/a", **{b: "n/a" for b in bins}}
    if not os.path.isfile(path):
        return missing
    with open(path) as f:
        runs = json.load(f).get("runs", {}).get(config, [])
    mids = [r["mid"] for r in runs if r.get("mid") and "nsr" in r["mid"] and "weight_share" in r["mid"]]
    if not mids:
        return missing
    without = np.array([m["nsr"]["batch"]["unweighted"]["nsr"] for m in mids], dtype=float)  # (seeds,)
    weighted = np.array([m["nsr"]["batch"]["weighted"]["nsr"] for m in mids], dtype=float)  # (seeds,)
    change = 100 * (weighted - without) / without  # (seeds,)
    sd = f" ± {change.std(ddof=1):.1f}%" if len(mids) > 1 else ""
    cells = {
        "nsr": f"{without.mean():.2f} -> {weighted.mean():.2f} ({change.mean():+.1f}%{sd} over {len(mids)} seeds, "
        "own rollouts)"
    }
    for b in bins:
        shares = [
            [100 * m["weight_share"][key]["prompt_weight"][b] for m in mids] for key in ("without_passk", "with_passk")
        ]
        cells[b] = f"{np.mean(shares[0]):.1f}% -> {np.mean(shares[1]):.1f}%"
    return cells


def checkpoint_label(spec: dict) -> str:
    """What a mechanism checkpoint trained: "default SR-PPO", or SR-PPO (at k = 1 for `sr-ppo-pass1`) with its
    options over the defaults."""
    name = "SR-PPO at k = 1" if spec["method"] == "sr-ppo-pass1" else "SR-PPO"
    options = ", ".join(f"{key}={value}" for key, value in spec.get("options") or ())
    if options:
        return f"{name} with {options}"
    return "default SR-PPO" if name == "SR-PPO" else name


def mechanism_lines(mech: dict | None, miniature: dict[str, str] | None = None) -> list[str]:
    """The analyses of a trained SR-PPO checkpoint beside the paper's figures and the miniature's (`miniature`:
    `miniature_mechanism`'s cells, read from `reports/mini_repro` when not given)."""
    lines = ["## The mechanism, on a trained SR-PPO checkpoint", ""]
    if not mech:
        return lines + ["Not run yet (`python -m benchmarks.real_study.study --stage mechanism`).", ""]
    spec, bins, nsr = mech["spec"], mech["bins"]["summary"], mech["nsr"]["summary"]
    quality = mech["critic-quality"]["summary"]
    without, weighted = nsr["batch"]["unweighted"]["nsr"], nsr["batch"]["weighted"]["nsr"]
    finite = np.isfinite(without) and np.isfinite(weighted) and without != 0
    change = 100 * (weighted - without) / without if finite else float("nan")
    counts = bins["bin_counts"]
    state, by_bin = quality["state_correct"], quality["by_bin"]
    mini = miniature_mechanism() if miniature is None else miniature
    shares = (
        ("hard", "30.5% -> 65.8%", mini["hard"]),
        ("medium", "12.5% -> 9.9% (the rest)", mini["medium"]),
        ("easy", "57.0% -> 24.3%", mini["easy"]),
    )
    rows = [
        ["batch NSR, without the Pass@k weight -> with it", f"{without:.2f} -> {weighted:.2f} ({change:+.1f}%)",
         "28.57 -> 10.36 (-63.7%)", mini["nsr"]],
        *[[f"{b} prompts' share of the update weight, without -> with",
           f"{share(bins, 'unweighted', b):.1f}% -> {share(bins, 'weighted', b):.1f}%", paper, cell]
          for b, paper, cell in shares],
        ["critic AUC pooled over prompts (state labelled by the outcome)", f"{state['pooled_auc']:.3f}",
         "above the within-prompt AUC", "n/a"],
        ["critic AUC within a prompt, mean (prompts kept)",
         f"{state['within_prompt']['mean_auc']:.3f} ({state['within_prompt']['num_kept']})", "slightly above 0.5",
         "n/a"],
    ]  # fmt: skip
    lines += table(["measure", "here", "paper", "miniature (`reports/mini_repro`)"], rows)
    value_rows = [
        [b, str(counts[b]), f"{by_bin['prompt_value'][b]['mean_value']:.3f}",
         f"{by_bin['token_value'][b]['mean_value']:.3f}", f"{by_bin['prompt_value'][b]['success_rate']:.3f}"]
        for b in ("easy", "medium", "hard")
    ]  # fmt: skip
    values = [by_bin["prompt_value"][b]["mean_value"] for b in ("easy", "medium", "hard") if counts[b]]
    rates = [by_bin["prompt_value"][b]["success_rate"] for b in ("easy", "medium", "hard") if counts[b]]
    lines += [
        "",
        "The critic's values by difficulty bin (the paper's Table 6: the values follow the success rate):",
        "",
        *table(["bin", "prompts", "mean qhat(s_0)", "mean token value", "success rate"], value_rows),
        "",
        f"Across the bins the critic's mean qhat(s_0) spans {min(values):.3f} to {max(values):.3f} while their "
        f"success rates span {min(rates):.3f} to {max(rates):.3f}; the NSR changes by {change:+.1f}% with the weight.",
        "",
        f"Checkpoint: {checkpoint_label(spec)} trained on seed {spec['seed']} at learning rate "
        f"{spec['learning_rate']:g} for {spec['updates']} updates; analyses: `trl-srppo analyze bins`, `nsr`, "
        "`critic-export` and `critic-quality` "
        f"on {mech['prompts']} test problems x 8 rollouts. Bins from the 8 rollouts (easy >= 6 correct, hard <= 2). "
        "No external judge here: each sentence's `state_correct` is its solution's verified outcome "
        "(`benchmarks.real_study.study.label_by_outcome`), so the AUCs measure how the critic ranks solutions that "
        "end "
        "right above those that end wrong; the paper's judge labels reasoning steps. Seconds: "
        + ", ".join(
            f"{name} {mech[name]['seconds']:.0f}" for name in ("bins", "nsr", "critic-export", "critic-quality")
        )
        + ".",
        "",
    ]
    return lines


def schedule_lines(
    compare: list[dict], base: dict, study: dict, rate: float | None, stability: dict, lora: dict | None = None,
    chosen: float | None = None,
) -> list[str]:  # fmt: skip
    """The stability stage and the LoRA stage, then the comparison under the schedule the stability stage chose (the
    default until it chooses; its LoRA arms at the LoRA stage's rate), then, where it chose another, the comparison's
    runs under the default schedule (their LoRA arms at the sweep's `chosen` rate), kept apart."""
    variant, samples = stability.get("variant"), study["test_samples"]
    default = variants(study["updates"], study["prompts_per_update"])[DEFAULT]
    lora = lora or {}
    heading, lora_rate = "## Stage 2: the methods and critics, on the test split", lora.get("rate")
    stages = [*stability_lines(stability, base), *lora_lines(lora, base)]
    if variant in (None, DEFAULT):
        return stages + compare_lines(compare, base, samples, rate, default, heading, lora_rate)
    prompts, options = stability["schedule"]
    described = f"{prompts} prompts per update" + "".join(f", `{name}={value!r}`" for name, value in options)
    return [
        *stages,
        *compare_lines(compare, base, samples, rate, stability["schedule"],
                       f"## Stage 2 under the chosen schedule, `{variant}` ({described}): the test split", lora_rate),
        *compare_lines(compare, base, samples, rate, default,
                       f"## Stage 2 under the default schedule, before the stability stage chose `{variant}`", chosen),
    ]  # fmt: skip


def write_report(
    out_dir, meta, base, sweep, table_by_lr, chosen, compare, mech=None, critic=None, stability=None, lora=None,
    probe=None, head=None,
) -> str:  # fmt: skip
    pilot = pilot_differences(PILOT)
    powered = power(sweep, chosen) if chosen is not None else None
    study = meta["study"]
    lines = [
        "# A paired comparison on a real model: SmolLM2-135M-Instruct on the CPU",
        "",
        *(
            ["**Smoke run** (`--smoke`, toy sizes): the code's end-to-end test. Its numbers are not results.", ""]
            if study["name"] == "smoke"
            else []
        ),  # fmt: skip
        f"Generated by `python -m benchmarks.real_study.study` on {meta['date']} ({meta['machine']}; workers: "
        f"{meta['workers']}, one torch thread each). The design, its rule for the schedule and the power "
        "computation are in `benchmarks/real_study/study.py`'s docstring; finished runs are kept in `runs/`.",
        "",
        "## Setting",
        "",
        f"- Model: `{meta['model']}` (float32). Task: `benchmarks/smollm2/task.py`'s arithmetic levels, "
        "verifier `number`.",
        f"- Levels kept (base success on the selection split at least {study['min_success']}): "
        + ", ".join(base["kept"])
        + ". Problems: "
        + ", ".join(f"{k} {v}" for k, v in meta["sizes"].items())
        + " (disjoint).",
        f"- Each run: {study['updates']} on-policy updates of {study['prompts_per_update']} prompts (GRPO: half as "
        f"many prompts x 4 rollouts), completions of at most {study['max_completion_length']} tokens at "
        "temperature 1, constant learning rate. Validation: "
        f"{study['val_samples']} samples per problem; test: {study['test_samples']}; pass@k is the unbiased "
        "estimator.",
        "",
        "## Base model",
        "",
        *table(
            ["level", "success on the selection split"],
            [[level, f"{info['success']:.3f}"] for level, info in base["selection"].items()],
        ),
        "",
        f"Validation pass@1 {base['val']['pass@1']:.3f}; test pass@1 {base['test']['pass@1']:.3f}.",
        "",
        *sweep_lines(table_by_lr, chosen, base, sweep),
        *pilot_lines(pilot),
        *power_lines(powered),
        *mechanism_lines(mech),
        *critic_lines(critic or {}, base),
        *probe_lines(probe),
        *(head_lines(head["table"], base, head["schedule"]) if head else []),
        *schedule_lines(compare, base, study, (critic or {}).get("rate"), stability or {}, lora, chosen),
    ]
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        results = {"meta": meta, "base": base, "sweep": {str(k): v for k, v in table_by_lr.items()}, "chosen": chosen,
                   "pilot": pilot, "power": powered, "mechanism": mech, "critic": critic,
                   "stability": {k: v for k, v in (stability or {}).items() if k != "default_runs"},
                   "lora": {"table": {str(k): v for k, v in (lora or {}).get("table", {}).items()},
                            "rate": (lora or {}).get("rate")},
                   "probe": probe,
                   "head": {str(k): v for k, v in (head or {}).get("table", {}).items()}}  # fmt: skip
        json.dump(finite_json(results), f, indent=1, allow_nan=False)
    path = os.path.join(out_dir, "README.md")
    with open(path, "w") as f:
        f.write("\n".join(lines).rstrip() + "\n")
    return path

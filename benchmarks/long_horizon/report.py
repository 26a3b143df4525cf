# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The long-horizon study's report, `reports/long_horizon/README.md` and `results.json`, from the runs finished so
far (`readings.py` reads them; missing runs are listed, not waited for)."""

import json
import math
import os

import numpy as np

from ..common.runs import finite_json
from ..common.tables import cell, fmt, fmt_difference, table
from .design import ARM_LABELS, FULL_KS, QUARTER_KS, STUDY_WORKERS, TARGET_DIFFERENCE
from .readings import (
    DIFFICULTY_BINS,
    RULE_METRICS,
    base_pass,
    binned,
    clip_key,
    collapse_update,
    collapse_window,
    decisions,
    difficulty,
    early_late,
    paired,
    paired_at_budget,
    peak_growth,
    pooled_nsr,
    quarter_spans,
    quarters,
    rss_reading,
    weight_shares,
    windows,
)

CONTRASTS = (  # (label, arm, reference)
    ("k2 - k1, default critic", "k2", "k1"),
    ("k2 - k1, value head at 3e-3", "k2 head", "k1 head"),
    ("separate critic (k2 head) - policy head k2", "k2 head", "policy head k2"),
    ("SR-PPO k2 head - GRPO", "k2 head", "grpo"),
)
BUDGET_AXES = (("equal updates", "update"), ("equal generated tokens", "generated_tokens"),
               ("equal seconds", "training_seconds"))  # fmt: skip
LOGGED = (("reward", "reward"), ("entropy", "entropy"), ("KL from start", "policy/kl_from_start"),
          ("completion tokens", "completions/mean_length"), ("critic AUC", "critic/prompt_auc"),
          ("critic trail", "critic/prompt_value_trail"))  # fmt: skip
NSR_VARIANTS = (("with the weight", ""), ("without", "_unweighted"))
PEAK_AFTER = 41  # the first update after the first checkpoint and evaluation (design.eval_points, save_steps)


def power_lines(power: dict, pilot: dict) -> list[str]:
    lines = ["## Power (stage `pilot`)", ""]
    runs = {arm: len(r) for arm, r in pilot.items()}
    lines.append(f"Pilot runs: {', '.join(f'{a} {n}' for a, n in runs.items()) or 'none yet'}.")
    if power["dof"]:
        found = ", ".join(f"{n} seeds {fmt(d)}" for n, d in power["detectable"].items())
        lines.append(f"The sd of the paired k2 head - k1 head difference in final test pass@1 is {fmt(power['sd'])} "
                     f"({power['dof']} degrees of freedom); detectable at 80% power: {found}.")  # fmt: skip
    else:
        lines.append("No pilot spread yet (fewer than 2 paired seeds).")
    lines.append(
        f"The comparison's seeds: {power['seeds']} (the fewest detecting {TARGET_DIFFERENCE}, else the most)."
    )
    return lines + [""]


def base_lines(base: dict, pass_k: dict, samples: int) -> list[str]:
    lines = ["## The base model (stage `base`)", ""]
    rows = [[level, f"{e['success']:.3f}", fmt(base["test"]["by_level"].get(level)), f"`{e['example']['problem']}`"]
            for level, e in base["selection"].items()]  # fmt: skip
    lines += table(["level", "selection success", "test success", "a problem"], rows)
    lines += ["", f"Test pass@k at n = {samples}: " + ", ".join(f"{k} {fmt(v)}" for k, v in pass_k.items()) + "."]
    return lines + [""]


def contrast_lines(compare: dict) -> list[str]:
    lines = ["## Paired differences (final test, 90% Student-t intervals over seeds)", ""]
    rows = []
    for label, arm, reference in CONTRASTS:
        axes = BUDGET_AXES if reference == "grpo" else BUDGET_AXES[:1]
        for axis_label, axis in axes:
            for metric in ("pass@1", "pass@8", "pass@32"):
                if axis == "update":
                    d = paired(compare.get(arm, []), compare.get(reference, []), metric)
                else:
                    d = paired_at_budget(compare.get(reference, []), compare.get(arm, []), axis, metric)
                    d = {**d, "mean": -d["mean"], "low": -d["high"], "high": -d["low"]}  # arm - reference
                rows.append([label, axis_label, metric, fmt_difference(d)])
    lines += table(["contrast", "at", "metric", "difference"], rows)
    return lines + [""]


def decision_lines(decided: dict, complete: bool, compare: dict) -> list[str]:
    lines = ["## Decisions (rules 2 and 3 of `benchmarks/long_horizon/study.py`)", ""]
    if not complete:
        lines += ["Provisional: not every arm the rules read has the planned seeds yet.", ""]
    k, critic = decided["k"], decided["critic"]
    counts = ", ".join(f"{a} {n} of {len(compare.get(a, []))}" for a, n in decided["collapses"].items())
    lines.append(f"- `pass_at_k`: k = {k['k']} ({k['why']}). Runs collapsed by rule 1: {counts}.")
    lines.append(
        f"- critic: `{critic['critic_type']}` ({critic['why']}; the separate-critic arm read: "
        f"{decided['separate_arm']}, vs the policy head "
        + ", ".join(f"{m} {fmt_difference(decided['vs_policy_head'][m])}" for m in RULE_METRICS)
        + ")."
    )
    if critic["head_rate"] is not None:
        verdict = "becomes" if critic["head_rate"] else "does not become"
        lines.append(f"- `critic_head_learning_rate=3e-3` {verdict} the default (k2 head - k2, mean final pass@1 "
                     f"{fmt(decided['head_minus_default'])}).")  # fmt: skip
    return lines + [""]


def curve_lines(compare: dict) -> list[str]:
    lines = ["## Curves (test split)", ""]
    rows, full_rows = [], []
    for arm, runs in compare.items():
        for r in sorted(runs, key=lambda r: r["spec"]["seed"]):
            name = f"{arm} s{r['spec']['seed']}"
            rows.append([name, *(f"{p['update']}: {fmt(p['pass@1'])} / {fmt(p.get('pass@8'))}" for p in r["curve"])])
            for p in r["curve"]:
                if p["samples"] == r["spec"]["eval_samples"]:
                    full_rows.append([name, str(p["update"]), *(fmt(p.get(f"pass@{k}")) for k in FULL_KS),
                                      fmt(p.get("at_cap"))])  # fmt: skip
    width = max((len(r) for r in rows), default=1)
    lines += table(["run", *(["update: pass@1 / pass@8"] * (width - 1))], [r + [""] * (width - len(r)) for r in rows])
    lines += ["", "pass@k at half and at the end, with the share of test completions that ran to the length cap "
              "(kept by the runs trained since it was added):", ""]  # fmt: skip
    lines += table(["run", "update", *(f"pass@{k}" for k in FULL_KS), "at the cap"], full_rows)
    return lines + [""]


def collapse_lines(compare: dict, base_pass1: float, cap: int) -> list[str]:
    lines = ["## Collapses (rule 1)", ""]
    rows, collapsed = [], []
    for arm, runs in compare.items():
        for r in runs:
            update = collapse_update(r["curve"], base_pass1)
            if update is None:
                continue
            collapsed.append((f"{arm} s{r['spec']['seed']}", r))
            window = collapse_window(r, update)
            clip = clip_key(r)
            means = [np.mean([e[k] for e in window if e.get(k) is not None] or [np.nan]) for _, k in LOGGED]
            clip_mean = np.mean([e[clip] for e in window if clip and e.get(clip) is not None] or [np.nan])
            rows.append([collapsed[-1][0], str(update), *(fmt(m) for m in means), fmt(clip_mean)])
    if not rows:
        return lines + ["No finished run has collapsed.", ""]
    lines.append("Means of the logged metrics over the 20 updates up to the collapse:")
    lines += ["", *table(["run", "collapse update", *(n for n, _ in LOGGED), "clip fraction"], rows), ""]
    for name, r in collapsed:
        lines += collapse_path_lines(name, r, cap)
    return lines


def collapse_path_lines(name: str, run: dict, cap: int) -> list[str]:
    """A collapsed run's whole path: its logged metrics 20 updates at a time, with the test evaluation at a window's
    end (pass@1; the share of test completions that ran to the length cap and a sample of each level where the run
    kept them)."""
    clip = clip_key(run)
    keys = [k for _, k in LOGGED] + ([clip] if clip else [])
    points = {p["update"]: p for p in run["curve"]}
    rows = []
    for w in windows(run, keys):
        point = points.get(w["update"], {})
        rows.append([str(w["update"]), *(fmt(w[k]) for k in keys), fmt(point.get("pass@1")), fmt(point.get("at_cap"))])
    lines = [f"The path of {name}, 20 updates at a time (means over the window ending at the update; the length cap "
             f"is {cap} tokens):", ""]  # fmt: skip
    header = ["update", *(n for n, _ in LOGGED), *(["clip fraction"] if clip else []), "test pass@1", "test at cap"]
    lines += [*table(header, rows), ""]
    kept = [p for p in run["curve"] if p.get("examples")]
    if kept:
        last = kept[-1]
        lines += [f"Its test samples at update {last['update']} (each level's first problem, first sample):", ""]
        lines += [f"- {e['level']} ({'right' if e['correct'] else 'wrong'}): `{e['problem']}` -> "
                  f"`{' '.join(e['completion'].split())}`" for e in last["examples"]]  # fmt: skip
        lines.append("")
    return lines


def mechanism_lines(compare: dict, base_by_level: dict) -> list[str]:
    lines = ["## The mechanism: first quarter -> last quarter of updates (mean over seeds)", ""]
    rows, share_rows = [], []
    bins = difficulty(base_by_level)
    bin_names = [name for _, name in DIFFICULTY_BINS]
    for arm, runs in compare.items():
        if not runs:
            continue
        cells = []
        for _, key in LOGGED[1:]:
            pairs = [early_late(r, key) for r in runs]
            cells.append(f"{cell([a for a, _ in pairs])} -> {cell([b for _, b in pairs])}")
        clips = [early_late(r, clip_key(r)) if clip_key(r) else (np.nan, np.nan) for r in runs]
        rss = [rss_reading(r) for r in runs]
        rows.append([arm, *cells, f"{cell([a for a, _ in clips])} -> {cell([b for _, b in clips])}",
                     f"{cell([a for a, _, _ in rss], 0)} -> {cell([b for _, b, _ in rss], 0)}",
                     cell([p for _, _, p in rss], 0)])  # fmt: skip
        for weighted in (False, True):
            for part, span in zip(("early", "late"), quarters(runs[0]["spec"]["updates"])):
                shares = [weight_shares(r, span, weighted) for r in runs]
                levels = sorted({level for s in shares for level in s if level is not None})
                text = ", ".join(f"{level} {cell([s.get(level, 0.0) for s in shares], 2)}" for level in levels)
                by_bin = [binned(s, bins) for s in shares]
                share_rows.append([arm, "with the weight" if weighted else "without", part,
                                   *(cell([b.get(name, 0.0) for b in by_bin], 2) if text else "n/a"
                                     for name in bin_names), text or "n/a"])  # fmt: skip
    header = [n for n, _ in LOGGED[1:]]
    lines += table(["arm", *header, "clip fraction", "RSS MiB", "highest peak RSS MiB"], rows)
    lines += [
        "",
        "Shares of the update's weight by the prompt's difficulty and level (a rollout weighs |Y - qhat(s_0)|, times "
        "k (1 - qhat)^(k-1) with the weight, which is 1 at k = 1). A level's bin is fixed by the base model's test "
        "success on it, not by the critic's `qhat(s_0)`: "
        + "; ".join(f"{name} {', '.join(sorted(lv for lv, b in bins.items() if b == name)) or 'none'}"
                    for name in bin_names) + f" (bounds {', '.join(str(b) for b, _ in DIFFICULTY_BINS[:-1])}).",
        "",
    ]  # fmt: skip
    lines += table(["arm", "weight", "updates", *bin_names, "share by level"], share_rows)
    return lines + [""]


def nsr_text(read: dict) -> str:
    """A quarter's pooled NSR (`readings.pooled_nsr`) with its lower bound, or the bound alone where the summed
    signal is not positive."""
    low = f">= {fmt(read['nsr_low'], digits=0)}" if math.isfinite(read["nsr_low"]) else "no bound"
    if read["nsr"] == math.inf:
        return f"not resolved ({low})"
    return fmt(read["nsr"], digits=0) + (f" ({low})" if math.isfinite(read["nsr"]) else "")


def nsr_lines(compare: dict) -> list[str]:
    """The batch NSR over the run's quarters, each arm's seeds pooled (`readings.pooled_nsr`)."""
    lines = [
        "## The batch gradient's noise-to-signal ratio over the run",
        "",
        "One rollout's policy gradient, measured on one generated batch every `gradient_nsr_steps` updates; a "
        "quarter's NSR is its summed noise over its summed signal, the arm's seeds pooled. The paper's batch NSR "
        "divides a rollout's by the batch size. In brackets, a lower bound on the ratio from the summed signal's "
        "one-sided 95% upper bound over the quarter's batches; 'not resolved' where the summed signal is not "
        "positive.",
        "",
    ]
    rows = []
    for arm, runs in compare.items():
        if not runs:
            continue
        for i, span in enumerate(quarter_spans(runs[0]["spec"]["updates"])):
            read = {name: pooled_nsr(runs, span, suffix) for name, suffix in NSR_VARIANTS}
            rows.append([arm, f"{i + 1} ({span.start}-{span.stop - 1})", str(read["with the weight"]["measured"]),
                         *(f"{fmt(read[n]['noise'], digits=0)} / {fmt(read[n]['signal'], digits=1)}"
                           for n, _ in NSR_VARIANTS),
                         *(nsr_text(read[n]) for n, _ in NSR_VARIANTS)])  # fmt: skip
    header = ["arm", "quarter (updates)", "batches measured",
              *(f"noise / signal, {n}" for n, _ in NSR_VARIANTS), *(f"NSR, {n}" for n, _ in NSR_VARIANTS)]  # fmt: skip
    return lines + table(header, rows) + [""]


def cost_lines(compare: dict) -> list[str]:
    lines = ["## Cost", ""]
    rows = []
    for arm, runs in compare.items():
        if runs:
            train = [r["training_seconds"] / r["spec"]["updates"] for r in runs]
            share = [r["eval_seconds"] / (r["eval_seconds"] + r["training_seconds"]) for r in runs]
            growth = [g for r in runs if (g := peak_growth(r, PEAK_AFTER)) is not None]
            largest = max(growth, key=lambda g: g[2], default=None)
            rows.append([arm, str(len(runs)), cell(train, 1), cell([r["eval_seconds"] for r in runs], 0),
                         cell(share, 3), cell([r["eval_tokens"] for r in runs], 0),
                         cell([r["generated_tokens"] for r in runs], 0),
                         f"{largest[2]:+.0f} ({largest[0]}-{largest[1]})" if largest else "n/a"])  # fmt: skip
    lines += table(["arm", "runs", "training s / update", "evaluation s", "evaluation share of the run's seconds",
                    "evaluation tokens", "generated training tokens",
                    f"peak RSS growth from update {PEAK_AFTER}, MiB (largest run)"], rows)  # fmt: skip
    worker, machine = machine_hours(compare, STUDY_WORKERS)
    return lines + [
        "",
        f"The peak's growth is read in the runs trained in one process (a resumed run's new process starts its peak "
        f"afresh), from update {PEAK_AFTER}: the first checkpoint (20) and the first evaluation (40) set its level "
        "before then; the evaluations at n = 64 (80 and 160) sample the most at once.",
        "",
        f"The finished runs took {worker:.1f} hours of one worker, training and evaluation: about "
        f"{machine:.1f} hours of the machine at {STUDY_WORKERS} at a time, as the study trains them "
        "(its budget: 24 hours, the base stage included).",
        "",
    ]


def missing_lines(compare: dict, planned) -> list[str]:
    """The planned runs (`planned`: (arm, seed) pairs, `design.planned_runs`) not in `compare` yet."""
    done = {(arm, r["spec"]["seed"]) for arm, runs in compare.items() for r in runs}
    missing = [f"{arm} s{s}" for arm, s in planned if (arm, s) not in done]
    return ["## Missing runs", "", ("Not finished yet: " + ", ".join(missing) + ".") if missing else "None.", ""]


def machine_hours(compare: dict, workers: int) -> tuple[float, float]:
    """The finished runs' training and evaluation seconds in all, in hours of one worker, and that over `workers`:
    the machine's hours they took, run `workers` at a time."""
    hours = sum(r["training_seconds"] + r["eval_seconds"] for runs in compare.values() for r in runs) / 3600
    return hours, hours / max(1, workers)


def write_report(out_dir: str, meta: dict, base: dict, power: dict, pilot: dict, compare: dict, planned, seeds) -> str:
    """Write README.md and results.json into `out_dir` from the finished runs (`pilot`, `compare`: arm -> runs);
    `planned` are the comparison's runs, (arm, seed) (those missing are listed), `seeds` its seeds. Returns the
    README's path."""
    samples = meta["study"]["test_samples"]
    pass_k = base_pass(base, samples)
    decided = decisions(compare, pass_k["pass@1"])
    complete = all(len(compare.get(a, [])) >= len(seeds) for a in ("k2", "k1", "k2 head", "k1 head", "policy head k2"))
    lines = ["# Long-horizon study: the Pass@k weight and the critic over long, off-policy training", "",
             f"Model `{meta['model']}`, {meta['date']}, {meta['machine']}; {meta['study']['updates']} updates of "
             f"{meta['study']['prompts_per_update']} prompts; splits {meta['sizes']}. Rules: "
             "`benchmarks/long_horizon/study.py`. Labels: "
             + "; ".join(f"{a}: {ARM_LABELS[a]}" for a in compare) + ".",
             f"Evaluations: pass@{', pass@'.join(map(str, QUARTER_KS))} at a quarter and three quarters, "
             f"n = {samples} at half and the end.", ""]  # fmt: skip
    lines += power_lines(power, pilot) + base_lines(base, pass_k, samples) + missing_lines(compare, planned)
    lines += contrast_lines(compare) + decision_lines(decided, complete, compare) + curve_lines(compare)
    lines += collapse_lines(compare, pass_k["pass@1"], meta["study"]["max_completion_length"])
    lines += mechanism_lines(compare, base["test"]["by_level"])
    lines += nsr_lines(compare) + cost_lines(compare)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "README.md")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    results = {"meta": meta, "base_pass": pass_k, "power": power, "decisions": decided, "complete": complete,
               "runs": {arm: [r["name"] for r in runs] for arm, runs in compare.items()}}  # fmt: skip
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(finite_json(results), f, indent=1)
    return path

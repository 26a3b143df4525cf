# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`reports/real_model/README.md` of `make bench-real`: the setting, the base model, the tables, the curves and a
reading computed from the numbers (`benchmarks.real_study.bench`)."""

import json
import os

import numpy as np

from trl_srppo.evaluation.markdown import markdown_table

from ..common.curves import curve_point
from ..common.stats import mean_std
from ..common.tables import cell

NAN = float("nan")  # the deviation of one value: a cell shows the mean alone, a spread is not drawn
LABELS = {
    "sr-ppo": "SR-PPO (defaults)",
    "sr-ppo-pass1": "SR-PPO k = 1",
    "ppo": "PPO, linear critic",
    "grpo": "GRPO, 4 rollouts",
}


def equal_token_point(result: dict) -> dict | None:
    """The point at equal generated tokens: the last one for the single-rollout methods, GRPO's at half its updates
    (it generates twice the completions per update)."""
    updates = result["spec"]["updates"]
    return curve_point(result, updates // 2 if result["spec"]["method"] == "grpo" else updates)


def by_method(results: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for result in sorted(results, key=lambda r: r["spec"]["seed"]):
        out.setdefault(result["spec"]["method"], []).append(result)
    return out


def comparison_rows(groups: dict[str, list[dict]], pick, metric: str) -> dict[str, list[float]]:
    """Per method, the `metric` of each seed's point chosen by `pick` (seeds without that point are left out)."""
    out = {}
    for method, runs in groups.items():
        points = [pick(r) for r in runs]
        out[method] = [p[metric] for p in points if p is not None and metric in p]
    return out


def reading(groups: dict[str, list[dict]], base: dict) -> list[str]:
    """Sentences computed from the numbers: who leads at equal tokens and updates, by how much, against the spread."""
    lines = []
    n_seeds = min(len(runs) for runs in groups.values())
    base_pass1 = base["test"]["pass@1"]
    for label, pick in (
        ("equal generated tokens", equal_token_point),
        ("equal updates", lambda r: r["final"]),
    ):
        values = {m: v for m, v in comparison_rows(groups, pick, "pass@1").items() if v}
        if not values:
            continue
        means = {m: mean_std(v, single=NAN)[0] for m, v in values.items()}
        spread = max((mean_std(v, single=NAN)[1] for v in values.values()), default=float("nan"))
        ranked = sorted(means, key=means.get, reverse=True)
        first, second = ranked[0], ranked[1] if len(ranked) > 1 else None
        text = f"- At {label}, the highest held-out pass@1 is {means[first]:.3f}, by {LABELS[first]}"
        if second is not None and means[first] == means[second]:
            text = f"- At {label}, {LABELS[first]} and {LABELS[second]} tie for the highest held-out pass@1, "
            text += f"{means[first]:.3f}."
        elif second is None:
            text += "."
        else:
            gap = means[first] - means[second]
            text += f", {gap:.3f} above {LABELS[second]} ({means[second]:.3f})"
            if np.isnan(spread):
                text += "; with one seed there is no spread to compare the gap with."
            elif gap > spread:
                text += f"; the gap exceeds the largest seed standard deviation ({spread:.3f})."
            else:
                text += f"; the gap is within the seeds' spread (largest standard deviation {spread:.3f})."
        lines.append(text)
        if "sr-ppo" in values and "grpo" in values:
            diff = means["sr-ppo"] - means["grpo"]
            where = "at or above" if diff >= 0 else "below"
            lines.append(f"  Default SR-PPO is {where} GRPO by {abs(diff):.3f} pass@1 at {label}.")
    if "sr-ppo" in groups:
        final = [r["final"]["pass@1"] for r in groups["sr-ppo"]]
        mean, std = mean_std(final, single=NAN)
        diff = mean - base_pass1
        text = f"- Default SR-PPO ends {diff:+.3f} pass@1 from the base model ({base_pass1:.3f} -> {mean:.3f})"
        if np.isnan(std):
            text += "; one seed, no spread."
        else:
            above = "more" if abs(diff) > std else "not more"
            text += f", {above} than its seeds' standard deviation ({std:.3f})."
        lines.append(text)
    lines.append(f"- Seeds per method: {n_seeds}.")
    return lines


def ranking(order: list[str], values: dict[str, float]) -> str:
    """Methods from best to worst, `>` between different values and `=` between equal ones."""
    text = LABELS[order[0]] if order else ""
    for previous, method in zip(order, order[1:]):
        text += (" = " if values[method] == values[previous] else " > ") + LABELS[method]
    return text


def beside_miniature(groups: dict[str, list[dict]], miniature: dict) -> list[str]:
    """The final held-out pass@1 of each method here and in the miniature bench's results (its off-policy runs, the
    selected learning rate, every seed), and whether the two rank default SR-PPO and GRPO the same way."""
    rows, here, there = [], {}, {}
    for method, runs in groups.items():
        mini = miniature.get("runs", {}).get(f"{method}/off", [])
        here[method] = mean_std([r["final"]["pass@1"] for r in runs], single=NAN)[0]
        values = [r["final"]["test"]["pass@1"] for r in mini]
        there[method] = mean_std(values, single=NAN)[0] if values else float("nan")
        rows.append([LABELS[method], cell([r["final"]["pass@1"] for r in runs]), cell(values) if values else "n/a"])
    lines = [
        markdown_table(["method", "here: pass@1, equal updates", "miniature: test pass@1 (off-policy)"], rows, str),
        "",
    ]
    order_here = sorted(here, key=here.get, reverse=True)
    known = [m for m in there if not np.isnan(there[m])]
    order_there = sorted(known, key=there.get, reverse=True)
    lines.append(f"- Order here: {ranking(order_here, here)}; in the miniature: {ranking(order_there, there)}.")
    if {"sr-ppo", "grpo"} <= set(known) and {"sr-ppo", "grpo"} <= set(here):
        sign_here = here["sr-ppo"] - here["grpo"]
        sign_there = there["sr-ppo"] - there["grpo"]
        agree = "agree" if (sign_here >= 0) == (sign_there >= 0) else "disagree"
        lines.append(
            f"- Default SR-PPO minus GRPO at equal updates: {sign_here:+.3f} here, {sign_there:+.3f} in the "
            f"miniature: the two benches {agree} on which is ahead."
        )
    return lines


def plot_curves(groups: dict[str, list[dict]], base: dict, path: str, x_key: str, x_label: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, metric in zip(axes, ("pass@1", "pass@8")):
        for method, runs in groups.items():
            for i, run in enumerate(runs):
                xs = [0] + [p[x_key] for p in run["curve"]]
                ys = [base["test"].get(metric, float("nan"))] + [p.get(metric, float("nan")) for p in run["curve"]]
                ax.plot(
                    xs,
                    ys,
                    marker="o",
                    color=f"C{list(LABELS).index(method)}",
                    alpha=0.8,
                    label=LABELS[method] if i == 0 else None,
                )
        ax.axhline(base["test"].get(metric, float("nan")), color="grey", linestyle=":", label="base model")
        ax.set_xlabel(x_label)
        ax.set_ylabel(f"held-out {metric}")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(
    output_dir: str, budget, base: dict, results: list[dict], meta: dict, splits: dict, miniature_path: str = ""
) -> str:
    """README.md, results.json (every number, the train and test problems) and the two figures in `output_dir`."""
    os.makedirs(output_dir, exist_ok=True)
    with open(os.path.join(output_dir, "results.json"), "w") as f:
        json.dump({"meta": meta, "base": base, "runs": results, **splits}, f, indent=1)
    groups = by_method(results)
    b = meta["budget"]
    smoke = budget.name != "full"
    lines = ["# SR-PPO on a real model: SmolLM2-135M-Instruct on the CPU", ""]
    if smoke:
        lines += [
            f"**This is a `{budget.name}` run: a test of the command at a tiny budget. Its numbers are not results.**",
            "",
        ]
    lines += [
        f"Generated by `{meta['command']}` on {meta['date']} ({meta['machine']}; workers: {meta['workers']}, one "
        f"torch thread each; {meta['minutes']:.1f} minutes, {meta['reused_runs']} runs reused from the cache).",
        "",
        "## Setting",
        "",
        f"- Model: `{meta['model']}` (float32). Task: one-operation arithmetic questions "
        "(`benchmarks/smollm2/task.py`), "
        "rendered with the model's chat template; verifier: the package's `number` reward (the number after the last "
        '"=" / "is", else the last number), the `arithmetic` task.',
        f"- Each run: {b['updates']} on-policy updates at learning rate {b['learning_rate']:g} (constant, not "
        f"searched), completions of at most {b['max_completion_length']} tokens at temperature 1. Single-rollout "
        f"methods: {b['prompts_per_update']} prompts x 1 rollout per update; GRPO: {b['prompts_per_update'] // 2} "
        "prompts x 4 rollouts (twice the completions per update).",
        "- Every SR-PPO variant runs the package's defaults but for `srppo_method`; as resolved in the runs: "
        + "; ".join(
            f"{LABELS[m]}: " + (", ".join(f"{k} {v}" for k, v in runs[0].get("config", {}).items()) or "not recorded")
            for m, runs in groups.items()
            if m != "grpo"
        )
        + ". The default SR-PPO's k is the one the miniature's defaults study chose. The validation split is not "
        "used (no learning-rate search).",
        f"- Held-out: {b['test_problems']} test problems per kept level x {b['eval_samples']} samples; pass@k is "
        "the unbiased estimator (`trl_srppo.evaluation.pass_at_k.pass_at_k`). Equal generated tokens compares the "
        "single-rollout runs' last evaluation with GRPO's at half its updates.",
        "",
        "## Base model and level selection",
        "",
    ]
    rows = [
        [level, info["problems"], info["samples"], info["success"], "kept" if level in base["kept"] else "dropped"]
        for level, info in base["selection"].items()
    ]
    lines += [
        markdown_table(
            ["level", "problems", "samples", "success rate", f"kept at a rate >= {b['min_success']}"], rows
        ),
        "",
        f"Base model on the test problems: pass@1 {base['test']['pass@1']:.3f}, "
        + ", ".join(f"{k} {v:.3f}" for k, v in base["test"].items() if k.startswith("pass@") and k != "pass@1"),
        "",
        "## Held-out results",
        "",
    ]
    header = [
        "method",
        "seeds",
        "pass@1, equal tokens",
        "pass@1, equal updates",
        "pass@8, equal updates",
        "generated tokens",
        "training s / run",
        "eval s / run",
    ]
    table = []
    for method, runs in groups.items():
        eq_tok = [p["pass@1"] for p in map(equal_token_point, runs) if p is not None]
        table.append(
            [
                LABELS[method],
                len(runs),
                cell(eq_tok) if eq_tok else "n/a",
                cell([r["final"]["pass@1"] for r in runs]),
                cell([r["final"].get("pass@8", float("nan")) for r in runs]),
                f"{np.mean([r['generated_tokens'] for r in runs]):.0f}",
                f"{np.mean([r['training_seconds'] for r in runs]):.0f}",
                f"{np.mean([r['eval_seconds'] for r in runs]):.0f}",
            ]
        )
    lines += [markdown_table(header, table, cell=str), "", "Mean ± sample standard deviation over seeds.", ""]
    phases = sorted({k for r in results for k in r["phase_seconds"]})
    rows = []
    for method, runs in groups.items():
        per = [np.mean([r["phase_seconds"].get(ph, 0.0) / r["spec"]["updates"] for r in runs]) for ph in phases]
        rows.append([LABELS[method]] + [f"{x:.1f}" for x in per] + [f"{sum(per):.1f}"])
    lines += [
        "### Seconds per update, by phase",
        "",
        markdown_table(["method"] + phases + ["total"], rows, cell=str),
        "",
        "Generation is TRL's `_generate`; critic is the critic's values pass and update; the rest is mostly the "
        "policy's forward and backward (with the reward and the logging). Two runs train at once on the 2 cores, so a "
        "run's seconds also depend on the run that shared the machine with it, and on other users' load.",
        "",
    ]
    project = meta["projection"]
    if project is not None:
        lines += [
            f"Projected wall time of the full budget from these per-update costs: {project['wall_seconds'] / 60:.0f} "
            f"minutes ({project['note']}).",
            "",
        ]
    lines += [
        "## Curves",
        "",
        "![held-out pass@k against generated tokens](curves_tokens.png)",
        "",
        "![held-out pass@k against training seconds](curves_seconds.png)",
        "",
        "## Reading",
        "",
    ]
    if smoke:
        lines += ["(A test run: the sentences below are computed as for a real run, and mean nothing here.)", ""]
    lines += reading(groups, base)
    if miniature_path and os.path.isfile(miniature_path):
        with open(miniature_path) as f:
            miniature = json.load(f)
        lines += ["", "## Beside the miniature", ""]
        lines += [
            f"The miniature bench (`{'/'.join(os.path.abspath(miniature_path).split(os.sep)[-3:])}`: "
            "a 2-layer model on the chain toy, off-policy schedule, a searched learning rate) against this one:",
            "",
        ]
        lines += beside_miniature(groups, miniature)
    lines += ["", "Not done here: a learning-rate search (one constant rate for every method).", ""]
    plot_curves(groups, base, os.path.join(output_dir, "curves_tokens.png"), "generated_tokens", "generated tokens")
    plot_curves(groups, base, os.path.join(output_dir, "curves_seconds.png"), "training_seconds", "training seconds")
    path = os.path.join(output_dir, "README.md")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return path

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Writes the benchmark report: `README.md` with the tables, learning-curve PNGs and `results.json`."""

import json
import math
import os

import numpy as np

from trl_srppo.evaluation.markdown import markdown_table

from ..common.curves import interpolate
from ..common.stats import mean_std
from ..common.tables import fmt
from .mid_analysis import ANALYSIS_K

BINS = ("easy", "medium", "hard")
LABELS = {
    "sr-ppo": "SR-PPO (defaults)",
    "sr-ppo-v0": "SR-PPO (previous defaults)",
    "sr-ppo-head": "SR-PPO, value head on the policy",
    "sr-ppo-prompt": "SR-PPO, prompt-level baseline",
    "grpo-lora": "GRPO (4 rollouts), LoRA policy",
    "sr-ppo-lora": "SR-PPO, LoRA policy, separate critic",
    "sr-ppo-lora-critic": "SR-PPO, LoRA policy, LoRA critic on its base",
    "sr-ppo-pass1": "SR-PPO Pass@1",
    "ppo": "PPO (linear critic)",
    "td": "TD ablation",
    "grpo": "GRPO (4 rollouts)",
}


def label(config: str) -> str:
    method, schedule = config.split("/")
    return f"{LABELS.get(method, method)}, {'on' if schedule == 'on' else 'off'}-policy"


def median(values) -> float:
    """Median over seeds; an infinite or missing NSR (signal at or below eps) counts as +inf."""
    values = [float("inf") if v is None else v for v in values]
    return float(np.median(values)) if values else float("nan")


def plot_curves(runs: dict, base_point: dict, path: str, x_key: str, x_label: str) -> None:
    """Held-out pass@1 and pass@8 (mean over seeds, band = ± std) against `x_key`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for metric, ax in zip(("pass@1", "pass@8"), axes):
        for config, results in runs.items():
            curves = [[base_point] + r["curve"] for r in results]
            length = min(len(c) for c in curves)
            xs = np.mean([[p[x_key] for p in c[:length]] for c in curves], axis=0)
            ys = np.array([[p[metric] for p in c[:length]] for c in curves])
            mean, std = ys.mean(axis=0), ys.std(axis=0, ddof=1) if len(ys) > 1 else np.zeros(length)
            style = "--" if config.endswith("/on") else "-"
            (line,) = ax.plot(xs, mean, style, marker="o", markersize=3, label=label(config))
            ax.fill_between(xs, mean - std, mean + std, color=line.get_color(), alpha=0.15)
        ax.set_xlabel(x_label)
        ax.set_ylabel(f"held-out {metric}")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle("Held-out test prompts, 8 samples each (mean ± std over seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _lines(header: list[str], rows: list[list[str]]) -> list[str]:
    return markdown_table(header, rows).splitlines()


def main_table(protocol: dict) -> list[str]:
    header = ["method", "schedule", "selected lr", "test pass@1", "test pass@8", "val pass@1", "generated tokens"]
    header.append("train wall time (s)")
    rows = []
    for config, results in protocol["runs"].items():
        method, schedule = config.split("/")
        p1 = mean_std([r["final"]["test"]["pass@1"] for r in results])
        p8 = mean_std([r["final"]["test"]["pass@8"] for r in results])
        v1 = mean_std([r["final"]["val"]["pass@1"] for r in results])
        tokens = mean_std([r["generated_tokens"] for r in results])
        wall = mean_std([r["train_seconds"] for r in results])
        rows.append(
            [
                LABELS.get(method, method),
                f"{schedule}-policy",
                f"{protocol['selected'][config]:g}",
                fmt(*p1),
                fmt(*p8),
                fmt(*v1),
                f"{tokens[0]:,.0f}",
                fmt(*wall, digits=1),
            ]
        )
    return _lines(header, rows)


def search_table(protocol: dict, learning_rates, base_val: float | None = None) -> list[str]:
    """Validation pass@1 of every learning rate of the search, the best and worst, and whether any collapsed
    (validation pass@1 below the base model's, `base_val`)."""
    header = ["configuration", *(f"lr {lr:g}" for lr in learning_rates), "best", "worst", "selected"]
    if base_val is not None:
        header.append("collapse (below base)")
    rows = []
    for config, scores in protocol["search"].items():
        values = [scores[lr] for lr in learning_rates]
        row = [label(config), *(fmt(v) for v in values), fmt(max(values)), fmt(min(values))]
        row.append(f"{protocol['selected'][config]:g}")
        if base_val is not None:
            collapsed = [f"{lr:g}" for lr in learning_rates if scores[lr] < base_val]
            row.append(", ".join(collapsed) if collapsed else "none")
        rows.append(row)
    return _lines(header, rows)


def nsr_cell(values) -> str:
    """Mean ± std of the finite NSRs over seeds, saying how many seeds had a signal at or below eps (infinite NSR)."""
    infinite = sum(1 for v in values if v is None or not math.isfinite(v))
    cell = fmt(*mean_std(values), digits=2)
    return cell if not infinite else f"{cell} (+{infinite} of {len(values)} seeds infinite)"


def nsr_tables(nsr_runs: dict) -> list[str]:
    """Batch and per-bin NSR, with and without the Pass@k weight, of `{configuration: [NSR summary per seed]}`."""
    header = [
        "run (mid-training)",
        "batch NSR without Pass@k weight",
        f"batch NSR with weight (k={ANALYSIS_K})",
        "change",
    ]
    header += [f"{b}: without / with" for b in BINS]
    rows = []
    for config, mids in nsr_runs.items():
        if not mids:
            continue
        without = nsr_cell([m["batch"]["unweighted"]["nsr"] for m in mids])
        with_w = nsr_cell([m["batch"]["weighted"]["nsr"] for m in mids])
        change = mean_std(
            [
                (m["batch"]["weighted"]["nsr"] - m["batch"]["unweighted"]["nsr"]) / m["batch"]["unweighted"]["nsr"]
                for m in mids
                if m["batch"]["weighted"]["nsr"] is not None and m["batch"]["unweighted"]["nsr"]
            ]
        )
        per_bin = []
        for b in BINS:
            un = median([m["per_bin"][b]["unweighted"] for m in mids])
            w = median([m["per_bin"][b]["weighted"] for m in mids])
            per_bin.append(f"{fmt(un, digits=2)} / {fmt(w, digits=2)}")
        rows.append([label(config), without, with_w, f"{fmt(100 * change[0], 100 * change[1], digits=1)}%", *per_bin])
    return _lines(header, rows) if rows else []


def own_rollout_nsr(protocol: dict) -> dict:
    """The mid-training NSR summaries measured on each run's own rollouts, `{configuration: [per seed]}`."""
    return {
        config: [r["mid"]["nsr"] for r in results if r.get("mid") and "nsr" in r["mid"]]
        for config, results in protocol["runs"].items()
    }


def equal_tokens_table(protocol: dict) -> list[str]:
    """Each single-rollout configuration's held-out pass@1 / pass@8 at its last curve point next to GRPO's at the same
    number of generated tokens (linear interpolation between GRPO's curve points), mean over seeds. GRPO is the run
    with the same kind of policy (`grpo-lora` for LoRA policies, `grpo` otherwise) and the same schedule, or the
    off-policy one when that schedule has no GRPO run."""
    header = ["method", "GRPO run", "generated tokens", "pass@1", "GRPO pass@1", "pass@8", "GRPO pass@8"]
    rows = []
    for config, results in protocol["runs"].items():
        if config.startswith("grpo"):
            continue
        method, schedule = config.split("/")
        grpo = "grpo-lora" if "lora" in method else "grpo"
        reference = f"{grpo}/{schedule}" if f"{grpo}/{schedule}" in protocol["runs"] else f"{grpo}/off"
        if reference not in protocol["runs"]:
            continue
        ref_curves = [r["curve"] for r in protocol["runs"][reference]]
        cells = {"tokens": [], "pass@1": [], "pass@8": [], "ref@1": [], "ref@8": []}
        for result, ref in zip(results, ref_curves):
            last = result["curve"][-1]
            if interpolate(ref, last["generated_tokens"], "pass@1") is None:
                continue  # more tokens than the reference ever generated: no comparison
            cells["tokens"].append(last["generated_tokens"])
            for metric, key in (("pass@1", "ref@1"), ("pass@8", "ref@8")):
                cells[metric].append(last[metric])
                cells[key].append(interpolate(ref, last["generated_tokens"], metric))
        if not cells["tokens"]:
            continue
        ms = {k: mean_std(v) for k, v in cells.items()}
        rows.append(
            [
                label(config),
                label(reference),
                f"{ms['tokens'][0]:,.0f}",
                fmt(*ms["pass@1"]),
                fmt(*ms["ref@1"]),
                fmt(*ms["pass@8"]),
                fmt(*ms["ref@8"]),
            ]
        )
    return _lines(header, rows) if rows else []


def share_table(protocol: dict) -> list[str]:
    header = ["run (mid-training)", "weight", *(f"{b} share" for b in BINS)]
    rows = []
    for config, results in protocol["runs"].items():
        mids = [r["mid"] for r in results if r.get("mid") and "weight_share" in r["mid"]]
        if not mids:
            continue
        for name, title in (
            ("without_passk", "without Pass@k (k=1)"),
            ("with_passk", f"with Pass@k (k={ANALYSIS_K})"),
        ):
            cells = []
            for b in BINS:
                ms = mean_std([m["weight_share"][name]["prompt_weight"][b] for m in mids])
                cells.append(f"{fmt(100 * ms[0], 100 * ms[1], digits=1)}%")
            rows.append([label(config), title, *cells])
    return _lines(header, rows) if rows else []


def calibration_table(protocol: dict, where: str) -> list[str]:
    header = ["run", *(f"{b}: mean qhat(s_0) / success" for b in BINS), "mean (qhat(s_0) - success rate)^2"]
    rows = []
    for config, results in protocol["runs"].items():
        if where == "final":
            cals = [r["final"]["test"].get("calibration") for r in results]
        else:
            cals = [(r.get("mid") or {}).get("calibration") for r in results]
        cals = [c for c in cals if c]
        if not cals:
            continue
        cells = []
        for b in BINS:
            q = mean_std([c[b]["mean_qhat_s0"] for c in cals])
            s = mean_std([c[b]["success_rate"] for c in cals])
            cells.append(f"{fmt(q[0])} / {fmt(s[0])}")
        error = mean_std([c.get("sq_error_s0", c.get("brier_s0")) for c in cals])  # the same number, older caches
        rows.append([label(config), *cells, fmt(*error)])
    return _lines(header, rows) if rows else []


def nsr_comparison(protocol: dict, config: str = "sr-ppo/off") -> list[str]:
    """Statements computed from the NSR tables: the change the Pass@k weight makes to the batch NSR under each
    protocol, next to the paper's, with the pooled NSR of each bin's prompts beside it. The batch NSR depends both on
    how noisy each bin's gradients are and on how the bins' mean gradients add up or cancel, so the per-bin NSRs do
    not predict the change on their own."""
    lines = []
    sources = (
        ("own rollouts", own_rollout_nsr(protocol).get(config, [])),
        ("the paper's protocol", protocol.get("paper_nsr", {}).get(config, [])),
    )
    for name, mids in sources:
        pairs = [
            (m["batch"]["unweighted"]["nsr"], m["batch"]["weighted"]["nsr"])
            for m in mids
            if m["batch"]["unweighted"]["nsr"] and m["batch"]["weighted"]["nsr"] is not None
        ]
        if not pairs:
            continue
        change = mean_std([(w - u) / u for u, w in pairs])
        per_bin = {b: median([m["per_bin"][b]["unweighted"] for m in mids]) for b in BINS}
        lines.append(
            f"- {label(config)}, {name}: the Pass@k weight changes the batch NSR by "
            f"{fmt(100 * change[0], 100 * change[1], digits=1)}% over {len(pairs)} seed(s) (paper: -63.7%). Without "
            "the weight, the pooled NSR of each bin's prompts (median over seeds) is "
            + ", ".join(f"{b} {fmt(per_bin[b], digits=2)}" for b in BINS)
            + "."
        )
    if lines:
        lines.append(
            "- The weight changes which prompts the update is made of (share table below). It lowers the batch NSR "
            "when it moves weight towards prompts whose gradients are less noisy, or away from gradients that cancel "
            "the others' (the paper finds easy prompts' gradients partly cancel hard prompts'); the per-bin NSRs "
            "above do not separate the two. They are pooled over a bin's prompts, and a pooled NSR also falls as the "
            "bin holds more prompts, so they are not comparable with the paper's per-prompt NSR by bin (its Table 2, "
            "lowest for hard prompts)."
        )
    return lines


def summary(protocol: dict) -> list[str]:
    """Plain statements computed from the numbers (so that a rerun rewrites them with the new numbers)."""
    stats = {}
    for config, results in protocol["runs"].items():
        stats[config] = {m: mean_std([r["final"]["test"][m] for r in results]) for m in ("pass@1", "pass@8")}
    lines = []
    for metric in ("pass@1", "pass@8"):
        order = sorted(stats, key=lambda c: -stats[c][metric][0])
        ranking = ", ".join(f"{label(c)} {stats[c][metric][0]:.3f}" for c in order)
        lines.append(f"- Test {metric}, best first: {ranking}.")
    ref = "sr-ppo/off"
    if ref in stats:
        for metric in ("pass@1", "pass@8"):
            parts = []
            for config in stats:
                if config == ref:
                    continue
                diff = stats[ref][metric][0] - stats[config][metric][0]
                spread = stats[ref][metric][1] + stats[config][metric][1]
                verdict = "within the seed spread" if abs(diff) <= spread else ("ahead" if diff > 0 else "behind")
                parts.append(f"{diff:+.3f} vs {label(config)} ({verdict})")
            lines.append(f"- SR-PPO (defaults) off-policy, test {metric}: " + "; ".join(parts) + ".")
    mids = [r["mid"] for r in protocol["runs"].get(ref, []) if r.get("mid") and "nsr" in r["mid"]]
    if mids:
        un = mean_std([m["nsr"]["batch"]["unweighted"]["nsr"] for m in mids])[0]
        w = mean_std([m["nsr"]["batch"]["weighted"]["nsr"] for m in mids])[0]
        hard_un = mean_std([m["weight_share"]["without_passk"]["prompt_weight"]["hard"] for m in mids])[0]
        hard_w = mean_std([m["weight_share"]["with_passk"]["prompt_weight"]["hard"] for m in mids])[0]
        easy_un = mean_std([m["weight_share"]["without_passk"]["prompt_weight"]["easy"] for m in mids])[0]
        easy_w = mean_std([m["weight_share"]["with_passk"]["prompt_weight"]["easy"] for m in mids])[0]
        lines.append(
            f"- SR-PPO (defaults) off-policy at mid-training: batch NSR {fmt(un, digits=2)} without the Pass@k "
            "weight, "
            f"{fmt(w, digits=2)} with it (paper: 28.57 -> 10.36); hard prompts' share of the update weight "
            f"{100 * hard_un:.1f}% -> {100 * hard_w:.1f}%, easy {100 * easy_un:.1f}% -> {100 * easy_w:.1f}% "
            "(paper: hard 30.5% -> 65.8%, easy 57.0% -> 24.3%)."
        )
    return lines


def write_report(out_dir: str, variant, protocol: dict, base: dict, meta: dict) -> str:
    """Write `README.md`, the figures and `results.json` to `out_dir`; returns the README path."""
    os.makedirs(out_dir, exist_ok=True)
    base_point = {"update": 0, "generated_tokens": 0, "pass@1": base["pass@1"], "pass@8": base["pass@8"]}
    plot_curves(protocol["runs"], base_point, os.path.join(out_dir, "curves_updates.png"), "update", "policy update")
    plot_curves(
        protocol["runs"],
        base_point,
        os.path.join(out_dir, "curves_tokens.png"),
        "generated_tokens",
        "generated completion tokens",
    )
    slim = {
        config: [{k: v for k, v in r.items() if k != "logs"} for r in results]
        for config, results in protocol["runs"].items()
    }
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(
            {
                "meta": meta,
                "base": base,
                "search": protocol["search"],
                "selected": protocol["selected"],
                "runs": slim,
                "paper_nsr": protocol.get("paper_nsr", {}),
            },
            f,
            indent=1,
            default=str,
        )

    v = variant
    lines = [
        "# SR-PPO in miniature: a CPU reproduction of the paper's comparisons",
        "",
        f"Produced by `{meta['command']}` (variant **{v.name}**) at git commit `{meta['commit']}`, "
        f"{meta['date']}, on {meta['machine']}: {meta['total_runs']} runs "
        f"({meta['reused_runs']} of them reused from the cache), {meta['grid_minutes']:.1f} minutes for the whole "
        f"command with {meta['workers']} worker processes; the runs' own times sum to "
        f"{meta['summed_run_minutes']:.1f} minutes.",
        "",
        "Everything here is generated by `python -m benchmarks.toy.run`; see `benchmarks/README.md` for the task, the "
        "model and the protocol. The numbers are what the run measured, including where SR-PPO loses.",
        "",
        "## Setting",
        "",
        f"- Task: running max / min chains of {v.task.min_steps}-{v.task.max_steps} steps over digits "
        f"(answer = {v.task.min_steps}-{v.task.max_steps} tokens + `<eos>`), reward 1 only for the exact chain. "
        f"Held-out: {v.num_val} validation prompts (learning-rate selection) and {v.num_test} test prompts "
        "(reported), never trained on.",
        f"- Model: Qwen3, {v.warm_start.num_layers} layers, hidden {v.warm_start.hidden_size}, from a config, "
        f"warm-started by {v.warm_start.sft_steps} supervised steps (`benchmarks/toy/base_model.py`).",
        f"- Training: {v.updates} policy updates per run. Single-rollout methods: {v.prompts_per_update} prompts x 1 "
        f"rollout per update; GRPO: {v.prompts_per_update // 2} prompts x 4 rollouts. Off-policy = 4 updates per "
        "generated batch (`steps_per_generation=4`); on-policy = 1.",
        f"- Search (same for every method): policy learning rates {', '.join(f'{lr:g}' for lr in v.learning_rates)} "
        f"on seed 0, best validation pass@1 kept, then {v.seeds} seeds in all. Everything else: the trainers' "
        "defaults (clip 0.2, no KL; for SR-PPO the critic's learning rate is the policy's, the value head starts "
        "at the first batch's success rate, k = 2), except the previous defaults' configuration, which sets them as "
        "they were (k = 4, a head starting at 0.5, critic learning rate 1e-3, the fixed value this benchmark used).",
        "- Metrics: unbiased pass@k (`trl_srppo.evaluation.pass_at_k.pass_at_k`) from 8 samples (temperature 1) per "
        "test prompt, mean ± std over seeds.",
        "",
        "## Base model (before RL)",
        "",
        f"Test pass@1 {fmt(base['pass@1'])}, pass@8 {fmt(base['pass@8'])}; difficulty bins of the test prompts "
        f"(8 samples): easy {100 * base['bins']['easy']:.0f}%, medium {100 * base['bins']['medium']:.0f}%, "
        f"hard {100 * base['bins']['hard']:.0f}%. Success by number of steps: "
        + ", ".join(f"{k}: {val:.2f}" for k, val in base["success_by_steps"].items())
        + ".",
        "",
        "## Summary (computed from the tables below)",
        "",
        *summary(protocol),
        "",
        "## Held-out results",
        "",
        *main_table(protocol),
        "",
        "Generated tokens: completion tokens sampled during training (GRPO samples twice as many completions per "
        "update). Wall time: training only (held-out evaluations excluded), one CPU thread per run.",
        "",
        "![pass@k against updates](curves_updates.png)",
        "",
        "![pass@k against generated tokens](curves_tokens.png)",
        "",
        "## Learning-rate search (validation pass@1, seed 0)",
        "",
        *search_table(protocol, v.learning_rates, base.get("val_pass@1")),
        "",
    ]
    if "val_pass@1" in base:
        lines[-1:-1] = [
            "",
            f"Collapse: validation pass@1 below the base model's ({fmt(base['val_pass@1'])}, 8 samples per "
            "validation prompt).",
        ]
    tokens = equal_tokens_table(protocol)
    if tokens:
        lines += [
            "## At equal generated tokens",
            "",
            "Each run's held-out pass@k at its last curve point (after all its updates) next to GRPO's at the same "
            "number of generated completion tokens (GRPO's curve interpolated between its points), mean ± std over "
            "seeds. Single-rollout methods generate about half GRPO's tokens per update, so they are compared with "
            "GRPO about halfway through its run.",
            "",
            *tokens,
            "",
        ]
    nsr = nsr_tables(own_rollout_nsr(protocol))
    if nsr:
        lines += [
            "## Gradient noise-to-signal ratio at mid-training",
            "",
            f"Policy and critic at update {v.updates // 2}; {v.num_analysis} held-out prompts x 8 rollouts; "
            "replica r = the one-rollout-per-prompt batch of rollout r (`trl_srppo.analysis.measure_nsr`), "
            "with each run's own advantages (Monte Carlo; one-step TD for the TD ablation) and critic. The change "
            "column is over the seeds where both are finite. "
            "Batch columns: mean ± std over seeds. Per-bin columns: the pooled NSR of that bin's prompts, median over "
            "seeds (a bin with few prompts can have a signal near zero, which makes its NSR explode in one seed).",
            "",
            *nsr,
            "",
        ]
    paper_nsr = nsr_tables(protocol.get("paper_nsr", {}))
    if paper_nsr:
        lines += [
            "## Gradient noise-to-signal ratio, the paper's protocol",
            "",
            f"As the paper measures it: the rollouts (8 per prompt, {v.num_analysis} held-out prompts) come from the "
            "off-policy GRPO run of the same seed at its mid-training update, the advantages from the SR-PPO run's "
            "mid-training critic and the gradients are those of its mid-training policy "
            "(`benchmarks/toy/mid_analysis.py`,"
            " `nsr_on_other_rollouts`). Same columns as above.",
            "",
            *paper_nsr,
            "",
        ]
    comparison = nsr_comparison(protocol)
    if comparison:
        lines += ["### The Pass@k weight and the batch NSR, here and in the paper", "", *comparison, ""]
    share = share_table(protocol)
    if share:
        lines += [
            "## Share of update weight by difficulty bin at mid-training",
            "",
            "Sum of the prompts' weights in a bin over the batch total (`update_weight_share`, prompt-weight "
            "definition): without the Pass@k weight every rollout weighs 1, with it `k (1 - qhat(s_0))^(k-1)` "
            f"(k = {ANALYSIS_K}).",
            "",
            *share,
            "",
        ]
    for where, title in (("mid", "at mid-training (analysis prompts)"), ("final", "after training (test prompts)")):
        table = calibration_table(protocol, where)
        if table:
            lines += [
                f"## Critic calibration {title}",
                "",
                "Mean critic value of the prompt, `qhat(s_0)` (for PPO: the linear critic's `V(s_0)`), per "
                "difficulty bin, next to the bin's empirical success rate over 8 samples; mean over seeds.",
                "",
                *table,
                "",
            ]
    lines += ["## Notes", "", *meta.get("notes", []), ""]
    path = os.path.join(out_dir, "README.md")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return path

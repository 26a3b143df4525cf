# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`make bench-prompt-sampling`: does prompt sampling (`prompt_sampling`) pay, on the miniature reproduction?

Five configurations, off-policy at the bench's selected policy learning rate (3e-4), on the bench's task, base model,
protocol and evaluation (`benchmarks/toy/training.py`), the same seeds for each: SR-PPO with its defaults (no prompt
sampling), `prompt_sampling="pass_at_k"` with a pool of m = 2 and m = 4 generated batches (floor 0.1),
`"near_half"` with m = 2, and GRPO with 4 rollouts (TRL's trainer, as the bench runs it). Every SR-PPO option is
written out (`CONFIGS`), so a row means the same whatever the trainer's defaults become.

Each comparison is a paired difference against default SR-PPO over seeds (same seed, same base model, same held-out
prompts and evaluation samples), with a 95% percentile bootstrap interval over seeds (`paired_difference`):

- at equal updates (for the single-rollout variants also equal generated completions): the final held-out test
  pass@1 / pass@8;
- at equal generated tokens against GRPO: each SR-PPO configuration's last curve point next to GRPO's curve
  interpolated at the same generated tokens (as `benchmarks/toy/report.py` does);
- at equal wall-clock: each configuration's curve point closest to but not past the training seconds default SR-PPO
  needed on that seed (`point_at_seconds`);
- the draw's own metrics (`prompt_sampling/*`), averaged over each run's logged steps.

Writes `reports/prompt_sampling/README.md` and `results.json`.

    python -m benchmarks.toy.prompt_sampling_study          # 5 configurations x 8 seeds, 300 updates (curve every 15)
    python -m benchmarks.toy.prompt_sampling_study --quick  # 60 updates, 2 seeds (a pilot)
    python -m benchmarks.toy.prompt_sampling_study --smoke  # the bench's smoke size, 2 seeds (the end-to-end test)
"""

import argparse
import datetime
import json
import math
import os
import platform
import time
from dataclasses import replace
from functools import partial

import numpy as np

from trl_srppo.evaluation.markdown import markdown_table

from ..common.curves import interpolate
from ..common.runs import REPO_ROOT, git_commit, quiet_offline_command, torch_threads
from ..common.runspec import OFF_POLICY_UPDATES_PER_BATCH
from ..common.stats import excludes_zero, mean_std
from ..common.tables import fmt, fmt_difference
from .base_model import DEFAULT_CACHE, load_or_build_base_model
from .defaults_study import CURRENT, LEARNING_RATE, run_specs, without_logs
from .grid import VARIANTS, Grid, held_out_prompts, variant_splits
from .scoring import evaluate

# SR-PPO's current defaults written out (k = 2, the value head starting at the first batch's success rate, the
# critic's learning rate the policy's), with the prompt-sampling options at the trainer's defaults.
SRPPO_DEFAULT = {**CURRENT, "prompt_sampling": "none", "prompt_pool_factor": 4, "prompt_sampling_floor": 0.1}
DEFAULT = "SR-PPO (default)"
GRPO = "GRPO (4 rollouts)"
# (name, method, options, what changes)
CONFIGS = (
    (DEFAULT, "sr-ppo", SRPPO_DEFAULT, "no prompt sampling: every prompt of the batch generated once"),
    (
        "pass_at_k, m = 2",
        "sr-ppo",
        {**SRPPO_DEFAULT, "prompt_sampling": "pass_at_k", "prompt_pool_factor": 2},
        "B prompts drawn from a pool of 2B by the Pass@k weight (floor 0.1), importance-weighted",
    ),
    (
        "pass_at_k, m = 4",
        "sr-ppo",
        {**SRPPO_DEFAULT, "prompt_sampling": "pass_at_k", "prompt_pool_factor": 4},
        "B prompts drawn from a pool of 4B by the Pass@k weight (floor 0.1), importance-weighted",
    ),
    (
        "near_half, m = 2",
        "sr-ppo",
        {**SRPPO_DEFAULT, "prompt_sampling": "near_half", "prompt_pool_factor": 2},
        "the B prompts of a pool of 2B with qhat(s_0) nearest 0.5 (biased), plain Pass@k weight",
    ),
    (GRPO, "grpo", {}, "TRL's GRPOTrainer as the bench runs it: half the prompts, 4 rollouts each"),
)
SEEDS = 8
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
METRICS = ("pass@1", "pass@8")
# The draw's logged metrics (`trl_srppo.method.prompt_sampling.draw_metrics`), and the batch's training reward.
DRAW_METRICS = (
    ("prompt_sampling/pool_q0_mean", "pool mean qhat(s_0)"),
    ("prompt_sampling/drawn_q0_mean", "drawn mean qhat(s_0)"),
    ("prompt_sampling/ess", "effective sample size / B"),
    ("prompt_sampling/pool_drawn_share", "share of the pool drawn"),
    ("prompt_sampling/pool_forward_seconds", "pool forward (s per generated batch)"),
    ("reward", "training reward (drawn batch)"),
)


# A bootstrap interval has no sign-flip p-value, and the tables give the seeds once: `+0.012 [-0.003, +0.027] *`.
fmt_bootstrap = partial(fmt_difference, seeds=False)


def paired_difference(
    values: list, reference: list, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> dict:
    """Mean of the per-seed differences `values[i] - reference[i]` and its 95% percentile bootstrap interval over
    seeds (`resamples` resamples of the seeds with replacement, a generator seeded with `seed`). A seed missing on
    either side (`None` or not finite) is left out; with no seed left every number is NaN."""
    pairs = [
        (v, r)
        for v, r in zip(values, reference, strict=True)
        if v is not None and r is not None and math.isfinite(v) and math.isfinite(r)
    ]
    diffs = np.array([v - r for v, r in pairs], dtype=np.float64)
    if diffs.size == 0:
        return {"mean": float("nan"), "low": float("nan"), "high": float("nan"), "seeds": 0, "differences": []}
    rng = np.random.default_rng(seed)
    means = diffs[rng.integers(0, diffs.size, size=(resamples, diffs.size))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return {
        "mean": float(diffs.mean()),
        "low": float(low),
        "high": float(high),
        "seeds": int(diffs.size),
        "differences": diffs.tolist(),
    }


def point_at_seconds(curve: list[dict], seconds: float) -> dict | None:
    """The curve point whose training seconds are closest to but not past `seconds` (the last such point: the
    training seconds grow along a curve); `None` when no point is that early, or the curve predates the field (a run
    cached before curve points recorded their training seconds)."""
    eligible = [p for p in curve if p.get("train_seconds") is not None and p["train_seconds"] <= seconds]
    return max(eligible, key=lambda p: p["train_seconds"]) if eligible else None


def run_mean(logs: list[dict], key: str) -> float:
    """Mean of a logged metric over the run's logged steps that carry it (NaN when none does)."""
    values = [entry[key] for entry in logs if key in entry]
    return float(np.mean(values)) if values else float("nan")


def summarize_run(result: dict) -> dict:
    """The numbers of one run the study uses (its logs averaged, not kept)."""
    return {
        "seed": result["spec"]["seed"],
        "test": {m: result["final"]["test"][m] for m in METRICS},
        "val_pass@1": result["final"]["val"]["pass@1"],
        "generated_tokens": result["generated_tokens"],
        "completions": result["completions"],
        "train_seconds": result["train_seconds"],
        "curve": result["curve"],
        "logged": {key: run_mean(result["logs"], key) for key, _ in DRAW_METRICS},
    }


def compare(runs: dict[str, list[dict]]) -> dict:
    """Every comparison of the study, from the summarised runs (`runs[name][i]` is seed `i`)."""
    default = runs[DEFAULT]
    out = {"equal_updates": {}, "equal_tokens": {}, "equal_seconds": {}}
    for name, results in runs.items():
        if name != DEFAULT:
            out["equal_updates"][name] = {
                m: paired_difference([r["test"][m] for r in results], [r["test"][m] for r in default]) for m in METRICS
            }
        budgets = [r["train_seconds"] for r in default]
        points = [point_at_seconds(r["curve"], b) for r, b in zip(results, budgets, strict=True)]
        own = [point_at_seconds(r["curve"], b) for r, b in zip(default, budgets, strict=True)]
        out["equal_seconds"][name] = {
            "budget_seconds": budgets,
            "updates": [None if p is None else p["update"] for p in points],
            **{
                m: {
                    "values": [None if p is None else p[m] for p in points],
                    "difference": paired_difference(
                        [None if p is None else p[m] for p in points], [None if p is None else p[m] for p in own]
                    ),
                }
                for m in METRICS
            },
        }
    for name, results in runs.items():
        if name == GRPO:
            continue
        row = {"generated_tokens": [r["curve"][-1]["generated_tokens"] for r in results]}
        for m in METRICS:
            ends = [r["curve"][-1][m] for r in results]
            grpo = [
                interpolate(g["curve"], r["curve"][-1]["generated_tokens"], m)
                for r, g in zip(results, runs[GRPO], strict=True)
            ]
            row[m] = {"values": ends, "grpo": grpo, "difference": paired_difference(ends, grpo)}
            if name != DEFAULT:  # against the default at the fewer generated tokens of the two runs of a seed
                both = [
                    min(r["curve"][-1]["generated_tokens"], d["curve"][-1]["generated_tokens"])
                    for r, d in zip(results, default, strict=True)
                ]
                own = [interpolate(r["curve"], t, m) for r, t in zip(results, both, strict=True)]
                ref = [interpolate(d["curve"], t, m) for d, t in zip(default, both, strict=True)]
                row[m]["default"] = {"tokens": both, "difference": paired_difference(own, ref)}
        out["equal_tokens"][name] = row
    return out


def updates_table(runs: dict, comparisons: dict) -> list[str]:
    header = ["configuration", "test pass@1", "test pass@8", "val pass@1", "generated tokens", "completions"]
    header += ["training seconds", "pass@1 - default [95% CI]", "pass@8 - default [95% CI]"]
    rows = []
    for name, _, _, _ in CONFIGS:
        results = runs[name]
        cells = [name] + [fmt(*mean_std([r["test"][m] for r in results])) for m in METRICS]
        cells.append(fmt(*mean_std([r["val_pass@1"] for r in results])))
        cells.append(f"{mean_std([r['generated_tokens'] for r in results])[0]:,.0f}")
        cells.append(f"{mean_std([r['completions'] for r in results])[0]:,.0f}")
        cells.append(fmt(*mean_std([r["train_seconds"] for r in results]), digits=1))
        diffs = comparisons["equal_updates"].get(name)
        cells += ["(reference)"] * 2 if diffs is None else [fmt_bootstrap(diffs[m]) for m in METRICS]
        rows.append(cells)
    return markdown_table(header, rows).splitlines()


def tokens_table(comparisons: dict) -> list[str]:
    header = ["configuration", "generated tokens", "pass@1", "GRPO pass@1", "pass@1 - GRPO [95% CI]"]
    header += ["pass@8", "GRPO pass@8", "pass@8 - GRPO [95% CI]"]
    header += ["pass@1 - default, equal tokens [95% CI]", "pass@8 - default, equal tokens [95% CI]"]
    rows = []
    for name, _, _, _ in CONFIGS:
        row = comparisons["equal_tokens"].get(name)
        if row is None:
            continue
        cells = [name, f"{mean_std(row['generated_tokens'])[0]:,.0f}"]
        for m in METRICS:
            cells += [
                fmt(*mean_std(row[m]["values"])),
                fmt(*mean_std(row[m]["grpo"])),
                fmt_bootstrap(row[m]["difference"]),
            ]
        cells += [
            fmt_bootstrap(row[m]["default"]["difference"]) if "default" in row[m] else "(reference)" for m in METRICS
        ]
        rows.append(cells)
    return markdown_table(header, rows).splitlines()


def seconds_table(comparisons: dict) -> list[str]:
    header = ["configuration", "update reached", "pass@1 at the budget", "pass@1 - default [95% CI]"]
    header += ["pass@8 at the budget", "pass@8 - default [95% CI]"]
    rows = []
    for name, _, _, _ in CONFIGS:
        row = comparisons["equal_seconds"][name]
        updates = [u for u in row["updates"] if u is not None]
        reached = f"{np.mean(updates):.0f} (min {min(updates)}, max {max(updates)})" if updates else "n/a"
        cells = [name, reached]
        for m in METRICS:
            cells.append(fmt(*mean_std(row[m]["values"])))
            cells.append("(reference)" if name == DEFAULT else fmt_bootstrap(row[m]["difference"]))
        rows.append(cells)
    return markdown_table(header, rows).splitlines()


def uniform_share(mode: str, factor: int, drawn: int) -> float | None:
    """The share of a pool of `factor * drawn` prompts drawn at least once by a uniform draw of `drawn` prompts: with
    replacement (`pass_at_k`'s draw when every weight is equal), `1 - (1 - 1/N)^B`; `near_half` keeps `B` distinct
    prompts, `1/m`."""
    if mode == "pass_at_k":
        return 1 - (1 - 1 / (factor * drawn)) ** drawn
    if mode == "near_half":
        return 1 / factor
    return None


def draw_table(runs: dict, drawn: int) -> list[str]:
    header = ["configuration"] + [title for _, title in DRAW_METRICS]
    header.insert(5, "share drawn if the draw were uniform")
    rows = []
    for name, _, options, _ in CONFIGS:
        digits = [3, 3, 3, 3, 4, 3]
        cells = [name] + [
            fmt(*mean_std([r["logged"][key] for r in runs[name]]), digits=d)
            for (key, _), d in zip(DRAW_METRICS, digits, strict=True)
        ]
        share = uniform_share(options.get("prompt_sampling", "none"), options.get("prompt_pool_factor", 1), drawn)
        cells.insert(5, "n/a" if share is None else f"{share:.3f}")
        rows.append(cells)
    return markdown_table(header, rows).splitlines()


def options_table() -> list[str]:
    rows = [
        [name, method, what, ", ".join(f"`{k}={v!r}`" for k, v in sorted(options.items())) or "TRL's defaults"]
        for name, method, options, what in CONFIGS
    ]
    return markdown_table(["configuration", "trainer", "what it does", "options"], rows).splitlines()


def verdict(d: dict, reference: str = "the default") -> str:
    if not d["seeds"]:
        return "n/a"
    if d["low"] > 0:
        return f"above {reference}, the interval excludes 0"
    if d["high"] < 0:
        return f"below {reference}, the interval excludes 0"
    return "the interval includes 0"


def reading(comparisons: dict) -> list[str]:
    """The tables read out, comparison by comparison, with which intervals exclude 0, and what that means for the
    default by the rule that prompt sampling stays off unless an interval shows a gain."""
    lines, gains, losses, counted, excluded, variant_counted = [], [], [], 0, 0, 0
    tokens = comparisons["equal_tokens"]
    for name, _, options, _ in CONFIGS:
        if name == DEFAULT:
            continue
        updates = comparisons["equal_updates"][name]
        seconds = comparisons["equal_seconds"][name]
        at_seconds = {m: seconds[m]["difference"] for m in METRICS}
        parts = [
            f"at equal updates, test pass@1 {fmt_bootstrap(updates['pass@1'])} ({verdict(updates['pass@1'])}) and "
            f"pass@8 {fmt_bootstrap(updates['pass@8'])} ({verdict(updates['pass@8'])})",
            f"at equal wall-clock, pass@1 {fmt_bootstrap(at_seconds['pass@1'])} ({verdict(at_seconds['pass@1'])}) "
            f"and pass@8 {fmt_bootstrap(at_seconds['pass@8'])} ({verdict(at_seconds['pass@8'])})",
        ]
        at_tokens = {m: tokens[name][m]["default"]["difference"] for m in METRICS} if name in tokens else {}
        diffs = [updates[m] for m in METRICS] + [at_seconds[m] for m in METRICS] + list(at_tokens.values())
        if name in tokens:
            own, ref = tokens[name], tokens[DEFAULT]
            parts.append(
                f"at equal generated tokens, pass@1 {fmt_bootstrap(at_tokens['pass@1'])} "
                f"({verdict(at_tokens['pass@1'])}) and pass@8 {fmt_bootstrap(at_tokens['pass@8'])} "
                f"({verdict(at_tokens['pass@8'])}); against GRPO "
                f"at its own generated tokens, pass@1 {fmt_bootstrap(own['pass@1']['difference'])} "
                f"({verdict(own['pass@1']['difference'], 'GRPO')}), where default SR-PPO is at "
                f"{fmt_bootstrap(ref['pass@1']['difference'])}"
            )
        else:  # GRPO: its own comparison at equal generated tokens is the default's row, read from the other side
            ref = tokens[DEFAULT]["pass@1"]["difference"]
            parts.append(
                f"at equal generated tokens default SR-PPO - GRPO is {fmt_bootstrap(ref)} on pass@1 "
                f"({verdict(ref, 'GRPO')})"
            )
        counted += len(diffs)
        if options.get("prompt_sampling", "none") != "none":
            variant_counted += len(diffs)
        excluded += sum(excludes_zero(d) for d in diffs)
        if options.get("prompt_sampling", "none") != "none":
            kinds = (
                ("equal updates", updates),
                ("equal generated tokens", at_tokens),
                ("equal wall-clock", at_seconds),
            )
            for kind, by_metric in kinds:
                for m in METRICS:
                    d = by_metric[m]
                    if excludes_zero(d):
                        (gains if d["low"] > 0 else losses).append(f"{name} ({kind}, {m})")
        lines.append(f"- **{name}**: " + "; ".join(parts) + ".")
    lines += [
        "",
        f"Of the {counted} paired differences against default SR-PPO above (equal updates, equal generated tokens "
        f"for the single-rollout configurations, equal wall-clock; pass@1 and pass@8), {excluded} have an interval "
        f"that excludes 0. Of the {variant_counted} of them that compare a prompt-sampling configuration with the "
        f"default, about {0.05 * variant_counted:.1f} would "
        "exclude 0 by chance alone at 95% each if prompt sampling changed nothing.",
        "",
        'For the default (`prompt_sampling="none"`, kept unless an interval shows a gain): '
        + (
            "an interval shows a gain for " + ", ".join(gains) + "."
            if gains
            else "no prompt-sampling configuration has an interval that shows a gain over default SR-PPO, at equal "
            "updates, tokens or wall-clock, on pass@1 or pass@8; on this task prompt sampling stays off."
        )
        + (" Intervals that show a loss: " + ", ".join(losses) + "." if losses else " No interval shows a loss."),
    ]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="60 updates, 2 seeds (a pilot)")
    size.add_argument("--smoke", action="store_true", help="the bench's smoke size, 2 seeds (for the tests)")
    parser.add_argument("--seeds", type=int, default=None, help=f"seeds per configuration (default {SEEDS})")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cache-dir", default=DEFAULT_CACHE)
    parser.add_argument("--output-dir", default=os.path.join(REPO_ROOT, "reports", "prompt_sampling"))
    args = parser.parse_args(argv)
    quiet_offline_command()
    start, commit, load_before = time.perf_counter(), git_commit(), os.getloadavg()
    full = VARIANTS["full"]
    # A curve point every 15 updates (the bench's is 30): the equal-wall-clock lookup can stop no closer to the
    # budget than a point. The evaluations run in a forked random stream, so they do not change the run.
    variant = replace(full, name="prompt-sampling", eval_every=15)
    if args.quick:
        variant = replace(full, name="prompt-sampling", updates=60, eval_every=15)
    if args.smoke:
        variant = replace(VARIANTS["smoke"], name="prompt-sampling-smoke")
    seeds = args.seeds or (2 if args.quick or args.smoke else SEEDS)
    splits = variant_splits(variant)
    configs = [(name, method, options) for name, method, options, _ in CONFIGS]
    with torch_threads(1):
        base_path, base_model, tokenizer = load_or_build_base_model(
            variant.task, variant.warm_start, held_out_prompts(splits), args.cache_dir
        )
        base = evaluate(
            base_model, tokenizer, splits["test"], 8, seed=7, max_new_tokens=variant.task.max_completion_tokens
        )
        # No mid-training analyses: the study reads the final evaluation, the curves and the logs.
        grid = Grid(variant, base_path, args.cache_dir, workers=args.workers, analyses=False)
        plan = run_specs(variant, seeds, configs)
        # Seed by seed, so that the runs of one seed train close in time (under the same load on a shared machine).
        grid.run([plan[name][seed] for seed in range(seeds) for name in plan])
    results = {name: [grid.results[spec.name] for spec in specs] for name, specs in plan.items()}
    runs = {name: [summarize_run(r) for r in rs] for name, rs in results.items()}
    comparisons = compare(runs)
    minutes = (time.perf_counter() - start) / 60
    load_after = os.getloadavg()
    size_flag = " --quick" if args.quick else " --smoke" if args.smoke else ""
    seeds_flag = f" --seeds {args.seeds}" if args.seeds else ""
    command = f"python -m benchmarks.toy.prompt_sampling_study{size_flag}{seeds_flag} --workers {args.workers}"
    meta = {
        "command": command,
        "commit": commit,
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores (shared)",
        "load_average_before": load_before,
        "load_average_after": load_after,
        "workers": args.workers,
        "minutes": minutes,
        "summed_run_minutes": sum(r.get("total_seconds", float("nan")) for rs in results.values() for r in rs) / 60,
        "reused_runs": grid.reused,
        "seeds": seeds,
        "updates": variant.updates,
        "eval_every": variant.eval_every,
        "prompts_per_update": variant.prompts_per_update,
        "learning_rate": LEARNING_RATE,
        "bootstrap": {"resamples": BOOTSTRAP_RESAMPLES, "seed": BOOTSTRAP_SEED, "interval": "95% percentile"},
        "base_model_test": {m: base[m] for m in METRICS},
    }
    os.makedirs(args.output_dir, exist_ok=True)
    lines = report_lines(meta, variant, runs, comparisons)
    with open(os.path.join(args.output_dir, "README.md"), "w") as f:
        f.write("\n".join(lines))
    with open(os.path.join(args.output_dir, "results.json"), "w") as f:
        payload = {
            "meta": meta,
            "configs": {name: {"method": method, "options": options} for name, method, options, _ in CONFIGS},
            "runs": runs,
            "comparisons": comparisons,
            "raw": without_logs(results),
        }
        json.dump(payload, f, indent=1, default=str)
    print(f"report: {os.path.join(args.output_dir, 'README.md')} ({minutes:.1f} minutes)")
    return 0


def report_lines(meta: dict, variant, runs: dict, comparisons: dict) -> list[str]:
    seeds = meta["seeds"]
    load = " / ".join(f"{x:.2f}" for x in meta["load_average_before"])
    load_after = " / ".join(f"{x:.2f}" for x in meta["load_average_after"])
    return [
        "# Prompt sampling on the miniature reproduction",
        "",
        f"Produced by `{meta['command']}` at git commit `{meta['commit']}`, {meta['date']}, on {meta['machine']}: "
        f"{len(CONFIGS)} configurations x {seeds} seeds, {variant.updates} updates each, {meta['minutes']:.1f} "
        f"minutes for the command with {meta['workers']} worker processes (the runs' own times sum to "
        f"{meta['summed_run_minutes']:.1f} minutes; {meta['reused_runs']} runs reused from the cache). Load average "
        f"(1 / 5 / 15 min) {load} at the start, {load_after} at the end.",
        "",
        "The bench's task, base model and held-out evaluation (`benchmarks/README.md`): off-policy (4 updates per "
        f"generated batch), policy learning rate {LEARNING_RATE:g} (the bench's selected rate for SR-PPO "
        f"off-policy), {variant.prompts_per_update} prompts x 1 rollout per update for SR-PPO, "
        f"{variant.prompts_per_update // 2} x 4 for GRPO. Base model: test pass@1 "
        f"{meta['base_model_test']['pass@1']:.3f}, pass@8 {meta['base_model_test']['pass@8']:.3f}. Held-out test "
        "prompts, 8 samples each at temperature 1.",
        "",
        *options_table(),
        "",
        "**Seeds.** Every configuration runs seeds 0 to "
        f"{seeds - 1}. The initial policy is the same cached warm-started base model for every seed and configuration "
        "(the seed does not change it). The seed is the trainer's `seed` and `data_seed`: TRL seeds torch, numpy and "
        "random with it when the trainer is built (the critic's value head, the policy's sampling), its "
        "`RepeatSampler` shuffles the training prompts with it, and the prompt draw has a generator of its own "
        "seeded with it, so that the draw leaves the policy's sampling stream alone. A pool of m generated batches "
        "walks the same shuffled order m times faster. The held-out evaluations use fixed seeds, the same for every "
        "run. So seed i of every configuration starts from the same model and prompt order, and the paired "
        "difference over seeds removes what the seed alone does.",
        "",
        f"**Intervals.** Each difference is the mean over the {seeds} seeds of (configuration - reference) on the "
        f"same seed, with a 95% percentile bootstrap interval over seeds ({BOOTSTRAP_RESAMPLES:,} resamples of the "
        f"seeds, generator seed {BOOTSTRAP_SEED}); `*` marks an interval that excludes 0. With {seeds} seeds a "
        "bootstrap interval is somewhat narrower than a t interval would be; read an interval that barely excludes "
        "0 as weak evidence. Mean ± std over seeds elsewhere.",
        "",
        "## At equal updates",
        "",
        "The final held-out test evaluation after the same number of policy updates. The single-rollout "
        "configurations then also generated the same number of completions (prompt sampling changes which prompts "
        "are generated, not how many); their generated tokens differ by the completions' lengths. GRPO generated "
        "twice the completions.",
        "",
        *updates_table(runs, comparisons),
        "",
        "## At equal generated tokens, against GRPO",
        "",
        "Each SR-PPO configuration's last curve point (after all its updates) next to GRPO's curve on the same seed "
        "interpolated at the same number of generated completion tokens (as `benchmarks/toy/report.py`'s table of "
        "that "
        "name); the difference is configuration - GRPO. The first row is default SR-PPO against GRPO. The curve "
        "points are evaluated with other sampling seeds than the final evaluation of the table above, so their "
        "values differ a little from it. SR-PPO's margin over GRPO changes along the curves, so the margins of runs "
        "that generated different numbers of tokens are not directly comparable: the last two columns compare each "
        "variant with default SR-PPO itself at equal generated tokens, both curves interpolated at the fewer tokens "
        "of the two runs of a seed.",
        "",
        *tokens_table(comparisons),
        "",
        "## At equal wall-clock",
        "",
        "Each configuration's held-out test pass@k at its curve point (every "
        f"{variant.eval_every} updates) closest to but not past the training seconds default SR-PPO needed on the "
        "same seed (training only: the held-out evaluations are not counted); default SR-PPO's own value is its "
        "last curve point. The update reached is that curve point's. Wall-clock on a shared 2-core machine, two "
        "runs at once, is noisy: a run's seconds depend on the run beside it and on other users' load, so a few "
        "percent of time difference means little.",
        "",
        *seconds_table(comparisons),
        "",
        "## What the draw did",
        "",
        "The prompt-sampling metrics each run logged (`trl_srppo.method.prompt_sampling.draw_metrics`), averaged "
        "over the run's logged steps, then mean ± std over seeds: the pool's and the drawn prompts' mean "
        "`qhat(s_0)`, the effective sample size of the drawn rollouts' weights divided by their number (1: equal "
        "weights), the share of the pool's prompts drawn at least once, the seconds of the critic's forward on the "
        "pool; and the training reward (success rate of the generated batch). n/a: not logged (no prompt sampling). "
        "Beside the share drawn, the share a uniform draw of as many prompts would give (B = "
        f"{variant.prompts_per_update * OFF_POLICY_UPDATES_PER_BATCH} prompts per generated batch from a pool of m B; "
        "with replacement for `pass_at_k`): a `pass_at_k` draw whose share and drawn mean `qhat(s_0)` sit at the "
        "uniform draw's is one whose weights hardly differ across the pool.",
        "",
        *draw_table(runs, variant.prompts_per_update * OFF_POLICY_UPDATES_PER_BATCH),
        "",
        "## Reading",
        "",
        "Read out from the tables above (difference [95% interval] against default SR-PPO unless named):",
        "",
        *reading(comparisons),
        "",
    ]


if __name__ == "__main__":
    raise SystemExit(main())

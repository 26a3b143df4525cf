# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The cold-start study's report, `reports/cold_start/README.md` and `results.json`, from the runs finished so far."""

import json
import math
import os

import numpy as np

from ..common.runs import finite_json
from ..common.stats import paired_t
from ..common.tables import cell, fmt, fmt_difference, table
from .design import ARM_LABELS, HEAD_RATE, OPTIONS, TOKEN_BUDGET
from .readings import (
    NON_INFERIORITY,
    TRACKING_TOLERANCE,
    critic_summary,
    decide_defaults,
    extra_tokens,
    goals,
    read_from_base,
)


def testbed_lines(base: dict, ceiling: dict, meta: dict) -> list[str]:
    lines = ["## The testbed (stage `base`)", ""]
    rows = [[level, f"{entry['success']:.3f}", f"{entry['problems']} x {entry['samples']}",
             f"`{entry['example']['problem']}`"] for level, entry in base["selection"].items()]  # fmt: skip
    lines += table(["level", "base success", "problems x samples", "a problem"], rows)
    sizes = meta["sizes"]
    lines += [
        "",
        f"Splits: {sizes['train']} training, {sizes['val']} validation and {sizes['test']} test problems. The base "
        f"model's validation pass@1 is {base['val']['pass@1']:.3f}, its test pass@1 / pass@8 "
        f"{base['test']['pass@1']:.3f} / {fmt(base['test'].get('pass@8'))}.",
        "",
        "What a critic's AUC of `qhat(s_0)` could reach on the base model's outcomes (each sample scored by its "
        "problem's value, labelled by its verified outcome; `benchmarks/real_study/probe.py`):",
        "",
    ]
    names = ("level_auc", "probe_auc", "oracle_auc", "probe_sd")  # NaN (stored as null): one class of outcomes only
    rows = [[split, *(fmt(ceiling[split][name]) for name in names)] for split in ("val", "test")]
    lines += table(["split", "the level's mean (other folds)", "ridge probe of the base features (other folds)",
                    "the problems' own rates (in-sample)", "probe values' sd"], rows)  # fmt: skip
    return lines + [""]


def probe_ceiling(ceiling: dict) -> float:
    """The ridge probe's validation AUC, the goals' ceiling: NaN where it could not be drawn (stored as null: the
    base model's validation outcomes all of one class)."""
    value = ceiling["val"]["probe_auc"]
    return float("nan") if value is None else float(value)


def mean_of(values) -> float:
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return float(np.mean(finite)) if finite else float("nan")


def option_lines(table_: dict, option: str | None, why: str, ceiling: float) -> list[str]:
    lines = ["## The cold-start options (stage `options`, validation split)", ""]
    if not any(row["runs"] for row in table_.values()):
        return lines + ["No run of the options stage has finished yet (`--stage options`).", ""]
    rows = []
    for name, row in table_.items():
        runs = row["runs"]
        if not runs:
            continue
        quarters = len(runs[0]["held_out"])
        held = " / ".join(fmt(mean_of(r["held_out"][q]["auc"] for r in runs)) for q in range(quarters))
        training = " / ".join(fmt(mean_of(r["training"][q] for r in runs)) for q in range(4))
        sd = mean_of(r["held_out"][-1]["sd"] for r in runs) if quarters else float("nan")
        rows.append([
            name, str(len(runs)), held, training, fmt(mean_of(r["tracking"]["mean_gap"] for r in runs)),
            fmt(mean_of(r["tracking"]["within"] for r in runs), digits=2), fmt(sd, digits=4),
            f"{mean_of(r['token_share'] for r in runs):.1%}", cell([r["final"] for r in runs]),
            fmt(mean_of(r["seconds"] for r in runs), digits=0),
        ])  # fmt: skip
    lines += table(["option", "seeds", "val AUC by quarter", "training-batch AUC by quarter",
                    "mean gap to batch success", f"updates within {TRACKING_TOLERANCE}", "val qhat(s_0) sd at end",
                    "extra tokens", "val pass@1 at end", "training s"], rows)  # fmt: skip
    settings = "; ".join(f"`{name}`: " + (", ".join(f"{k}={v}" for k, v in opts) or "the trainer's defaults")
                         for name, opts in OPTIONS.items())  # fmt: skip
    lines += [
        "",
        "Means over the seeds. Val AUC: the critic's `qhat(s_0)` of every validation problem at each quarter of the "
        "run against the base model's validation outcomes (the same labels for every run). Training-batch AUC: the "
        "prompts of each quarter's batches, valued before their rollouts, against those rollouts' outcomes (pooled). "
        f"Extra tokens: a warm start's and critic-only updates' generated tokens over those of the policy's updates "
        f"(the rule's budget: {TOKEN_BUDGET:.0%}).",
        "",
        f"The options: {settings}.",
        "",
        f"**Chosen: {option or 'none yet'}** ({why}).",
        "",
    ]
    return lines + goal_lines(table_, ceiling)


def goal_lines(table_: dict, ceiling: float) -> list[str]:
    """Which option meets which of the issue's goals (`readings.goals`), each on every one of its runs."""
    met = {name: goals(row, ceiling) for name, row in table_.items() if row["runs"]}
    rows = [[name, *("yes" if g[key] else "no" for key in ("tracks", "ceiling", "tokens")),
             "yes" if all(g.values()) else "no",
             fmt(mean_of(r["tracking"]["within"] for r in table_[name]["runs"]), digits=2),
             fmt(mean_of(r["tracking"]["calibrated"] for r in table_[name]["runs"]), digits=2)]
            for name, g in met.items()]  # fmt: skip
    lines = ["The issue's goals, each met on every run of the option or not:", ""]
    lines += table(["option", f"mean value within {TRACKING_TOLERANCE:g} of the batch's success at every update",
                    f"training-batch AUC in the first quarter >= the probe's {fmt(ceiling)}",
                    f"extra tokens <= {TOKEN_BUDGET:.0%}", "all three", f"updates within {TRACKING_TOLERANCE:g}",
                    "the same, expected of a calibrated critic"], rows)  # fmt: skip
    passing = [name for name, g in met.items() if all(g.values())]
    return lines + [
        "",
        f"Options meeting all three: {', '.join(passing) if passing else 'none'}. The last column: the share of "
        f"updates whose success rate would land within {TRACKING_TOLERANCE:g} of the mean value if each prompt's "
        "value were its true chance of success (`readings.calibrated_within`, the Poisson-binomial law of the "
        "batch's successes, mean over the updates and runs). With one rollout per prompt, a batch's success rate is "
        "itself a draw, so no critic tracks it within the tolerance at every update; read the two columns together.",
        "",
    ]


def compare_lines(compare: dict, base_test: dict) -> list[str]:
    """The comparison's tables: each arm's runs, then its test pass@1 and pass@n (`n` its samples per problem, 8 in
    the study) paired by seed against default SR-PPO at equal updates, generated tokens and seconds, read on its
    curve started at the base model's `base_test` (`readings.read_from_base`)."""
    lines = ["## The comparison (stage `compare`, test split)", ""]
    metrics = sorted((k for k in base_test if k.startswith("pass@")), key=lambda k: int(k.removeprefix("pass@")))
    if not compare:
        return lines + ["No run of the comparison has finished yet (`--stage compare`, after the options stage).", ""]
    reference = {r["spec"]["seed"]: r for r in compare.get("sr-ppo", [])}
    labels = dict(ARM_LABELS)
    if same_runs(compare.get("best", []), compare.get("sr-ppo head", [])):  # the chosen option is the fast head
        compare = {arm: runs for arm, runs in compare.items() if arm != "best"}
        labels["sr-ppo head"] += " (the chosen cold-start option), k = 2"
    rows = []
    for arm, runs in compare.items():
        finals = [cell([r["final"][metric] for r in runs]) for metric in metrics]
        tokens = fmt(mean_of(r["generated_tokens"] for r in runs), digits=0)
        seconds = fmt(mean_of(r["training_seconds"] for r in runs), digits=0)
        offline = fmt(mean_of(extra_tokens(r) for r in runs), digits=0)
        rows.append([labels[arm], str(len(runs)), *finals, tokens, offline, seconds])
    lines += table(["arm", "seeds", *(f"test {m}" for m in metrics), "generated tokens", "of which no policy update",
                    "training s"], rows)  # fmt: skip
    for metric in metrics:
        rows = [[labels[arm], *paired_cells(runs, reference, base_test[metric], metric)]
                for arm, runs in compare.items() if arm != "sr-ppo"]  # fmt: skip
        lines += ["", f"Test {metric} minus default SR-PPO's:", ""]
        lines += table(["arm", "equal updates", "at SR-PPO's generated tokens", "at SR-PPO's seconds"], rows)
    k2 = "sr-ppo head" if "best" not in compare else "best"  # the chosen option at k = 2, under its one label
    if compare.get(k2) and compare.get("best k=1"):  # the Pass@k weight's own effect: the same critic, k = 2 - k = 1
        k1 = {r["spec"]["seed"]: r for r in compare["best k=1"]}
        rows = [[metric, *paired_cells(compare[k2], k1, base_test[metric], metric)] for metric in metrics]
        lines += ["", "The Pass@k weight's own effect: the chosen option at k = 2 minus the same at k = 1:", ""]
        lines += table(["test", "equal updates", "at k = 1's generated tokens", "at k = 1's seconds"], rows)
    if compare.get("best k=1") and compare.get("running mean k=1"):  # what the learned critic's values add, at k = 1
        mean = {r["spec"]["seed"]: r for r in compare["running mean k=1"]}
        rows = [[metric, *paired_cells(compare["best k=1"], mean, base_test[metric], metric)] for metric in metrics]
        lines += ["", "What the learned critic adds: the chosen option at k = 1 minus the running mean at k = 1:", ""]
        lines += table(["test", "equal updates", "at the running mean's generated tokens",
                        "at the running mean's seconds"], rows)  # fmt: skip
    start = ", ".join(f"{m} {base_test[m]:.3f}" for m in metrics)
    lines += [
        "",
        "Paired by seed against default SR-PPO's last evaluation (95% t interval). At equal generated tokens and "
        f"seconds, an arm's curve starts at the base model (test {start}), which it stays through what it spends "
        "before its first policy update (A*-PO's offline stage, a warm start); it is read by linear interpolation "
        "from there to its first evaluation (half) and between its evaluations, and at its last evaluation when "
        "SR-PPO's budget is past it (a lower bound). Generated tokens count warm starts and A*-PO's offline stage "
        "(A*-PO's from its completions' text, without the end token); A*-PO's seconds count its offline stage.",
        *critic_lines(compare, labels),
        "",
    ]
    return lines


def critic_lines(compare: dict, labels: dict) -> list[str]:
    """What each arm's critic knew in the comparison's runs (`readings.critic_summary`, mean over its seeds): the
    arms that train one."""
    rows = []
    for arm, runs in compare.items():
        runs = [r for r in runs if "critic_s0" in r["final"]]
        if not runs:
            continue
        summaries = [critic_summary(r) for r in runs]
        quarters = " / ".join(fmt(mean_of(s["training"][q] for s in summaries)) for q in range(4))
        rows.append([
            labels[arm], str(len(runs)), quarters, fmt(mean_of(s["tracking"]["mean_gap"] for s in summaries)),
            fmt(mean_of(s["tracking"]["within"] for s in summaries), digits=2),
            fmt(mean_of(s["tracking"]["calibrated"] for s in summaries), digits=2),
            fmt(mean_of(s["squared_advantage"]["mean"] for s in summaries)),
            fmt(mean_of(s["squared_advantage"]["relative"] for s in summaries), digits=2),
            fmt(mean_of(s["test_auc"] for s in summaries)), fmt(mean_of(s["test_sd"] for s in summaries), digits=4),
            fmt(mean_of(s["weight_ratio"] for s in summaries), digits=2),
        ])  # fmt: skip
    if not rows:
        return []
    lines = ["", "The critics of the comparison's runs:", ""]
    lines += table(["arm", "seeds", "training-batch AUC by quarter", "mean gap to batch success",
                    f"updates within {TRACKING_TOLERANCE:g}", "expected of a calibrated critic",
                    "training-batch mean (Y - qhat(s_0))^2", "the same over the batch's own rate's",
                    "test AUC at end",
                    "test qhat(s_0) sd at end", "Pass@2 weights, 90th / 10th percentile"], rows)  # fmt: skip
    return lines + [
        "",
        "Means over the seeds. Training-batch AUC: each batch's prompts valued before their rollouts, against those "
        "rollouts' outcomes. Test AUC: the critic's `qhat(s_0)` of every test problem at the last evaluation against "
        "that evaluation's outcomes (0.5: no problem told from another; the running mean gives every problem one "
        "value). The weights' spread is what the Pass@2 weight does between problems with these values (at k = 1, "
        "what it would do): 1.00 weighs them alike. Mean (Y - qhat(s_0))^2: the squared advantage of each training "
        "rollout's first token, the noise the baseline leaves in the policy gradient at `s_0` (each arm's own "
        "rollouts, so it also moves with how far its policy's success rate is from one half); over the batch's own "
        "rate's: the same sum over what each batch's own success rate, the best one value for its prompts, would "
        "have left (below 1: the critic tells the batch's prompts apart; any constant is at 1 or above). The "
        "calibrated critic's column: `readings.calibrated_within` on each arm's own values, as in the options' "
        "goals table.",
    ]


def paired_cells(runs: list[dict], reference: dict, base: float, metric: str) -> list[str]:
    """`runs`' `metric` minus `reference`'s (seed -> default SR-PPO's run) last evaluation on the seeds both have: at
    equal updates, at the reference's generated tokens and at its seconds (`readings.read_from_base`, from the base
    model's `base`)."""
    mine = {r["spec"]["seed"]: r for r in runs}
    same = [s for s in mine if s in reference]
    finals = [reference[s]["final"][metric] for s in same]
    cells = [fmt_difference(paired_t([mine[s]["final"][metric] for s in same], finals))]
    for axis in ("generated_tokens", "training_seconds"):
        values = [read_from_base(mine[s], axis, reference[s][axis], base, metric) for s in same]
        cells.append(budget_cell(paired_t(values, finals), runs, reference, axis))
    return cells


def same_runs(runs: list[dict], others: list[dict]) -> bool:
    """Whether two arms' runs are the same runs (two arms of one setting share them)."""
    return bool(runs) and sorted(r["name"] for r in runs) == sorted(r["name"] for r in others)


def budget_cell(difference: dict, runs: list[dict], reference: dict, axis: str) -> str:
    """A paired difference at SR-PPO's budget on `axis` (`"generated_tokens"`, `"training_seconds"`), or, where no
    seed's run could be read there (evaluated only past it, with what it spent before its first policy update not
    recorded: the seconds of critic-only updates), how far past the budget the run's first evaluation came."""
    if difference["seeds"] or not runs or not reference:
        return fmt_difference(difference)
    first = mean_of(min(p[axis] for p in r["curve"]) for r in runs)
    budget = mean_of(r[axis] for r in reference.values())
    what = "generated tokens" if axis == "generated_tokens" else "seconds"
    return f"none: its first evaluation comes at {first / budget:.1f}x SR-PPO's {what}"


def run_seconds(result: dict) -> float:
    """A run's own seconds, its evaluations included (`total_seconds`; its training seconds where not recorded)."""
    return result["total_seconds"] if "total_seconds" in result else result["training_seconds"]


def distinct_runs(compare: dict) -> list[dict]:
    """The comparison's runs, each once (two arms of one setting share their runs)."""
    return list({r["name"]: r for runs in compare.values() for r in runs}.values())


def part_minutes(base: dict, ceiling: dict, option_runs: list[dict], sweep_runs: list[dict], compare_runs: list[dict],
                 mechanisms: dict) -> dict[str, float]:  # fmt: skip
    """Each part's minutes, each run's own time (its evaluations included) summed: the testbed (the levels' selection,
    the base model's evaluations, the ceilings), the options, the sweep, the comparison (`distinct_runs`) and the
    mechanism (its runs and analyses)."""
    testbed = base["select_seconds"] + base["val"]["eval_seconds"] + base["test"]["eval_seconds"] + ceiling["seconds"]
    mechanism = sum(
        run_seconds(mech["run"])
        + sum(v["seconds"] for k, v in mech.items() if k != "run" and isinstance(v, dict) and "seconds" in v)
        for mech in mechanisms.values()
    )  # fmt: skip
    return {
        "testbed": testbed / 60,
        "options": sum(run_seconds(r) for r in option_runs) / 60,
        "sweep": sum(run_seconds(r) for r in sweep_runs) / 60,
        "comparison": sum(run_seconds(r) for r in compare_runs) / 60,
        "mechanism": mechanism / 60,
    }


def time_lines(minutes: dict[str, float], runs: dict[str, int]) -> list[str]:
    """`part_minutes`' table, with each part's finished runs (`runs`, part -> count)."""
    rows = [[part, str(runs.get(part, "-")), f"{value:.0f}"] for part, value in minutes.items()]
    return [
        "## Time spent",
        "",
        *table(["part", "finished runs", "minutes"], rows),
        "",
        f"In all {sum(minutes.values()) / 60:.1f} hours of one torch thread. Each run's own time, its evaluations "
        "included; two ran at once, so the machine's wall clock was about half of it.",
        "",
    ]


def sweep_lines(sweep: dict) -> list[str]:
    lines = ["## The policy rates (stage `sweep`, validation split)", ""]
    rows = [[method, f"{rate:g}", ", ".join(str(s) for s in row["seeds"]) or "none yet", cell(row["final"]),
             "yes" if row["below_base"] else "no"]
            for method, rates in sweep["table"].items() for rate, row in rates.items()]  # fmt: skip
    lines += table(["method", "rate", "seeds", "val pass@1 at end", "a run below the base model"], rows)
    chosen = sweep["rates"]
    picked = ", ".join(f"{m} {r:g}" for m, r in chosen.items()) if chosen else "none yet"
    power = sweep["power"]
    found = ", ".join(f"{n} seeds {d:.3f}" for n, d in power["detectable"].items()) or "no spread yet"
    return lines + [
        "", f"**Chosen: {picked}** ({sweep['why']}).", "",
        f"Power: the SR-PPO - GRPO paired difference of validation pass@1 spreads by an sd of {fmt(power['sd'])} "
        f"({power['dof']} degrees of freedom, pooled over the rates); the difference detected at 80% power: {found}. "
        f"The comparison trains {power['seeds']} seeds.", "",
    ]  # fmt: skip


def decision_lines(compare: dict, seeds: int) -> list[str]:
    """The defaults decision (`readings.decide_defaults`'s rule) and the readings it rests on."""
    lines = ["## The defaults decision", ""]
    decision = decide_defaults(compare, seeds)
    if not decision["decided"]:
        return lines + [f"Not yet: the rule (`readings.decide_defaults`) {decision['why']}.", ""]

    def cells(differences: dict) -> list[str]:
        return [fmt_difference(d) for d in differences.values()]

    rows = [
        ["the chosen option (k = 2) minus default SR-PPO: does the option pay?", *cells(decision["option"]),
         "yes" if decision["option_pays"] else "no"],
        ["the chosen option, k = 2 minus k = 1: does the Pass@k weight pay?", *cells(decision["weight"]),
         "yes" if decision["weight_pays"] else "no"],
        *[[f"{ARM_LABELS[arm]} minus default SR-PPO: does it match (lower bounds >= -{NON_INFERIORITY:g})?",
           *cells(d), "yes" if decision["matches"][arm] else "no"]
          for arm, d in decision["cheaper"].items()],
    ]  # fmt: skip
    lines += table(["question", *(f"test {m}, equal updates" for m in decision["option"]), "answer"], rows)
    if decision["option_pays"]:
        verdict = "The chosen cold-start option pays: it becomes the default."
    elif decision["weight_pays"]:
        verdict = "The option does not pay, and the Pass@k weight does: the defaults stay."
    else:
        critic = "the default critic" if decision["critic"] is None else ARM_LABELS[decision["critic"]]
        verdict = f"Neither the option nor the Pass@k weight pays here: the recommendation is k = 1 with {critic}."
    return lines + ["", verdict, ""]


def mechanism_section(mechanisms: dict) -> list[str]:
    """The SmolLM2 study's mechanism tables (`real_study.report.mechanism_lines`), one per analysed arm."""
    from ..real_study.report import mechanism_lines

    lines = ["## The mechanism on trained checkpoints (stage `mechanism`)", ""]
    if not mechanisms:
        return lines + ["Not run yet (`--stage mechanism`, after the options and the sweep).", ""]
    for arm, mech in mechanisms.items():
        lines += [f"### {ARM_LABELS[arm]}", "", *mechanism_lines(mech)[2:]]
    return lines


def write_report(
    out_dir: str, meta: dict, base: dict, ceiling: dict, table_: dict, option, why, compare, option_runs, sweep,
    mechanisms: dict,
) -> str:  # fmt: skip
    os.makedirs(out_dir, exist_ok=True)
    compare_runs = distinct_runs(compare)
    lines = [
        "# The critic's cold start on SmolLM2-135M-Instruct",
        "",
        f"Generated by `python -m benchmarks.cold_start.study` on {meta['date']} ({meta['machine']}; workers: "
        f"{meta['workers']}, one torch thread each). The design and the options stage's rule are in "
        "`benchmarks/cold_start/study.py`'s docstring; finished runs are kept in `runs/`. The cheapest fix is the "
        f"value head at its own rate ({HEAD_RATE:g}).",
        "",
        *testbed_lines(base, ceiling, meta),
        *option_lines(table_, option, why, probe_ceiling(ceiling)),
        *sweep_lines(sweep),
        *compare_lines(compare, base["test"]),
        *decision_lines(compare, sweep["power"]["seeds"]),
        *mechanism_section(mechanisms),
        *time_lines(
            part_minutes(base, ceiling, option_runs, sweep["runs"], compare_runs, mechanisms),
            {
                "options": len(option_runs),
                "sweep": len(sweep["runs"]),
                "mechanism": len(mechanisms),
                "comparison": len(compare_runs),
            },
        ),
    ]
    path = os.path.join(out_dir, "README.md")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    results = {"meta": meta, "base": {k: v for k, v in base.items() if k != "selection"}, "ceilings": ceiling,
               "options": table_, "chosen": option, "why": option and why,
               "sweep": {m: {f"{r:g}": row for r, row in rates.items()} for m, rates in sweep["table"].items()},
               "rates": sweep["rates"],
               "compare": {arm: [r["name"] for r in runs] for arm, runs in compare.items()}}  # fmt: skip
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(finite_json(results), f, indent=1)
    return path

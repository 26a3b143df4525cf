# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The critic's cold start on SmolLM2-135M-Instruct: can the Pass@k weight act on a real model, and does it pay?

    python -m benchmarks.cold_start.study --stage base      # the testbed: base success per level, AUC ceilings
    python -m benchmarks.cold_start.study --stage options   # the cold-start options (validation split)
    python -m benchmarks.cold_start.study --stage sweep     # each method's policy rate (validation split)
    python -m benchmarks.cold_start.study --stage compare   # the arms, paired seeds (test split)
    python -m benchmarks.cold_start.study --stage mechanism # the paper's analyses on trained checkpoints
    python -m benchmarks.cold_start.study --stage report    # the report from the runs finished so far
    python -m benchmarks.cold_start.study --smoke ...       # the same code at toy sizes (the end-to-end test)

The SmolLM2 study (`reports/real_study/README.md`) found the separate critic flat: after 16 updates its `qhat(s_0)`
had an sd of 0.0004 over the test problems and an AUC of 0.52, so every Pass@k weight was the same. Its task gave the
weight little to act on besides: four levels of base success 0.08 to 0.27, the level explaining almost nothing.

- **The testbed (stage `base`).** `benchmarks.smollm2.task`'s `wide` levels, whose difficulty for the base model
  spans widely and whose form tells them apart (`echo2` "What is 47?", `add1`, `plus1` "What is 47 + 1?", `mul21`
  "What is 47 * 8?"), at most 90 problems per level (`WIDE`), split as the SmolLM2 study splits (8 for the level
  selection, 15% validation, 45% test, the rest for training: 128 training problems, one epoch of a 16-update run
  of 8 prompts). Every level is kept (`min_success` 0: the hard levels are the point). The stage measures the base
  model's success per level and its validation and test numbers, and the ceilings of a critic's AUC on the base
  model's outcomes: a value that knows only the level (its mean success on the other folds) and a ridge probe of the
  base checkpoint's features (what a fresh value head reads), both cross-validated (`real_study.probe`).
- **The options (stage `options`).** Default SR-PPO and each of `design.OPTIONS` on `OPTION_SEEDS`, at the study's
  rate, on the validation split. Each run records its critic's `qhat(s_0)` of every training batch's prompts before
  their rollouts (the trainer's `srppo_value` column, beside the outcomes) and of every validation problem at every
  quarter of the run. Read: the training batches' AUC per quarter, how closely the mean value follows each batch's
  success rate, the validation AUC per quarter (against the base model's validation outcomes, the same labels for
  every run) and its sd, the extra generated tokens (a warm start's, critic-only updates'), seconds, and the final
  validation pass@1.
  **Rule, fixed before any option ran:** no option is chosen until every option has a run on every stage seed; then,
  among the options whose every run spends at most `TOKEN_BUDGET` (10%) extra generated tokens over the tokens of
  the updates that moved the policy and ends at or above the base model's validation pass@1, and whose critic's
  validation `qhat(s_0)` spreads by an sd of at least `MIN_SPREAD` (0.05, a third of the ridge probe's 0.152) at
  the end (mean over its runs), the one with the highest mean validation AUC over its runs and their quarter points;
  `default` when none qualifies. The spread condition was added after the stage's first two runs (default SR-PPO,
  before any option had run): they ranked the validation problems at AUC 0.47 to 0.69 with values that spread by an
  sd of 0.0001 to 0.015, so the AUC alone would credit a critic whose Pass@k weights are all but equal.
- **The policy rates (stage `sweep`).** Default SR-PPO, GRPO and A*-PO at each of `SWEEP_RATES` on
  `OPTION_SEEDS`, validation split: every method gets the same learning-rate sweep on this testbed (A*-PO's
  regression loss has another scale than the clipped surrogate's, so no rate carries over between them).
  **Rule, fixed before the stage ran:** for each method, the rate with the highest mean validation pass@1 at the
  last update among its rates where no run ends below the base model's (the highest mean if every rate has one);
  none until every method has every rate on every stage seed. Every SR-PPO arm of the comparison trains at
  SR-PPO's rate.
- **The comparison (stage `compare`, after the options and the sweep).** `design.ARMS` on seeds 0 .. n - 1, the
  fewest of `SEED_CHOICES` (6 to 12) whose detectable SR-PPO - GRPO difference, from the sweep's spread, is at most
  `TARGET_DIFFERENCE` (0.05); test split, every arm on the same 128 training problems (so A*-PO's offline stage
  samples only the prompts the run visits, 8 each, with `filter_all_incorrect` off as no other arm filters),
  evaluated at half and at the end (GRPO's half is its equal-generated-token point). Read: test pass@1 and pass@8
  at equal updates, at equal generated tokens (warm starts and A*-PO's offline stage counted) and at equal seconds,
  paired by seed against default SR-PPO; and what each arm's critic knew (its training batches' AUC, how its mean
  followed their success, its test AUC and the spread of its Pass@2 weights). The arm `running mean k=1`
  (`critic_type="running_mean"`: no network, the outcomes' running mean) is the control, added after 38 of the
  other arms' runs had finished: paired with the chosen option at k = 1, it says what the learned critic's values
  add as a baseline.
- **The mechanism (stage `mechanism`, after the sweep and the options).** Seed 0 of the arms of `MECHANISM_ARMS`
  trained again with their weights saved (their results also serve the comparison), then the SmolLM2 study's
  analyses on 48 test problems x 8 rollouts (`real_study.study.analyze_checkpoint`): the batch NSR with and without
  the Pass@k weight, the hard / medium / easy shares of the update's weight, and the critic's values by difficulty
  bin, beside the paper's figures.

Runs are kept as JSON under `reports/cold_start/runs/<stage>-<settings>/` and reused; `--stop-after MINUTES` starts no
run after that long, so a stage splits over sessions. Two workers, one torch thread each.
"""

import json
import os
import sys
import time

from ..common import study_runner
from ..common.runs import REPO_ROOT, finite_json, quiet_offline_command, spec_record, torch_threads
from ..common.runspec import RunSpec
from ..real_study.base import open_study, write_json
from ..real_study.design import Study
from ..real_study.study import mechanism_of, train_and_analyze, train_stage
from .design import (
    ARMS,
    LEARNING_RATE,
    MECHANISM_ARMS,
    MECHANISM_SEED,
    OPTIONS,
    SEED_CHOICES,
    SMOKE_OPTIONS,
    SWEEP_METHODS,
    SWEEP_RATES,
    WIDE,
    WIDE_SMOKE,
    arm_options,
    arm_rate,
)
from .readings import choose_option, choose_rates, option_table, planned_seeds, slim_run, sweep_table
from .report import write_report

DEFAULT_OUTPUT = os.path.join(REPO_ROOT, "reports", "cold_start")
WORK_DIR = os.path.join(REPO_ROOT, ".cache", "cold_start")  # the trainers' output_dir (nothing is saved there)


def option_specs(study: Study, names, seeds) -> list[RunSpec]:
    """The options stage: default SR-PPO with each option of `names` on each of `seeds`, evaluated on the validation
    split at the end, its critic's values every quarter."""
    return [
        RunSpec(
            "sr-ppo",
            "on",
            LEARNING_RATE,
            seed,
            study.updates,
            study.prompts_per_update,
            study.updates,
            study.val_samples,
            options=OPTIONS[name],
        )  # fmt: skip
        for name in names
        for seed in seeds
    ]


def sweep_specs(study: Study, seeds) -> list[RunSpec]:
    """The sweep stage: each of `SWEEP_METHODS` at each of `SWEEP_RATES` on each of `seeds`, with its defaults,
    evaluated on the validation split at the end."""
    return [
        RunSpec(method, "on", rate, seed, study.updates, study.prompts_per_update, study.updates, study.val_samples)
        for rate in SWEEP_RATES
        for seed in seeds
        for method in SWEEP_METHODS
    ]


def compare_specs(study: Study, arms, seeds, chosen: tuple, rates: dict) -> list[tuple[str, RunSpec]]:
    """The comparison: each arm on each seed at its method's rate (`rates`), evaluated on the test split at half and
    at the end."""
    out = []
    for seed in seeds:
        for arm in arms:
            method, options = arm_options(arm, chosen)
            out.append((arm, RunSpec(method, "on", arm_rate(arm, rates), seed, study.updates, study.prompts_per_update,
                                     max(1, study.updates // 2), study.test_samples, options=options)))  # fmt: skip
    return out


def job_options(study: Study) -> dict:
    """What the study's jobs add to the SmolLM2 study's (`real_study.study.pending_jobs`): its own slimming, and the
    critic's held-out values every quarter of the run."""
    return {"finish": slim_run, "critic_every": max(1, study.updates // 4)}


def train(specs, folder, model_path, rows, study, split, samples, args, deadline) -> None:
    specs = list(dict.fromkeys(specs))  # an arm whose options are another's (the chosen option `default`) trains once
    train_stage(specs, folder, model_path, rows, study, split, samples, args.workers, args.work_dir, deadline,
                **job_options(study))  # fmt: skip


def ceilings(model_path: str, rows: dict, base: dict, study: Study) -> dict:
    """The AUC a critic could reach on the base model's validation and test outcomes: the level's mean (other
    folds), a ridge probe of the base checkpoint's features, and the problems' own rates (in-sample)."""
    from transformers import AutoModel, AutoTokenizer

    from ..real_study.probe import probe_run, prompt_features
    from ..smollm2.task import as_example

    start = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModel.from_pretrained(model_path, use_safetensors=True).eval()
    out = {}
    for split, samples in (("val", study.val_samples), ("test", study.test_samples)):
        features = prompt_features(model, tokenizer, [as_example(r)["prompt"] for r in rows[split]])  # (N, H)
        levels = [r["level"] for r in rows[split]]
        out[split] = probe_run(features, base[split]["correct_counts"], samples, levels)
    out["seconds"] = time.perf_counter() - start
    return out


def study_command(args) -> int:
    quiet_offline_command()
    study = WIDE_SMOKE if args.smoke else WIDE
    opened = open_study(study, args.model, args.output_dir, "cold_start")
    if opened is None:
        return 1
    model_path, key, base, rows = opened
    deadline = study_runner.stop_time(args.stop_after)
    ceilings_path = os.path.join(study_runner.stage_folder(args.output_dir, "base", key), "ceilings.json")
    if not os.path.isfile(ceilings_path):
        with torch_threads(1):
            write_json(ceilings_path, finite_json(ceilings(model_path, rows, base, study)))
    with open(ceilings_path) as f:
        ceiling = json.load(f)
    names = SMOKE_OPTIONS if args.smoke else tuple(OPTIONS)
    options_folder = study_runner.stage_folder(args.output_dir, "options", key)
    if args.stage == "options":
        seeds = study.sweep_seeds if args.seeds is None else tuple(args.seeds)
        train(option_specs(study, names, seeds), options_folder, model_path, rows, study, "val", study.val_samples,
              args, deadline)  # fmt: skip
    option_runs = study_runner.finished(options_folder)
    table = option_table(option_runs, base, study.val_samples)
    option, why = choose_option({n: table[n] for n in names}, study.sweep_seeds)
    sweep_folder = study_runner.stage_folder(args.output_dir, "sweep", key)
    if args.stage == "sweep":
        seeds = study.sweep_seeds if args.seeds is None else tuple(args.seeds)
        train(sweep_specs(study, seeds), sweep_folder, model_path, rows, study, "val", study.val_samples, args,
              deadline)  # fmt: skip
    sweep_runs = study_runner.finished(sweep_folder)
    sweep = sweep_table(sweep_runs, base["val"]["pass@1"])
    rates, rates_why = choose_rates(sweep, study.sweep_seeds)
    power = planned_seeds(sweep)
    compare_folder = study_runner.stage_folder(args.output_dir, "compare", key)
    if args.stage == "compare":
        if option is None or rates is None:
            missing = f"the options stage ({why})" if option is None else f"the sweep ({rates_why})"
            print(f"cold_start: {missing} has not chosen: run that stage first.", file=sys.stderr)
            return 1
        count = args.compare_seeds or power["seeds"]
        seeds = range(count) if args.seeds is None else args.seeds
        specs = compare_specs(study, args.arms, seeds, OPTIONS[option], rates)
        train([s for _, s in specs], compare_folder, model_path, rows, study, "test", study.test_samples, args,
              deadline)  # fmt: skip
    mechanisms = {}
    if args.stage == "mechanism" and (option is None or rates is None):
        print("cold_start: the mechanism trains the comparison's runs: run --stage options and --stage sweep first.",
              file=sys.stderr)  # fmt: skip
        return 1
    if option is not None and rates is not None:
        for arm, spec in compare_specs(study, MECHANISM_ARMS, [MECHANISM_SEED], OPTIONS[option], rates):
            folder = study_runner.stage_folder(args.output_dir, f"mechanism-{arm.replace(' ', '_')}", key)
            if args.stage == "mechanism":
                with torch_threads(1):
                    train_and_analyze(spec, study, model_path, rows, folder, args.work_dir, compare_folder,
                                      **job_options(study))  # fmt: skip
            found = mechanism_of(folder, spec)
            if found is not None:
                mechanisms[arm] = found
    compare = {}
    if option is not None and rates is not None:
        runs = {json.dumps(r["spec"], sort_keys=True): r for r in study_runner.finished(compare_folder)}
        most = max(args.compare_seeds or 0, SEED_CHOICES[-1])  # every seed the comparison may have trained
        for arm, spec in compare_specs(study, ARMS, range(most), OPTIONS[option], rates):
            found = runs.get(json.dumps(spec_record(spec), sort_keys=True))
            if found is not None:
                compare.setdefault(arm, []).append(found)
    meta = {**study_runner.study_meta(study, model_path, args.workers, rows), "key": key}
    sweep_state = {"table": sweep, "rates": rates, "why": rates_why, "power": power, "runs": sweep_runs}
    path = write_report(args.output_dir, meta, base, ceiling, table, option, why, compare, option_runs, sweep_state,
                        mechanisms)  # fmt: skip
    print(f"report: {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = study_runner.study_parser(__doc__, ("base", "options", "sweep", "compare", "mechanism", "report"))
    parser.add_argument(
        "--compare-seeds",
        type=int,
        default=None,
        help="the comparison's seeds 0 .. n - 1 (default: the fewest the sweep's spread asks for)",
    )
    parser.add_argument("--arms", nargs="+", choices=list(ARMS), default=list(ARMS), help="the comparison's arms")
    stop_help = "minutes after which no run starts (those under way finish; a rerun trains the rest)"
    study_runner.run_arguments(parser, DEFAULT_OUTPUT, WORK_DIR, stop_help, "the trainers' output folders")
    return study_runner.run_command(parser, study_command, argv)


if __name__ == "__main__":
    raise SystemExit(main())

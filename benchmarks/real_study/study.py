# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`make bench-real-study`: a paired, powered comparison of SR-PPO's methods and critics on SmolLM2-135M-Instruct.

    python -m benchmarks.real_study.study --stage sweep      # 1. the schedule, chosen on the validation split
    python -m benchmarks.real_study.study --stage mechanism  # the paper's analyses on a trained SR-PPO checkpoint
    python -m benchmarks.real_study.study --stage compare    # 2. the methods and critics on the test split
    python -m benchmarks.real_study.study --stage stability  # why some seeds never take off (validation split)
    python -m benchmarks.real_study.study --stage lora       # the LoRA policy's learning rate (validation split)
    python -m benchmarks.real_study.study --stage probe      # could the critic's features tell the problems apart?
    python -m benchmarks.real_study.study --stage head       # a faster value head (validation split)
    python -m benchmarks.real_study.study --stage report     # the report from the runs finished so far, no training
    python -m benchmarks.real_study.study --smoke ...        # the same code at toy sizes (the end-to-end test)

`make bench-real` (`reports/real_model`) could not separate any two methods: 24 held-out problems, 3 seeds, one seed
in three far behind the others. This study is designed to decide, or to say that it cannot:

- **Paired.** Every method runs on the same seeds (the seed fixes the data order and the sampling stream), trains on
  the same problems and is evaluated on the same held-out problems with the same evaluation seed. The report's
  comparisons are per-seed differences against a reference method, with a 95% Student-t interval over seeds
  (`benchmarks.common.stats.paired_t`; a bootstrap is too narrow at these seed counts).
- **Held-out size.** The kept levels' problems are split by level into fixed fractions (`VAL_FRACTION`,
  `TEST_FRACTION`, after `SELECT_PROBLEMS` per level for the level selection): 233 test problems x 8 samples and
  78 validation problems x 4 samples with the four levels of `benchmarks.smollm2.task`.
- **Stability first (stage `sweep`).** In the pilot (`reports/real_model/results.json`) one seed of every
  single-rollout method stood far behind: the same seed for all three, whose runs drew the same first rollouts, and
  whose curves were still rising at the last update (learning rate 1e-5, 16 updates). The sweep trains default
  SR-PPO and GRPO at `SWEEP_LEARNING_RATES` on `SWEEP_SEEDS` (seeds the comparison does not use) and reads
  validation pass@1 only.
  **Rule, fixed before the sweep ran:** the learning rate with the highest mean validation pass@1 at the last update,
  averaged over both methods and the sweep's seeds, among those where no run ends below the base model's validation
  pass@1; every method of the comparison uses it. No rate is chosen until every rate has both methods on every sweep
  seed.
- **The mechanism (stage `mechanism`, after the sweep).** Default SR-PPO trained at the chosen rate on seed 0 with
  its weights saved, then `trl-srppo analyze bins`, `nsr`, `critic-export` and `critic-quality` on test problems:
  the batch NSR with and without the Pass@k weight, each difficulty bin's share of the update weight, the critic's
  AUC (labelled by the verified outcome, no external judge) and its values by bin.
- **The critic (stage `critic`, after the mechanism).** The mechanism found the separate critic flat after 16
  updates at the trainer's default critic rate (the policy's): `qhat(s_0)` 0.075 in every difficulty bin, so the
  Pass@k weight was uniform and SR-PPO was REINFORCE with a constant baseline. Stage `critic` trains default SR-PPO
  at the chosen policy rate with `critic_learning_rate` = r x that rate for r in `CRITIC_LR_RATIOS`, on the sweep's
  seeds, and reads the validation split only. Each evaluation records every validation problem's `qhat(s_0)` and
  its pooled AUC against the evaluation's outcomes (`bench.critic_point`).
  **Rule, fixed before the stage ran:** no ratio is chosen until every ratio has a run on every sweep seed; then,
  among the ratios where no run ends below the base model's validation pass@1 and every run's AUC is defined, the
  one with the highest mean AUC at the last update, provided it beats ratio 1's mean AUC by at least
  `CRITIC_MIN_GAIN`; otherwise ratio 1. Every arm that has a critic trains at the chosen critic rate in the
  comparison (an assumption for the policy head and the LoRA critics, whose parameters differ from the separate
  critic's: their AUCs on the test split are recorded, so the report can check it); runs trained at another critic
  rate stay in `runs/` and are left out of the comparison's table.
- **The critic over a longer run (stage `horizon`, descriptive).** Default SR-PPO at the chosen policy rate for
  `HORIZON_FACTOR` x the study's updates, at the critic ratios `HORIZON_RATIOS`, on one sweep seed, with the
  validation split evaluated every `updates` updates: does the critic's `qhat(s_0)` come to tell the prompts apart
  when it has more batches to learn from? No choice is made from it.
- **Stability (stage `stability`, after the comparison's default runs).** Some seeds of default SR-PPO never took off
  in the comparison. The stage trains one-change variants of the schedule (batch, critic warm-up, the value head's
  start) on those seeds and on control seeds, on the validation split; its rule, fixed before it ran, is in
  `benchmarks/real_study/stability.py`. Once the rule chooses a variant, `--stage compare` trains every arm under it
  (its batch for every method, its critic options for every arm with a critic), and the report keeps the runs of the
  default schedule in a section of their own.
- **The LoRA policy's learning rate (stage `lora`, after the stability stage).** At the full model's chosen rate both
  LoRA arms (`LORA_ARMS`) stayed at the base model: an adapter's few parameters move little per step at that rate.
  The stage (once the stability stage has chosen a schedule) trains both LoRA arms at each of `LORA_LEARNING_RATES`
  on the sweep's seeds, under that schedule, with the options the comparison gives them, and reads the validation
  split only. The `policy_lora` critic's rate is the critic stage's: with its default ratio (the one it chose here)
  the trainer's default, the policy's rate, so the LoRA rate; with another ratio, that ratio x the full model's rate.
  **Rule, fixed before the stage ran:** the sweep's rule over these rates and the two LoRA arms (the highest mean
  validation pass@1 at the last update, averaged over both arms and the sweep's seeds, among the rates where no run
  ends below the base model's validation pass@1; none until every rate has both arms on every sweep seed). Once it
  chooses, `--stage compare` trains the LoRA arms at that rate, and the report reads their runs under the chosen
  schedule at it; until then they train at the full model's rate.
- **A linear probe of the critic's features (stage `probe`, descriptive, no training).** The separate critic ended
  every run with nearly one value for every problem. The stage asks whether the features its value head reads carry
  the problems' difficulty at all: `benchmarks/real_study/probe.py` (its docstring has the method). No choice is made
  from it.
- **A faster value head (stage `head`, after the stability stage, descriptive).** Default SR-PPO under the chosen
  schedule with `critic_head_learning_rate` at a few rates, on the sweep's seeds, validation split only:
  `benchmarks/real_study/head.py`. No choice is made from it.
- **Power (stage `compare`, after the sweep).** The report computes, from the sweep's runs (the spread around each
  rate's mean, pooled over the rates), the seeds' standard deviation of a method's validation pass@1 and of the
  SR-PPO - GRPO paired difference, and the smallest difference that `n` seeds detect at 80% power
  (`(t_{n-1, 0.975} + t_{n-1, 0.80}) s / sqrt(n)`), before the comparison runs. The comparison trains the fewest
  seeds of `SEED_CHOICES` that detect `TARGET_DIFFERENCE` (0.05 pass@1), or the most of them.

Runs are kept as JSON under `reports/real_study/runs/<stage>-<settings>/`, in the repository: a later session (or
machine) resumes where the last one stopped, and the report reads every finished run. Two workers, one torch thread
each. `--stop-after MINUTES` starts no run after that long (the runs under way finish): a stage split over sessions.
"""

import json
import math
import os
import sys
import time
from dataclasses import replace

import numpy as np

from trl_srppo.method.srppo_config import CRITIC_LR_RATIO

from ..common import study_runner
from ..common.curves import point_at
from ..common.runs import REPO_ROOT, cached_result, finite_json, quiet_offline_command, spec_record, torch_threads
from ..common.runspec import LORA_RANK_OPTION, RunSpec
from ..common.study_runner import (
    finished,
    run_all,
    run_arguments,
    run_command,
    stage_folder,
    stop_time,
    study_meta,
    study_parser,
)
from .base import open_study, write_json
from .bench import run_job
from .design import (
    ARMS,
    CRITIC_LR_RATIOS,
    CRITIC_MIN_GAIN,
    CRITIC_RATE_OPTION,
    DEFAULT,
    DEFAULT_RATIO,
    FULL,
    HORIZON_FACTOR,
    HORIZON_RATIOS,
    HORIZON_SEED,
    LORA_ARMS,
    LORA_LEARNING_RATES,
    SMOKE,
    SWEEP_LEARNING_RATES,
    SWEEP_METHODS,
    SWEEP_SEEDS,
    Study,
    arm_options,
    critic_rate,
    variants,
)
from .head import head_specs, head_table
from .probe import probe_stage
from .readings import arm_of, final_metric, power, weight_ratio
from .report import write_report
from .stability import choose_variant, stage_seeds, stage_table

DEFAULT_OUTPUT = os.path.join(REPO_ROOT, "reports", "real_study")
WORK_DIR = os.path.join(REPO_ROOT, ".cache", "real_study")  # the trainers' output_dir, the checkpoint analysed


# ---- the runs -------------------------------------------------------------------------------------------------------


def sweep_specs(study: Study, seeds=SWEEP_SEEDS) -> list[RunSpec]:
    """Stage 1: default SR-PPO and GRPO at each sweep learning rate and seed, validation curve at half and end."""
    return [
        RunSpec(
            method,
            "on",
            lr,
            seed,
            study.updates,
            study.prompts_per_update,
            max(1, study.updates // 2),
            study.val_samples,
        )  # fmt: skip
        for lr in SWEEP_LEARNING_RATES
        for seed in seeds
        for method in SWEEP_METHODS
    ]


def critic_specs(study: Study, learning_rate: float, seeds) -> list[RunSpec]:
    """The critic stage: default SR-PPO at the chosen policy rate and each critic ratio, evaluated on the validation
    split at half and at the end."""
    out = []
    for ratio in CRITIC_LR_RATIOS:
        options = arm_options("sr-ppo", critic_rate(learning_rate, ratio))
        for seed in seeds:
            out.append(RunSpec("sr-ppo", "on", learning_rate, seed, study.updates, study.prompts_per_update,
                               max(1, study.updates // 2), study.val_samples, options=options))  # fmt: skip
    return out


def horizon_specs(study: Study, learning_rate: float, seed: int = HORIZON_SEED) -> list[RunSpec]:
    """The horizon stage's runs: default SR-PPO for `HORIZON_FACTOR` x the study's updates at each of
    `HORIZON_RATIOS`, evaluated on the validation split every `study.updates` updates."""
    out = []
    for ratio in HORIZON_RATIOS:
        options = arm_options("sr-ppo", critic_rate(learning_rate, ratio))
        out.append(RunSpec("sr-ppo", "on", learning_rate, seed, HORIZON_FACTOR * study.updates,
                           study.prompts_per_update, study.updates, study.val_samples, options=options))  # fmt: skip
    return out


def stability_specs(study: Study, learning_rate: float, seeds, rate: float | None = None) -> list[RunSpec]:
    """The stability stage (`benchmarks.real_study.stability`): default SR-PPO and each one-change variant of its
    schedule on each of `seeds`, at the chosen rates, evaluated on the validation split at half and at the end."""
    out = []
    for seed in seeds:
        for prompts, options in variants(study.updates, study.prompts_per_update).values():
            out.append(RunSpec("sr-ppo", "on", learning_rate, seed, study.updates, prompts, max(1, study.updates // 2),
                               study.val_samples, options=arm_options("sr-ppo", rate, options)))  # fmt: skip
    return out


def lora_specs(study: Study, seeds, rate: float | None = None, schedule: tuple | None = None) -> list[RunSpec]:
    """The LoRA stage: each of `LORA_ARMS` at each of `LORA_LEARNING_RATES` on each of `seeds`, with the critic
    stage's `critic_learning_rate` `rate` (`None`: the trainer's default, the policy's rate) under the stability
    stage's `schedule` (`None`: the study's batch, no option), as the comparison trains them, evaluated on the
    validation split at half and at the end."""
    prompts, schedule_options = schedule or (study.prompts_per_update, ())
    out = []
    for lr in LORA_LEARNING_RATES:
        for seed in seeds:
            for arm in LORA_ARMS:
                out.append(RunSpec(ARMS[arm][0], "on", lr, seed, study.updates, prompts, max(1, study.updates // 2),
                                   study.val_samples, options=arm_options(arm, rate, schedule_options)))  # fmt: skip
    return out


def critic_table(results: list[dict], learning_rate: float, base_val: float) -> dict:
    """Per critic ratio: the runs' seeds, final validation pass@1, the critic's AUC and the spread (sd over the
    problems) of its `qhat(s_0)` at the last update, and whether any run ends below the base model."""
    table = {}
    for ratio in CRITIC_LR_RATIOS:
        rate = critic_rate(learning_rate, ratio)
        runs = sorted(
            (
                r
                for r in results
                if r["spec"]["learning_rate"] == learning_rate
                and dict(map(tuple, r["spec"]["options"])).get(CRITIC_RATE_OPTION) == rate
            ),
            key=lambda r: r["spec"]["seed"],
        )
        finals = [final_metric(r) for r in runs]
        aucs = [r["final"].get("critic_auc_s0", float("nan")) for r in runs]
        table[ratio] = {
            "rate": critic_rate(learning_rate, ratio) or learning_rate * CRITIC_LR_RATIO,
            "seeds": [r["spec"]["seed"] for r in runs],
            "final": finals,
            "auc": aucs,
            "value_sd": [
                float(np.std(r["final"]["critic_s0"])) if "critic_s0" in r["final"] else float("nan") for r in runs
            ],  # fmt: skip
            "value_mean": [
                float(np.mean(r["final"]["critic_s0"])) if "critic_s0" in r["final"] else float("nan") for r in runs
            ],  # fmt: skip
            "weight_ratio": [
                weight_ratio(r["final"]["critic_s0"], r["config"]["pass_at_k"])
                for r in runs
                if "critic_s0" in r["final"]
            ],  # fmt: skip
            "mean_auc": float(np.mean(aucs)) if aucs else float("nan"),
            "below_base": any(v < base_val for v in finals),
        }
    return table


def choose_critic_ratio(table: dict, seeds=SWEEP_SEEDS) -> tuple[float | None, str]:
    """The critic stage's rule (the module's docstring): `(ratio, why)`, `(None, why)` until every ratio has every
    one of `seeds`."""
    wanted = sorted(seeds)
    if any(sorted(table.get(ratio, {}).get("seeds", [])) != wanted for ratio in CRITIC_LR_RATIOS):
        return None, "not every ratio has run on every sweep seed"
    eligible = {r: row for r, row in table.items() if not row["below_base"] and math.isfinite(row["mean_auc"])}
    if not eligible:
        return DEFAULT_RATIO, "every ratio has a run below the base model or an undefined AUC: the default stays"
    best = max(eligible, key=lambda r: eligible[r]["mean_auc"])
    if best == DEFAULT_RATIO:
        return best, "the default's mean AUC is the highest"
    default_auc = table[DEFAULT_RATIO]["mean_auc"]
    gain = eligible[best]["mean_auc"] - default_auc
    if math.isfinite(default_auc) and gain < CRITIC_MIN_GAIN:
        return DEFAULT_RATIO, f"the best, ratio {best}, gains {gain:.3f} AUC over the default: under {CRITIC_MIN_GAIN}"
    return best, f"the highest mean AUC, {eligible[best]['mean_auc']:.3f}, against the default's {default_auc:.3f}"


def compare_specs(
    study: Study,
    learning_rate: float,
    seeds,
    arms,
    rate: float | None = None,
    schedule: tuple | None = None,
    lora_rate: float | None = None,
) -> list[tuple[str, RunSpec]]:
    """Stage 2: each arm on each seed at the chosen rate (the `LORA_ARMS` at the LoRA stage's `lora_rate` once it has
    chosen one; and the critic stage's `critic_learning_rate`, `rate`, for the arms with a critic) under the stability
    stage's `schedule`, `(prompts per update, options)` (`None`: the study's batch, no option): its batch for every
    arm, its options for every arm with a critic. GRPO arms are evaluated at half their updates too (its
    equal-generated-token point: twice the completions per update), the prompt-sampling arms at three quarters (the
    pool's forward makes their updates slower: their equal-wall-clock point lies between the two evaluations); the
    others at the end only."""
    prompts, schedule_options = schedule or (study.prompts_per_update, ())
    out = []
    for seed in seeds:
        for arm in arms:
            method, options = ARMS[arm][0], arm_options(arm, rate, schedule_options)
            every = study.updates
            if method == "grpo":
                every = max(1, study.updates // 2)
            elif "prompt_sampling" in dict(options):
                every = max(1, 3 * study.updates // 4)
            lr = lora_rate if arm in LORA_ARMS and lora_rate is not None else learning_rate
            spec = RunSpec(method, "on", lr, seed, study.updates, prompts, every, study.test_samples,
                           options=options)  # fmt: skip
            out.append((arm, spec))
    return out


def stability_state(study: Study, rate: float | None, compare: list[dict], folder: str) -> dict:
    """The stability stage as its finished runs in `folder` stand, from the comparison's finished runs `compare` at
    the chosen policy rate: its slow and control seeds, its table, the rule's variant (`None` until it chooses) and
    why, the comparison's default SR-PPO runs, and the schedule the comparison trains under, `(prompts per update,
    options)`: the chosen variant's, the default's until then."""
    schedules = variants(study.updates, study.prompts_per_update)
    defaults = [r for r in compare if arm_of(r, rate, schedules[DEFAULT]) == "sr-ppo"]
    slow, controls = stage_seeds(defaults, study.control_seeds)
    found = stage_table(finished(folder), schedules, rate)
    variant, why = choose_variant(found, slow, controls)
    return {"table": found, "slow": slow, "controls": controls, "variant": variant, "why": why,
            "default_runs": defaults, "schedule": schedules[variant or DEFAULT]}  # fmt: skip


def run_file(spec: RunSpec, study: Study) -> str:
    """The name of a run's file in its stage's folder: `spec.name` (which leaves the batch out), with the prompts per
    update appended where they are not the study's."""
    batch = "" if spec.prompts_per_update == study.prompts_per_update else f"_b{spec.prompts_per_update}"
    return spec.name + batch


def pending_jobs(specs, folder: str, model_path: str, rows: dict, study: Study, split: str, samples: int,
                 work_root: str | None = None, **job_options):  # fmt: skip
    """(finished results, jobs still to train) for `specs` whose results live in `folder` (`study_runner.pending_jobs`,
    each in its `run_file`); `job_options` are more fields of each job, or replace its own (another `finish`, a
    `critic_every`: `bench.run_job`)."""

    def job(spec: RunSpec, name: str) -> dict:
        return {
            "model": model_path,
            "train": rows["train"],
            "test": rows[split],
            "budget": study.budget(samples, spec.learning_rate),
            "output_dir": os.path.join(work_root or WORK_DIR, os.path.basename(folder), name),  # nothing saved
            "finish": slim,  # the worker writes the result once, slimmed
            **job_options,
        }

    return study_runner.pending_jobs(specs, folder, job, lambda spec: run_file(spec, study))


def slim(result: dict) -> dict:
    """A run's result without what the report does not read (keeps the committed JSON small)."""
    out = {k: v for k, v in result.items() if k != "logs"}
    out["reward_by_update"] = [entry.get("reward") for entry in result.get("logs", []) if "reward" in entry]
    return out


# ---- the mechanism: `trl-srppo analyze` on a trained SR-PPO checkpoint ----------------------------------------------

MECHANISM_PROMPTS = 48  # test problems the analyses sample, 8 rollouts each
MECHANISM_SEED = 0  # the comparison's seed whose SR-PPO run is analysed (trained again here, with its weights saved)
ANALYSES = ("bins", "nsr", "critic-export", "critic-quality")


def mechanism_rows(test_rows: list[dict], count: int = MECHANISM_PROMPTS) -> list[dict]:
    """`count` test problems spread evenly over the split (the levels in their test shares)."""
    return [test_rows[i * len(test_rows) // count] for i in range(min(count, len(test_rows)))]


def label_by_outcome(export_path: str, labelled_path: str) -> int:
    """Label `trl-srppo analyze critic-export`'s file with the verifier in place of an external judge: every
    sentence's `state_correct` is its solution's outcome (is the solution still on a correct track = does it end
    correct); `sentence_correct` stays unlabelled. Returns the number of labelled sentences."""
    from trl_srppo.tasks.registry import is_correct

    count = 0
    with open(export_path, encoding="utf-8") as src, open(labelled_path, "w", encoding="utf-8") as dst:
        for line in src:
            record = json.loads(line)
            correct = record.get("reward") is not None and is_correct(float(record["reward"]))
            for sentence in record["sentences"]:
                sentence["state_correct"] = correct
                count += 1
            dst.write(json.dumps(record) + "\n")
    return count


def analyze(name: str, checkpoint: str, out_dir: str, extra: list[str]) -> dict:
    """`trl-srppo analyze <name>` on the checkpoint and its critic (in this process, one torch thread); its
    summary.json."""
    from trl_srppo.analysis.cli import main as analyze_main
    from trl_srppo.analysis.report import SUMMARY, decode_special_floats

    critic = os.path.join(checkpoint, "critic")
    argv = [name, "--model_name_or_path", checkpoint, "--critic_model_name_or_path", critic, "--output_dir", out_dir,
            "--device", "cpu", *extra]  # fmt: skip
    if analyze_main(argv) != 0:
        raise RuntimeError(f"trl-srppo analyze {name} failed")
    with open(os.path.join(out_dir, SUMMARY)) as f:
        return decode_special_floats(json.load(f))


def mechanism(study: Study, chosen: float, model_path: str, rows: dict, folder: str, work_root: str,
              compare_folder: str | None = None) -> dict:  # fmt: skip
    """Train SR-PPO on `MECHANISM_SEED` at the chosen rate with its final weights saved, then run the analyses on
    `mechanism_rows` of the test split (`train_and_analyze`). The run is the comparison's default SR-PPO run of that
    seed (the same spec), so the comparison does not train it again."""
    spec = compare_specs(study, chosen, [MECHANISM_SEED], ["sr-ppo"])[0][1]
    return train_and_analyze(spec, study, model_path, rows, folder, work_root, compare_folder)


def train_and_analyze(spec, study: Study, model_path: str, rows: dict, folder: str, work_root: str,
                      compare_folder: str | None = None, **job_options) -> dict | None:  # fmt: skip
    """Train `spec` on the test split with its final weights saved (once: its result is kept in `folder` as
    `run.json`, and also goes to `compare_folder` when that has none), then the analyses of the checkpoint on
    `mechanism_rows` of the test split (bins, nsr with and without the Pass@k weight, critic-export labelled by
    outcome, critic-quality), each kept in `folder` and reused; the finished analyses (`finished_mechanism`).
    `job_options` go to the job (`pending_jobs`). With every analysis of `spec` kept, they are returned as they are:
    the checkpoint, under `work_root`, need not outlive the machine that trained it."""
    done = mechanism_of(folder, spec)
    if done is not None:
        return done
    work = os.path.join(work_root, os.path.basename(folder))
    checkpoint = os.path.join(work, "checkpoint")
    run_path = os.path.join(folder, "run.json")
    if cached_result(run_path, spec) is None or not os.path.isfile(os.path.join(checkpoint, "critic", "config.json")):
        for name in ANALYSES:  # analyses of another checkpoint
            if os.path.isfile(os.path.join(folder, f"{name}.json")):
                os.remove(os.path.join(folder, f"{name}.json"))
        job = pending_jobs([spec], folder, model_path, rows, study, "test", study.test_samples, work_root,
                           **job_options)[1][0]  # fmt: skip
        result = run_job({**job, "result_path": run_path, "save_dir": checkpoint})
        compare_path = None if compare_folder is None else os.path.join(compare_folder, f"{spec.name}.json")
        if compare_path is not None and cached_result(compare_path, spec) is None:
            write_json(compare_path, result)
    analyze_checkpoint(checkpoint, mechanism_rows(rows["test"]), study.max_completion_length, folder, work)
    return finished_mechanism(folder)


def analyze_checkpoint(checkpoint: str, rows: list[dict], max_completion_length: int, folder: str, work: str) -> None:
    """`trl-srppo analyze` bins, nsr, critic-export (labelled by outcome) and critic-quality on the trained
    `checkpoint` and its critic, sampling 8 rollouts of each of `rows`; each summary kept in `folder` as
    `<analysis>.json` (with its seconds) and reused, the analyses' files under `work`."""
    os.makedirs(work, exist_ok=True)
    prompts = os.path.join(work, "prompts.jsonl")
    with open(prompts, "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"problem": r["problem"], "answer": r["answer"]}) + "\n" for r in rows)
    sampling = ["--dataset_name", prompts, "--task", "arithmetic", "--num_generations", "8",
                "--max_completion_length", str(max_completion_length), "--seed", "0"]  # fmt: skip
    for name in ("bins", "nsr", "critic-export"):
        path = os.path.join(folder, f"{name}.json")
        if not os.path.isfile(path):
            start = time.perf_counter()
            summary = analyze(name, checkpoint, os.path.join(work, name), sampling)
            summary.pop("file", None)  # a path on this machine
            write_json(path, {"summary": summary, "seconds": time.perf_counter() - start})
    path = os.path.join(folder, "critic-quality.json")
    if not os.path.isfile(path):
        from trl_srppo.analysis.critic_quality import LABELLING_FILE

        labelled = os.path.join(work, "labelled.jsonl")
        label_by_outcome(os.path.join(work, "critic-export", LABELLING_FILE), labelled)
        start = time.perf_counter()
        summary = analyze("critic-quality", checkpoint, os.path.join(work, "critic-quality"), ["--labelled", labelled])
        write_json(path, {"summary": summary, "seconds": time.perf_counter() - start})


# ---- the stages' analyses -------------------------------------------------------------------------------------------


def sweep_table(results: list[dict], base_val: float) -> dict:
    """Per learning rate: each method's validation pass@1 per seed (half-way and at the end), their mean, and whether
    any run ends below the base model."""
    table = {}
    for lr in sorted({r["spec"]["learning_rate"] for r in results}):
        row = {"methods": {}, "below_base": False}
        for method in SWEEP_METHODS:
            runs = sorted((r for r in results if r["spec"]["learning_rate"] == lr and r["spec"]["method"] == method),
                          key=lambda r: r["spec"]["seed"])  # fmt: skip
            finals = [final_metric(r) for r in runs]
            row["methods"][method] = {
                "seeds": [r["spec"]["seed"] for r in runs],
                "final": finals,
                "half": [point_at(r, r["spec"]["updates"] // 2) for r in runs],
                "mean": float(np.mean(finals)) if finals else float("nan"),
            }
            row["below_base"] |= any(v < base_val for v in finals)
        means = [m["mean"] for m in row["methods"].values()]
        row["score"] = float(np.mean(means))
        table[lr] = row
    return table


def choose_learning_rate(table: dict, seeds=SWEEP_SEEDS, candidates=SWEEP_LEARNING_RATES) -> float | None:
    """The sweep's rule (and the LoRA stage's, over `LORA_LEARNING_RATES`): `None` until every rate of `candidates`
    has both methods on every one of `seeds`; then the highest score among the rates where no run ends below the base
    model (`None` if every rate has one)."""
    rates = {lr: table.get(lr) for lr in candidates}
    wanted = sorted(seeds)
    if any(
        row is None or any(sorted(m["seeds"]) != wanted for m in row["methods"].values()) for row in rates.values()
    ):
        return None
    eligible = {lr: row for lr, row in rates.items() if not row["below_base"]}
    return max(eligible, key=lambda lr: eligible[lr]["score"]) if eligible else None


# ---- the command ----------------------------------------------------------------------------------------------------


def train_stage(specs, folder, model_path, rows, study, split, samples, workers, work_root,
                deadline: float | None = None, **job_options) -> list[dict]:  # fmt: skip
    done, jobs = pending_jobs(specs, folder, model_path, rows, study, split, samples, work_root, **job_options)
    print(f"  {len(jobs)} runs to train, {len(done)} finished before")
    start = time.perf_counter()
    run_all(jobs, workers, run_job, deadline=deadline)  # each worker writes its run's (slimmed) result in `folder`
    print(f"  trained in {(time.perf_counter() - start) / 60:.1f} minutes")
    return done


def compare_runs(folder: str, learning_rate: float | None, lora_rate: float | None = None) -> list[dict]:
    """The comparison's finished runs at the chosen policy `learning_rate`, and a LoRA policy's at the LoRA stage's
    `lora_rate` (another rate's are not in it; `readings.arm_of` tells the two LoRA rates' runs apart)."""

    def wanted(result: dict) -> bool:
        lora = LORA_RANK_OPTION in dict(map(tuple, result["spec"]["options"]))
        return result["spec"]["learning_rate"] in ((learning_rate, lora_rate) if lora else (learning_rate,))

    return [r for r in finished(folder) if wanted(r)]


def lora_state(study: Study, runs: list[dict], rate: float | None, schedule: tuple | None, base_val: float) -> dict:
    """The LoRA stage as its finished `runs` stand: those of the `LORA_ARMS` at the critic stage's `rate` under the
    stability stage's `schedule` (`None`: no schedule yet, so no run), their table by learning rate (`sweep_table`:
    the arms' methods are the sweep's) and the rule's rate (`None` until it chooses)."""
    runs = [r for r in runs if schedule is not None and arm_of(r, rate, schedule) in LORA_ARMS]
    table = sweep_table(runs, base_val) if runs else {}
    chosen = choose_learning_rate(table, study.sweep_seeds, LORA_LEARNING_RATES) if table else None
    return {"runs": runs, "table": table, "rate": chosen}


def probed_runs(compare: list[dict], rate: float | None) -> list[dict]:
    """The probe's runs: the comparison's default SR-PPO runs (any batch) whose critic's values were recorded."""
    return [r for r in compare if arm_of(r, rate) == "sr-ppo" and "critic_auc_s0" in r["final"]]


def finished_mechanism(folder: str) -> dict | None:
    """The mechanism stage's results when all of them are there."""
    names = ("run", *ANALYSES)
    if not all(os.path.isfile(os.path.join(folder, f"{name}.json")) for name in names):
        return None
    out = {}
    for name in names:
        with open(os.path.join(folder, f"{name}.json")) as f:
            out[name] = json.load(f)
    from trl_srppo.analysis.report import decode_special_floats

    out = decode_special_floats(out)
    counts = out["bins"]["summary"]["bin_counts"]
    prompts = sum(counts.values()) + out["bins"]["summary"]["num_unbinned"]
    return {**out, "spec": out["run"]["spec"], "prompts": prompts}


def mechanism_of(folder: str, spec: RunSpec) -> dict | None:
    """The mechanism stage's results in `folder` (`finished_mechanism`) when all of them are there and analyse a run
    of `spec`."""
    found = finished_mechanism(folder)
    return found if found is not None and found["spec"] == spec_record(spec) else None


def study_command(args) -> int:
    quiet_offline_command()
    study = SMOKE if args.smoke else FULL
    if args.updates is not None:
        study = replace(study, updates=args.updates)
    opened = open_study(study, args.model, args.output_dir, "real_study")
    if opened is None:
        return 1
    model_path, key, base, rows = opened
    deadline = stop_time(args.stop_after)
    sweep_folder = stage_folder(args.output_dir, "sweep", key)
    if args.stage == "sweep":
        seeds = study.sweep_seeds if args.seeds is None else tuple(args.seeds)
        train_stage(sweep_specs(study, seeds), sweep_folder, model_path, rows, study, "val", study.val_samples,
                    args.workers, args.work_dir, deadline)  # fmt: skip
    sweep = finished(sweep_folder)
    table = sweep_table(sweep, base["val"]["pass@1"]) if sweep else {}
    chosen = choose_learning_rate(table, study.sweep_seeds) if table else None
    if args.stage in ("mechanism", "critic", "horizon", "compare", "lora", "probe") and chosen is None:
        print("real_study: the sweep has not chosen a learning rate yet: run --stage sweep first.", file=sys.stderr)
        return 1
    mechanism_folder = stage_folder(args.output_dir, "mechanism", key)
    compare_folder = stage_folder(args.output_dir, "compare", key)
    critic_folder = stage_folder(args.output_dir, "critic", key)
    if args.stage == "mechanism":
        with torch_threads(1):
            mechanism(study, chosen, model_path, rows, mechanism_folder, args.work_dir, compare_folder)
    if args.stage == "critic":
        seeds = study.sweep_seeds if args.seeds is None else tuple(args.seeds)
        train_stage(critic_specs(study, chosen, seeds), critic_folder, model_path, rows, study, "val",
                    study.val_samples, args.workers, args.work_dir, deadline)  # fmt: skip
    horizon_folder = stage_folder(args.output_dir, "horizon", key)
    if args.stage == "horizon":
        train_stage(horizon_specs(study, chosen), horizon_folder, model_path, rows, study, "val", study.val_samples,
                    args.workers, args.work_dir, deadline)  # fmt: skip
    critic_runs = finished(critic_folder)
    critic = critic_table(critic_runs, chosen, base["val"]["pass@1"]) if chosen is not None and critic_runs else {}
    ratio, why = choose_critic_ratio(critic, study.sweep_seeds) if critic else (None, "no run yet")
    if args.stage in ("compare", "stability", "lora", "head") and ratio is None:
        print("real_study: the critic stage has not chosen a critic rate yet: run --stage critic first.",
              file=sys.stderr)  # fmt: skip
        return 1
    rate = critic_rate(chosen, ratio) if ratio is not None else None
    stability_folder = stage_folder(args.output_dir, "stability", key)
    compare = compare_runs(compare_folder, chosen)
    stability = {}
    if ratio is not None:
        stability = stability_state(study, rate, compare, stability_folder)
        if args.stage == "stability":
            slow, controls, defaults = stability["slow"], stability["controls"], stability["default_runs"]
            asked = stage_seeds(defaults, study.control_seeds, args.seeds) if args.seeds is not None else None
            seeds = [*slow, *controls] if asked is None else [*asked[0], *asked[1]]  # the slow seeds first
            print(f"  stability: slow seeds {slow}, control seeds {controls}; training seeds {seeds}")
            train_stage(stability_specs(study, chosen, seeds, rate), stability_folder, model_path, rows, study, "val",
                        study.val_samples, args.workers, args.work_dir, deadline)  # fmt: skip
    lora_folder = stage_folder(args.output_dir, "lora", key)
    head_folder = stage_folder(args.output_dir, "head", key)
    under_schedule = {  # the validation stages that train under the stability stage's chosen schedule
        "lora": (lora_folder, lambda seeds: lora_specs(study, seeds, rate, stability["schedule"]), "the LoRA stage"),
        "head": (head_folder, lambda seeds: head_specs(study, chosen, seeds, rate, stability["schedule"]),
                 "the head stage"),
    }  # fmt: skip
    if args.stage in under_schedule:
        folder, specs, label = under_schedule[args.stage]
        if stability["variant"] is None:
            print(f"real_study: the stability stage has not chosen a schedule ({stability['why']}): {label} trains "
                  "under the chosen one. Run --stage stability first.", file=sys.stderr)  # fmt: skip
            return 1
        seeds = study.sweep_seeds if args.seeds is None else tuple(args.seeds)
        train_stage(specs(seeds), folder, model_path, rows, study, "val", study.val_samples, args.workers,
                    args.work_dir, deadline)  # fmt: skip
    lora = lora_state(study, finished(lora_folder), rate, stability.get("schedule"), base["val"]["pass@1"])
    if args.stage == "compare":
        if stability["variant"] is None:
            print(f"  compare: the stability stage has not chosen a schedule ({stability['why']}): the default's")
        if lora["rate"] is None and set(args.arms) & set(LORA_ARMS):
            print(f"  compare: the LoRA stage has not chosen a rate: the LoRA arms train at {chosen:g}")
        planned = power(sweep, chosen)["planned_seeds"]
        seeds = range(args.compare_seeds or planned) if args.seeds is None else args.seeds
        specs = compare_specs(study, chosen, seeds, args.arms, rate, stability["schedule"], lora["rate"])
        train_stage([spec for _, spec in specs], compare_folder, model_path, rows, study, "test", study.test_samples,
                    args.workers, args.work_dir, deadline)  # fmt: skip
    if args.stage in ("compare", "stability"):  # the runs trained since: read again
        compare = compare_runs(compare_folder, chosen)
        stability = stability_state(study, rate, compare, stability_folder)
        lora = lora_state(study, finished(lora_folder), rate, stability["schedule"], base["val"]["pass@1"])
    compare = compare_runs(compare_folder, chosen, lora["rate"])
    probe_path = os.path.join(stage_folder(args.output_dir, "probe", key), "probe.json")
    if args.stage == "probe":
        with torch_threads(1):
            write_json(probe_path, finite_json(probe_stage(model_path, rows["test"], base, probed_runs(compare, rate),
                                                           study.test_samples)))  # fmt: skip
    meta = study_meta(study, model_path, args.workers, rows)
    mech = finished_mechanism(mechanism_folder)
    horizon = [cached_result(os.path.join(horizon_folder, f"{spec.name}.json"), spec)
               for spec in (horizon_specs(study, chosen) if chosen is not None else [])]  # fmt: skip
    horizon = [r for r in horizon if r is not None]
    critic_stage = {"table": critic, "ratio": ratio, "why": why, "rate": rate, "horizon": horizon}
    probe = None
    if os.path.isfile(probe_path):
        with open(probe_path) as f:
            probe = json.load(f)
        probed = {(r["name"], r["prompts_per_update"]) for r in probe["runs"]}  # the name leaves the batch out
        probe["not_probed"] = sorted(f"{r['name']} ({r['spec']['prompts_per_update']} prompts per update)"
                                     for r in probed_runs(compare, rate)
                                     if (r["name"], r["spec"]["prompts_per_update"]) not in probed)  # fmt: skip
    head = {"table": head_table(finished(head_folder), base["val"]["pass@1"]), "schedule": stability.get("schedule")}
    path = write_report(
        args.output_dir, meta, base, sweep, table, chosen, compare, mech, critic_stage, stability, lora, probe, head
    )
    print(f"report: {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    stages = ("sweep", "mechanism", "critic", "horizon", "compare", "stability", "lora", "probe", "head", "report")
    parser = study_parser(__doc__, stages)
    parser.add_argument(
        "--compare-seeds", type=int, default=None, help="the comparison's seeds 0 .. n - 1 (default: the planned n)"
    )
    parser.add_argument("--arms", nargs="+", choices=list(ARMS), default=list(ARMS), help="the comparison's arms")
    parser.add_argument("--updates", type=int, default=None, help="override the study's updates")
    stop_help = (
        "minutes after which no run of the stage starts (those under way finish; a rerun trains the rest; the "
        "mechanism's one run always starts): fits a stage to a session"
    )
    run_arguments(parser, DEFAULT_OUTPUT, WORK_DIR, stop_help, "the trainers' output and the analysed checkpoint")
    return run_command(parser, study_command, argv)


if __name__ == "__main__":
    raise SystemExit(main())

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Over long, off-policy training, do SR-PPO's Pass@k weight (k = 2 against k = 1) and its separate critic earn
their cost? SmolLM2-135M-Instruct, 160 updates where the earlier studies stopped at 16 on-policy ones.

    python -m benchmarks.long_horizon.study --stage base     # the base model: success per level, test pass@k, n = 64
    python -m benchmarks.long_horizon.study --stage pilot    # k2 head and k1 head on seeds 0, 1: the spread
    python -m benchmarks.long_horizon.study --stage compare  # the arms on seeds 0 .. n - 1 (n from the pilot)
    python -m benchmarks.long_horizon.study --stage report   # the report from the runs finished so far (default)
    python -m benchmarks.long_horizon.study --smoke ...      # the same code at toy sizes (the end-to-end test)

- **The testbed.** `benchmarks.smollm2.task`'s `long` levels: the `wide` ones (`echo2`, `add1`, `plus1`, `mul21`)
  and three harder ones (`add2`, `sub2`, `mul22`: two two-digit operands), so that hard problems stay in play once
  the easy levels saturate. At most 120 problems per level; per level 8 for the selection, 15% of the rest for
  validation (not read), 8 for the test split (56 problems, the same for every run) and the rest for training
  (526: a run's 1,280 prompt draws visit each 2 or 3 times). The test split was 16 per level until the base stage
  showed what an evaluation costs: 1,289 s for 112 problems x 64 samples, about 21 minutes of a run of about an hour
  of training, twice per run; at 8 per level the evaluations cost half of that, before any run.
- **The schedule.** 160 policy updates of 8 prompts, one rollout each, off-policy: 4 updates per generated batch of
  32 prompts (`steps_per_generation=4`); the on-policy contrast arm generates for every update. Policy rate 3e-5
  (the cold-start study's). GRPO: 4 rollouts x 4 prompts per update.
- **Evaluation.** Test split, temperature 1, the unbiased pass@k: at updates 80 and 160 n = 64 (pass@1 .. pass@32),
  at 40 and 120 n = 16 (pass@1, pass@8); their seconds and tokens are recorded. The base model once, n = 64.
- **Runs resume.** Each run saves a checkpoint every 20 updates (policy, critic, optimizers and the harness's state:
  `benchmarks/long_horizon/run.py`) under `--work-dir`; a command started again goes on from there. A finished run
  is kept as JSON under `reports/long_horizon/runs/<stage>-<settings>/` and its checkpoints are deleted.
  `--stop-after MINUTES` starts no run after that long. A SIGTERM or Ctrl-C to the command stops it at once: each
  run under way saves a checkpoint at the end of its update (`study_runner.run_all`). Two workers at most, one
  torch thread each.
- **Seeds.** The pilot trains `k2 head` and `k1 head` on seeds 0 and 1, which are also the comparison's first two
  seeds of those arms (an internal pilot: 2 runs of 2 hours each are not spent twice). The comparison's seeds are
  0 .. n - 1, n the fewest of 2, 3, 4 whose detectable paired k2 - k1
  difference in final test pass@1 (80% power, 5% two-sided, the pilot's sd of the k2 head - k1 head difference, as
  the cold-start study plans from its sweep's paired spread) is at most 0.10, else 4; `--seeds` overrides. The
  must-have arms are trained over those seeds first, seed-major, then the optional ones (TD, the running mean at
  k = 1, the policy head at k = 1, A*-PO) over the first two (`design.OPTIONAL_SEEDS`: the study's 24 hours).

**The rules, fixed before any run** (pure functions of `benchmarks/long_horizon/readings.py`):

1. *Collapse* (`collapse_update`): a run has collapsed when its test pass@1 at an evaluation point is below the base
   model's test pass@1, or below half of its own highest test pass@1 up to that point, and stays so at every later
   evaluation point, the last included. Its update of collapse is the first such point; the report shows the means
   of its logged metrics (reward, entropy, KL from start, clip fraction, critic trail and AUC, NSR) over the 20
   updates up to it.
2. *`pass_at_k`* (`decide_k`; the weight costs no compute, its cost is risk): k = 2 stays the default if, with
   either critic (the default or the value head at 3e-3), k2 - k1 in final test pass@1 or pass@32 has a paired 90%
   interval above 0, or k = 1 collapses in more seeds than k = 2 (both critics counted). k = 1 becomes the default if
   k2 - k1 has a 90% interval below 0 in pass@1 or pass@32 with both critics, or k = 2 collapses in more seeds than
   k = 1. Otherwise k = 2 stays and the docs say the weight showed no measured effect over a long run. The clauses
   are read in this order.
3. *The critic* (`decide_critic`; the separate model costs about 35% of each update on SmolLM2 and 1.68x GRPO's
   per-process peak memory under ZeRO-3): the separate critic stays the default only if the better of its two arms
   (`k2 head` or `k2`, by mean final test pass@1) minus `policy head k2` has a paired 90% interval above 0 in final
   test pass@1 or pass@32 at equal updates, or the policy head collapses in more seeds; otherwise
   `critic_type="policy_head"` becomes the default. If the separate critic stays, `critic_head_learning_rate=3e-3`
   becomes its default when `k2 head` - `k2` has a mean final test pass@1 of at least -0.02 and `k2 head` collapses
   no more often than `k2`.
4. *GRPO* is read, not decided on: its row says at which of equal updates, generated tokens and seconds SR-PPO
   (k2 head) or GRPO leads, for the README's recommendation.
"""

import os
import sys

from ..common import study_runner
from ..common.runs import REPO_ROOT, quiet_offline_command
from ..real_study.base import open_study
from ..real_study.design import Study, settings_key
from ..real_study.study import pending_jobs
from ..smollm2.model import model_id, resolve_model
from .design import (
    ARMS,
    LONG,
    LONG_SMOKE,
    PILOT_ARMS,
    QUARTER_SAMPLES,
    SEED_CHOICES,
    SMOKE_QUARTER_SAMPLES,
    arm_spec,
    eval_points,
    planned_runs,
    save_steps,
)
from .readings import planned_seeds
from .report import write_report
from .run import run_job

DEFAULT_OUTPUT = os.path.join(REPO_ROOT, "reports", "long_horizon")
WORK_DIR = os.path.join(REPO_ROOT, ".cache", "long_horizon")  # the runs' checkpoints, deleted once a run finishes


def train(specs, folder: str, model_path: str, rows: dict, study: Study, args, deadline) -> None:
    """Train the runs of `specs` not finished in `folder` (`real_study.study.pending_jobs`), resumable
    (`run.run_job`), `args.workers` at a time until `deadline`."""
    quarter = SMOKE_QUARTER_SAMPLES if args.smoke else QUARTER_SAMPLES
    done, jobs = pending_jobs(specs, folder, model_path, rows, study, "test", study.test_samples, args.work_dir,
                              points=eval_points(study, quarter), save_steps=save_steps(study))  # fmt: skip
    print(f"  {len(jobs)} runs to train, {len(done)} finished before")
    study_runner.run_all(jobs, args.workers, run_job, deadline=deadline)


def by_arm(folder: str, study: Study, arms, seeds) -> dict:
    """The finished runs of `folder` that are `arms` x `seeds` (arm -> runs), by their spec."""
    runs = {r["name"]: r for r in study_runner.finished(folder)}
    out = {}
    for arm in arms:
        for seed in seeds:
            spec = arm_spec(study, arm, seed)
            if spec.name in runs and runs[spec.name]["spec"]["options"] == [list(o) for o in spec.options]:
                out.setdefault(arm, []).append(runs[spec.name])
    return out


def study_command(args) -> int:
    quiet_offline_command()
    study = LONG_SMOKE if args.smoke else LONG
    if args.stage == "report":  # the report measures nothing: the base model must be there
        model_path = resolve_model(args.model, "long_horizon")
        key = model_path and settings_key(study, model_id(model_path))
        if key is None or not os.path.isfile(os.path.join(study_runner.stage_folder(args.output_dir, "base", key),
                                                          "base.json")):  # fmt: skip
            print("long_horizon: no base model measured yet: run --stage base first.", file=sys.stderr)
            return 1
    opened = open_study(study, args.model, args.output_dir, "long_horizon")
    if opened is None:
        return 1
    model_path, key, base, rows = opened
    deadline = study_runner.stop_time(args.stop_after)
    # The pilot's runs are the comparison's first seeds of its arms: one folder holds both stages' runs.
    compare_folder = study_runner.stage_folder(args.output_dir, "compare", key)
    if args.stage == "pilot":
        seeds = study.sweep_seeds if args.seeds is None else args.seeds
        arms = [a for a in args.arms if a in PILOT_ARMS] if args.arms else PILOT_ARMS
        train([arm_spec(study, a, s) for s in seeds for a in arms], compare_folder, model_path, rows, study, args,
              deadline)  # fmt: skip
    pilot = by_arm(compare_folder, study, PILOT_ARMS, study.sweep_seeds)
    power = planned_seeds(pilot)
    seeds = list(range(power["seeds"])) if args.seeds is None else args.seeds
    planned = planned_runs(seeds, args.arms, args.seeds)  # `--seeds` names the optional arms' seeds too
    if args.stage == "compare":
        train([arm_spec(study, a, s) for a, s in planned], compare_folder, model_path, rows, study, args, deadline)
    compare = by_arm(compare_folder, study, ARMS, range(max(SEED_CHOICES[-1], *(s + 1 for s in seeds))))
    meta = {**study_runner.study_meta(study, model_path, args.workers, rows), "key": key}
    path = write_report(args.output_dir, meta, base, power, pilot, compare, planned_runs(seeds), seeds)
    print(f"report: {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = study_runner.study_parser(__doc__, ("base", "pilot", "compare", "report"))
    parser.add_argument("--arms", nargs="+", choices=list(ARMS), default=None,
                        help="train only these arms (default: every arm, the must-have ones first)")  # fmt: skip
    stop_help = "minutes after which no run starts (those under way finish; a rerun resumes or trains the rest)"
    study_runner.run_arguments(parser, DEFAULT_OUTPUT, WORK_DIR, stop_help, "the runs' checkpoints")
    return study_runner.run_command(parser, study_command, argv)


if __name__ == "__main__":
    raise SystemExit(main())

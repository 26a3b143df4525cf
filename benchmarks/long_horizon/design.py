# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The design of the long-horizon study (`python -m benchmarks.long_horizon.study`), which every stage reads: its
sizes (the SmolLM2 study's `Study` on the `long` testbed), its evaluation points, its checkpoints, its arms, their
seeds and the metrics every run logs. The study's questions and rules are in `benchmarks/long_horizon/study.py`'s
docstring."""

from dataclasses import replace

from ..cold_start.design import HEAD, LEARNING_RATE
from ..common.runspec import RunSpec
from ..real_study.design import Study

PILOT_SEEDS = (0, 1)  # the pilot's seeds: its runs are the comparison's first (an internal pilot, no run wasted)
PILOT_ARMS = ("k2 head", "k1 head")  # the pilot's arms: the spread of their paired difference plans the seeds
SEED_CHOICES = (2, 3, 4)  # the comparison's seeds: the fewest that detect TARGET_DIFFERENCE, else the most
TARGET_DIFFERENCE = 0.10  # final test pass@1, the smallest k2 - k1 difference the comparison is planned to detect
FULL_KS = (1, 2, 4, 8, 16, 32)  # the pass@k of an evaluation at half and at the end of a run (and the base model's)
QUARTER_KS = (1, 8)  # those of the evaluations at a quarter and three quarters
QUARTER_SAMPLES = 16  # samples per test problem at a quarter and three quarters (the study's `test_samples` else)
# The optional arms' seeds, the first of the comparison's: a pilot run took 1.5 to 1.75 hours of one worker (training
# and evaluation, two at once), so the must-have arms at 3 seeds are about 17 hours of the machine and the 4 optional
# arms at 2 seeds about 7 more, within the study's 24 hours with the base stage; at 3 seeds they would be 10.
OPTIONAL_SEEDS = 2
STUDY_WORKERS = 2  # runs trained at once (`--workers`' default), one torch thread each: the timings' condition

LONG = Study(
    "long", updates=160, prompts_per_update=8, max_completion_length=32, val_samples=4, test_samples=64,
    select_samples=8, min_success=0.0, level_cap=120, testbed="long", test_problems=8, sweep_seeds=PILOT_SEEDS,
    control_seeds=(),
)  # fmt: skip
LONG_SMOKE = replace(
    LONG, name="long-smoke", updates=4, prompts_per_update=2, max_completion_length=8, val_samples=2, test_samples=4,
    select_samples=2, level_cap=16, test_problems=2, sweep_seeds=(0,),
)  # fmt: skip
SMOKE_QUARTER_SAMPLES = 2

# Updates between two NSR measurements: each costs a forward and backward pass per rollout of the generated batch (32),
# about 60 s on SmolLM2 here (two runs at once), against about 25 s per update without it; at first it took 123 s
# every 8th update (before the per-rollout sums lost a float64 copy of the model's gradient and a concatenation),
# 30% of the pilot's first 20 updates.
NSR_STEPS = 16
# The per-run metrics besides the defaults, in one place: `log_kl_from_start` (`RuntimeConfig`, GRPO too) logs
# `policy/kl_from_start`; `gradient_nsr_steps` (`SRPPOConfig`) logs the batch NSR with and without the weight every
# that many updates. `metric_options` leaves out a field the installed trainer's config does not have.
METRIC_OPTIONS = (("log_kl_from_start", True), ("gradient_nsr_steps", NSR_STEPS))
GRPO_METRIC_OPTIONS = (("log_kl_from_start", True),)

# The arms: name -> (trainer method, schedule, options over the defaults), in the order they are trained.
ARMS_MUST: dict[str, tuple[str, str, tuple]] = {
    "k2": ("sr-ppo", "off", ()),
    "k1": ("sr-ppo-pass1", "off", ()),
    "k2 head": ("sr-ppo", "off", HEAD),
    "k1 head": ("sr-ppo-pass1", "off", HEAD),
    "policy head k2": ("sr-ppo", "off", (("critic_type", "policy_head"),)),
    "grpo": ("grpo", "off", ()),
    "k2 head on-policy": ("sr-ppo", "on", HEAD),
}
ARMS_OPTIONAL: dict[str, tuple[str, str, tuple]] = {
    "td k2 head": ("td", "off", HEAD),  # gae_lambda 0: the collapse the paper reports
    "running mean k1": ("sr-ppo-pass1", "off", (("critic_type", "running_mean"),)),
    "policy head k1": ("sr-ppo-pass1", "off", (("critic_type", "policy_head"),)),
    "a2po": ("a2po", "off", ()),
}
ARMS = {**ARMS_MUST, **ARMS_OPTIONAL}
ARM_LABELS = {
    "k2": "SR-PPO, k = 2 (defaults)",
    "k1": "SR-PPO, k = 1",
    "k2 head": "SR-PPO, k = 2, value head at 3e-3",
    "k1 head": "SR-PPO, k = 1, value head at 3e-3",
    "policy head k2": "SR-PPO, k = 2, policy_head critic",
    "grpo": "GRPO, 4 rollouts x 4 prompts",
    "k2 head on-policy": "SR-PPO, k = 2, value head at 3e-3, on-policy",
    "td k2 head": "TD (gae_lambda 0), k = 2, value head at 3e-3",
    "running mean k1": "SR-PPO, k = 1, running-mean critic",
    "policy head k1": "SR-PPO, k = 1, policy_head critic",
    "a2po": "A*-PO (TRL's A2POTrainer)",
}


def planned_runs(seeds, arms=None, optional_seeds=None) -> list[tuple[str, int]]:
    """The comparison's runs, (arm, seed), in the order they are trained: the must-have arms over `seeds`, seed-major,
    then the optional ones over `optional_seeds` (the first `OPTIONAL_SEEDS` of `seeds` when `None`); `arms`, when
    given, keeps only those arms."""
    optional_seeds = list(seeds)[:OPTIONAL_SEEDS] if optional_seeds is None else optional_seeds
    keep = set(ARMS if arms is None else arms)
    must = [(a, s) for s in seeds for a in ARMS_MUST if a in keep]
    return must + [(a, s) for s in optional_seeds for a in ARMS_OPTIONAL if a in keep]


def metric_options(method: str) -> tuple:
    """The metric options of `method`'s runs (`METRIC_OPTIONS`, GRPO's `GRPO_METRIC_OPTIONS`, none for A*-PO), less
    the fields its installed config class does not have (a trainer from before they were added)."""
    if method == "a2po":
        return ()
    if method == "grpo":
        from trl_srppo.runtime.config import GRPORuntimeConfig as config

        wanted = GRPO_METRIC_OPTIONS
    else:
        from trl_srppo import SRPPOConfig as config

        wanted = METRIC_OPTIONS
    return tuple((name, value) for name, value in wanted if name in config.__dataclass_fields__)


def arm_spec(study: Study, arm: str, seed: int) -> RunSpec:
    """The run of `arm` on `seed`: its method, schedule and options with the metric options, at the cold-start
    study's policy rate, the study's updates and prompts, evaluated every quarter (`eval_points`)."""
    method, schedule, options = ARMS[arm]
    options = (*options, *metric_options(method))
    return RunSpec(method, schedule, LEARNING_RATE, seed, study.updates, study.prompts_per_update,
                   max(1, study.updates // 4), study.test_samples, options=options)  # fmt: skip


def eval_points(study: Study, quarter_samples: int) -> dict[int, tuple[int, tuple[int, ...]]]:
    """The run's test evaluations: update -> (samples per problem, the pass@k read). At half and at the end the
    study's `test_samples` and `FULL_KS`; at a quarter and three quarters `quarter_samples` and `QUARTER_KS`."""
    quarter = max(1, study.updates // 4)
    points = {}
    for update in sorted({quarter, 2 * quarter, 3 * quarter, study.updates}):
        full = update in (2 * quarter, study.updates)
        points[update] = (study.test_samples, FULL_KS) if full else (quarter_samples, QUARTER_KS)
    return points


def save_steps(study: Study) -> int:
    """The updates between two checkpoints of a run: an eighth of it (20 of 160), at least one."""
    return max(1, study.updates // 8)

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The design of the cold-start study (`python -m benchmarks.cold_start.study`), which every stage reads: its sizes
(the SmolLM2 study's `Study` on the `wide` testbed), the critic options it measures, the comparison's arms, their
seeds, and the rule that picks the option the comparison trains. The study's questions and rules are in
`benchmarks/cold_start/study.py`'s docstring."""

from dataclasses import replace

from ..real_study.design import Study

LEARNING_RATE = 3e-5  # the SmolLM2 study's chosen policy rate (its sweep), and the recipe's: the options stage's
SWEEP_RATES = (1e-5, 3e-5, 1e-4)  # the sweep stage's policy rates, the SmolLM2 study's, for each method
SWEEP_METHODS = ("sr-ppo", "grpo", "a2po")  # each gets its own rate: A*-PO's regression loss has another scale
OPTION_SEEDS = (100, 101)  # the options stage's seeds (validation split), which the comparison does not use
MECHANISM_ARMS = ("sr-ppo", "best")  # the arms whose seed-0 checkpoint the mechanism stage analyses
MECHANISM_SEED = 0
SEED_CHOICES = (6, 8, 10, 12)  # the comparison's seeds: the fewest that detect TARGET_DIFFERENCE, at most 12
TARGET_DIFFERENCE = 0.05  # pass@1, the smallest SR-PPO - GRPO difference the comparison is planned to detect
MIN_SPREAD = 0.05  # the validation qhat(s_0) sd an option's critic must reach: a third of the ridge probe's (0.152)
TOKEN_BUDGET = 0.10  # an option's extra generated tokens (warm start, critic-only steps) as a share of the run's
HEAD_RATE = 3e-3  # `critic_head_learning_rate` of the cheapest fix: about 100x the policy's rate
CRITIC_RATE_10X = float(f"{10 * LEARNING_RATE:.4g}")  # verl's ratio of critic to actor rate

WIDE = Study("wide", min_success=0.0, level_cap=90, sweep_seeds=OPTION_SEEDS, control_seeds=(), testbed="wide")
WIDE_SMOKE = replace(
    WIDE, name="wide-smoke", updates=2, prompts_per_update=4, max_completion_length=8, val_samples=2, test_samples=2,
    select_samples=2, level_cap=20, sweep_seeds=(100,),
)  # fmt: skip

HEAD = (("critic_head_learning_rate", HEAD_RATE),)
SMALL_WARM_START = (
    ("critic_warm_start_prompts", 2),
    ("critic_warm_start_samples", 4),
    ("critic_warm_start_epochs", 4),
)

# The cold-start options: name -> SR-PPO config options over the defaults. Each is measured by its critic's AUC and
# spread of `qhat(s_0)` on the training batches' prompts (every update) and on the validation problems (every
# quarter of the run), and by what it costs.
OPTIONS: dict[str, tuple] = {
    "default": (),
    "head": HEAD,  # the value head at its own fast rate: the cheapest fix
    "critic lr x10": (("critic_learning_rate", CRITIC_RATE_10X),),  # verl / OpenRLHF's ratio
    "critic epochs 4": (("critic_epochs", 4),),
    "head + epochs 4": (*HEAD, ("critic_epochs", 4)),
    "critic-only quarter": (("critic_warmup_steps", 4),),  # OpenRLHF's freezing_steps: a quarter of a 16-update run
    "head + small warm start": (*HEAD, *SMALL_WARM_START),  # 2 prompts x 4 rollouts: 8 of the run's 128
    "head + A*-PO's warm start": (
        *HEAD,
        ("critic_warm_start_prompts", 128),
        ("critic_warm_start_samples", 8),
        ("critic_warm_start_epochs", 2),
    ),  # fmt: skip  # A*-PO's 8 per visited prompt
}
SMOKE_OPTIONS = ("default", "head + small warm start")

# The comparison's arms: name -> (trainer method, options); "best" and "best k=1" take the options stage's choice.
ARMS: dict[str, tuple[str, tuple]] = {
    "sr-ppo": ("sr-ppo", ()),
    "sr-ppo head": ("sr-ppo", HEAD),
    "best": ("sr-ppo", None),
    "best k=1": ("sr-ppo-pass1", None),
    # The control: a critic that reads nothing, the outcomes' running mean (no network). k = 1, since its Pass@k
    # weight would be one factor for the whole batch; against "best k=1", what the learned critic's values add.
    "running mean k=1": ("sr-ppo-pass1", (("critic_type", "running_mean"),)),
    "grpo": ("grpo", ()),
    "a2po": ("a2po", ()),
}
ARM_LABELS = {
    "sr-ppo": "SR-PPO (defaults)",
    "sr-ppo head": f"SR-PPO, value head at {HEAD_RATE:g}",
    "best": "SR-PPO + the chosen cold-start option, k = 2",
    "best k=1": "SR-PPO + the chosen cold-start option, k = 1",
    "running mean k=1": "SR-PPO, k = 1, the outcomes' running mean for a critic (no network)",
    "grpo": "GRPO, 4 rollouts",
    "a2po": "A*-PO (TRL's A2POTrainer), 8 value samples",
}


def arm_rate(arm: str, rates: dict) -> float:
    """The policy rate `arm` trains at: its method's rate from the sweep stage (`rates`, method -> rate; SR-PPO's for
    every SR-PPO arm)."""
    method = ARMS[arm][0]
    return rates["sr-ppo" if method.startswith("sr-ppo") else method]


def arm_options(arm: str, chosen: tuple) -> tuple[str, tuple]:
    """`(method, options)` of `arm`, with the options stage's `chosen` options for the arms that take them."""
    method, options = ARMS[arm]
    return method, chosen if options is None else options

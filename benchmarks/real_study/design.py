# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The design of the SmolLM2 study (`make bench-real-study`), which every stage reads and which imports no stage:
its sizes (`Study`, `FULL`, `SMOKE`, and the evaluation `Budget` of a run), its splits of the task's problems, the
settings its cache key hashes (`settings_key`), the arms of the comparison and their options, the learning rates and
critic ratios of the stages, their seeds, and the schedules of the stability stage (`variants`). The rules that choose
among them are in `benchmarks/real_study/study.py`'s docstring."""

import hashlib
import json
import math
from dataclasses import asdict, dataclass

from trl_srppo.method.srppo_config import CRITIC_LR_RATIO

from ..common.runspec import LORA_RANK_OPTION
from ..smollm2.task import TESTBEDS, level_problems, level_splits

SELECT_PROBLEMS = 8  # per level, for the level selection (base model only)
VAL_FRACTION = 0.15  # of each level's problems after the selection's
TEST_FRACTION = 0.45
SWEEP_LEARNING_RATES = (1e-5, 3e-5, 1e-4)
SWEEP_SEEDS = (100, 101)
SWEEP_METHODS = ("sr-ppo", "grpo")
LORA_LEARNING_RATES = (1e-4, 3e-4, 1e-3)  # the LoRA stage's rates for the LoRA policy's arms
SEED_CHOICES = (4, 6, 8, 12)  # the comparison's seeds: the fewest of these that detect TARGET_DIFFERENCE
TARGET_DIFFERENCE = 0.05  # test pass@1, the smallest SR-PPO - GRPO difference the design is built to detect

# The comparison's arms: name -> (trainer method, config options). `lora_rank` makes the policy a LoRA adapter.
ARMS: dict[str, tuple[str, tuple]] = {
    "sr-ppo": ("sr-ppo", ()),
    "sr-ppo-k1": ("sr-ppo-pass1", ()),
    "grpo": ("grpo", ()),
    "sampling-pass_at_k": ("sr-ppo", (("prompt_pool_factor", 2), ("prompt_sampling", "pass_at_k"))),
    "sampling-near_half": ("sr-ppo", (("prompt_pool_factor", 2), ("prompt_sampling", "near_half"))),
    "critic-policy_head": ("sr-ppo", (("critic_type", "policy_head"),)),
    "critic-lora": ("sr-ppo", (("critic_use_peft", True),)),
    "lora-policy_lora": ("sr-ppo", ((LORA_RANK_OPTION, 16), ("critic_type", "policy_lora"))),
    "lora-grpo": ("grpo", ((LORA_RANK_OPTION, 16),)),
}
ARM_LABELS = {
    "sr-ppo": "SR-PPO (defaults)",
    "sr-ppo-k1": "SR-PPO k = 1",
    "grpo": "GRPO, 4 rollouts",
    "sampling-pass_at_k": "SR-PPO + prompt sampling pass_at_k, m = 2",
    "sampling-near_half": "SR-PPO + prompt sampling near_half, m = 2",
    "critic-policy_head": "SR-PPO, policy_head critic",
    "critic-lora": "SR-PPO, LoRA critic (critic_use_peft)",
    "lora-policy_lora": "LoRA policy (r 16), policy_lora critic",
    "lora-grpo": "LoRA policy (r 16), GRPO",
}
LORA_ARMS = ("lora-policy_lora", "lora-grpo")  # the arms whose policy is a LoRA adapter: the LoRA stage's rate
assert all(LORA_RANK_OPTION in dict(ARMS[arm][1]) for arm in LORA_ARMS)
REFERENCES = {"lora-policy_lora": "lora-grpo"}  # an arm's paired reference, when not default SR-PPO
CRITIC_RATE_OPTION = "critic_learning_rate"
CRITIC_LR_RATIOS = (1, 10, 30)  # the critic stage: critic_learning_rate as multiples of the chosen policy rate
DEFAULT_RATIO = 1  # the trainer's: `critic_learning_rate` left unset
CRITIC_MIN_GAIN = 0.05  # validation AUC a ratio must gain over the default ratio to replace it
assert DEFAULT_RATIO == CRITIC_LR_RATIO and DEFAULT_RATIO in CRITIC_LR_RATIOS
HORIZON_FACTOR = 4  # the horizon stage's runs: this many times the study's updates
HORIZON_RATIOS = (1, 10)  # at these critic ratios
HORIZON_SEED = SWEEP_SEEDS[0]  # on this sweep seed (validation only)
CONTROL_SEEDS = (0, 1)  # the stability stage's control seeds (comparison seeds whose default run took off)


@dataclass(frozen=True)
class Budget:
    """The sizes of a variant; `--smoke`, `--timing` and the default run the same code with different sizes."""

    name: str
    updates: int
    seeds: int
    prompts_per_update: int
    eval_every: int
    select_problems: int  # per level
    select_samples: int
    val_problems: int  # per level
    test_problems: int  # per level
    eval_samples: int = 8
    max_completion_length: int = 32
    learning_rate: float = 1e-5
    min_success: float = 0.05
    min_train_problems: int = 8  # per level
    data_seed: int = 0

    def settings_key(self, model_id: str) -> str:
        """A hash of what a run's result depends on besides its method and seed (the seeds' count is left out, so
        that more seeds reuse the first ones)."""
        settings = {k: v for k, v in asdict(self).items() if k not in ("name", "seeds")}
        return hashlib.sha256(json.dumps([settings, model_id], sort_keys=True).encode()).hexdigest()[:10]


@dataclass(frozen=True)
class Study:
    """The sizes of the study; `--smoke` runs the same code with `SMOKE`."""

    name: str
    updates: int = 16
    prompts_per_update: int = 8
    max_completion_length: int = 32
    val_samples: int = 4
    test_samples: int = 8
    select_samples: int = 8
    min_success: float = 0.05
    data_seed: int = 0
    level_cap: int | None = None  # at most this many problems per level (the smoke's toy sizes)
    testbed: str = "arithmetic"  # the levels (`smollm2.task.TESTBEDS`)
    test_problems: int | None = None  # per level, the test split's size (`None`: TEST_FRACTION of the rest)
    sweep_seeds: tuple[int, ...] = SWEEP_SEEDS  # the seeds every rate of the sweep needs before the rule chooses
    control_seeds: tuple[int, ...] = CONTROL_SEEDS  # the stability stage's seeds besides the slow ones

    def budget(self, samples: int, learning_rate: float = 1e-5) -> Budget:
        """The `Budget` whose evaluation draws `samples` samples per problem (what its runs read)."""
        return Budget(
            f"study-{self.name}",
            self.updates,
            1,
            self.prompts_per_update,
            self.updates,
            SELECT_PROBLEMS,
            self.select_samples,
            0,
            0,
            eval_samples=samples,
            max_completion_length=self.max_completion_length,
            learning_rate=learning_rate,
            min_success=self.min_success,
            data_seed=self.data_seed,
        )


FULL = Study("full")
SMOKE = Study("smoke", updates=2, prompts_per_update=4, max_completion_length=8, val_samples=2, test_samples=2,
              select_samples=2, min_success=0.0, level_cap=20, sweep_seeds=(100,), control_seeds=(0,))  # fmt: skip


def study_splits(study: Study) -> dict[str, dict[str, list[dict]]]:
    """Per level: `select` (`SELECT_PROBLEMS`), then `val` and `test` as fixed fractions of the rest (`test`: the
    study's `test_problems` where it sets them), `train` the remainder; disjoint, fixed by the data seed (the shuffle
    of `smollm2.task.level_splits`)."""
    out = {}
    for level in TESTBEDS[study.testbed]:
        total = min(len(level_problems(level)), study.level_cap or math.inf)
        rest = total - SELECT_PROBLEMS
        test = round(TEST_FRACTION * rest) if study.test_problems is None else study.test_problems
        sizes = {"select": SELECT_PROBLEMS, "val": round(VAL_FRACTION * rest), "test": test}
        sizes["train"] = rest - sizes["val"] - sizes["test"]
        splits = level_splits(level, sizes, study.data_seed)
        splits["train"] = splits["train"][: sizes["train"]]
        out[level] = splits
    return out


def settings_key(study: Study, model: str) -> str:
    """What every run of the study depends on besides its spec: the sizes, the splits and the model."""
    settings = {k: v for k, v in asdict(study).items() if k not in ("name", "sweep_seeds", "control_seeds")}
    if settings["testbed"] == "arithmetic":  # the key of the runs made before there was a choice of testbed
        del settings["testbed"]
    if settings["test_problems"] is None:  # nor before a study could set its test split's size
        del settings["test_problems"]
    settings["splits"] = [SELECT_PROBLEMS, VAL_FRACTION, TEST_FRACTION]  # what the problems' split depends on
    return hashlib.sha256(json.dumps([settings, model], sort_keys=True).encode()).hexdigest()[:10]


def critic_rate(learning_rate: float, ratio: float) -> float | None:
    """The `critic_learning_rate` option of `ratio` x the policy's rate; `None` for `DEFAULT_RATIO` (the trainer's
    default, set by leaving the option out, so that such runs keep their names)."""
    return None if ratio == DEFAULT_RATIO else float(f"{ratio * learning_rate:.4g}")


def arm_options(arm: str, rate: float | None, schedule_options: tuple = ()) -> tuple:
    """`ARMS[arm]`'s options, with `critic_learning_rate=rate` and the stability stage's chosen `schedule_options`
    for an arm that has a critic (all but GRPO's)."""
    method, options = ARMS[arm]
    if method == "grpo":
        return options
    return (*options, *(() if rate is None else ((CRITIC_RATE_OPTION, rate),)), *schedule_options)


DEFAULT = "default"


def variants(updates: int, prompts_per_update: int) -> dict[str, tuple[int, tuple]]:
    """The stage's schedules: name -> (prompts per update, config options added to default SR-PPO's)."""
    return {
        DEFAULT: (prompts_per_update, ()),
        "batch x2": (2 * prompts_per_update, ()),
        "critic warm-up": (prompts_per_update, (("critic_warmup_steps", max(1, updates // 4)),)),
        "value head at 0.5": (prompts_per_update, (("critic_value_init", "zero"),)),
    }

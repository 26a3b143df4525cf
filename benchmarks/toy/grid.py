# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The benchmark grid: variants (full, quick, smoke), the hyperparameter search and the seeds, run in worker processes.

Protocol (the same for every method):

1. Search: every configuration (method x schedule) trains on seed 0 with each learning rate of the variant.
2. Selection: the learning rate with the best pass@1 on the *validation* prompts (never the test prompts).
3. Seeds: the selected learning rate trains on the remaining seeds (seed 0's search run is reused).

Every run's result is a JSON file under `<cache>/runs/<variant>-<key>/`; a rerun reuses the runs already done.
"""

import hashlib
import json
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from multiprocessing import get_context
from typing import Any

from ..common.runs import cached_result, torch_threads
from ..common.runspec import LORA_RANK_OPTION, METHODS, RunSpec
from .base_model import DEFAULT_CACHE, WarmStartSpec
from .tasks import TaskSpec, make_splits

# Configurations that are a method with some `SRPPOConfig` fields set: name -> (method, options). A configuration
# named by a method alone runs that method with the trainer's defaults.
NAMED_CONFIGS: dict[str, tuple[str, tuple[tuple[str, Any], ...]]] = {
    # SR-PPO as the trainer's defaults were before they were measured here (the critic's learning rate as this
    # benchmark fixed it then; the trainer's own default was 1e-5).
    "sr-ppo-v0": ("sr-ppo", (("pass_at_k", 4), ("critic_value_init", "zero"), ("critic_learning_rate", 1e-3))),
    # The cheaper critics: a value head on the policy's hidden states, and one baseline per prompt.
    "sr-ppo-head": ("sr-ppo", (("critic_type", "policy_head"),)),
    "sr-ppo-prompt": ("sr-ppo", (("advantage_baseline", "prompt"),)),
    # LoRA policies (rank 8 on every linear layer): GRPO, SR-PPO with its separate critic, and SR-PPO with the critic
    # as a second adapter on the policy's base model.
    "grpo-lora": ("grpo", ((LORA_RANK_OPTION, 8),)),
    "sr-ppo-lora": ("sr-ppo", ((LORA_RANK_OPTION, 8),)),
    "sr-ppo-lora-critic": ("sr-ppo", ((LORA_RANK_OPTION, 8), ("critic_type", "policy_lora"))),
}

# The methods off-policy, SR-PPO and GRPO also on-policy (as the paper runs them), the previous defaults beside the
# current ones, the cheaper critics, and LoRA policies (GRPO, and SR-PPO with either critic).
CONFIGS = (
    tuple((m, "off") for m in METHODS)
    + (("sr-ppo", "on"), ("grpo", "on"), ("sr-ppo-v0", "off"), ("sr-ppo-v0", "on"))
    + (("sr-ppo-head", "off"), ("sr-ppo-prompt", "off"))
    + (("grpo-lora", "off"), ("sr-ppo-lora", "off"), ("sr-ppo-lora-critic", "off"))
)


def resolve_config(name: str) -> tuple[str, tuple[tuple[str, Any], ...]]:
    """The method and the `SRPPOConfig` options of a configuration name."""
    return NAMED_CONFIGS.get(name, (name, ()))


@dataclass(frozen=True)
class Variant:
    """Size of a benchmark variant. The three variants run the same code with different sizes."""

    name: str
    updates: int
    seeds: int
    eval_every: int
    learning_rates: tuple[float, ...] = (1e-4, 3e-4, 1e-3)
    configs: tuple[tuple[str, str], ...] = CONFIGS
    prompts_per_update: int = 32
    critic_learning_rate: float | None = None
    num_train: int = 8000
    num_val: int = 120
    num_test: int = 240
    num_analysis: int = 64
    data_seed: int = 0
    task: TaskSpec = field(default_factory=TaskSpec)
    warm_start: WarmStartSpec = field(default_factory=WarmStartSpec)

    def key(self) -> str:
        """A hash of what a run's result depends on: the variant's settings (not which configurations, learning rates
        and seeds it runs: a run's file name says those) and the trainer's defaults, so that cached runs are not
        reused once a default they ran with has changed, and are reused when a configuration is added."""
        shape = {k: v for k, v in asdict(self).items() if k not in ("name", "configs", "learning_rates", "seeds")}
        settings = {"variant": shape, "trainer_defaults": trainer_defaults()}
        return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:8]


def trainer_defaults() -> dict:
    """The default of every `SRPPOConfig` field (TRL's `GRPOConfig` ones included), the method presets and the
    critic's learning-rate rule."""
    from trl_srppo.method.srppo_config import CRITIC_LR_RATIO, METHOD_PRESETS, SRPPOConfig

    defaults = {f.name: f.default for f in fields(SRPPOConfig) if f.default is not MISSING}
    return {"fields": defaults, "presets": METHOD_PRESETS, "critic_lr_ratio": CRITIC_LR_RATIO}


VARIANTS = {
    "full": Variant("full", updates=300, seeds=3, eval_every=30),
    "quick": Variant("quick", updates=60, seeds=2, eval_every=15),
    "smoke": Variant(
        "smoke",
        updates=4,
        seeds=1,
        eval_every=2,
        learning_rates=(1e-3,),
        configs=(("sr-ppo", "off"), ("grpo", "off")),
        prompts_per_update=8,
        num_train=200,
        num_val=24,
        num_test=24,
        num_analysis=12,
    ),
}


def variant_splits(variant: Variant) -> dict[str, list[dict]]:
    """Train / val / test prompts of the variant, and the analysis prompts (the first validation prompts)."""
    splits = make_splits(variant.task, variant.data_seed, variant.num_train, variant.num_val, variant.num_test)
    splits["analysis"] = splits["val"][: variant.num_analysis]
    return splits


def held_out_prompts(splits: dict) -> list[str]:
    return [r["prompt"] for r in splits["val"] + splits["test"]]


def run_spec(variant: Variant, config: str, schedule: str, learning_rate: float, seed: int) -> RunSpec:
    method, options = resolve_config(config)
    return RunSpec(
        method=method,
        options=options,
        schedule=schedule,
        learning_rate=learning_rate,
        seed=seed,
        updates=variant.updates,
        prompts_per_update=variant.prompts_per_update,
        eval_every=variant.eval_every,
        critic_learning_rate=variant.critic_learning_rate,
    )


def run_one(job: dict) -> dict:
    """Worker entry point: one run, its result written to `job["result_path"]` and returned."""
    from .base_model import build_tokenizer
    from .training import Runner

    start = time.perf_counter()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    variant = job["variant"]
    spec = RunSpec(**job["spec"])
    runner = Runner(
        spec,
        job["base_path"],
        build_tokenizer(),
        variant_splits(variant),
        variant.task,
        job["output_dir"],
        analyses=job.get("analyses", True),
    )
    with torch_threads(1):
        result = runner.train()
    result["total_seconds"] = time.perf_counter() - start  # training, evaluations and analyses
    tmp = job["result_path"] + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f)
    os.replace(tmp, job["result_path"])
    return result


class Grid:
    """Runs the variant's search and seeds with `workers` processes, reusing finished runs. `analyses=False` skips the
    mid-training snapshot and analyses of the runs it trains (a cached run is reused whether it has them or not)."""

    def __init__(
        self,
        variant: Variant,
        base_path: str,
        cache_dir: str = DEFAULT_CACHE,
        workers: int = 2,
        log=print,
        analyses: bool = True,
    ):
        self.variant, self.base_path, self.workers, self.log = variant, base_path, workers, log
        self.analyses = analyses
        self.run_dir = os.path.join(cache_dir, "runs", f"{variant.name}-{variant.key()}")
        os.makedirs(self.run_dir, exist_ok=True)
        self.results: dict[str, dict] = {}
        self.reused = 0  # runs loaded from the cache instead of trained

    def run_folder(self, name: str) -> str:
        """The output folder of the run `name` (its trainer output and mid-training snapshot)."""
        return os.path.join(self.run_dir, "trainer", name)

    def _jobs(self, specs: list[RunSpec]) -> list[dict]:
        jobs = []
        for spec in specs:
            path = os.path.join(self.run_dir, f"{spec.name}.json")
            cached = cached_result(path, spec)
            if cached is not None:
                self.results[spec.name] = cached
                self.reused += 1
                continue
            jobs.append(
                {
                    "variant": self.variant,
                    "spec": asdict(spec),
                    "base_path": self.base_path,
                    "output_dir": self.run_folder(spec.name),
                    "result_path": path,
                    "analyses": self.analyses,
                }
            )
        return jobs

    def run(self, specs: list[RunSpec]) -> None:
        jobs = self._jobs(specs)
        if not jobs:
            return
        start = time.perf_counter()
        if self.workers <= 1:
            for job in jobs:
                result = run_one(job)
                self.results[result["name"]] = result
                self.log(f"  {result['name']}: done ({time.perf_counter() - start:.0f}s)")
            return
        with ProcessPoolExecutor(max_workers=self.workers, mp_context=get_context("spawn")) as pool:
            for result in pool.map(run_one, jobs):
                self.results[result["name"]] = result
                self.log(f"  {result['name']}: done ({time.perf_counter() - start:.0f}s)")

    def search_and_seeds(self) -> dict:
        """The whole protocol; returns `{"search": ..., "selected": ..., "runs": {config: [results per seed]}}`."""
        v = self.variant
        search_specs = [run_spec(v, m, s, lr, seed=0) for m, s in v.configs for lr in v.learning_rates]
        self.log(f"search: {len(search_specs)} runs (each configuration x {len(v.learning_rates)} learning rates)")
        self.run(search_specs)
        search, selected = {}, {}
        for m, s in v.configs:
            scores = {}
            for lr in v.learning_rates:
                result = self.results[run_spec(v, m, s, lr, 0).name]
                scores[lr] = result["final"]["val"]["pass@1"]
            search[f"{m}/{s}"] = scores
            selected[f"{m}/{s}"] = max(v.learning_rates, key=lambda lr: (scores[lr], -lr))
        seed_specs = [
            run_spec(v, m, s, selected[f"{m}/{s}"], seed) for m, s in v.configs for seed in range(1, v.seeds)
        ]
        self.log(f"seeds: {len(seed_specs)} runs at the selected learning rates")
        self.run(seed_specs)
        runs = {
            f"{m}/{s}": [self.results[run_spec(v, m, s, selected[f"{m}/{s}"], seed).name] for seed in range(v.seeds)]
            for m, s in v.configs
        }
        return {"search": search, "selected": selected, "runs": runs}


def with_updates(variant: Variant, updates: int) -> Variant:
    """The variant with another number of updates (evaluation spacing scaled to match)."""
    return replace(variant, updates=updates, eval_every=max(1, updates // 10))

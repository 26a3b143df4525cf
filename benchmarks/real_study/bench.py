# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`make bench-real`: SR-PPO against its baselines on a real model, SmolLM2-135M-Instruct, on the CPU.

    python -m benchmarks.real_study.bench           # the full comparison (about two hours on 2 cores, see below)
    python -m benchmarks.real_study.bench --timing  # 2 updates of each method at the full shapes: per-update costs and
                                                    # the full budget's projected wall time
    python -m benchmarks.real_study.bench --smoke   # a few updates on a few problems (the end-to-end test)
    python -m benchmarks.real_study.bench --model DIR --cache-dir DIR --output-dir DIR --workers 2

Steps:

1. The model: `benchmarks.smollm2.model.ensure_real_model` (converted once into `.cache/real_model/`; needs the `real`
   extra), or `--model`, any causal LM folder with a chat template.
2. The task (`benchmarks.smollm2.task`): one-operation arithmetic questions in four levels, verified by the package's
   `number` reward (the number after the last "=" / "is"; the base model never writes `\\boxed{}`). Selection: the
   base model samples `select_samples` answers to `select_problems` problems of each level (a split of their own);
   the levels whose success rate is at least `min_success` are kept. Train, validation and test problems come from the
   kept levels and are disjoint. The validation split is not used: there is no learning-rate search at this budget.
3. The base model's held-out pass@1 and pass@8 (the unbiased estimator, `trl_srppo.evaluation.pass_at_k.pass_at_k`) on
the test
   problems.
4. Runs, each seed: SR-PPO (the package's defaults), SR-PPO with k = 1 (`sr-ppo-pass1`), PPO with the linear critic
   (`ppo`), each one rollout per prompt and `prompts_per_update` prompts per update, and TRL's GRPO with 4 rollouts of
   half as many prompts. Every run makes `updates` on-policy updates (one per generated batch) at the same learning
   rate; GRPO generates twice the completions per update, so the comparison at equal updates reads every run's last
   evaluation and the one at equal generated tokens reads GRPO's evaluation at half its updates. Each run records its
   held-out curve (test pass@1 and pass@8 every `eval_every` updates, against generated tokens and training seconds)
   and its seconds per phase: generation (TRL's `_generate`), the critic (its values pass and its update) and the
   rest, mostly the policy's forward and backward.
5. `reports/real_model/README.md` and its figures.

Finished runs are kept under `<cache-dir>/real_bench/` (keyed by the settings and the model) and reused by a rerun,
so an interrupted command resumes. Two workers train two runs at once, one torch thread each.

Budget of the default (`FULL`: 3 seeds x 4 methods x 16 updates of 8 prompts; 6 test problems per kept level, at
most 24, x 8 samples, evaluated half-way and at the end; 8 selection problems per level x 8 samples), from what
`--timing` measured on the shared 2-core machine (2026-12-01, two runs at once, one thread each, load average about
4; completions of at most 32 tokens, about 25 on average; prompts of about 47 tokens with the chat template):

- training seconds per update: SR-PPO 56.8 (generation 10.1, critic 22.7, policy and the rest 24.1), SR-PPO k = 1
  56.3, PPO 42.7, GRPO 41.4 (16 completions, no critic; generation 14.3);
- evaluation: 0.71 s per sampled completion, so 24 x 8 = 192 samples take 136 s; selection: 1.38 s per sample
  (smaller batches), 4 x 8 x 8 = 256 samples take 353 s;
- per run: 16 updates + 2 evaluations: SR-PPO 909 + 272 = 1181 s, k = 1 1174 s, PPO 955 s, GRPO 935 s; per seed
  4243 s; 3 seeds 12730 worker-seconds, 6365 s on 2 workers, plus the base model (353 + 136 s) and about 10 s of
  model loading per run: about 115 minutes.

One full-budget SR-PPO run alone on one core (load average about 2.5, same day) took 27.2 s per update (generation
7.7, critic 8.3, the rest 11.2), 68 s per evaluation, and 88 + 71 s for the selection and the base model: with two runs
at once the costs above are the ones to plan with, on a quiet machine the command takes less.

`--timing` prints this projection again from the costs it measures (`projection`); `--seeds` and `--updates` change
the budget (more updates or seeds do not fit in two hours at these costs: 3 seeds x 30 updates project to 183
minutes). The machine is shared: the seconds are upper bounds of this CPU's, and the report gives the ones measured.
"""

import argparse
import datetime
import json
import os
import platform
import time
from dataclasses import asdict, replace

import numpy as np

from ..common.runs import REPO_ROOT, quiet_offline_command, torch_threads
from ..common.runspec import RunSpec, TokenCounter, run_options, run_settings
from ..common.scoring import correct_per_prompt, pass_at
from ..common.study_runner import pending_jobs, run_all, run_command
from ..smollm2.model import load_model, model_id, resolve_model
from ..smollm2.task import LEVELS, as_example, level_splits
from .bench_report import write_report
from .design import Budget

METHODS = ("sr-ppo", "sr-ppo-pass1", "ppo", "grpo")
DEFAULT_CACHE = os.path.join(REPO_ROOT, ".cache")
DEFAULT_OUTPUT = os.path.join(REPO_ROOT, "reports", "real_model")
EVAL_BATCH_PROMPTS = 8  # prompts per generate call of the evaluation (x the samples per prompt)


FULL = Budget("full", 16, 3, 8, 8, 8, 8, 4, 6)
TIMING = Budget("timing", 2, 1, 8, 2, 2, 8, 1, 1, min_success=0.0, min_train_problems=4)
SMOKE = Budget("smoke", 2, 1, 4, 1, 1, 8, 1, 1, max_completion_length=12, min_success=0.0, min_train_problems=4)


# ---- the task and the base model ------------------------------------------------------------------------------------


def splits_by_level(budget: Budget) -> dict[str, dict[str, list[dict]]]:
    sizes = {
        "select": budget.select_problems,
        "val": budget.val_problems,
        "test": budget.test_problems,
        "train": budget.min_train_problems,
    }
    return {level: level_splits(level, sizes, budget.data_seed) for level in LEVELS}


def select_levels(success: dict[str, float], min_success: float) -> list[str]:
    """The levels whose measured success rate is at least `min_success`, in `success`' order; a clear error when none
    is.

    Example:

    ```python
    >>> select_levels({"add1": 0.2, "sub1": 0.04, "mul1": 0.05}, 0.05)
    ['add1', 'mul1']
    ```
    """
    kept = [level for level in success if success[level] >= min_success]
    if not kept:
        measured = ", ".join(f"{k} {v:.3f}" for k, v in success.items())
        raise ValueError(
            f"the base model solves no level at a rate of at least {min_success} ({measured}): it would get reward 0 "
            "on every rollout. Use a stronger model, easier levels in benchmarks/smollm2/task.py, or a lower "
            "min_success"
        )
    return kept


def sample_and_score(model, tokenizer, rows: list[dict], samples: int, seed: int, max_new_tokens: int):
    """`samples` completions (temperature 1) of each row's conversation, scored by `number`: (the correct counts, the
    completions' tokens, the scored `Rollouts`)."""
    import torch

    from trl_srppo.analysis import generate_rollouts, score_rollouts
    from trl_srppo.rewards import number_reward

    with torch.random.fork_rng(devices=[]):
        rollouts = generate_rollouts(
            model,
            tokenizer,
            [as_example(r)["prompt"] for r in rows],
            num_rollouts=samples,
            temperature=1.0,
            max_new_tokens=max_new_tokens,
            seed=seed,
            batch_size=EVAL_BATCH_PROMPTS,
            columns={"answer": [r["answer"] for r in rows]},
        )
    score_rollouts(rollouts, number_reward)
    tokens = int(rollouts.completion_mask.sum())
    return correct_per_prompt(rollouts), tokens, rollouts


def held_out(model, tokenizer, rows: list[dict], budget: Budget, seed: int) -> dict:
    """Test pass@1 and pass@n (n = `eval_samples`), per level too, with the evaluation's seconds; `at_cap`, the share
    of completions that ran to `max_completion_length`, and `examples`, each level's first problem's first sample."""
    start = time.perf_counter()
    was_training = model.training
    model.eval()
    counts, tokens, rollouts = sample_and_score(
        model, tokenizer, rows, budget.eval_samples, seed, budget.max_completion_length
    )
    model.train(was_training)
    n = budget.eval_samples
    out = pass_at(counts, n, ks=sorted({1, 8, n} & set(range(1, n + 1))))
    out["by_level"] = {
        level: float(np.mean([c / n for c, r in zip(counts, rows) if r["level"] == level]))
        for level in sorted({r["level"] for r in rows})
    }
    out["correct_counts"] = [int(c) for c in counts]  # per problem, in `rows`' order (paired analyses)
    out["eval_tokens"] = tokens
    out["at_cap"] = float((rollouts.completion_mask.sum(1) >= budget.max_completion_length).float().mean())
    first = {r["level"]: p for p, r in reversed(list(enumerate(rows)))}  # level -> its first problem's index
    out["examples"] = [
        {"level": level, "problem": rows[p]["problem"], "completion": rollouts.completions[p * n],
         "correct": bool(rollouts.rewards[p * n] == 1)}
        for level, p in sorted(first.items())
    ]  # fmt: skip
    out["eval_seconds"] = time.perf_counter() - start
    return out


def critic_point(trainer, rows: list[dict], counts: list[int], samples: int) -> dict:
    """The trainer's critic on the held-out problems, as it stands: `critic_s0`, each problem's `qhat(s_0)` (the
    prompt's value, read as the prompt sampler reads it), and `critic_auc_s0`, the pooled AUC of `qhat(s_0)` against
    the evaluation's outcomes (each of the `samples` samples of a problem scored by its problem's value and labelled
    by its verified outcome; `counts` are the correct ones). 0.5 is a critic that tells no problem from another."""
    from trl_srppo.analysis.critic_quality import pooled_auc
    from trl_srppo.method.prompt_sampling import pool_values

    start = time.perf_counter()
    values = pool_values(trainer, [as_example(r) for r in rows]).float().cpu().tolist()  # (N,), under no_grad
    groups = [([v] * samples, [1] * c + [0] * (samples - c)) for v, c in zip(values, counts)]
    return {
        "critic_s0": values,
        "critic_auc_s0": pooled_auc(groups),
        "critic_seconds": time.perf_counter() - start,
    }


def level_selection(model, tokenizer, budget: Budget, by_level: dict) -> tuple[dict, list[str], float]:
    """The base model's success per level on the `select` split: (per-level numbers, the kept levels, seconds)."""
    start = time.perf_counter()
    selection = {}
    for level, splits in by_level.items():
        counts, _, rollouts = sample_and_score(
            model, tokenizer, splits["select"], budget.select_samples, 5, budget.max_completion_length
        )
        completions = rollouts.completions
        selection[level] = {
            "success": float(np.mean(counts) / budget.select_samples),
            "problems": len(counts),
            "samples": budget.select_samples,
            "example": {"problem": splits["select"][0]["problem"], "completion": completions[0]},
        }
    kept = select_levels({k: v["success"] for k, v in selection.items()}, budget.min_success)
    return selection, kept, time.perf_counter() - start


def measure_base(model_path: str, budget: Budget, by_level: dict) -> dict:
    """The selection step (success per level on the `select` split) and the base model's held-out numbers."""
    import torch

    torch.manual_seed(0)
    tokenizer, model = load_model(model_path)
    selection, kept, select_seconds = level_selection(model, tokenizer, budget, by_level)
    test = [row for level in kept for row in by_level[level]["test"]]
    base = held_out(model, tokenizer, test, budget, seed=7)
    return {"selection": selection, "kept": kept, "select_seconds": select_seconds, "test": base}


# ---- one run --------------------------------------------------------------------------------------------------------


class PhaseTimer:
    """Wall seconds spent in some of a trainer's methods, by phase (wraps them on the instance)."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self.paused = False  # True while the benchmark itself calls a wrapped method (not a training phase)

    def wrap(self, obj, method: str, phase: str) -> None:
        inner = getattr(obj, method, None)
        if inner is None:
            return

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                if not self.paused:
                    self.seconds[phase] = self.seconds.get(phase, 0.0) + time.perf_counter() - start

        setattr(obj, method, timed)


def build_trainer(
    spec: RunSpec,
    model_path: str,
    train_rows: list[dict],
    budget: Budget,
    output_dir: str,
    callback,
    extra_settings: dict | None = None,
):
    """The run's trainer through the public API: `SRPPOTrainer` for the single-rollout methods, TRL's
    `GRPOTrainer` (`trl_srppo.runtime.mixin.grpo_trainer_class()`) for GRPO, on the package's `arithmetic` task (its
    prompts as `trl-srppo train --task arithmetic` builds them, its `number` reward). `spec.options` are config fields
    of the run, `(LORA_RANK_OPTION, r)` a LoRA policy of rank `r`; `extra_settings` are config fields of the harness
    over both (its checkpoints)."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.trainer_callback import PrinterCallback

    from trl_srppo.rewards import number_reward
    from trl_srppo.tasks.data import build_prompts
    from trl_srppo.tasks.registry import get_task

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path, use_safetensors=True)
    counter = TokenCounter(number_reward, tokenizer)
    options, peft_config = run_options(spec)
    settings = {**run_settings(spec, output_dir, budget.max_completion_length), **options, **(extra_settings or {})}
    train_dataset = build_prompts(Dataset.from_list(train_rows), get_task("arithmetic"), on_bad_row="error")[0]
    if spec.method == "a2po":
        trainer = a2po_trainer(model, tokenizer, counter, settings, train_dataset, callback)
        trainer.remove_callback(PrinterCallback)
        return trainer, tokenizer, counter
    if spec.method == "grpo":
        from trl_srppo.runtime.config import GRPORuntimeConfig
        from trl_srppo.runtime.mixin import grpo_trainer_class

        config, trainer_class = GRPORuntimeConfig(**settings), grpo_trainer_class()
    else:
        from trl_srppo import SRPPOConfig, SRPPOTrainer

        config, trainer_class = SRPPOConfig(**settings, srppo_method=spec.method), SRPPOTrainer
    trainer = trainer_class(
        model=model,
        reward_funcs=counter,
        args=config,
        train_dataset=train_dataset,
        processing_class=tokenizer,
        callbacks=[callback],
        peft_config=peft_config,
    )
    trainer.remove_callback(PrinterCallback)
    return trainer, tokenizer, counter


def a2po_trainer(model, tokenizer, counter, settings: dict, train_dataset, callback):
    """TRL's A*-PO (`trl.experimental.a2po.A2POTrainer`) as a new user sets it up, on the run's settings:
    `prompts_per_update` prompts (one rollout each) per update, its offline stage's `num_value_samples` samples of
    every training prompt (so the run is given only the prompts it visits), `filter_all_incorrect` off (no arm
    filters its prompts), left padding for its batched generation. Its reward function is the token counter, which
    counts its completions' tokens from their text (A*-PO passes no token ids)."""
    from trl.experimental.a2po import A2POConfig, A2POTrainer

    # The run's settings that A*-PO's config has (not GRPO's rollouts per prompt or generation batch).
    fields = {name: value for name, value in settings.items() if name in A2POConfig.__dataclass_fields__}
    fields.setdefault("filter_all_incorrect", False)
    tokenizer.padding_side = "left"
    return A2POTrainer(
        model=model,
        reward_funcs=counter,
        args=A2POConfig(**fields),
        train_dataset=train_dataset,
        processing_class=tokenizer,
        callbacks=[callback],
    )


def train_run(
    spec: RunSpec,
    model_path: str,
    train_rows: list[dict],
    test_rows: list[dict],
    budget: Budget,
    out: str,
    save_dir: str | None = None,
    critic_every: int | None = None,
):
    """Train one run and return its curve, final numbers, timing and logs; with `save_dir`, the trained policy (and
    critic, in `critic/`) is saved there as `trainer.save_model` saves it. With `critic_every`, the critic's
    `qhat(s_0)` of every held-out problem is also recorded every `critic_every` updates (`critic_curve`), between the
    evaluations too."""
    import warnings

    import torch
    from transformers import TrainerCallback

    warnings.filterwarnings("ignore")
    state = {"eval_seconds": 0.0, "curve": []}
    holder = {}

    class CurveCallback(TrainerCallback):
        def on_step_end(self, args, train_state, control, **kwargs):
            step = train_state.global_step
            batch = prompt_values(holder["trainer"])
            if batch is not None:
                state.setdefault("prompt_values", []).append(batch)
            evaluated = step % spec.eval_every == 0 or step == spec.updates
            if critic_every and step % critic_every == 0 and not evaluated:  # the critic's values alone
                trainer = holder["trainer"]
                if getattr(trainer, "critic_backend", None) is not None:
                    state["eval_seconds"] += critic_curve_point(trainer, test_rows, step, state, holder["timer"])
            if step % spec.eval_every == 0 or step == spec.updates:
                trainer = holder["trainer"]
                training_seconds = time.perf_counter() - state["start"] - state["eval_seconds"]
                model = trainer.accelerator.unwrap_model(trainer.model)
                point = held_out(model, holder["tokenizer"], test_rows, budget, seed=1000 + step)
                if getattr(trainer, "critic_backend", None) is not None:
                    holder["timer"].paused = True  # an evaluation's critic forwards: not the critic's training phase
                    try:
                        point.update(critic_point(trainer, test_rows, point["correct_counts"], budget.eval_samples))
                    finally:
                        holder["timer"].paused = False
                    if critic_every:
                        state.setdefault("critic_curve", []).append({"update": step, "critic_s0": point["critic_s0"]})
                state["eval_seconds"] += point["eval_seconds"] + point.get("critic_seconds", 0.0)
                point.update(
                    update=step,
                    generated_tokens=holder["counter"].tokens,
                    completions=holder["counter"].completions,
                    training_seconds=training_seconds,
                    phase_seconds=dict(holder["timer"].seconds),  # so far, by phase
                )
                state["curve"].append(point)
            return control

    torch.manual_seed(spec.seed)
    trainer, tokenizer, counter = build_trainer(spec, model_path, train_rows, budget, out, CurveCallback())
    holder.update(trainer=trainer, tokenizer=tokenizer, counter=counter)
    timer = holder["timer"] = timed_phases(trainer, counter, state)
    state["start"] = time.perf_counter()
    trainer.train()
    training_seconds = time.perf_counter() - state["start"] - state["eval_seconds"]
    if save_dir is not None:
        trainer.save_model(save_dir)
    logs = [
        {k: v for k, v in entry.items() if isinstance(v, (int, float))}
        for entry in trainer.state.log_history
        if "loss" in entry or "reward" in entry
    ]
    return {
        **run_result(spec, trainer, counter, timer, state["curve"], training_seconds, state["eval_seconds"]),
        "logs": logs,
        **{name: state[name] for name in ("prompt_values", "critic_curve", "offline_tokens") if name in state},
    }


def run_result(spec: RunSpec, trainer, counter: TokenCounter, timer: PhaseTimer, curve: list[dict],
               training_seconds: float, eval_seconds: float) -> dict:  # fmt: skip
    """What every harness records of a finished run: its spec, its evaluations (`curve`, the last one `final`), its
    training and evaluation seconds, its training seconds by phase (the rest of `training_seconds` beyond `timer`'s
    phases: the policy's update), its resolved method settings and its generated tokens and completions."""
    phases = dict(timer.seconds)
    phases["policy update and the rest"] = training_seconds - sum(phases.values())
    return {
        "spec": asdict(spec),
        "name": spec.name,
        "curve": curve,
        "final": curve[-1],
        "training_seconds": training_seconds,
        "eval_seconds": eval_seconds,
        "phase_seconds": phases,
        "config": resolved_config(trainer),
        "generated_tokens": counter.tokens,
        "completions": counter.completions,
    }


def timed_phases(trainer, counter: TokenCounter, state: dict) -> PhaseTimer:
    """A `PhaseTimer` on the trainer's phases: generation, the critic's values and updates (GRPO has no critic) and
    A*-PO's offline stage, whose generated tokens so far go into `state["offline_tokens"]` when it ends."""
    timer = PhaseTimer()
    timer.wrap(trainer, "_generate", "generation")
    critic = getattr(trainer, "critic_backend", None)
    timer.wrap(critic, "values", "critic")
    timer.wrap(critic, "update", "critic")
    timer.wrap(critic, "_update_fused", "critic")
    timer.wrap(trainer, "_estimate_optimal_values", "offline values")
    if hasattr(trainer, "_estimate_optimal_values"):
        offline = trainer._estimate_optimal_values

        def counted_offline_stage():
            offline()
            state["offline_tokens"] = counter.tokens

        trainer._estimate_optimal_values = counted_offline_stage
    return timer


def resolved_config(trainer) -> dict:
    """The method's settings as the trainer resolved them (its defaults filled in): those of them the config has."""
    resolved = ("pass_at_k", "critic_type", "critic_head", "gae_lambda", "critic_learning_rate", "advantage_baseline",
                "critic_head_learning_rate")  # fmt: skip
    config = {name: getattr(trainer.args, name) for name in resolved if hasattr(trainer.args, name)}
    return {k: v for k, v in config.items() if v is None or isinstance(v, (int, float, str, bool))}


def critic_curve_point(trainer, rows: list[dict], step: int, state: dict, timer) -> float:
    """Record the critic's `qhat(s_0)` of every row at update `step` in `state["critic_curve"]`; returns its seconds
    (an evaluation's, not the critic's training phase)."""
    from trl_srppo.method.prompt_sampling import pool_values

    start = time.perf_counter()
    timer.paused = True
    try:
        values = pool_values(trainer, [as_example(r) for r in rows]).float().cpu().tolist()  # (N,), under no_grad
    finally:
        timer.paused = False
    state.setdefault("critic_curve", []).append({"update": step, "critic_s0": values})
    return time.perf_counter() - start


def prompt_values(trainer) -> dict | None:
    """The last generated batch's prompt values `qhat(s_0)`, before the critic's update on it, and the rollouts'
    outcomes, as SR-PPO's completions table holds them (its `srppo_value` column beside the reward); `None` for a
    trainer without them."""
    from trl_srppo.method.srppo_trainer import VALUE_COLUMN

    logs = getattr(trainer, "_logs", None)
    if logs is None or VALUE_COLUMN not in logs["extra"] or len(logs["rewards"]) != 1:
        return None
    (outcomes,) = logs["rewards"].values()
    return {"values": list(logs["extra"][VALUE_COLUMN]), "outcomes": list(outcomes)}


def run_job(job: dict) -> dict:
    """Worker entry point: one run, its result written to `job["result_path"]` and returned. `job["finish"]`, when
    given, is a module-level function (it travels to the worker by name) applied to the result before it is written."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    start = time.perf_counter()
    with torch_threads(1):
        result = train_run(
            RunSpec(**job["spec"]),
            job["model"],
            job["train"],
            job["test"],
            job["budget"],
            job["output_dir"],
            job.get("save_dir"),
            job.get("critic_every"),
        )
    result["total_seconds"] = time.perf_counter() - start
    if job.get("finish") is not None:
        result = job["finish"](result)
    tmp = job["result_path"] + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f)
    os.replace(tmp, job["result_path"])
    return result


def run_specs(budget: Budget, methods: tuple[str, ...] = METHODS) -> list[RunSpec]:
    """The runs of `budget`: each of `methods` on each seed."""
    return [
        RunSpec(
            method=method,
            schedule="on",
            learning_rate=budget.learning_rate,
            seed=seed,
            updates=budget.updates,
            prompts_per_update=budget.prompts_per_update,
            eval_every=budget.eval_every,
            eval_samples=budget.eval_samples,
        )
        for seed in range(budget.seeds)
        for method in methods
    ]


# ---- the whole command ----------------------------------------------------------------------------------------------


def per_update_seconds(results: list[dict]) -> dict[str, float]:
    """Mean training seconds per update of each method over its runs."""
    out = {}
    for method in METHODS:
        runs = [r for r in results if r["spec"]["method"] == method]
        if runs:
            out[method] = float(np.mean([r["training_seconds"] / r["spec"]["updates"] for r in runs]))
    return out


def projection(per_update: dict[str, float], eval_per_sample: float, select_per_sample: float, budget=FULL) -> dict:
    """The wall time of `budget` on 2 workers from measured costs: `per_update` (method -> training seconds per
    update at the budget's shapes), and the seconds per sampled completion of the evaluation and of the selection.
    Every level is counted as kept (an upper bound)."""
    levels = len(LEVELS)
    eval_seconds = budget.test_problems * levels * budget.eval_samples * eval_per_sample
    base_seconds = budget.select_problems * levels * budget.select_samples * select_per_sample + eval_seconds
    evals_per_run = len({*range(budget.eval_every, budget.updates + 1, budget.eval_every), budget.updates})
    per_run = {m: budget.updates * s + evals_per_run * eval_seconds for m, s in per_update.items()}
    worker_seconds = budget.seeds * sum(per_run.values())
    return {
        "per_run_seconds": per_run,
        "eval_seconds": eval_seconds,
        "base_seconds": base_seconds,
        "worker_seconds": worker_seconds,
        "wall_seconds": worker_seconds / 2 + base_seconds,
        "note": f"{budget.seeds} seeds x {len(per_run)} methods x {budget.updates} updates, {evals_per_run} "
        f"evaluations of {budget.test_problems * levels} problems x {budget.eval_samples} samples per run, 2 workers",
    }


def same_shapes(budget: Budget, other: Budget) -> bool:
    """Whether a run of `budget` costs per update what one of `other` does (same prompts and completion length)."""
    return (budget.prompts_per_update, budget.max_completion_length) == (
        other.prompts_per_update,
        other.max_completion_length,
    )


def bench(args) -> int:
    quiet_offline_command()
    budget = SMOKE if args.smoke else TIMING if args.timing else FULL
    if args.seeds is not None:
        budget = replace(budget, seeds=args.seeds)
    if args.updates is not None:
        budget = replace(budget, updates=args.updates, eval_every=max(1, args.updates // 2))
    start = time.perf_counter()
    model_path = resolve_model(args.model, "real_bench")
    if model_path is None:
        return 1
    key = budget.settings_key(model_id(model_path))
    cache = os.path.join(args.cache_dir, "real_bench", f"{budget.name}-{key}")
    os.makedirs(cache, exist_ok=True)
    print(f"real_bench {budget.name}: {model_path}, cache {cache}")

    by_level = splits_by_level(budget)
    base_path = os.path.join(cache, "base.json")
    if os.path.isfile(base_path):
        with open(base_path) as f:
            base = json.load(f)
    else:
        with torch_threads(1):
            base = measure_base(model_path, budget, by_level)
        with open(base_path, "w") as f:
            json.dump(base, f)
    for level, info in base["selection"].items():
        print(f"  selection {level}: success {info['success']:.3f} ({info['problems']} x {info['samples']})")
    print(f"  kept {base['kept']}; base test pass@1 {base['test']['pass@1']:.3f}")
    train = [row for level in base["kept"] for row in by_level[level]["train"]]
    test = [row for level in base["kept"] for row in by_level[level]["test"]]

    def job(spec: RunSpec, name: str) -> dict:
        return {"model": model_path, "train": train, "test": test, "budget": budget,
                "output_dir": os.path.join(cache, "trainer", name)}  # fmt: skip

    results, jobs = pending_jobs(run_specs(budget, tuple(args.methods)), cache, job)
    reused = len(results)
    print(f"  {len(jobs)} runs to train, {reused} reused")
    results += run_all(jobs, args.workers, run_job)

    per_update = per_update_seconds(results)
    eval_points = [p for r in results for p in r["curve"]]
    eval_per_sample = sum(p["eval_seconds"] for p in eval_points) / (
        len(eval_points) * len(test) * budget.eval_samples
    )
    select_per_sample = base["select_seconds"] / (budget.select_problems * len(LEVELS) * budget.select_samples)
    project = projection(per_update, eval_per_sample, select_per_sample)
    for method, seconds in per_update.items():
        print(f"  {method}: {seconds:.1f} s per update")
    if same_shapes(budget, FULL):
        print(f"  projected full budget ({project['note']}): {project['wall_seconds'] / 60:.0f} minutes")
    else:
        project = None
        print("  no projection of the full budget: this variant's shapes differ from it (run --timing)")

    meta = {
        "command": "python -m benchmarks.real_study.bench"
        + {"smoke": " --smoke", "timing": " --timing"}.get(budget.name, ""),
        "budget": asdict(budget),
        "model": os.path.relpath(model_path, REPO_ROOT) if model_path.startswith(REPO_ROOT) else model_path,
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores (shared), load average "
        f"{os.getloadavg()[0]:.1f} at the end",
        "workers": args.workers,
        "minutes": (time.perf_counter() - start) / 60,
        "reused_runs": reused,
        "per_update_seconds": per_update,
        "projection": project,
    }
    miniature = os.path.join(REPO_ROOT, "reports", "mini_repro", "results.json")
    path = write_report(args.output_dir, budget, base, results, meta, {"train": train, "test": test}, miniature)
    print(f"report: {path} ({meta['minutes']:.1f} minutes)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--smoke", action="store_true", help="2 updates, 4 prompts, one test problem per level")
    size.add_argument("--timing", action="store_true", help="2 updates of each method at the full shapes")
    parser.add_argument("--model", default=None, help="a causal LM folder with a chat template (default: SmolLM2)")
    parser.add_argument("--seeds", type=int, default=None, help="override the variant's seeds")
    parser.add_argument("--updates", type=int, default=None, help="override the variant's updates")
    parser.add_argument(
        "--methods", nargs="+", choices=METHODS, default=list(METHODS), help="train only these (a partial report)"
    )
    parser.add_argument("--workers", type=int, default=2, help="runs trained at once (one torch thread each)")
    parser.add_argument("--cache-dir", default=DEFAULT_CACHE, help="the model's and finished runs' cache")
    parser.add_argument("--output-dir", default=DEFAULT_OUTPUT, help="where README.md and the figures go")
    return run_command(parser, bench, argv)


if __name__ == "__main__":
    raise SystemExit(main())

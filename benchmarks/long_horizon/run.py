# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""One run of the long-horizon study, resumable: the trainer of `real_study.bench.build_trainer` saving a checkpoint
every `save_steps` updates into the run's work folder, with the harness's own state beside the trainer's in each
(`HARNESS_STATE`: the test evaluations so far, the token counter, the phase and training seconds, the per-update
seconds and the training batches' prompt values). A run started again goes on from its newest checkpoint that holds
that state, so a killed run loses at most `save_steps` updates, and no evaluation point is lost or made twice (an
evaluation runs at the end of its update, before that update's checkpoint is saved). `run_job` is the workers'
entry point; a finished run's JSON goes to its stage's folder and its checkpoints are deleted."""

import json
import os
import shutil
import time

import numpy as np

from ..common.runs import torch_threads
from ..common.runspec import RunSpec
from ..common.scoring import pass_at
from ..real_study.base import write_json
from ..real_study.bench import build_trainer, held_out, prompt_values, run_result, timed_phases

HARNESS_STATE = "long_horizon_state.json"  # in each checkpoint folder, written once the trainer's files are
KEPT_LOGS = (
    "reward", "entropy", "policy/kl_from_start", "critic/prompt_auc", "critic/prompt_value_trail",
    "critic/prompt_value_std", "policy/gradient_nsr", "policy/gradient_nsr_unweighted", "policy/gradient_noise",
    "policy/gradient_noise_unweighted", "policy/gradient_signal", "policy/gradient_signal_unweighted",
    "memory/peak_rss_mib", "memory/rss_mib", "completions/mean_length",
)  # fmt: skip
KEPT_PREFIXES = ("clip_ratio/",)


def resume_point(output_dir: str) -> str | None:
    """The newest complete checkpoint of `output_dir` that holds the harness's state (a run killed between the
    trainer's save and the harness's resumes from the one before), or `None`."""
    from trl_srppo.runtime.checkpoints import is_complete_checkpoint, list_checkpoints

    for folder in reversed(list_checkpoints(output_dir)):
        if is_complete_checkpoint(folder) and os.path.isfile(os.path.join(folder, HARNESS_STATE)):
            return folder
    return None


def evaluate(model, tokenizer, rows: list[dict], budget, samples: int, ks: tuple, update: int) -> dict:
    """The test evaluation at `update`: `real_study.bench.held_out` at `samples` per problem (temperature 1, seed
    1000 + update), with the unbiased pass@k for each of `ks` up to `samples`."""
    from dataclasses import replace

    point = held_out(model, tokenizer, rows, replace(budget, eval_samples=samples), seed=1000 + update)
    point.update(pass_at(np.asarray(point["correct_counts"]), samples, ks))
    point["samples"] = samples
    return point


def kept_logs(log_history: list[dict]) -> list[dict]:
    """The per-update entries of the trainer's log history, each with its `step` and the metrics of `KEPT_LOGS` and
    `KEPT_PREFIXES` it has (the generation's, such as the reward, only at a generated batch's first update)."""
    return [
        {
            "step": entry["step"],
            **{k: v for k, v in entry.items() if k in KEPT_LOGS or k.startswith(KEPT_PREFIXES)},
        }  # fmt: skip
        for entry in log_history
        if "step" in entry and ("loss" in entry or "reward" in entry)  # off-policy: reward at generation steps only
    ]


def batch_levels(trainer, level_of: dict) -> list:
    """The level of each prompt of the trainer's last generated batch (its completions table's prompts, by the
    problem's text; `None` for a prompt not found)."""
    return [level_of.get(prompt[-1]["content"]) for prompt in trainer._logs["prompt"]]


def train_resumable(
    spec: RunSpec,
    model_path: str,
    train_rows: list[dict],
    test_rows: list[dict],
    budget,
    output_dir: str,
    points: dict,
    every: int,
) -> dict:
    """Train `spec` (going on from `output_dir`'s last checkpoint, if any) with a checkpoint every `every` updates,
    evaluated on `test_rows` at `points` (update -> (samples, ks), `design.eval_points`); returns the run's result:
    its curve, per-update logs and seconds, the training batches' prompt values with their levels, its seconds by
    phase and its generated tokens."""
    import torch
    from transformers import TrainerCallback

    level_of = {row["problem"]: row["level"] for row in train_rows}
    checkpoint = resume_point(output_dir)
    state = {"curve": [], "eval_seconds": 0.0, "wall_seconds": 0.0, "update_seconds": [], "prompt_values": [],
             "tokens": 0, "completions": 0, "phases": {}, "sessions": 0}  # fmt: skip
    if checkpoint is not None:
        with open(os.path.join(checkpoint, HARNESS_STATE)) as f:
            state = json.load(f)
    state["sessions"] += 1
    holder = {}

    def training_seconds() -> float:  # this session's wall seconds since it started training, on top of the saved
        return state["wall_seconds"] + time.perf_counter() - holder["start"] - state["eval_seconds"]

    class HarnessCallback(TrainerCallback):
        def on_step_end(self, args, train_state, control, **kwargs):
            step, trainer = train_state.global_step, holder["trainer"]
            now = training_seconds()
            state["update_seconds"].append(now - sum(state["update_seconds"]))
            if (step - 1) % spec.updates_per_batch == 0:  # a generated batch's first update: its prompts' values
                batch = prompt_values(trainer)
                if batch is not None:
                    state["prompt_values"].append({"update": step, **batch, "levels": batch_levels(trainer, level_of)})
            if step in points:
                samples, ks = points[step]
                model = trainer.accelerator.unwrap_model(trainer.model)
                point = evaluate(model, holder["tokenizer"], test_rows, budget, samples, ks, step)
                state["eval_seconds"] += point["eval_seconds"]
                point.update(update=step, generated_tokens=holder["counter"].tokens,
                             completions=holder["counter"].completions, training_seconds=now,
                             phase_seconds=dict(holder["timer"].seconds))  # fmt: skip
                state["curve"].append(point)
            return control

        def on_save(self, args, train_state, control, **kwargs):
            folder = os.path.join(args.output_dir, f"checkpoint-{train_state.global_step}")
            counter = holder["counter"]
            saved = {**state, "tokens": counter.tokens, "completions": counter.completions,
                     "phases": dict(holder["timer"].seconds),
                     "wall_seconds": training_seconds() + state["eval_seconds"]}  # fmt: skip
            write_json(os.path.join(folder, HARNESS_STATE), saved)
            return control

    torch.manual_seed(spec.seed)
    checkpoints = {"save_strategy": "steps", "save_steps": every, "save_total_limit": 2, "save_only_model": False}
    trainer, tokenizer, counter = build_trainer(spec, model_path, train_rows, budget, output_dir, HarnessCallback(),
                                                checkpoints)  # fmt: skip
    counter.tokens, counter.completions = state["tokens"], state["completions"]
    timer = timed_phases(trainer, counter, state)
    timer.seconds = dict(state["phases"])
    holder.update(trainer=trainer, tokenizer=tokenizer, counter=counter, timer=timer, start=time.perf_counter())
    trainer.train(resume_from_checkpoint=checkpoint)
    return {
        **run_result(spec, trainer, counter, timer, state["curve"], training_seconds(), state["eval_seconds"]),
        "eval_tokens": sum(p["eval_tokens"] for p in state["curve"]),
        "by_update": kept_logs(trainer.state.log_history),
        "update_seconds": state["update_seconds"],
        "prompt_values": state["prompt_values"],
        "sessions": state["sessions"],
        **({"offline_tokens": state["offline_tokens"]} if "offline_tokens" in state else {}),
    }


def run_job(job: dict) -> dict:
    """Worker entry point: one run (`train_resumable` on the job's fields), its result written to
    `job["result_path"]` and returned; the run's checkpoints are deleted once it is."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    start = time.perf_counter()
    with torch_threads(1):
        result = train_resumable(RunSpec(**job["spec"]), job["model"], job["train"], job["test"], job["budget"],
                                 job["output_dir"], job["points"], job["save_steps"])  # fmt: skip
    result["total_seconds"] = time.perf_counter() - start  # this session's
    write_json(job["result_path"], result)
    shutil.rmtree(job["output_dir"], ignore_errors=True)
    return result

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`make bench-step-zero3` (part of `make bench-step`): where the time of one training step goes under DeepSpeed
ZeRO-3, GRPO and each of SR-PPO's critics, on 2 CPU processes.

Every variant is launched as `accelerate launch --config_file recipes/accelerate/zero3.yaml --num_processes 2
--mixed_precision no -m benchmarks.costs.sharded_step_run ...` (`DS_ACCELERATOR=cpu`: DeepSpeed's CPU accelerator,
gloo between the processes, one torch thread per process, float32), one launch per variant: a DeepSpeed engine per
process holds one trainer. Each process builds the variant's trainer with `step_cost.build_trainer` from a model
folder saved here with `save_pretrained` (the random-init Qwen3 model of `step_cost.build_model`, so ZeRO-3
partitions the policy as it loads), trains a warm-up step and the timed steps, and records each step's phases with
`step_cost.PhaseTimer` (the phases of `step_cost.PHASES`: generation, rewards, critic values, critic update, policy
log-probs, and the rest: the policy's backward and optimizer step and TRL's bookkeeping).

Variants (`step_cost.variants`, at the same completions per step): GRPO with 4 rollouts per prompt (`grpo`), SR-PPO
with the separate critic (`sr-ppo`, the default: under ZeRO-3 the critic gets its own DeepSpeed ZeRO-3 engine), with a
value head on the policy's hidden states (`sr-ppo-policy-head`), with a LoRA critic (`sr-ppo-lora-critic`,
`critic_use_peft=True`, replicated on every process) and with a critic adapter beside a LoRA policy
(`sr-ppo-policy-lora`), which the trainer refuses at start under ZeRO-3: the report records the refusal's message.

Machine noise: the variants run in rounds, each round a fresh launch of every variant in a rotating order. Reported:
the median seconds per step of each phase over every timed step on process 0 (and process 1's whole step beside
it), the critic's share of the step, (critic values + critic update) / whole step, and each SR-PPO variant's step as
a ratio to GRPO's, taken within each round (`step_cost.ratios`). It writes `reports/performance_zero3.md` and `.json`.

    python -m benchmarks.costs.sharded_step  # step_cost's default size, 5 rounds of 4 timed steps
    python -m benchmarks.costs.sharded_step --quick  # a tiny model, 1 round of 1 timed step (the smoke test)
"""

import argparse
import datetime
import json
import os
import shlex
import statistics
import sys
import tempfile
import time

from ..common.runs import REPO_ROOT, git_commit
from . import step_cost
from .zero3_launch import launch

VARIANTS = ("grpo", "sr-ppo", "sr-ppo-policy-head", "sr-ppo-lora-critic", "sr-ppo-policy-lora")
CONFIG = os.path.join("recipes", "accelerate", "zero3.yaml")
PROCESSES = 2
CRITIC_PHASES = ("critic values", "critic update")


# ---- the launches ---------------------------------------------------------------------------------------------------


def launch_variant(name: str, model_dir: str, settings: dict, scratch: str) -> list[dict]:
    """One launch of the variant `name` on `PROCESSES` processes under ZeRO-3: each process's outcome, by rank."""
    folder = tempfile.mkdtemp(prefix=f"{name}-", dir=scratch)
    script = ["-m", "benchmarks.costs.sharded_step_run", folder, model_dir, name, json.dumps(settings)]
    done = launch(os.path.join(REPO_ROOT, CONFIG), PROCESSES, "no", script, cwd=REPO_ROOT, timeout=3600)
    files = [os.path.join(folder, f"rank{rank}.json") for rank in range(PROCESSES)]
    if done.returncode != 0 or not all(os.path.isfile(f) for f in files):
        raise RuntimeError(
            f"the launch of {name} failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-4000:]}"
        )
    outcomes = []
    for file in files:
        with open(file, encoding="utf-8") as f:
            outcomes.append(json.load(f))
    return outcomes


def measure(names: list[str], model_dir: str, settings: dict, rounds: int, scratch: str) -> dict:
    """Every variant launched once a round, the order rotating; a variant refused at start is launched once.

    Returns `steps` (per process, per variant, per round: the timed steps' phase seconds), `refused` (variant ->
    message), `critic_class` (variant -> the critic backend the trainer built) and `launch_seconds` (per variant, the
    wall time of each launch)."""
    steps = [{name: [] for name in names} for _ in range(PROCESSES)]
    refused, critic_class, launch_seconds = {}, {}, {name: [] for name in names}
    active = list(names)
    for r in range(rounds):
        for name in active[r % len(active) :] + active[: r % len(active)]:
            start = time.perf_counter()
            outcomes = launch_variant(name, model_dir, settings, scratch)
            launch_seconds[name].append(round(time.perf_counter() - start, 1))
            if "refused" in outcomes[0]:
                refused[name] = outcomes[0]["refused"]
                active.remove(name)
                print(f"round {r} {name}: refused at start: {refused[name]}", flush=True)
                continue
            critic_class[name] = outcomes[0]["critic_class"]
            for outcome in outcomes:
                steps[outcome["rank"]][name].append(outcome["steps"])
            median = statistics.median(s["step"] for s in outcomes[0]["steps"])
            print(f"round {r} {name}: {median:.3f} s/step on process 0", flush=True)
    steps = [{name: rounds_ for name, rounds_ in by_name.items() if name not in refused} for by_name in steps]
    return dict(steps=steps, refused=refused, critic_class=critic_class, launch_seconds=launch_seconds)


def critic_shares(summary: dict) -> dict:
    """Per variant, the critic's share of the step, (critic values + critic update) / whole step: of the overall
    medians, and the median and range of the per-round shares."""
    out = {}
    for name, seconds in summary.items():
        rounds = [sum(r[p] for p in CRITIC_PHASES) / r["step"] for r in seconds["rounds"]]
        critic = sum(seconds[p] for p in CRITIC_PHASES)
        out[name] = dict(
            critic_seconds=critic, of_medians=critic / seconds["step"], median=statistics.median(rounds), rounds=rounds
        )
    return out


# ---- the report -----------------------------------------------------------------------------------------------------


def variant_rows(result: dict) -> list[str]:
    """The report's table of the variants: trainer and critic, prompts x rollouts, completions per step."""
    lines = [
        "| variant | trainer | critic backend under ZeRO-3 | prompts x rollouts per process | completions per step |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, spec in result["variants"].items():
        options = [f"`{k}={v!r}`" for k, v in spec.items() if k not in ("trainer", "prompts", "rollouts", "lora")]
        if spec.get("lora"):
            options.append("LoRA policy")
        trainer = ("GRPOTrainer" if spec["trainer"] == "grpo" else "SRPPOTrainer") + (
            f" ({', '.join(options)})" if options else ""
        )
        backend = result["critic_class"].get(name) or ("refused at start" if name in result["refused"] else "-")
        completions = spec["prompts"] * spec["rollouts"]
        lines.append(
            f"| {name} | {trainer} | {backend} | {spec['prompts']} x {spec['rollouts']} | "
            f"{PROCESSES * completions} ({completions} per process) |"
        )
    return lines


def write_report(result: dict, output_dir: str) -> str:
    setup, info, summary = result["setup"], result["machine"], result["seconds"]
    names = list(summary)
    lines = [
        "# Cost of a training step under DeepSpeed ZeRO-3: GRPO and SR-PPO's critics",
        "",
        "Written by `python -m benchmarks.costs.sharded_step`; regenerate with `make bench-step-zero3` (also run by "
        "`make bench-step`). Every figure below was measured in the run described here.",
        "",
    ]
    if setup["quick"]:
        lines += ["**Quick mode** (`--quick`): a tiny model and one round, a smoke test; its figures say nothing.", ""]
    if setup.get("note"):
        lines += [f"**Note on this run:** {setup['note']}", ""]
    lines += [
        f"- Command: `{result['command']}` (wall time {result['wall_seconds'] / 60:.1f} min)",
        f"- Date: {result['date']}; code: {result['commit']}",
        f"- Machine: {info['platform']}, {info['cpu_count']} CPUs; load average (1, 5, 15 min) at start "
        f"{info['load_average_at_start']}, at end {info['load_average_at_end']}; torch {info['torch']}, "
        f"transformers {info['transformers']}, trl {info['trl']}, deepspeed {info['deepspeed']}",
        f"- Engine: each variant launched by `accelerate launch --config_file {CONFIG} --num_processes {PROCESSES} "
        "--mixed_precision no` with `DS_ACCELERATOR=cpu` (DeepSpeed ZeRO-3 on the CPU, gloo between the processes), "
        "one torch thread per process, float32; the policy loaded from a saved folder, partitioned as it loads.",
        f"- Model: random-init Qwen3 model from a config ({setup['num_layers']} layers, "
        f"hidden {setup['hidden_size']}, intermediate {setup['intermediate_size']}, "
        f"vocabulary {setup['vocab_size']}); "
        f"{setup['prompt_tokens']}-token prompts, {setup['completion_tokens']} completion tokens (every completion "
        "the same length); one optimizer step per generated batch.",
        f"- Timing: {setup['rounds']} round(s), each a fresh launch of every variant in a rotating order, every "
        f"launch a warm-up step then {setup['steps']} timed steps; medians over all timed steps on process 0.",
        "",
        *variant_rows(result),
    ]
    if result["refused"]:
        lines += ["", "## Refused at start", "", "| variant | the trainer's message |", "| --- | --- |"]
        lines += [f"| {name} | {message} |" for name, message in result["refused"].items()]
    lines += step_cost.phase_tables(summary, names, " on process 0")
    lines += [
        "",
        "Critic values are 0 where the values come from the critic update's own forward (the fused critic step, "
        "SR-PPO's default) or from the policy's forward (the policy head, its no-grad policy pass in its update).",
    ]
    shares = result["critic_share"]
    lines += [
        "",
        "## The critic's share of the step",
        "",
        "(critic values + critic update) / whole step, on process 0.",
        "",
        "| variant | critic (s) | whole step (s) | share of the medians | median share over rounds | range (rounds) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name in names:
        share, low, high = shares[name], min(shares[name]["rounds"]), max(shares[name]["rounds"])
        lines.append(
            f"| {name} | {share['critic_seconds']:.4f} | {summary[name]['step']:.4f} | "
            f"{100 * share['of_medians']:.1f}% | {100 * share['median']:.1f}% | {100 * low:.1f}% - {100 * high:.1f}% |"
        )
    lines += [
        "",
        "## Ratios",
        "",
        "Each ratio is taken within a round, where the variants ran one after the other, and the median over the "
        "rounds is reported with their range; the last column is the ratio of the overall medians. The floor is "
        "GRPO's step plus the separate critic's update (one critic forward and backward).",
        *step_cost.ratio_table(result["ratios"]),
        "",
        "## Process 1 beside process 0",
        "",
        "| variant | whole step, process 0 (s) | whole step, process 1 (s) | process 1 / process 0 |",
        "| --- | --- | --- | --- |",
    ]
    other = result["seconds_by_process"][1]
    lines += [
        f"| {n} | {summary[n]['step']:.4f} | {other[n]['step']:.4f} | {other[n]['step'] / summary[n]['step']:.3f} |"
        for n in names
    ]
    lines += [
        "",
        "Timing on a shared CPU is noisy: compare the ratios (measured side by side), not the absolute seconds.",
        "",
    ]
    os.makedirs(output_dir, exist_ok=True)
    path = os.path.join(output_dir, "performance_zero3.md")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    with open(os.path.join(output_dir, "performance_zero3.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
    return path


# ---- entry point ----------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a tiny model, 1 round of 1 timed step (the smoke test)")
    parser.add_argument("--rounds", type=int, help="rounds, each a launch of every variant (default 5, 1 quick)")
    parser.add_argument("--steps", type=int, help="timed steps per launch, after a warm-up step (default 4, 1 quick)")
    parser.add_argument("--completions", type=int, default=8, help="completions per step, both processes together")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated, among step_cost's variants")
    parser.add_argument("--note", help="a sentence the report shows about this run (e.g. other jobs on the machine)")
    parser.add_argument("--output-dir", default=os.path.join(REPO_ROOT, "reports"))
    args = parser.parse_args(argv)
    if args.completions % (4 * PROCESSES):
        parser.error(f"--completions must be a multiple of {4 * PROCESSES} (groups of 4 rollouts on every process).")
    per_process = args.completions // PROCESSES
    names = [n.strip() for n in args.variants.split(",") if n.strip()]
    unknown = [n for n in names if n not in step_cost.variants(per_process)]
    if unknown or not names:
        parser.error(f"--variants: unknown {unknown or args.variants!r}; choose among {', '.join(VARIANTS)}.")
    rounds, steps = args.rounds or (1 if args.quick else 5), args.steps or (1 if args.quick else 4)

    import deepspeed
    import torch

    torch.set_num_threads(1)  # as every launched process runs
    started = time.perf_counter()
    size = dict(step_cost.SIZES["quick" if args.quick else "default"])
    settings = dict(size=size, completions=per_process, steps=steps)
    info = dict(step_cost.machine(), deepspeed=deepspeed.__version__)
    with tempfile.TemporaryDirectory() as scratch:
        model_dir = os.path.join(scratch, "model")
        step_cost.build_model(size).save_pretrained(model_dir)
        measured = measure(names, model_dir, settings, rounds, scratch)
    info["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    by_process = [step_cost.summarize(steps_) for steps_ in measured["steps"]]
    spec = step_cost.variants(per_process)
    result = {
        "command": shlex.join(["python", "-m", "benchmarks.costs.sharded_step", *argv]),
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "commit": git_commit("src", "benchmarks"),
        "wall_seconds": round(time.perf_counter() - started, 1),
        "machine": info,
        "setup": {
            **size,
            "quick": args.quick,
            "rounds": rounds,
            "steps": steps,
            "processes": PROCESSES,
            "note": args.note,
        },
        "variants": {name: spec[name] for name in names},
        "refused": measured["refused"],
        "critic_class": measured["critic_class"],
        "seconds": by_process[0],
        "seconds_by_process": by_process,
        "critic_share": critic_shares(by_process[0]),
        "ratios": step_cost.ratios(by_process[0]),
        "launch_seconds": measured["launch_seconds"],
        "steps": measured["steps"],
    }
    print(f"wrote {write_report(result, args.output_dir)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

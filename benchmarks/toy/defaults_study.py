# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`make bench-defaults`: the measurements that chose SR-PPO's defaults, on the miniature reproduction.

Each configuration changes one thing from the previous defaults (k = 4, a value head starting at 0.5, critic learning
rate 1e-3) or from the value-head start, and trains off-policy at the bench's selected policy learning rate (3e-4,
unless the row says otherwise) on 3 seeds, with the bench's task, base model, protocol and evaluation
(`benchmarks/toy/training.py`). Every option is written out, so a configuration means the same whatever the trainer's
defaults are. Writes `reports/mini_repro/defaults.md` and `defaults.json`.

    python -m benchmarks.toy.defaults_study          # every configuration of STUDY x 3 seeds, 300 updates
    python -m benchmarks.toy.defaults_study --quick  # 60 updates, 1 seed
    python -m benchmarks.toy.defaults_study --smoke  # 3 rows, a few updates (the end-to-end test)

A second table asks whether the choice of k depends on how hard the prompts are for the model: the same task with its
longest chains cut (`MIXES`), each with a base model warm-started on its own chains, runs GRPO and SR-PPO with k = 1,
2 and 4 (`MIX_CONFIGS`), and, on-policy at the largest learning rate of the bench's grid, GRPO and SR-PPO with k = 1
and 2 (the default also with a learning-rate warm-up, and with a KL penalty). Cutting the long chains moves the base
model's test prompts from mostly hard (the bench's chains of 1-6 steps) to mostly easy, as the paper's training
prompts are.
"""

import argparse
import datetime
import json
import os
import time
from dataclasses import replace

from trl_srppo.evaluation.markdown import markdown_table
from trl_srppo.tasks.toy import TaskSpec

from ..common.runs import REPO_ROOT, git_commit, quiet_offline_command, torch_threads
from ..common.runspec import RunSpec
from ..common.stats import mean_std
from ..common.tables import fmt
from .base_model import DEFAULT_CACHE, load_or_build_base_model
from .grid import VARIANTS, Grid, held_out_prompts, variant_splits
from .scoring import evaluate

LEARNING_RATE = 3e-4  # the bench's selected policy learning rate for SR-PPO, off-policy
PREVIOUS = {"pass_at_k": 4, "critic_value_init": "zero", "critic_learning_rate": 1e-3}
STARTED = {**PREVIOUS, "critic_value_init": "success_rate"}
# The current defaults written out: head at the success rate, k = 2, the critic's learning rate the policy's.
CURRENT = {**STARTED, "pass_at_k": 2, "critic_learning_rate": LEARNING_RATE}
LR_1E3 = {"learning_rate": 1e-3}  # the largest policy learning rate of the bench's grid, where runs can collapse
ON_1E3 = {**STARTED, "pass_at_k": 2, "steps_per_generation": 1, **LR_1E3}  # on-policy at that rate

# (name, what changes, options): each row changes one thing from the row it names.
STUDY = (
    ("previous defaults", "k = 4, head at 0.5, critic lr 1e-3", PREVIOUS),
    (
        "critic lr 1e-5",
        "the trainer's previous fixed critic lr (0.03x the policy's)",
        {**PREVIOUS, "critic_learning_rate": 1e-5},
    ),
    ("head at success rate", "previous defaults, head starting at the first batch's success rate", STARTED),
    ("critic lr 3e-4", "head at success rate, critic lr 1x the policy's", {**STARTED, "critic_learning_rate": 3e-4}),
    ("critic lr 3e-3", "head at success rate, critic lr 10x the policy's", {**STARTED, "critic_learning_rate": 3e-3}),
    ("critic lr 1e-2", "head at success rate, critic lr 33x the policy's", {**STARTED, "critic_learning_rate": 1e-2}),
    ("k = 1", "head at success rate, no Pass@k weight (SR-PPO Pass@1)", {**STARTED, "pass_at_k": 1}),
    ("k = 2", "head at success rate, k = 2", {**STARTED, "pass_at_k": 2}),
    ("k = 3", "head at success rate, k = 3", {**STARTED, "pass_at_k": 3}),
    ("k = 8", "head at success rate, k = 8", {**STARTED, "pass_at_k": 8}),
    ("k = 4, normalised", "head at success rate, weight / batch mean", {**STARTED, "pass_at_k_normalize": True}),
    (
        "k = 2, normalised",
        "head at success rate, k = 2, weight / batch mean",
        {**STARTED, "pass_at_k": 2, "pass_at_k_normalize": True},
    ),
    ("critic warm-up", "head at success rate, 8 critic-only steps first", {**STARTED, "critic_warmup_steps": 8}),
    ("k = 2, lr 1e-3", "k = 2 at the largest policy lr of the bench's grid", {**STARTED, "pass_at_k": 2, **LR_1E3}),
    (
        "k = 2, lr 1e-3, critic lr 5e-3",
        "the same with the critic's lr at 5x the policy's",
        {**STARTED, "pass_at_k": 2, **LR_1E3, "critic_learning_rate": 5e-3},
    ),
    (
        "k = 2, normalised, lr 1e-3",
        "the same with the weight / batch mean",
        {**STARTED, "pass_at_k": 2, "pass_at_k_normalize": True, **LR_1E3},
    ),
    (
        "k = 2, on-policy, lr 1e-3",
        "one update per generated batch, at lr 1e-3",
        ON_1E3,
    ),
    (
        "k = 2, on-policy, lr 1e-3, critic lr 3e-4",
        "the same with the critic's lr at 0.3x the policy's",
        {**ON_1E3, "critic_learning_rate": 3e-4},
    ),
    (
        "k = 2, on-policy, lr 1e-3, warm-up",
        "the same with the learning rate warmed up over the first 10% of the updates",
        {**ON_1E3, "lr_scheduler_type": "constant_with_warmup", "warmup_steps": 0.1},
    ),
    (
        "k = 2, on-policy, lr 1e-3, gradient clip 0.3",
        "the same with the policy's gradient norm clipped at 0.3 instead of 1",
        {**ON_1E3, "max_grad_norm": 0.3},
    ),
    (
        "k = 2, on-policy, lr 1e-3, KL 0.04",
        "the same with a KL penalty to the reference model (beta = 0.04)",
        {**ON_1E3, "beta": 0.04},
    ),
    (
        "k = 2, on-policy, lr 1e-3, entropy bonus",
        "the same with TRL's entropy bonus (entropy_coef = 0.01)",
        {**ON_1E3, "entropy_coef": 0.01},
    ),
    (
        "prompt baseline, on-policy, lr 1e-3",
        "the same with every token against the value of the prompt, qhat(s_0)",
        {**ON_1E3, "advantage_baseline": "prompt"},
    ),
    (
        "k = 1, on-policy, lr 1e-3",
        "the same without the Pass@k weight",
        {**ON_1E3, "pass_at_k": 1},
    ),
    (
        "k = 2, normalised, on-policy, lr 1e-3",
        "the same with the weight / batch mean",
        {**ON_1E3, "pass_at_k_normalize": True},
    ),
    (
        "critic warm-up, on-policy, lr 1e-3",
        "the same with 10 critic-only steps first (the policy frozen while the critic learns its values)",
        {**ON_1E3, "critic_warmup_steps": 10},
    ),
    (
        "value head on the policy, on-policy, lr 1e-3",
        "the same with critic_type='policy_head' (a linear head on the policy's hidden states)",
        {**ON_1E3, "critic_type": "policy_head"},
    ),
    (
        "halved actor mini-batch",
        "head at success rate, 16 prompts per update, 8 updates per generated batch of 128",
        {**STARTED, "per_device_train_batch_size": 16, "steps_per_generation": 8},
    ),
    ("current defaults", "head at success rate, k = 2, critic lr 1x the policy's", CURRENT),
    (
        "critic loss: squared error",
        "current defaults, the critic's BCE term dropped",
        {**CURRENT, "critic_loss_type": "mse"},
    ),
    ("clip-higher", "current defaults, upper clip 0.28 (DAPO's clip-higher)", {**CURRENT, "epsilon_high": 0.28}),
    ("2 critic epochs", "current defaults, two critic passes over each batch", {**CURRENT, "critic_epochs": 2}),
    ("KL 0.04", "current defaults, a KL penalty to the reference model (beta = 0.04)", {**CURRENT, "beta": 0.04}),
    (
        "prompt baseline",
        "current defaults, every token against the value of the prompt, qhat(s_0)",
        {**CURRENT, "advantage_baseline": "prompt"},
    ),
    (
        "64 prompts per update",
        "current defaults, as many completions per update as GRPO's 16 prompts x 4 rollouts",
        {**CURRENT, "per_device_train_batch_size": 64},
    ),
)


# The difficulty mixes: the most steps of a chain (the bench's task has 1-6), and the configurations run on each, every
# SR-PPO option written out as in STUDY; GRPO is the bench's (16 prompts x 4 rollouts per update). The last five rows
# train on-policy at the grid's largest learning rate, where runs can collapse, the critic's rate the policy's: the
# last two with the policy's learning rate warmed up over the first 10% of the updates, or a KL penalty.
MIXES = (4, 5, 6)
ON_POLICY_1E3 = {"steps_per_generation": 1, **LR_1E3}
MIX_CONFIGS = (
    ("GRPO (4 rollouts)", "grpo", {}),
    ("SR-PPO k = 1", "sr-ppo", {**CURRENT, "pass_at_k": 1}),
    ("SR-PPO k = 2 (default)", "sr-ppo", CURRENT),
    ("SR-PPO k = 4", "sr-ppo", {**CURRENT, "pass_at_k": 4}),
    ("GRPO (4 rollouts), on-policy, lr 1e-3", "grpo", ON_POLICY_1E3),
    (
        "SR-PPO k = 1, on-policy, lr 1e-3",
        "sr-ppo",
        {**CURRENT, "pass_at_k": 1, "critic_learning_rate": 1e-3, **ON_POLICY_1E3},
    ),
    (
        "SR-PPO k = 2 (default), on-policy, lr 1e-3",
        "sr-ppo",
        {**CURRENT, "critic_learning_rate": 1e-3, **ON_POLICY_1E3},
    ),
    (
        "SR-PPO k = 2, on-policy, lr 1e-3, warm-up",
        "sr-ppo",
        {
            **CURRENT,
            "critic_learning_rate": 1e-3,
            **ON_POLICY_1E3,
            "lr_scheduler_type": "constant_with_warmup",
            "warmup_steps": 0.1,
        },
    ),
    (
        "SR-PPO k = 2, on-policy, lr 1e-3, KL 0.04",
        "sr-ppo",
        {**CURRENT, "critic_learning_rate": 1e-3, **ON_POLICY_1E3, "beta": 0.04},
    ),
)


def mix_variant(variant, max_steps: int):
    """`variant` on chains of 1 to `max_steps` steps; the bench's own task keeps its name (and so its cached runs)."""
    task = TaskSpec(min_steps=variant.task.min_steps, max_steps=max_steps)
    if task == variant.task:
        return variant
    return replace(variant, name=f"{variant.name}-steps1-{max_steps}", task=task)


def run_specs(variant, seeds: int, configs) -> dict[str, list[RunSpec]]:
    """The runs of every `(name, method, options)` of `configs` on `variant`, per seed, off-policy at the bench's
    selected policy learning rate."""
    return {
        name: [
            RunSpec(
                method,
                "off",
                LEARNING_RATE,
                seed,
                variant.updates,
                variant.prompts_per_update,
                variant.eval_every,
                options=tuple(sorted(options.items())),
            )
            for seed in range(seeds)
        ]
        for name, method, options in configs
    }


def run_mixes(variant, mixes, seeds: int, configs, cache_dir: str, workers: int) -> list[dict]:
    """For each mix: the base model's held-out test pass@k and difficulty bins (and validation pass@1), and the runs
    of each configuration."""
    out = []
    for max_steps in mixes:
        mixed = mix_variant(variant, max_steps)
        splits = variant_splits(mixed)
        with torch_threads(1):
            base_path, base_model, tokenizer = load_or_build_base_model(
                mixed.task, mixed.warm_start, held_out_prompts(splits), cache_dir
            )
            base, base_val = (
                evaluate(
                    base_model, tokenizer, splits[split], 8, seed=7, max_new_tokens=mixed.task.max_completion_tokens
                )
                for split in ("test", "val")
            )
            base["val_pass@1"] = base_val["pass@1"]
            grid = Grid(mixed, base_path, cache_dir, workers=workers)
            plan = run_specs(mixed, seeds, configs)
            grid.run([spec for runs in plan.values() for spec in runs])
        runs = {name: [grid.results[spec.name] for spec in specs_] for name, specs_ in plan.items()}
        out.append({"max_steps": max_steps, "base": base, "runs": runs, "reused": grid.reused})
    return out


EARLY_UPDATES = 10  # the first updates of a run, whose training reward and truncation the mix table reports


def early_mean(logs: list[dict], key: str, updates: int = EARLY_UPDATES) -> float:
    """Mean of a logged training metric over a run's first `updates` optimizer steps (the trainer logs every step)."""
    values = [entry[key] for entry in logs if key in entry and entry.get("step", 0) <= updates]
    return sum(values) / len(values) if values else float("nan")


def mix_table(mixes: list[dict], configs=MIX_CONFIGS) -> list[str]:
    header = ["chains", "base test pass@1 / pass@8, val pass@1", "base test prompts easy / medium / hard"]
    header += ["configuration", "test pass@1", "test pass@8", "val pass@1", "seeds below the base (val)"]
    header += [f"training reward, updates 1-{EARLY_UPDATES}", f"truncated completions, updates 1-{EARLY_UPDATES}"]
    rows = []
    for mix in mixes:
        base = mix["base"]
        shares = " / ".join(f"{100 * base['bins'][b]:.0f}%" for b in ("easy", "medium", "hard"))
        summary = f"{base['pass@1']:.3f} / {base['pass@8']:.3f}, {base['val_pass@1']:.3f}"
        for i, (name, _, _) in enumerate(configs):
            runs = mix["runs"][name]
            cells = [f"1-{mix['max_steps']} steps", summary, shares] if i == 0 else ["", "", ""]
            cells.append(name)
            cells += [fmt(*mean_std([r["final"]["test"][m] for r in runs])) for m in ("pass@1", "pass@8")]
            val = [r["final"]["val"]["pass@1"] for r in runs]
            cells += [fmt(*mean_std(val)), f"{sum(v < base['val_pass@1'] for v in val)} of {len(val)}"]
            for key in ("reward", "completions/clipped_ratio"):  # the first updates, where a collapse starts
                cells.append(fmt(*mean_std([early_mean(r["logs"], key) for r in runs])))
            rows.append(cells)
    return markdown_table(header, rows).splitlines()


def specs(variant, seeds: int, study=STUDY) -> dict[str, list[RunSpec]]:
    """The runs of every configuration of `study` (SR-PPO), per seed."""
    return run_specs(variant, seeds, [(name, "sr-ppo", options) for name, _, options in study])


def table(results: dict[str, list[dict]], study=STUDY) -> list[str]:
    header = ["configuration", "what changes", "test pass@1", "test pass@8", "val pass@1", "batch NSR (mid, own k)"]
    header.append("qhat(s_0) easy / medium / hard vs success (mid)")
    rows = []
    for name, what, _ in study:
        runs = results[name]
        cells = [name, what]
        for split, metric in (("test", "pass@1"), ("test", "pass@8"), ("val", "pass@1")):
            cells.append(fmt(*mean_std([r["final"][split][metric] for r in runs])))
        mids = [r["mid"] for r in runs if r.get("mid") and "nsr" in r["mid"]]
        cells.append(fmt(*mean_std([m["nsr"]["batch"]["weighted"]["nsr"] for m in mids]), digits=2))
        cals = [m["calibration"] for m in mids]
        cells.append(  # no mid-training analysis (a value head on the policy): n/a, as the NSR
            " / ".join(
                f"{mean_std([c[b]['mean_qhat_s0'] for c in cals])[0]:.2f} vs "
                f"{mean_std([c[b]['success_rate'] for c in cals])[0]:.2f}"
                for b in ("easy", "medium", "hard")
            )
            if cals
            else "n/a"
        )
        rows.append(cells)
    return markdown_table(header, rows).splitlines()


def without_logs(results: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """Each run's result without its per-step logs (kept in the runs' cache)."""
    return {name: [{k: v for k, v in r.items() if k != "logs"} for r in runs] for name, runs in results.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="60 updates, 1 seed")
    size.add_argument("--smoke", action="store_true", help="the first 3 rows, the bench's smoke size (for the tests)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cache-dir", default=DEFAULT_CACHE)
    parser.add_argument("--output-dir", default=os.path.join(REPO_ROOT, "reports", "mini_repro"))
    args = parser.parse_args(argv)
    quiet_offline_command()
    start, commit = time.perf_counter(), git_commit()
    full = VARIANTS["full"]
    variant = replace(full, name="defaults")
    if args.quick:
        variant = replace(full, name="defaults", updates=60, eval_every=15)
    if args.smoke:
        variant = replace(VARIANTS["smoke"], name="defaults-smoke")
    seeds = 1 if args.quick or args.smoke else 3
    study = STUDY[:3] if args.smoke else STUDY
    mixes, mix_configs = ((2,), MIX_CONFIGS[:2]) if args.smoke else (MIXES, MIX_CONFIGS)
    splits = variant_splits(variant)
    with torch_threads(1):
        base_path, _, _ = load_or_build_base_model(
            variant.task, variant.warm_start, held_out_prompts(splits), args.cache_dir
        )
        grid = Grid(variant, base_path, args.cache_dir, workers=args.workers)
        plan = specs(variant, seeds, study)
        grid.run([spec for runs in plan.values() for spec in runs])
    results = {name: [grid.results[spec.name] for spec in runs] for name, runs in plan.items()}
    mix_results = run_mixes(variant, mixes, seeds, mix_configs, args.cache_dir, args.workers)
    reused = grid.reused + sum(mix["reused"] for mix in mix_results)
    mix_runs = sum(len(runs) for mix in mix_results for runs in mix["runs"].values())
    os.makedirs(args.output_dir, exist_ok=True)
    minutes = (time.perf_counter() - start) / 60
    size = " --quick" if args.quick else " --smoke" if args.smoke else ""
    command = "python -m benchmarks.toy.defaults_study" + size
    lines = [
        "# How SR-PPO's defaults were chosen",
        "",
        f"Produced by `{command}` at git commit `{commit}`, {datetime.datetime.now():%Y-%m-%d %H:%M}: "
        f"{len(study)} configurations x {seeds} seed(s) and {mix_runs} runs on {len(mixes)} difficulty mixes, "
        f"{variant.updates} updates each, {minutes:.1f} minutes with {args.workers} worker processes ({reused} runs "
        "reused from the cache).",
        "",
        "SR-PPO off-policy on the miniature reproduction's task and base model (`benchmarks/README.md`), policy "
        f"learning rate {LEARNING_RATE:g}, {variant.prompts_per_update} prompts x 1 rollout per update; every SR-PPO "
        "option is written out "
        "(`STUDY` in `benchmarks/toy/defaults_study.py`). Mean ± std over seeds; held-out test prompts, 8 samples "
        "each. "
        "The batch NSR is measured at mid-training with the run's own critic and a Pass@k weight of the default k "
        "(as in `reports/mini_repro/README.md`); the last column is the critic's mean `qhat(s_0)` per difficulty bin "
        "against the bin's success rate over 8 samples (both n/a for a value head on the policy, which the "
        "mid-training analysis does not load).",
        "",
        *table(results, study),
        "",
        "## k and the difficulty mix",
        "",
        "The same task with its longest chains cut, so that the base model finds most prompts easy (the bench's "
        "chains of 1-6 steps leave most of them hard). Each mix has a base model warm-started on its own chains "
        "(the bench's warm start), its own held-out prompts, and runs off-policy at policy learning rate "
        f"{LEARNING_RATE:g} for {variant.updates} updates, and on-policy at the grid's largest learning rate (1e-3, "
        "the critic's the same) where the last column counts the seeds that collapse (validation pass@1 below the "
        "base model's); GRPO takes half as many prompts per update with 4 rollouts each (`MIX_CONFIGS` in "
        "`benchmarks/toy/defaults_study.py`). Difficulty bins of the base model's test prompts from 8 samples "
        "(easy >= 6 "
        "correct, hard <= 2). The last two columns average the training batches of the first updates: their success "
        "rate, and the share of completions cut at `max_completion_length` (no end of sequence). Mean ± std over "
        "seeds.",
        "",
        *mix_table(mix_results, mix_configs),
        "",
    ]
    with open(os.path.join(args.output_dir, "defaults.md"), "w") as f:
        f.write("\n".join(lines))
    slim = without_logs(results)
    with open(os.path.join(args.output_dir, "defaults.json"), "w") as f:
        mixes_slim = [{**mix, "runs": without_logs(mix["runs"])} for mix in mix_results]
        json.dump(
            {"command": command, "commit": commit, "results": slim, "mixes": mixes_slim}, f, indent=1, default=str
        )
    print(f"report: {os.path.join(args.output_dir, 'defaults.md')} ({minutes:.1f} minutes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

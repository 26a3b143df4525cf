# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`make bench`: the paper's comparisons in miniature on a CPU.

Builds (or loads from `.cache/bench/`) the warm-started base model, runs SR-PPO, SR-PPO Pass@1, PPO, the TD
ablation and GRPO through the same learning-rate search and seeds, and writes `reports/mini_repro/README.md` with
the tables and figures.

    python -m benchmarks.toy.run  # the full grid (3 learning rates, 3 seeds, 300 updates)
    python -m benchmarks.toy.run --quick # the same code, 2 seeds and 60 updates
    python -m benchmarks.toy.run --smoke # a few updates of two methods (the end-to-end test)
"""

import argparse
import datetime
import os
import platform
import time

from ..common.runs import REPO_ROOT, git_commit, quiet_offline_command, torch_threads
from .base_model import DEFAULT_CACHE, load_or_build_base_model
from .grid import VARIANTS, Grid, held_out_prompts, variant_splits
from .mid_analysis import paper_way_nsr
from .report import write_report
from .scoring import evaluate

NOTES = [
    "- The task is a toy with a 2-layer, 32-wide model: it checks that the estimators behave as the paper says on a "
    "problem where everything can be measured, not that the paper's numbers carry over to Qwen3-1.7B on math.",
    "- Single-rollout methods and GRPO make the same number of policy updates; GRPO sees twice as many completions "
    "per update (the paper's matching), so compare the token-axis figure as well.",
    "- The learning rates were searched on seed 0 with the validation prompts; the other seeds reuse the choice.",
    "- Every configuration runs the trainers' defaults except where its name says otherwise; the critic's learning "
    "rate is the SR-PPO trainer's default (the policy's), not tuned per method.",
    "- LoRA-policy configurations: rank 8, alpha 16, every linear layer, the same learning-rate grid as the others; "
    "their selected rate is the grid's largest, so they may be under-tuned, and they have no mid-training analyses "
    "(those take a whole model). Compare them with the LoRA GRPO run, not with the full-model runs.",
    "- Mid-training snapshots are fresh models loaded with the weights (a `copy.deepcopy` of an Accelerate-prepared "
    "model keeps calling the live model's forward).",
]


def main(argv: list[str] | None = None) -> int:
    """Parse the options, run the grid (one CPU thread per run) and write the report."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="2 seeds, 60 updates (under 10 minutes on 2 cores)")
    size.add_argument("--smoke", action="store_true", help="1 seed, 2 methods, 4 updates (for the tests)")
    parser.add_argument("--workers", type=int, default=2, help="runs trained in parallel (one CPU thread each)")
    parser.add_argument("--cache-dir", default=DEFAULT_CACHE, help="base model and finished runs")
    parser.add_argument("--output-dir", default=os.path.join(REPO_ROOT, "reports", "mini_repro"))
    args = parser.parse_args(argv)
    with torch_threads(1):
        return bench(args)


def bench(args) -> int:
    """The grid and the report for parsed options."""
    quiet_offline_command()

    variant = VARIANTS["smoke" if args.smoke else "quick" if args.quick else "full"]
    start = time.perf_counter()
    commit = git_commit()  # the code that runs, recorded before the (long) grid
    print(
        f"variant {variant.name}: {len(variant.configs)} configurations, {variant.seeds} seed(s), "
        f"{variant.updates} updates, learning rates {variant.learning_rates}"
    )
    splits = variant_splits(variant)
    base_path, base_model, tokenizer = load_or_build_base_model(
        variant.task, variant.warm_start, held_out_prompts(splits), args.cache_dir
    )
    base = evaluate(
        base_model, tokenizer, splits["test"], 8, seed=7, max_new_tokens=variant.task.max_completion_tokens
    )
    print(
        f"base model {base_path}: test pass@1 {base['pass@1']:.3f}, pass@8 {base['pass@8']:.3f}, bins {base['bins']}"
    )

    grid = Grid(variant, base_path, args.cache_dir, workers=args.workers)
    protocol = grid.search_and_seeds()
    protocol["paper_nsr"] = paper_way_nsr(
        protocol["runs"],
        grid.run_folder,
        tokenizer,
        splits["analysis"],
        variant.task.max_completion_tokens,
    )
    base_val = evaluate(
        base_model, tokenizer, splits["val"], 8, seed=7, max_new_tokens=variant.task.max_completion_tokens
    )
    base["val_pass@1"] = base_val["pass@1"]
    command = "python -m benchmarks.toy.run" + (" --quick" if args.quick else " --smoke" if args.smoke else "")
    meta = {
        "command": command,
        "variant": variant.name,
        "commit": commit,
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores (shared)",
        "workers": args.workers,
        "grid_minutes": (time.perf_counter() - start) / 60,
        "reused_runs": grid.reused,
        "total_runs": len(grid.results),
        "summed_run_minutes": sum(r.get("total_seconds", float("nan")) for r in grid.results.values()) / 60,
        "notes": NOTES,
    }
    path = write_report(args.output_dir, variant, protocol, base, meta)
    print(f"report: {path} ({meta['grid_minutes']:.1f} minutes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

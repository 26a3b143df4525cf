"""`make demo`: SR-PPO next to GRPO on the same budget of generated tokens, on a CPU in about 30 s once the base
model is cached.

Loads (or builds once and caches under `.cache/bench/`) the warm-started tiny model of `make bench` and trains it
twice from the same start: SR-PPO with the trainer's method defaults (one rollout per prompt; 32 prompts per update,
300 updates) and TRL's GRPO (4 rollouts per prompt, 16 prompts per update) for half as many updates, so both sample
the same number of completions. Both run off-policy as in `make bench` (4 updates per generated batch). Prints a
table (held-out pass@1 / pass@8, generated tokens, training time) and a few sample completions, and saves held-out
pass@1 against generated tokens for both as a PNG.

    python -m benchmarks.toy.demo               # 300 SR-PPO updates, 150 GRPO updates
    python -m benchmarks.toy.demo --updates 60  # shorter
"""

import argparse
import os
import time

from ..common.runs import REPO_ROOT, quiet_offline_command, torch_threads
from ..common.runspec import RunSpec
from .base_model import DEFAULT_CACHE, load_or_build_base_model
from .grid import VARIANTS, held_out_prompts, variant_splits
from .scoring import evaluate
from .tasks import chain_reward
from .training import Runner

LABELS = {"sr-ppo": "SR-PPO, 1 rollout per prompt", "grpo": "GRPO, 4 rollouts per prompt"}


def save_curves(results: dict, base: dict, path: str) -> None:
    """Held-out pass@1 of each run against the completion tokens it has generated."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.8))
    for method, result in results.items():
        points = [{"generated_tokens": 0, "pass@1": base["pass@1"]}] + result["curve"]
        ax.plot(
            [p["generated_tokens"] for p in points], [p["pass@1"] for p in points], marker="o", label=LABELS[method]
        )
    ax.set_xlabel("generated completion tokens")
    ax.set_ylabel("held-out pass@1")
    ax.set_title("Same generation budget (make demo)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def greedy_samples(model, tokenizer, rows: list[dict], max_new_tokens: int) -> list[str]:
    """One greedy completion per prompt, with the evaluation's transformers engine."""
    from trl_srppo.evaluation.engines import TransformersEngine
    from trl_srppo.evaluation.prompts import tokenize_prompts
    from trl_srppo.evaluation.sampling import SamplingConfig

    engine = TransformersEngine(model, tokenizer, batch_size=max(1, len(rows)))
    prompt_ids = tokenize_prompts(tokenizer, [r["prompt"] for r in rows], chat_template_applied=False)
    outputs = engine.generate(prompt_ids, 1, SamplingConfig(temperature=0.0, max_new_tokens=max_new_tokens))
    return [completions[0].text for completions in outputs]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--updates", type=int, default=300, help="SR-PPO's policy updates (GRPO makes half)")
    parser.add_argument("--learning-rate", type=float, default=3e-4, help="policy learning rate (the bench's choice)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--variant", default="full", choices=["full", "smoke"], help="the bench's prompts and model")
    parser.add_argument("--cache-dir", default=DEFAULT_CACHE)
    parser.add_argument("--output-dir", default=os.path.join(REPO_ROOT, "outputs", "demo"))
    args = parser.parse_args(argv)
    quiet_offline_command()
    with torch_threads(1):
        return demo(args)


def demo(args) -> int:
    """Both runs, the table, the samples and the figure for parsed options."""
    start = time.perf_counter()
    variant = VARIANTS[args.variant]  # the bench's task, prompts and base model (shared cache)
    task, splits = variant.task, variant_splits(variant)
    base_path, base_model, tokenizer = load_or_build_base_model(
        task, variant.warm_start, held_out_prompts(splits), args.cache_dir
    )
    width = task.max_completion_tokens
    print("Task: running max / min over a chain of digits, e.g. '7 max 5 min 3 =' -> '7 3'; reward 1 only if exact.")
    print(f"Held-out test prompts: {len(splits['test'])} (never trained on), 8 samples each at temperature 1.")
    base = evaluate(base_model, tokenizer, splits["test"], 8, seed=7, max_new_tokens=width)
    print(f"Base model (warm-started): pass@1 {base['pass@1']:.3f}, pass@8 {base['pass@8']:.3f}")

    runs = {
        # SR-PPO: the trainer's defaults; GRPO: half the updates of twice the completions, so the same budget.
        "sr-ppo": RunSpec(
            "sr-ppo",
            "off",
            args.learning_rate,
            args.seed,
            args.updates,
            variant.prompts_per_update,
            eval_every=max(1, args.updates // 5),
        ),
        "grpo": RunSpec(
            "grpo",
            "off",
            args.learning_rate,
            args.seed,
            max(1, args.updates // 2),
            variant.prompts_per_update,
            eval_every=max(1, args.updates // 10),
        ),
    }
    results, runners = {}, {}
    for method, spec in runs.items():
        print(f"Training {LABELS[method]}: {spec.updates} updates of {spec.completions_per_update} completions ...")
        runner = Runner(spec, base_path, tokenizer, splits, task, os.path.join(args.output_dir, method), False)
        results[method], runners[method] = runner.train(), runner
    runners["sr-ppo"].trainer.save_model()  # the SR-PPO policy, with its critic in critic/

    print()
    header = ["method", "updates", "generated tokens", "held-out pass@1", "held-out pass@8", "training time"]
    rows = [["base model", "0", "0", f"{base['pass@1']:.3f}", f"{base['pass@8']:.3f}", "-"]]
    for method, result in results.items():
        test = result["final"]["test"]
        rows.append(
            [
                LABELS[method],
                str(result["spec"]["updates"]),
                f"{result['generated_tokens']:,}",
                f"{test['pass@1']:.3f}",
                f"{test['pass@8']:.3f}",
                f"{result['train_seconds']:.0f} s",
            ]
        )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)))

    model = runners["sr-ppo"].trainer.accelerator.unwrap_model(runners["sr-ppo"].trainer.model).eval()
    samples = splits["test"][:4]
    print("Sample held-out completions of the SR-PPO policy (greedy):")
    for row, completion in zip(samples, greedy_samples(model, tokenizer, samples, width), strict=True):
        mark = "ok" if chain_reward([completion], [row["answer"]])[0] == 1.0 else "wrong"
        print(f"  {row['prompt']!r} -> {completion!r} (gold {row['answer']!r}, {mark})")
    figure = os.path.join(args.output_dir, "demo_curves.png")
    save_curves(results, base, figure)
    print(f"Figure: {figure}; SR-PPO policy and critic saved in {os.path.join(args.output_dir, 'sr-ppo')}.")
    print(f"Total time: {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

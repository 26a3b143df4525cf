# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`make demo`: SR-PPO in a few minutes on a CPU, on the miniature reproduction's task and base model.

Loads (or builds once and caches under `.cache/bench/`) the warm-started tiny model of `make bench`, prints its
held-out pass@1 / pass@8, trains it with SR-PPO (one rollout per prompt, Pass@4 weight, online critic) with a progress
bar, then prints held-out pass@1 / pass@8 again, a few sample completions and the success rate per chain length, and
saves the training reward curve as a PNG.

    python -m benchmarks.demo                  # 300 updates, about 2-3 minutes on 2 cores
    python -m benchmarks.demo --updates 60     # shorter
"""

import argparse
import os
import time
import warnings

from .base_model import DEFAULT_CACHE, REPO_ROOT, load_or_build_base_model
from .grid import VARIANTS, held_out_prompts, variant_splits
from .scoring import evaluate
from .tasks import chain_reward


def save_reward_curve(log_history: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = [(entry["step"], entry["reward"]) for entry in log_history if "reward" in entry]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot([s for s, _ in points], [r for _, r in points], marker="o", markersize=3)
    ax.set_xlabel("policy update")
    ax.set_ylabel("mean training reward")
    ax.set_title("SR-PPO, one rollout per prompt (make demo)")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def greedy_samples(model, tokenizer, rows: list[dict], max_new_tokens: int) -> list[str]:
    """One greedy completion per prompt, with the evaluation's transformers engine."""
    from trl_srppo.evaluation.engines import SamplingConfig, TransformersEngine
    from trl_srppo.evaluation.prompts import tokenize_prompts

    engine = TransformersEngine(model, tokenizer, batch_size=max(1, len(rows)))
    prompt_ids = tokenize_prompts(tokenizer, [r["prompt"] for r in rows], chat_template_applied=False)
    outputs = engine.generate(prompt_ids, 1, SamplingConfig(temperature=0.0, max_new_tokens=max_new_tokens))
    return [completions[0].text for completions in outputs]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--updates", type=int, default=300, help="policy updates")
    parser.add_argument("--learning-rate", type=float, default=3e-4, help="policy learning rate (the bench's choice)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--variant", default="full", choices=["full", "smoke"], help="the bench's prompts and model")
    parser.add_argument("--cache-dir", default=DEFAULT_CACHE)
    parser.add_argument("--output-dir", default=os.path.join(REPO_ROOT, "outputs", "demo"))
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM

    from trl_srppo import SRPPOConfig, SRPPOTrainer

    start = time.perf_counter()
    variant = VARIANTS[args.variant]  # the bench's task, prompts and base model (shared cache)
    task, splits = variant.task, variant_splits(variant)
    base_path, base_model, tokenizer = load_or_build_base_model(
        task, variant.warm_start, held_out_prompts(splits), args.cache_dir
    )
    width = task.max_completion_tokens
    print("Task: running max / min over a chain of digits, e.g. '7 max 5 min 3 =' -> '7 3'; reward 1 only if exact.")
    print(f"Held-out test prompts: {len(splits['test'])} (never trained on), 8 samples each at temperature 1.")
    before = evaluate(base_model, tokenizer, splits["test"], 8, seed=7, max_new_tokens=width)
    print(f"Base model (warm-started): pass@1 {before['pass@1']:.3f}, pass@8 {before['pass@8']:.3f}")

    torch.manual_seed(args.seed)
    config = SRPPOConfig(
        output_dir=args.output_dir,
        report_to=[],
        bf16=False,
        use_cpu=True,
        save_strategy="no",
        gradient_checkpointing=False,
        logging_steps=10,
        per_device_train_batch_size=variant.prompts_per_update,  # prompts per update, one rollout each
        steps_per_generation=4,  # four updates per generated batch (the paper's off-policy schedule)
        max_completion_length=width,
        max_steps=args.updates,
        learning_rate=args.learning_rate,
        lr_scheduler_type="constant",
        critic_learning_rate=1e-3,
        srppo_method="sr-ppo",
        temperature=1.0,
        seed=args.seed,
    )
    train = Dataset.from_list([{"prompt": r["prompt"], "answer": r["answer"]} for r in splits["train"]])
    trainer = SRPPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(base_path, use_safetensors=True),
        reward_funcs=chain_reward,
        args=config,
        train_dataset=train,
        processing_class=tokenizer,
    )
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # keep the progress bar; the metrics stay in `state.log_history`
    trainer.train()
    trainer.save_model()

    model = trainer.accelerator.unwrap_model(trainer.model).eval()
    after = evaluate(model, tokenizer, splits["test"], 8, seed=7, max_new_tokens=width)
    curve = os.path.join(args.output_dir, "reward_curve.png")
    save_reward_curve(trainer.state.log_history, curve)

    print()
    print(f"Held-out pass@1: before {before['pass@1']:.3f}, after {after['pass@1']:.3f}")
    print(f"Held-out pass@8: before {before['pass@8']:.3f}, after {after['pass@8']:.3f}")
    steps = sorted(before["success_by_steps"], key=int)
    print(
        "Success rate by chain length (steps): "
        + ", ".join(f"{s}: {before['success_by_steps'][s]:.2f} -> {after['success_by_steps'][s]:.2f}" for s in steps)
    )
    rows = splits["test"][:5]
    print("Sample held-out completions after training (greedy):")
    for row, completion in zip(rows, greedy_samples(model, tokenizer, rows, width), strict=True):
        mark = "ok" if chain_reward([completion], [row["answer"]])[0] == 1.0 else "wrong"
        print(f"  {row['prompt']!r} -> {completion!r} (gold {row['answer']!r}, {mark})")
    print(f"Reward curve: {curve}; policy and critic saved in {args.output_dir} (critic in critic/).")
    print(f"Total time: {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

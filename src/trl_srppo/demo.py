# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`make demo`: SR-PPO trains a tiny model on the toy task on a CPU in about a minute.

Prints held-out accuracy before and after training and a few sample completions, and saves the training reward
curve as a PNG. Run `python -m trl_srppo.demo --help` for the options.
"""

import argparse
import os
import warnings

import torch

from .toy import build_model, build_tokenizer, last_digit_reward, make_dataset


def held_out_accuracy(model, tokenizer, prompts: list[str], answers: list[str]) -> tuple[float, list[str]]:
    """Greedy accuracy of `model` on the prompts, and its completions."""
    model.eval()
    tokenizer.padding_side = "left"
    inputs = tokenizer(prompts, return_tensors="pt", padding=True).to(model.device)
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=2, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    completions = tokenizer.batch_decode(out[:, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
    rewards = last_digit_reward(completions, answers)
    return sum(rewards) / len(rewards), completions


def save_reward_curve(log_history: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = [(entry["step"], entry["reward"]) for entry in log_history if "reward" in entry]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot([s for s, _ in points], [r for _, r in points], marker="o", markersize=3)
    ax.set_xlabel("policy update")
    ax.set_ylabel("mean training reward")
    ax.set_title("SR-PPO on the toy task (one rollout per prompt)")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output-dir", default="outputs/demo", help="where the reward curve and the model go")
    parser.add_argument("--steps", type=int, default=300, help="policy updates")
    parser.add_argument("--batch-size", type=int, default=16, help="prompts (one rollout each) per update")
    parser.add_argument("--pass-at-k", type=int, default=4, help="k of the Pass@k weight")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", category=FutureWarning)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    from . import SRPPOConfig, SRPPOTrainer

    tokenizer = build_tokenizer()
    model = build_model(tokenizer, seed=args.seed)
    held_out = make_dataset(200, seed=10_000 + args.seed)
    train = make_dataset(args.steps * args.batch_size, seed=args.seed, exclude=set(held_out["prompt"]), distinct=False)
    print("Task: the completion's first token must repeat the prompt's last digit (e.g. '3 8 1' -> '1').")
    print(f"Training prompts: {len(train)} (none of the {len(held_out)} held-out prompts among them).")

    before, _ = held_out_accuracy(model, tokenizer, list(held_out["prompt"]), list(held_out["answer"]))
    config = SRPPOConfig(
        output_dir=args.output_dir,
        report_to=[],
        bf16=False,
        use_cpu=True,
        per_device_train_batch_size=args.batch_size,
        max_completion_length=2,
        max_steps=args.steps,
        learning_rate=3e-3,
        lr_scheduler_type="constant",
        critic_learning_rate=3e-3,
        pass_at_k=args.pass_at_k,
        logging_steps=10,
        save_strategy="no",
        gradient_checkpointing=False,
        seed=args.seed,
    )
    trainer = SRPPOTrainer(
        model=model, reward_funcs=last_digit_reward, args=config, train_dataset=train, processing_class=tokenizer
    )
    trainer.train()
    trainer.save_model()

    after, completions = held_out_accuracy(
        trainer.model, tokenizer, list(held_out["prompt"]), list(held_out["answer"])
    )
    curve = os.path.join(args.output_dir, "reward_curve.png")
    save_reward_curve(trainer.state.log_history, curve)
    print()
    print(f"Held-out accuracy (greedy, {len(held_out)} prompts): before {before:.1%}, after {after:.1%}")
    print("Sample held-out completions after training:")
    for prompt, answer, completion in list(zip(held_out["prompt"], held_out["answer"], completions, strict=True))[:5]:
        print(f"  {prompt!r:>10} -> {completion!r:<8} (gold {answer})")
    print(f"Reward curve: {curve}; policy and critic saved in {args.output_dir} (critic in critic/).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

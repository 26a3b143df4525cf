# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""GPU check: two SR-PPO steps on a random-init model of Qwen3-1.7B's size, in bf16, with transformers generation.

Needs no network: the model is built from a config (Qwen3-1.7B's published shape) with random weights and a
byte-level toy tokenizer, so the rewards are meaningless; what it measures is whether the trainer runs at real size
and what it costs (step time, peak GPU memory, for the policy, its reference-free PPO update and the critic).

    python scripts/gpu_check.py                      # Qwen3-1.7B size, bf16, on the GPU
    python scripts/gpu_check.py --tiny --cpu         # the same code path on a CPU, tiny model (a smoke test)
"""

import argparse
import json
import time

import torch
from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM, TrainerCallback

from trl_srppo import SRPPOConfig, SRPPOTrainer

QWEN3_1_7B = dict(
    vocab_size=151936,
    hidden_size=2048,
    intermediate_size=6144,
    num_hidden_layers=28,
    num_attention_heads=16,
    num_key_value_heads=8,
    head_dim=128,
    max_position_embeddings=40960,
    tie_word_embeddings=True,
)
TINY = dict(
    vocab_size=512,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    max_position_embeddings=2048,
    tie_word_embeddings=True,
)


def byte_tokenizer(vocab_size: int) -> PreTrainedTokenizerFast:
    vocab = {"<pad>": 0, "<eos>": 1, **{f"t{i}": i for i in range(2, vocab_size)}}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="<pad>", eos_token="<eos>")


class StepTimer(TrainerCallback):
    def __init__(self):
        self.times, self._start = [], None

    def on_step_begin(self, args, state, control, **kwargs):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        self._start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        self.times.append(time.perf_counter() - self._start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="a tiny model instead of Qwen3-1.7B's size")
    parser.add_argument("--cpu", action="store_true", help="run on the CPU in float32")
    parser.add_argument("--batch-size", type=int, default=8, help="prompts (one rollout each) per step")
    parser.add_argument("--prompt-length", type=int, default=256)
    parser.add_argument("--completion-length", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args()

    shape = TINY if args.tiny else QWEN3_1_7B
    tokenizer = byte_tokenizer(shape["vocab_size"])
    config = Qwen3Config(**shape, pad_token_id=0, eos_token_id=1, bos_token_id=None)
    dtype = torch.float32 if args.cpu else torch.bfloat16
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(config).to(dtype)
    model.generation_config.pad_token_id, model.generation_config.eos_token_id = 0, 1
    if not args.cpu:
        model = model.cuda()
    words = [f"t{i}" for i in range(2, shape["vocab_size"])]
    rows = [
        {"prompt": " ".join(words[(i * 7 + j) % len(words)] for j in range(args.prompt_length))} for i in range(64)
    ]

    def reward(completions, **kwargs):
        return [float(len(c.split()) % 2) for c in completions]

    timer = StepTimer()
    training_args = SRPPOConfig(
        output_dir="outputs/gpu_check",
        report_to=[],
        bf16=not args.cpu,
        use_cpu=args.cpu,
        per_device_train_batch_size=args.batch_size,
        max_completion_length=args.completion_length,
        max_steps=args.steps,
        learning_rate=1e-6,
        critic_learning_rate=5e-6,
        gradient_checkpointing=True,
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        temperature=1.0,
    )
    trainer = SRPPOTrainer(
        model=model,
        reward_funcs=reward,
        args=training_args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        callbacks=[timer],
    )
    if torch.cuda.is_available() and not args.cpu:
        torch.cuda.reset_peak_memory_stats()
    trainer.train()
    logs = [h for h in trainer.state.log_history if "critic/loss" in h]
    result = {
        "model": "tiny" if args.tiny else "Qwen3-1.7B shape (random init)",
        "device": "cpu" if args.cpu else torch.cuda.get_device_name(0),
        "dtype": str(dtype),
        "policy_parameters": sum(p.numel() for p in trainer.model.parameters()),
        "critic_parameters": sum(p.numel() for p in trainer.critic.parameters()),
        "batch": f"{args.batch_size} prompts x 1 rollout, prompt {args.prompt_length} + up to "
        f"{args.completion_length} completion tokens",
        "step_seconds": [round(t, 2) for t in timer.times],
        "peak_gpu_memory_gib": None if args.cpu else round(torch.cuda.max_memory_allocated() / 2**30, 2),
        "mean_completion_length": [h.get("completions/mean_length") for h in logs],
        "critic_loss": [h.get("critic/loss") for h in logs],
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""GPU check: two SR-PPO steps on a random-init model of Qwen3-1.7B's size, in bf16, with transformers generation.

Needs no network: the model is built from a config (Qwen3-1.7B's published shape) with random weights and a
word-level toy tokenizer, so the rewards are meaningless; what it measures is whether the trainer runs at real size
with long completions and what it costs (step time, peak GPU memory, for the policy, its reference-free PPO update
and the critic). The model, tokenizer, prompts and step timer are those of the step-cost benchmark
(`benchmarks/costs/step_cost.py`), whose GPU mode (`python -m benchmarks.costs.step_cost --gpu`) compares every
critic option with GRPO phase by phase at this size. Run it from the repository root, as a module (`scripts` and
`benchmarks` are packages there).

    python -m scripts.gpu_check               # Qwen3-1.7B size, bf16, on the GPU
    python -m scripts.gpu_check --tiny --cpu  # the same code path on a CPU, tiny model (a smoke test)
    python -m scripts.gpu_check --vllm        # generating with vLLM colocated on the same GPU

With `--vllm` the model is saved to `outputs/gpu_check/model` (vLLM loads the policy from a folder) and generation
runs in vLLM beside the policy and the critic, with `--vllm-gpu-memory-utilization` of the GPU (see `docs/vllm.md`
for the value per model size); the report adds the GPU memory in use at the end, vLLM's reservation included.
"""

import argparse
import json
import os

import torch

from benchmarks.costs.step_cost import SIZES, PhaseTimer, build_model, build_tokenizer, make_dataset
from trl_srppo import SRPPOConfig, SRPPOTrainer


def gpu_memory_in_use() -> int:
    """Bytes in use on the current GPU by every allocator (vLLM's reservation included), as the driver reports it."""
    free, total = torch.cuda.mem_get_info()
    return total - free


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="a tiny model instead of Qwen3-1.7B's size")
    parser.add_argument("--cpu", action="store_true", help="run on the CPU in float32")
    parser.add_argument("--batch-size", type=int, default=8, help="prompts (one rollout each) per step")
    parser.add_argument("--prompt-length", type=int, default=256)
    parser.add_argument("--completion-length", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--vllm", action="store_true", help="generate with vLLM in colocate mode (needs vLLM)")
    parser.add_argument(
        "--vllm-gpu-memory-utilization", type=float, default=0.15, help="with --vllm: vLLM's share of GPU memory"
    )
    args = parser.parse_args()
    if not args.cpu and not torch.cuda.is_available():
        parser.error("no CUDA GPU is visible (torch.cuda.is_available() is False): run on a GPU, or add --cpu.")

    size = dict(SIZES["quick" if args.tiny else "gpu"], prompt_tokens=args.prompt_length)
    size["completion_tokens"] = args.completion_length
    dtype = "float32" if args.cpu else "bfloat16"
    model = build_model(size, dtype=dtype, device="cpu" if args.cpu else "cuda")
    tokenizer = build_tokenizer(size["vocab_size"])
    if args.vllm:  # TRL starts vLLM on the policy's `name_or_path`: a folder with its weights and tokenizer
        folder = os.path.abspath("outputs/gpu_check/model")
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        model.config._name_or_path = folder

    def reward(completions, **kwargs):
        return [float(len(c.split()) % 2) for c in completions]

    timer = PhaseTimer(None if args.cpu else torch.cuda.synchronize)
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
        use_vllm=args.vllm,
        vllm_mode="colocate",
        vllm_gpu_memory_utilization=args.vllm_gpu_memory_utilization,
        vllm_max_model_length=args.prompt_length + args.completion_length,
    )
    trainer = SRPPOTrainer(
        model=model,
        reward_funcs=reward,
        args=training_args,
        train_dataset=make_dataset(size, rows=64),
        processing_class=tokenizer,
        callbacks=[timer.callback()],
    )
    timer.wrap(trainer)
    if not args.cpu:
        torch.cuda.reset_peak_memory_stats()
    trainer.train()
    logs = [h for h in trainer.state.log_history if "critic/loss" in h]
    result = {
        "model": "tiny" if args.tiny else "Qwen3-1.7B shape (random init)",
        "device": "cpu" if args.cpu else torch.cuda.get_device_name(0),
        "dtype": str(getattr(torch, dtype)),
        "policy_parameters": sum(p.numel() for p in trainer.model.parameters()),
        "critic_parameters": sum(p.numel() for p in trainer.critic.parameters()),
        "batch": f"{args.batch_size} prompts x 1 rollout, prompt {args.prompt_length} + up to "
        f"{args.completion_length} completion tokens",
        "step_seconds": [round(step["step"], 2) for step in timer.steps],
        "phase_seconds": [{k: round(v, 3) for k, v in step.items() if k != "step"} for step in timer.steps],
        "generation": "vllm colocate" if args.vllm else "transformers",
        "peak_gpu_memory_gib": None if args.cpu else round(torch.cuda.max_memory_allocated() / 2**30, 2),
        "gpu_memory_in_use_gib": None if args.cpu else round(gpu_memory_in_use() / 2**30, 2),
        "mean_completion_length": [h.get("completions/mean_length") for h in logs],
        "critic_loss": [h.get("critic/loss") for h in logs],
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

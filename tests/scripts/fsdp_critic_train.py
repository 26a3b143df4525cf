# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Run by `tests/test_distributed.py` in two processes: the same SR-PPO run with the replicated critic, with the
FSDP2-sharded critic, and with the sharded critic resumed from a mid-run checkpoint. The policy is DDP in all three
(the sharded critic does not need the policy to be sharded). Writes, under the output folder:

- `{replicate,fsdp,resumed}/critic_final.safetensors`: the critic's full weights at the end (from process 0);
- `{replicate,fsdp}/critic_initial.safetensors`: the weights before training;
- `fsdp/bytes_rank{r}.json`: the bytes of critic parameters and optimizer state this process holds, and the totals;
- `fsdp/checkpoint-2/`, `fsdp/critic/`: a checkpoint and the final `save_model()` output.
"""

import json
import os
import sys

import torch
from helpers import cpu_config  # tests/helpers.py, on PYTHONPATH (helpers.script_env)
from safetensors.torch import save_file

from trl_srppo import SRPPOTrainer
from trl_srppo.critic_sharding import gather_state_dict, local_bytes
from trl_srppo.toy import build_model, build_tokenizer, last_digit_reward, make_dataset

MAX_STEPS = 4


def full_weights(trainer) -> dict[str, torch.Tensor]:
    """The critic's whole weights on process 0 (every process must call this)."""
    state_dict = gather_state_dict(trainer.critic)
    if state_dict is None:
        state_dict = trainer.accelerator.unwrap_model(trainer.critic).state_dict()
    return {k: v.detach().clone().contiguous() for k, v in state_dict.items()}


def run(output_dir: str, critic_parallelism: str, overrides: dict, resume: str | None = None):
    tokenizer = build_tokenizer()
    args = cpu_config(
        output_dir,
        per_device_train_batch_size=4,
        max_steps=MAX_STEPS,
        steps_per_generation=2,
        critic_parallelism=critic_parallelism,
        save_strategy="steps",
        save_steps=2,
        **overrides,
    )
    trainer = SRPPOTrainer(
        model=build_model(tokenizer),
        reward_funcs=last_digit_reward,
        args=args,
        train_dataset=make_dataset(64, seed=0),
        processing_class=tokenizer,
    )
    rank = trainer.accelerator.process_index
    initial = full_weights(trainer)
    trainer.train(resume_from_checkpoint=resume)
    final = full_weights(trainer)
    if critic_parallelism == "fsdp":
        optimizer_tensors = [
            value for state in trainer.critic_optimizer.state.values() for value in state.values() if value.dim() > 0
        ]
        parameters = list(trainer.critic.parameters())
        counts = {
            "parameters_local": local_bytes(parameters),
            "parameters_total": sum(p.numel() * p.element_size() for p in parameters),  # a DTensor's global size
            "optimizer_local": local_bytes(optimizer_tensors),
            "optimizer_total": sum(t.numel() * t.element_size() for t in optimizer_tensors),
            "parameter_class": type(parameters[0]).__name__,
        }
        with open(os.path.join(output_dir, f"bytes_rank{rank}.json"), "w") as f:
            json.dump(counts, f)
    if rank == 0:
        save_file(final, os.path.join(output_dir, "critic_final.safetensors"))
        save_file(initial, os.path.join(output_dir, "critic_initial.safetensors"))
    trainer.save_model()
    trainer.accelerator.wait_for_everyone()


def main(output_dir: str, overrides: dict):
    run(os.path.join(output_dir, "replicate"), "replicate", overrides)
    run(os.path.join(output_dir, "fsdp"), "fsdp", overrides)
    checkpoint = os.path.join(output_dir, "fsdp", "checkpoint-2")
    run(os.path.join(output_dir, "resumed"), "fsdp", overrides, resume=checkpoint)


if __name__ == "__main__":
    main(sys.argv[1], json.loads(sys.argv[2]) if len(sys.argv) > 2 else {})

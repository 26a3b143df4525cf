# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Run by `tests/test_distributed.py` in two processes: the same SR-PPO run with the replicated critic, with the
critic in its own DeepSpeed engine under ZeRO-2 and ZeRO-3, and with each DeepSpeed critic resumed from its mid-run
checkpoint (ZeRO-3 without the fused critic forward, so the values come from a separate no-grad pass). The policy is
DDP in all of them (the DeepSpeed critic does not need a DeepSpeed policy). Writes, under the output folder:

- `{replicate,zero2,zero3,zero2_resumed,zero3_resumed}/critic_final.safetensors`: the critic's full weights at the
  end (from process 0), and `critic_initial.safetensors`, the weights before training;
- `{zero2,zero3}/bytes_rank{r}.json`: the bytes of critic parameters, master weights and optimizer state this process
  holds;
- `{zero2,zero3}/checkpoint-2/`, `{zero2,zero3}/critic/`: a checkpoint and the final `save_model()` output.
"""

import json
import os
import sys

import torch
from helpers import cpu_config  # tests/helpers.py, on PYTHONPATH (helpers.script_env)
from safetensors.torch import save_file

from trl_srppo import SRPPOTrainer, critic_deepspeed
from trl_srppo.toy import build_model, build_tokenizer, last_digit_reward, make_dataset

MAX_STEPS = 4


def full_weights(trainer) -> dict[str, torch.Tensor]:
    """The critic's whole weights on process 0 (every process must call this)."""
    if critic_deepspeed.is_engine(trainer.critic):
        state_dict = critic_deepspeed.gather_state_dict(trainer.critic)
    else:
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
    if critic_deepspeed.is_engine(trainer.critic):
        counts = critic_deepspeed.local_bytes(trainer.critic)
        counts["engine_stage"] = trainer.critic.zero_optimization_stage()
        with open(os.path.join(output_dir, f"bytes_rank{rank}.json"), "w") as f:
            json.dump(counts, f)
    if rank == 0:
        save_file(final, os.path.join(output_dir, "critic_final.safetensors"))
        save_file(initial, os.path.join(output_dir, "critic_initial.safetensors"))
    trainer.save_model()
    trainer.accelerator.wait_for_everyone()


def main(output_dir: str, overrides: dict):
    run(os.path.join(output_dir, "replicate"), "replicate", overrides)
    for stage in (2, 3):
        name = f"zero{stage}"
        # ZeRO-3 also takes the separate no-grad value pass over partitioned weights (the fused step otherwise).
        ds_overrides = {**overrides, "critic_zero_stage": stage, "critic_fused_forward": stage == 2}
        run(os.path.join(output_dir, name), "deepspeed", ds_overrides)
        checkpoint = os.path.join(output_dir, name, "checkpoint-2")
        run(os.path.join(output_dir, f"{name}_resumed"), "deepspeed", ds_overrides, resume=checkpoint)


if __name__ == "__main__":
    main(sys.argv[1], json.loads(sys.argv[2]) if len(sys.argv) > 2 else {})

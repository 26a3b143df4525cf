# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Run by `tests/test_distributed.py` under `accelerate launch --num_processes 2`: a few SR-PPO steps on the toy
chain task, then every process writes its critic's weights so the test can compare them."""

import json
import os
import sys

import helpers  # tests/helpers.py, on PYTHONPATH (helpers.script_env)
from helpers import cpu_config
from safetensors.torch import save_file

from trl_srppo import SRPPOTrainer
from trl_srppo.runtime.teardown import end_distributed
from trl_srppo.tasks.toy import build_model, build_tokenizer, make_dataset


def small_digit_reward(completions, **kwargs):
    rewards = helpers.small_digit_reward(completions)
    if os.environ.get("RANK") == "0":
        rewards[0] = None  # unscorable rollouts on one process only: collectives must still line up
    return rewards


def main(output_dir: str, critic_parallelism: str, critic_steps: str = "two"):
    """`critic_parallelism="policy_head"` runs `critic_type="policy_head"` (a value head on the policy) instead,
    `"running_mean"` `critic_type="running_mean"` (the outcomes' running mean, no network), and `"policy_lora"` a
    LoRA policy with `critic_type="policy_lora"` (a second adapter and a head on its base)."""
    tokenizer = build_tokenizer()
    peft_config = None
    if critic_parallelism in ("policy_head", "running_mean"):
        critic_options = dict(critic_type=critic_parallelism)
    elif critic_parallelism == "policy_lora":
        from peft import LoraConfig

        critic_options = dict(critic_type="policy_lora")
        peft_config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
    else:
        critic_options = dict(critic_parallelism=critic_parallelism)
    if critic_steps == "warm_start":  # two steps per batch, after a warm start of 8 prompts x 2 rollouts
        critic_options.update(critic_warm_start_prompts=8, critic_warm_start_samples=2)
    args = cpu_config(
        output_dir,
        per_device_train_batch_size=4,
        max_steps=3,
        steps_per_generation=2,
        # "one": a single critic step per generated batch, over two micro-batches (the fused critic forward)
        gradient_accumulation_steps=2 if critic_steps == "one" else 1,
        **critic_options,
    )
    trainer = SRPPOTrainer(
        model=build_model(tokenizer),
        reward_funcs=small_digit_reward,
        args=args,
        train_dataset=make_dataset(64, seed=0),
        processing_class=tokenizer,
        peft_config=peft_config,
    )

    def critic_state():  # a policy LoRA critic's adapter lives in the policy: its parameters, not its state_dict
        critic = trainer.accelerator.unwrap_model(trainer.critic)
        tensors = dict(critic.named_parameters()) if peft_config is not None else critic.state_dict()
        return {k: v.detach().clone().contiguous() for k, v in tensors.items()}

    initial = critic_state()
    trainer.train()
    rank = trainer.accelerator.process_index
    save_file(critic_state(), os.path.join(output_dir, f"critic_rank{rank}.safetensors"))
    if rank == 0:
        save_file(initial, os.path.join(output_dir, "critic_initial.safetensors"))
        with open(os.path.join(output_dir, "world_size.txt"), "w") as f:
            f.write(str(trainer.accelerator.num_processes))
        with open(os.path.join(output_dir, "critic_wrapper.txt"), "w") as f:
            f.write(type(trainer.critic).__name__)
        with open(os.path.join(output_dir, "log_history.json"), "w") as f:
            json.dump(trainer.state.log_history, f)
    trainer.save_model()
    end_distributed(trainer.accelerator)


if __name__ == "__main__":
    main(*sys.argv[1:])

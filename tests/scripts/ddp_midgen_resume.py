# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Run by `tests/test_distributed.py` under `accelerate launch --num_processes 2`: a run with two optimizer steps per
generated batch, then the same run resumed from its checkpoint in the middle of a generated batch (each process
keeps its rest of the batch); every process writes whether its final policy and critic equal the uninterrupted
run's."""

import json
import os
import shutil
import sys

from helpers import cpu_config, small_digit_reward

from trl_srppo import SRPPOTrainer
from trl_srppo.runtime.teardown import end_distributed
from trl_srppo.tasks.toy import build_model, build_tokenizer, make_dataset


def train(output_dir: str, resume: str | None = None) -> SRPPOTrainer:
    tokenizer = build_tokenizer()
    args = cpu_config(
        output_dir,
        per_device_train_batch_size=4,
        max_steps=4,
        steps_per_generation=2,
        save_strategy="steps",
        save_steps=1,
    )
    trainer = SRPPOTrainer(
        model=build_model(tokenizer),
        reward_funcs=small_digit_reward,
        args=args,
        train_dataset=make_dataset(64, seed=0),
        processing_class=tokenizer,
    )
    trainer.train(resume_from_checkpoint=resume)
    return trainer


def weights(trainer, module) -> dict:
    return {k: v.detach().clone() for k, v in trainer.accelerator.unwrap_model(module).state_dict().items()}


def main(output_dir: str):
    full = train(os.path.join(output_dir, "full"))
    folder = os.path.join(output_dir, "resumed", "checkpoint-1")
    if full.accelerator.is_main_process:
        shutil.copytree(os.path.join(output_dir, "full", "checkpoint-1"), folder)
    full.accelerator.wait_for_everyone()
    resumed = train(os.path.join(output_dir, "resumed"), resume=folder)
    result = {"buffer_files": sorted(os.listdir(os.path.join(folder, "generation_buffer")))}
    for name, a, b in (("policy", full.model, resumed.model), ("critic", full.critic, resumed.critic)):
        expected, got = weights(full, a), weights(resumed, b)
        result[name] = [k for k in expected if not (expected[k] == got[k]).all()]
    result["critic_steps"] = [full.critic_backend.steps, resumed.critic_backend.steps]
    with open(os.path.join(output_dir, f"rank{full.accelerator.process_index}.json"), "w") as f:
        json.dump(result, f)
    end_distributed(resumed.accelerator)


if __name__ == "__main__":
    main(*sys.argv[1:])

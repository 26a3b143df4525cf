# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Run by `tests/test_distributed.py` under `accelerate launch --num_processes 2`: SR-PPO with prompt sampling
(`prompt_sampling="pass_at_k"`, a pool of 2 generated batches) on the toy chain task, 4 steps of 2 per generated
batch; every process writes its pools, its draws and its critic's weights, and a run given a checkpoint resumes from
it."""

import json
import os
import sys

from helpers import cpu_config, small_digit_reward
from safetensors.torch import save_file

from trl_srppo import SRPPOTrainer
from trl_srppo.runtime.teardown import end_distributed
from trl_srppo.tasks.toy import build_model, build_tokenizer, make_dataset


def main(output_dir: str, resume: str = ""):
    tokenizer = build_tokenizer()
    args = cpu_config(
        output_dir,
        per_device_train_batch_size=4,
        max_steps=4,
        steps_per_generation=2,
        save_strategy="steps",
        save_steps=2,
        prompt_sampling="pass_at_k",
        prompt_pool_factor=2,
        prompt_sampling_floor=0.3,
        pass_at_k=4,
    )
    trainer = SRPPOTrainer(
        model=build_model(tokenizer),
        reward_funcs=small_digit_reward,
        args=args,
        train_dataset=make_dataset(64, seed=0),
        processing_class=tokenizer,
    )
    draws = []
    sampler = trainer._prompt_sampler
    draw = sampler.draw

    def recording_draw(trainer_, inputs):
        drawn, result = draw(trainer_, inputs)
        draws.append({"pool": [x["prompt"] for x in inputs], "drawn": [x["prompt"] for x in drawn]})
        return drawn, result

    sampler.draw = recording_draw
    trainer.train(resume_from_checkpoint=resume or None)
    rank = trainer.accelerator.process_index
    name = "resumed" if resume else "full"
    with open(os.path.join(output_dir, f"draws_{name}_rank{rank}.json"), "w") as f:
        json.dump(draws, f)
    critic = trainer.accelerator.unwrap_model(trainer.critic)
    state = {k: v.detach().clone().contiguous() for k, v in critic.state_dict().items()}
    save_file(state, os.path.join(output_dir, f"critic_{name}_rank{rank}.safetensors"))
    end_distributed(trainer.accelerator)


if __name__ == "__main__":
    main(*sys.argv[1:])

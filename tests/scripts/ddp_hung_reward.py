# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Run by `tests/test_distributed.py` under `accelerate launch --num_processes 2`: a reward function that never
returns on process 1 only. Each process first writes the timeout of its process group (from `ddp_timeout`)."""

import os
import sys
import time

import torch
from helpers import cpu_config  # tests/helpers.py, on PYTHONPATH (helpers.script_env)

from trl_srppo import SRPPOTrainer
from trl_srppo.rewards import chain_reward
from trl_srppo.tasks.toy import build_model, build_tokenizer, make_dataset


def hangs_on_process_1(completions, **kwargs):
    if os.environ.get("RANK") == "1":
        time.sleep(3600)  # a stuck network call, a deadlock, ...
    return chain_reward(completions, **kwargs)


def main(output_dir: str):
    tokenizer = build_tokenizer()
    args = cpu_config(output_dir, per_device_train_batch_size=4, max_steps=2, reward_timeout=3, ddp_timeout=40)
    trainer = SRPPOTrainer(
        model=build_model(tokenizer),
        reward_funcs=hangs_on_process_1,
        args=args,
        train_dataset=make_dataset(64, seed=0),
        processing_class=tokenizer,
    )
    from torch.distributed.distributed_c10d import _get_default_group

    timeout = _get_default_group()._get_backend(torch.device("cpu")).options._timeout
    with open(os.path.join(output_dir, f"pg_timeout_rank{trainer.accelerator.process_index}.txt"), "w") as f:
        f.write(str(timeout.total_seconds()))
    trainer.train()


if __name__ == "__main__":
    main(sys.argv[1])

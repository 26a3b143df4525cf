# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Run by `tests/test_training_metrics_distributed.py` under `accelerate launch --num_processes 2`: SR-PPO on the toy
chain task with `gradient_nsr_steps` and `log_kl_from_start`, each process saving what it measured on its own rows
(its rollouts' gradients and their weights, its completions' log-probabilities), so that the test can compute both
metrics over the two processes' rows from scratch and compare them with the logged ones."""

import json
import os
import sys

import torch
from helpers import cpu_config, small_digit_reward

import trl_srppo.method.gradient_noise as gradient_noise
import trl_srppo.runtime.run_output as run_output
from trl_srppo import SRPPOTrainer
from trl_srppo.runtime.teardown import end_distributed
from trl_srppo.tasks.toy import build_tokenizer, make_dataset


def main(output_dir: str, model_folder: str):
    rank = int(os.environ["RANK"])
    calls = {"nsr": 0, "kl": 0}
    measure_nsr, measure_kl = gradient_noise.gradient_nsr, run_output.kl_from_start_metrics

    def recording_nsr(gradients, scales, like, reduce, eps=1e-12):
        grads = [[g.clone() for g in row] for row in gradients]  # this process's rows, per parameter
        flat = [torch.cat([g.reshape(-1) for g in row]) for row in grads]
        torch.save({"grads": flat, "scales": scales}, os.path.join(output_dir, f"nsr_{calls['nsr']}_{rank}.pt"))
        calls["nsr"] += 1
        return measure_nsr(iter(grads), scales, like, reduce, eps)

    def recording_kl(logps, start, mask, reduce):
        torch.save(
            {"logps": logps, "start": start, "mask": mask}, os.path.join(output_dir, f"kl_{calls['kl']}_{rank}.pt")
        )
        calls["kl"] += 1
        return measure_kl(logps, start, mask, reduce)

    gradient_noise.gradient_nsr = recording_nsr
    run_output.kl_from_start_metrics = recording_kl
    args = cpu_config(
        output_dir, per_device_train_batch_size=4, max_steps=4, steps_per_generation=2, gradient_nsr_steps=2,
        log_kl_from_start=True, learning_rate=3e-2,
    )  # fmt: skip
    trainer = SRPPOTrainer(
        model=model_folder,
        reward_funcs=small_digit_reward,
        args=args,
        train_dataset=make_dataset(64, seed=0),
        processing_class=build_tokenizer(),
    )
    trainer.train()
    if rank == 0:
        with open(os.path.join(output_dir, "log_history.json"), "w") as f:
            json.dump(trainer.state.log_history, f)
    end_distributed(trainer.accelerator)


if __name__ == "__main__":
    main(*sys.argv[1:])

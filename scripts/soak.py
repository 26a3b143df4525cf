# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Soak test: a long SR-PPO run on the toy chain task, recording the process's memory and step time as it goes.

A leak (a growing list of metrics, tensors kept across steps) shows as resident memory that keeps rising after the
first steps; a slowdown as step times that drift upward. The run loads the toy model and data through the same path
as `trl-srppo train` (a saved model folder, a local data file).

    python -m scripts.soak --steps 300  # prints a table and writes soak.json in --output_dir
"""

import argparse
import json
import os
import statistics
import tempfile
import time

import torch
from transformers import TrainerCallback

from trl_srppo.runtime.memory import memory_metrics  # the resident memory now (the peak would hide a later release)


class Recorder(TrainerCallback):
    def __init__(self, every: int):
        self.every, self.rows, self.step_times, self._start = every, [], [], None

    def on_step_begin(self, args, state, control, **kwargs):
        self._start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.step_times.append(time.perf_counter() - self._start)
        if state.global_step == 1 or state.global_step % self.every == 0:
            window = self.step_times[-self.every :]
            self.rows.append(
                {
                    "step": state.global_step,
                    "rss_mb": round(memory_metrics()["memory/rss_mib"], 1),
                    "step_s": statistics.median(window),
                }
            )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=300, help="optimizer steps to run")
    parser.add_argument("--every", type=int, default=50, help="record memory and step time every N steps")
    parser.add_argument("--output_dir", default=None, help="folder for the run and soak.json (default: a temp dir)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    from trl_srppo import SRPPOConfig, SRPPOTrainer
    from trl_srppo.rewards import get_reward_func
    from trl_srppo.tasks.data import build_prompts, load_source
    from trl_srppo.tasks.registry import get_task
    from trl_srppo.tasks.toy import save_toy

    output_dir = args.output_dir or tempfile.mkdtemp(prefix="srppo-soak-")
    model_dir, data_file = save_toy(os.path.join(output_dir, "toy"), num_prompts=4800)
    dataset, _ = build_prompts(load_source(data_file), get_task("chain"))
    config = SRPPOConfig(
        output_dir=os.path.join(output_dir, "run"),
        use_cpu=True,
        bf16=False,
        per_device_train_batch_size=16,
        max_completion_length=3,  # the toy chains' longest answer (two values) and <eos>
        max_steps=args.steps,
        learning_rate=3e-3,
        critic_learning_rate=3e-3,
        lr_scheduler_type="constant",
        logging_steps=10,
        save_strategy="no",
        report_to=[],
        disable_tqdm=True,
        gradient_checkpointing=False,
        seed=0,
    )
    recorder = Recorder(args.every)
    trainer = SRPPOTrainer(
        model_dir, get_reward_func(get_task("chain").reward), config, train_dataset=dataset, callbacks=[recorder]
    )
    trainer.train()

    print(f"{'step':>6} {'RSS MB':>8} {'median step s':>14}")
    for row in recorder.rows:
        print(f"{row['step']:>6} {row['rss_mb']:>8.1f} {row['step_s']:>14.4f}")
    with open(os.path.join(output_dir, "soak.json"), "w") as f:
        json.dump({"steps": args.steps, "every": args.every, "rows": recorder.rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

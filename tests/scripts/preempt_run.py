# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Run by `tests/test_preemption.py`, alone or under `accelerate launch --num_processes 2`: SR-PPO on the toy chain
task, four steps (or as many as the fifth argument), no periodic checkpoint, whose reward function sends its own
process the signals named on the command line while it scores the rollouts of step 2 (a reward call under its
deadline, as a scheduler's signal would find the run), on `every` process, on process `1` only, or on `none` (the test
signals the launcher). A process stopped with a checkpoint writes `outcome_rank<r>.json` and exits by
`TrainingPreempted`."""

import json
import os
import signal
import sys

import helpers  # tests/helpers.py, on PYTHONPATH (helpers.script_env)
from helpers import cpu_config

from trl_srppo import SRPPOTrainer
from trl_srppo.runtime.preemption import TrainingPreempted
from trl_srppo.runtime.teardown import end_distributed
from trl_srppo.tasks.toy import build_model, build_tokenizer, make_dataset


def main(output_dir: str, signals: str, on_process: str, save_on_preemption: str, max_steps: str = "4"):
    def sends_signals_at_step_2(completions, trainer_state, **kwargs):
        if trainer_state.global_step == 1 and on_process in ("every", os.environ.get("RANK", "0")):
            for name in signals.split(","):
                os.kill(os.getpid(), getattr(signal, name))
        return helpers.small_digit_reward(completions)

    tokenizer = build_tokenizer()
    args = cpu_config(
        output_dir,
        per_device_train_batch_size=4,
        max_steps=int(max_steps),
        ddp_timeout=60,
        save_on_preemption=save_on_preemption == "true",
    )
    trainer = SRPPOTrainer(
        model=build_model(tokenizer),
        reward_funcs=sends_signals_at_step_2,
        args=args,
        train_dataset=make_dataset(64, seed=0),
        processing_class=tokenizer,
    )
    try:
        trainer.train()
    except TrainingPreempted as stop:
        outcome = {"signal": stop.signal_name, "step": stop.step, "checkpoint": stop.checkpoint, "code": stop.code}
        with open(os.path.join(output_dir, f"outcome_rank{trainer.accelerator.process_index}.json"), "w") as f:
            json.dump(outcome, f)
        end_distributed(trainer.accelerator)
        raise
    end_distributed(trainer.accelerator)


if __name__ == "__main__":
    main(*sys.argv[1:])

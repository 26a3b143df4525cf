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

from helpers import run_critic_mode  # tests/helpers.py, on PYTHONPATH (helpers.script_env)

from trl_srppo.method.critics import deepspeed_engine
from trl_srppo.runtime.teardown import end_distributed


def count_bytes(trainer):
    """Bytes of the DeepSpeed critic's parameters, master weights and optimizer state held here."""
    if not isinstance(trainer.critic_backend, deepspeed_engine.DeepSpeedCritic):
        return None
    counts = deepspeed_engine.local_bytes(trainer.critic)
    counts["engine_stage"] = trainer.critic.zero_optimization_stage()
    return counts


def main(output_dir: str, overrides: dict):
    run_critic_mode(os.path.join(output_dir, "replicate"), "replicate", overrides)
    for stage in (2, 3):
        name = f"zero{stage}"
        # ZeRO-3 also takes the separate no-grad value pass over partitioned weights (the fused step otherwise).
        ds_overrides = {**overrides, "critic_zero_stage": stage, "critic_fused_forward": stage == 2}
        run_critic_mode(os.path.join(output_dir, name), "deepspeed", ds_overrides, count_bytes=count_bytes)
        checkpoint = os.path.join(output_dir, name, "checkpoint-2")
        run_critic_mode(os.path.join(output_dir, f"{name}_resumed"), "deepspeed", ds_overrides, resume=checkpoint)


if __name__ == "__main__":
    main(sys.argv[1], json.loads(sys.argv[2]) if len(sys.argv) > 2 else {})
    end_distributed()  # as `trl-srppo train` ends: no abort at exit on gloo

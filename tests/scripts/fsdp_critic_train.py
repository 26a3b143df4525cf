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

from helpers import run_critic_mode  # tests/helpers.py, on PYTHONPATH (helpers.script_env)

from trl_srppo.method.critics.fsdp2 import local_bytes
from trl_srppo.runtime.teardown import end_distributed


def count_bytes(trainer):
    """Bytes of the sharded critic's parameters and optimizer state held here, and their totals."""
    if trainer.args.critic_parallelism != "fsdp":
        return None
    optimizer_tensors = [
        value for state in trainer.critic_optimizer.state.values() for value in state.values() if value.dim() > 0
    ]
    parameters = list(trainer.critic.parameters())
    return {
        "parameters_local": local_bytes(parameters),
        "parameters_total": sum(p.numel() * p.element_size() for p in parameters),  # a DTensor's global size
        "optimizer_local": local_bytes(optimizer_tensors),
        "optimizer_total": sum(t.numel() * t.element_size() for t in optimizer_tensors),
        "parameter_class": type(parameters[0]).__name__,
    }


def main(output_dir: str, overrides: dict):
    run_critic_mode(os.path.join(output_dir, "replicate"), "replicate", overrides)
    run_critic_mode(os.path.join(output_dir, "fsdp"), "fsdp", overrides, count_bytes=count_bytes)
    checkpoint = os.path.join(output_dir, "fsdp", "checkpoint-2")
    run_critic_mode(os.path.join(output_dir, "resumed"), "fsdp", overrides, resume=checkpoint)


if __name__ == "__main__":
    main(sys.argv[1], json.loads(sys.argv[2]) if len(sys.argv) > 2 else {})
    end_distributed()  # as `trl-srppo train` ends: no abort at exit on gloo

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Run by `tests/test_distributed.py` under `torch.distributed.run` with any number of processes: one toy SR-PPO run
([`helpers.run_critic_mode`] with `record=True`), given as JSON: `{"output_dir", "critic_parallelism", "overrides",
"max_steps", "resume"}`. Writes, under `output_dir`, the critic's final weights, the first checkpoint's states
(`saved_state.pt`), in a resumed run the restored states (`loaded_state.pt`), and the prompts each process scored
(`prompts_rank{r}.jsonl`)."""

import json
import sys

from helpers import run_critic_mode  # tests/helpers.py, on PYTHONPATH (helpers.script_env)

from trl_srppo.runtime.teardown import end_distributed

if __name__ == "__main__":
    spec = json.loads(sys.argv[1])
    run_critic_mode(
        spec["output_dir"],
        spec["critic_parallelism"],
        spec.get("overrides", {}),
        resume=spec.get("resume"),
        max_steps=spec.get("max_steps", 4),
        record=True,
    )
    end_distributed()  # as `trl-srppo train` ends: no abort at exit on gloo

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""A user's own training script, in the style of TRL's examples, run by `tests/test_user_script_exit.py` under
`accelerate launch --config_file recipes/accelerate/<engine>.yaml` (2 CPU processes over gloo): the public API only
(config, trainer, `train()`, `save_model()`, end of script), no call to the package's teardown.

    script.py OUTPUT_DIR MODEL_DIR MAX_STEPS [resume] [late_work]

`late_work`: the script's last line starts a collective with a Python callback and does not wait for it, so that a gloo
worker thread asks for the GIL as the script ends (what the end of any collective may do, made certain here).

FSDP2 on a CPU: the harness relabels Accelerate's state as multi-GPU first (`helpers.relabel_for_fsdp`), so that the
config's FSDP2 is what trains here.
"""

import os
import sys

import torch
from helpers import cpu_config, relabel_for_fsdp, small_digit_reward

from trl_srppo import SRPPOTrainer
from trl_srppo.tasks.toy import build_tokenizer, make_dataset

output_dir, model_dir, max_steps, *flags = sys.argv[1:]
fsdp = os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true"
args = cpu_config(
    output_dir,
    per_device_train_batch_size=4,
    max_steps=int(max_steps),
    save_strategy="steps",
    save_steps=2,
    **({"accelerator_config": relabel_for_fsdp()} if fsdp else {}),
)
trainer = SRPPOTrainer(
    model=model_dir,
    reward_funcs=small_digit_reward,
    args=args,
    train_dataset=make_dataset(64, seed=0),
    processing_class=build_tokenizer(),
)
trainer.train(resume_from_checkpoint=True if "resume" in flags else None)
trainer.save_model()
print(f"trained to step {trainer.state.global_step}", flush=True)
if "late_work" in flags:
    torch.distributed.all_reduce(torch.ones(4_000_000), async_op=True).get_future().then(lambda future: None)

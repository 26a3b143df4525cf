# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Run by `tests/test_critic_contract.py` in two processes: one toy SR-PPO run of 2 steps with the critic mode given
as JSON (`{"output_dir", "critic_parallelism", "overrides"}`). At every critic update it records, on each process, the
largest difference between the values the advantages were made from and the critic's own values on the batch just
before the update (`values()`, a no-grad pass), and the largest change of those values by the update; with the
critic optimizer's groups' learning rates and whether its last group holds exactly the value head's parameters,
writes them to `contract_rank{r}.json`."""

import json
import os
import sys

from helpers import cpu_config, small_digit_reward  # tests/helpers.py, on PYTHONPATH (helpers.script_env)

from trl_srppo import SRPPOTrainer
from trl_srppo.method.critics.model import value_output_layer
from trl_srppo.method.critics.optimizer_state import torch_optimizer
from trl_srppo.runtime.teardown import end_distributed
from trl_srppo.tasks.toy import build_model, build_tokenizer, make_dataset

if __name__ == "__main__":
    spec = json.loads(sys.argv[1])
    tokenizer = build_tokenizer()
    fields = dict(per_device_train_batch_size=4, max_steps=2, critic_learning_rate=1e-2)
    fields.update(critic_parallelism=spec["critic_parallelism"], **spec.get("overrides", {}))
    trainer = SRPPOTrainer(
        model=build_model(tokenizer),
        reward_funcs=small_digit_reward,
        args=cpu_config(spec["output_dir"], **fields),
        train_dataset=make_dataset(64, seed=0),
        processing_class=tokenizer,
    )
    critic = trainer.critic_backend
    learn, records = critic.learn, []

    def spy(batch, mask, estimate, steps, global_step):
        before = critic.values(batch, global_step)  # (B, C), every process
        result = learn(batch, mask, estimate, steps, global_step)
        after = critic.values(batch, global_step)
        seen = mask.bool()
        records.append(
            {
                "fused": critic._fuses(steps),
                "used_vs_before": float((result.values - before)[seen].abs().max()),
                "learned": float((after - before)[seen].abs().max()),
            }
        )
        return result

    critic.learn = spy
    trainer.train()
    groups = torch_optimizer(critic.optimizer).param_groups
    head = {id(p) for p in value_output_layer(critic.unwrapped()).parameters()}
    # ZeRO-2's torch optimizer holds flat partitions; its own record of each group's parameters is `bit16_groups`.
    engine_groups = getattr(getattr(critic.model, "optimizer", None), "bit16_groups", None)
    last = engine_groups[-1] if engine_groups is not None else groups[-1]["params"]
    record = {
        "mode": type(critic).__name__,
        "steps": critic.steps,
        "updates": records,
        "group_lrs": [group["lr"] for group in groups],
        "head_group_is_the_head": len(groups) > 1 and {id(p) for p in last} == head,
    }
    rank = trainer.accelerator.process_index
    with open(os.path.join(spec["output_dir"], f"contract_rank{rank}.json"), "w") as f:
        json.dump(record, f)
    end_distributed()

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Run by `tests/test_vllm.py` under `accelerate launch --config_file recipes/accelerate/zero3.yaml --num_processes 2`:
SR-PPO with a ZeRO-3 policy generating through vLLM colocate (one CPU engine per process, as TRL's colocate mode runs
it), 4 steps of 4 rollouts per process, 2 steps per generated batch. Every process writes `process_<rank>.json`:
whether the reward function was given exactly the tokens vLLM generated, and, after each weight sync, whether vLLM's
weights equal the policy's gathered whole weights (rounded to vLLM's dtype) and whether they moved since the last one.

    vllm_zero3_run.py MODEL_DIR OUTPUT_DIR [CRITIC]

CRITIC: `separate` (the default: its own ZeRO-3 engine) or `policy_head` (a value head on the policy's hidden states,
read through the ZeRO-3 policy's backbone).
"""

import json
import os
import sys

import deepspeed
import torch
import vllm
from helpers import cpu_config, small_digit_reward  # tests/helpers.py, on PYTHONPATH (helpers.script_env)
from test_vllm import _expected_vllm_weights

from trl_srppo import SRPPOTrainer
from trl_srppo.runtime.teardown import end_distributed
from trl_srppo.tasks.toy import build_tokenizer, make_dataset


def main(model_dir: str, output_dir: str, critic: str = "separate") -> None:
    record = {"generated": [], "rewarded": [], "syncs": []}
    generate = vllm.LLM.generate

    def spy_generate(self, *args, **kwargs):
        outputs = generate(self, *args, **kwargs)
        record["generated"].append([list(o.token_ids) for output in outputs for o in output.outputs])
        return outputs

    vllm.LLM.generate = spy_generate

    def reward(completions, completion_ids, **kwargs):
        record["rewarded"].append([list(ids) for ids in completion_ids])
        return small_digit_reward(completions)

    args = cpu_config(
        output_dir,
        per_device_train_batch_size=4,
        use_vllm=True,
        vllm_mode="colocate",
        max_steps=4,
        steps_per_generation=2,
        learning_rate=3e-2,
        critic_type=critic,
    )
    trainer = SRPPOTrainer(
        model=model_dir,
        reward_funcs=reward,
        args=args,
        train_dataset=make_dataset(64, seed=0),
        processing_class=build_tokenizer(),
    )
    generation = trainer.vllm_generation
    engine = generation.llm.llm_engine.model_executor.driver_worker.model_runner.model
    dtype = generation.llm.llm_engine.model_config.dtype
    sync = generation.sync_weights
    previous = {}

    def checked_sync():
        sync()
        policy = trainer.model
        parameters = list(policy.parameters())
        record["partitioned"] = all(hasattr(p, "ds_id") for p in parameters)
        with deepspeed.zero.GatheredParameters(parameters):  # the whole weights, on every process
            whole = {name: tensor.detach().clone() for name, tensor in policy.state_dict().items()}
        weights = {name: tensor.detach().clone() for name, tensor in engine.named_parameters()}
        expected = _expected_vllm_weights(whole, weights)
        mismatched = [
            name
            for name, e in expected.items()
            if not (torch.equal(weights[name][: e.shape[0]], e.to(dtype)) and not weights[name][e.shape[0] :].any())
        ]
        moved = bool(previous) and any(not torch.equal(previous[name], weights[name]) for name in weights)
        previous.update(weights)
        record["syncs"].append({"step": trainer.state.global_step, "mismatched": mismatched, "moved": moved})

    generation.sync_weights = checked_sync
    trainer.train()
    rank = trainer.accelerator.process_index
    outcome = {
        "engine": trainer.accelerator.distributed_type.name,
        "zero_stage": trainer.model_wrapped.zero_optimization_stage(),
        "critic_class": type(trainer.critic_backend).__name__,
        "critic_losses": [e["critic/loss"] for e in trainer.state.log_history if "critic/loss" in e],
        "generate_calls": len(record["generated"]),
        "rollouts_per_call": [len(batch) for batch in record["generated"]],
        "rewarded_equals_generated": record["rewarded"] == record["generated"],
        "partitioned": record.get("partitioned"),
        "syncs": record["syncs"],
    }
    with open(os.path.join(output_dir, f"process_{rank}.json"), "w") as f:
        json.dump(outcome, f)
    end_distributed(trainer.accelerator)


if __name__ == "__main__":
    torch.set_num_threads(1)
    main(*sys.argv[1:])

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Run by `tests/test_vllm.py` (in a process of its own: one vLLM engine per process): SR-PPO with a LoRA policy
through vLLM colocate, two steps of generation. Before each weight sync it merges a copy of the policy's adapter into
its base weights (peft's `merge_and_unload`); after it, it reads vLLM's weights. Writes to `<output_dir>/syncs.json`,
for each sync, whether vLLM holds exactly that merge (in vLLM's dtype) and whether the merge differs from the base.

    python vllm_lora_sync.py <model_dir> <output_dir>
"""

import copy
import json
import os
import sys

import torch
from helpers import cpu_config, small_digit_reward  # tests/helpers.py, on PYTHONPATH (helpers.script_env)
from peft import LoraConfig
from test_vllm import _expected_vllm_weights

from trl_srppo import SRPPOTrainer
from trl_srppo.tasks.toy import build_tokenizer, make_dataset


def main(model_dir: str, output_dir: str) -> None:
    trainer = SRPPOTrainer(
        model=model_dir,
        reward_funcs=small_digit_reward,
        args=cpu_config(output_dir, use_vllm=True, vllm_mode="colocate", max_steps=2, learning_rate=3e-2),
        train_dataset=make_dataset(64, seed=0),
        processing_class=build_tokenizer(),
        peft_config=LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", task_type="CAUSAL_LM"),
    )
    generation = trainer.vllm_generation
    engine = generation.llm.llm_engine.model_executor.driver_worker.model_runner.model
    dtype = generation.llm.llm_engine.model_config.dtype
    sync = generation.sync_weights
    syncs = []

    def checked_sync():
        policy = trainer.accelerator.unwrap_model(trainer.model)
        base = {name: tensor.clone() for name, tensor in policy.get_base_model().state_dict().items()}
        merged = copy.deepcopy(policy).merge_and_unload().state_dict()
        sync()
        weights = dict(engine.named_parameters())
        expected = _expected_vllm_weights(merged, weights)
        equal = all(
            torch.equal(weights[name][: e.shape[0]], e.to(dtype)) and not weights[name][e.shape[0] :].any()
            for name, e in expected.items()
        )
        lora_bases = {name: name.removesuffix(".weight") + ".base_layer.weight" for name in merged}
        moved = any(not torch.equal(merged[n], base[b]) for n, b in lora_bases.items() if b in base)
        syncs.append({"step": trainer.state.global_step, "equal": equal, "adapter_moved_weights": moved})

    generation.sync_weights = checked_sync
    trainer.train()
    with open(os.path.join(output_dir, "syncs.json"), "w") as f:
        json.dump(syncs, f)


if __name__ == "__main__":
    main(*sys.argv[1:3])

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Run by `tests/test_sharded_policy.py` under `accelerate launch --config_file recipes/accelerate/<engine>.yaml`
(2 CPU processes over gloo): SR-PPO on the toy chain task with the policy owned by the launch's engine (DDP,
DeepSpeed ZeRO-2/3 or FSDP2), then process 0 writes `outcome.json`: the engine, how the policy's and the critic's
parameters are held per process, and the logged losses.

    script.py OUTPUT_DIR MODEL_DIR CRITIC MAX_STEPS [resume] [greedy] [pool]

CRITIC: `separate` (the default critic, its mode from the policy's engine), `lora_critic` (`critic_use_peft`),
`lora_policy` (a LoRA policy beside the separate critic), `policy_head` (a value head on the policy's hidden states),
or `policy_lora` (a second LoRA adapter on a LoRA policy; refused under ZeRO-3: the refusal is written instead).

FSDP2 on a CPU: Accelerate switches to FSDP only from a multi-accelerator state, which a CPU run is not (it would train
the policy under DDP and say so). The harness, not the package, relabels Accelerate's shared state as multi-GPU
before the trainer is built, so that the config's FSDP2 is what trains here.
"""

import json
import os
import sys

import helpers  # tests/helpers.py, on PYTHONPATH (helpers.script_env)
import torch
from helpers import cpu_config, relabel_for_fsdp

from trl_srppo import SRPPOTrainer
from trl_srppo.runtime.teardown import end_distributed, exit_process
from trl_srppo.tasks.toy import build_tokenizer, make_dataset

ROWS = 8  # prompts per step over all processes


def held(parameters) -> dict:
    """Local and whole element counts of `parameters` on this process, and how they are split."""
    from torch.distributed.tensor import DTensor

    local = whole = dtensors = partitioned = 0
    count = 0
    for p in parameters:
        count += 1
        if isinstance(p, DTensor):
            dtensors += 1
            local += p.to_local().numel()
            whole += p.numel()
        elif hasattr(p, "ds_id"):  # a ZeRO-3 partitioned parameter
            partitioned += 1
            local += p.ds_tensor.numel()
            whole += p.ds_numel
        else:
            local += p.numel()
            whole += p.numel()
    return {"count": count, "local": local, "whole": whole, "dtensors": dtensors, "zero3_partitioned": partitioned}


def zero_master_weights(engine) -> dict | None:
    """ZeRO-1/2: the float32 master weights this process holds against all of them."""
    optimizer = getattr(engine, "optimizer", None)
    groups = getattr(optimizer, "single_partition_of_fp32_groups", None)
    if groups is None:
        return None
    local = sum(g.numel() for g in groups)
    whole = sum(p.numel() for group in optimizer.bit16_groups for p in group)
    return {"local": local, "whole": whole}


def critic_options(case: str):
    """(SRPPOConfig fields, peft_config) of a critic case."""
    from peft import LoraConfig

    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
    if case == "separate":
        return {}, None
    if case == "lora_critic":
        return {"critic_use_peft": True, "critic_lora_target_modules": ["q_proj", "v_proj"]}, None
    if case == "lora_policy":
        return {}, lora
    if case == "policy_head":
        return {"critic_type": "policy_head"}, None
    if case == "policy_lora":
        return {"critic_type": "policy_lora"}, lora
    raise ValueError(case)


def main(output_dir: str, model_dir: str, case: str, max_steps: str, *flags: str):
    resume = "resume" in flags
    extra = {}
    if os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true":
        extra["accelerator_config"] = relabel_for_fsdp()
    fields, peft_config = critic_options(case)
    args = cpu_config(
        output_dir,
        per_device_train_batch_size=ROWS // int(os.environ.get("WORLD_SIZE", "1")),  # 8 rows a step on any count
        max_steps=int(max_steps),
        save_strategy="steps",
        save_steps=2,
        # `greedy`: every completion is the policy's argmax, so that a run on another number of processes (whose
        # per-process sampling streams differ) generates the same completions.
        **({"generation_kwargs": {"do_sample": False}} if "greedy" in flags else {}),
        # `pool`: the batch's prompts drawn from a pool of 2 batches by the critic's Pass@k weights, the pool valued by
        # the critic's no-grad forward under the launch's engine.
        **({"prompt_sampling": "pass_at_k", "prompt_pool_factor": 2} if "pool" in flags else {}),
        **fields,
        **extra,
    )
    outcome = {"case": case}
    try:
        trainer = SRPPOTrainer(
            model=model_dir,
            reward_funcs=helpers.small_digit_reward,
            args=args,
            train_dataset=make_dataset(64, seed=0),
            processing_class=build_tokenizer(),
            peft_config=peft_config,
        )
    except (ValueError, NotImplementedError) as err:  # a combination refused at start
        outcome["refused"] = f"{type(err).__name__}: {err}"
        if int(os.environ.get("RANK", "0")) == 0:
            with open(os.path.join(output_dir, "outcome.json"), "w") as f:
                json.dump(outcome, f)
        return
    accelerator = trainer.accelerator
    outcome["engine"] = accelerator.distributed_type.name
    outcome["policy_at_start"] = held(trainer.model.parameters())
    outcome["critic_class"] = type(trainer.critic_backend).__name__
    outcome["critic_at_start"] = held(trainer.critic_backend.unwrapped().parameters())
    trainer.train(resume_from_checkpoint=True if resume else None)
    outcome["policy_wrapper"] = type(trainer.model_wrapped).__name__
    outcome["policy_at_end"] = held(trainer.model.parameters())  # FSDP2 shards the policy when training starts
    outcome["critic_at_end"] = held(trainer.critic_backend.unwrapped().parameters())  # a policy LoRA critic's too
    outcome["policy_master_weights"] = zero_master_weights(trainer.model_wrapped)
    outcome["critic_master_weights"] = zero_master_weights(trainer.critic_backend.model)
    critic_engine = trainer.critic_backend.model
    if hasattr(critic_engine, "zero_optimization_stage"):
        outcome["critic_zero_stage"] = critic_engine.zero_optimization_stage()
    if hasattr(trainer.model_wrapped, "zero_optimization_stage"):
        outcome["policy_zero_stage"] = trainer.model_wrapped.zero_optimization_stage()
    outcome["losses"] = {e["step"]: e["loss"] for e in trainer.state.log_history if "loss" in e}
    outcome["critic_losses"] = {e["step"]: e["critic/loss"] for e in trainer.state.log_history if "critic/loss" in e}
    outcome["global_step"] = trainer.state.global_step
    key = "prompt_sampling/pool_q0_mean"  # the critic's mean value of the pool's prompts (with `pool`)
    outcome["pool_values"] = {e["step"]: e[key] for e in trainer.state.log_history if key in e}
    trainer.save_model()
    if accelerator.is_main_process:
        with open(os.path.join(output_dir, "outcome.json"), "w") as f:
            json.dump(outcome, f, indent=1)
    end_distributed(accelerator)


if __name__ == "__main__":
    torch.set_num_threads(1)
    main(*sys.argv[1:])
    exit_process(0)  # as `trl-srppo train` ends: no abort at exit while gloo's threads outlive their groups

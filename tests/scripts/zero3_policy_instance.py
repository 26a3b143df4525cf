# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Run by `tests/test_critic_deepspeed.py` in a process of its own: a policy loaded as a model instance while a
DeepSpeed ZeRO-3 config is alive (so `from_pretrained` partitions it), and the critic `build_critic_model` makes from
it.
Prints whether the policy was partitioned, whether the critic holds the policy's whole weights, and whether the copy
gathered them one module at a time."""

import json
import os
import sys
import tempfile

import deepspeed
import torch
import torch.distributed as dist
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM
from transformers.integrations import HfDeepSpeedConfig

from trl_srppo import SRPPOConfig
from trl_srppo.method.critics.model import build_critic_model
from trl_srppo.tasks.toy import build_model, build_tokenizer


def main(port: str):
    os.environ.update(DS_ACCELERATOR="cpu", LOCAL_RANK="0", RANK="0", WORLD_SIZE="1")
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    dist.init_process_group("gloo", rank=0, world_size=1)
    folder = tempfile.mkdtemp()
    build_model(build_tokenizer()).save_pretrained(folder)
    saved = load_file(os.path.join(folder, "model.safetensors"))
    zero3 = HfDeepSpeedConfig({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}})  # noqa: F841
    policy = AutoModelForCausalLM.from_pretrained(folder)
    partitioned = hasattr(policy.model.embed_tokens.weight, "ds_id")
    gathers, gathered_parameters = [], deepspeed.zero.GatheredParameters

    def recording(params, *args, **kwargs):  # the number of weights each gather makes whole
        gathers.append(sum(p.ds_numel for p in params))
        return gathered_parameters(params, *args, **kwargs)

    deepspeed.zero.GatheredParameters = recording
    critic = build_critic_model(policy, None, SRPPOConfig(output_dir=folder, report_to=[], use_cpu=True, bf16=False))
    deepspeed.zero.GatheredParameters = gathered_parameters
    largest_module = max(sum(p.numel() for p in m.parameters(recurse=False)) for m in critic.model.modules())
    copied = {f"model.{k}": v for k, v in critic.model.state_dict().items() if "rotary" not in k}
    equal = all(torch.equal(v, saved[k]) for k, v in copied.items())
    outcome = {"partitioned": partitioned, "copied": len(copied), "equal": equal}
    # Whole one module at a time: every weight gathered once, no gather larger than the largest module's own.
    outcome["gathered_once"] = sum(gathers) == sum(p.numel() for p in critic.model.parameters())
    outcome["one_module_at_a_time"] = max(gathers) <= largest_module
    print(json.dumps(outcome))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:])

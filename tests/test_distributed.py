# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`accelerate launch --num_processes 2` on CPU: training runs and the critic stays identical on both processes."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file


@pytest.mark.parametrize("critic_parallelism", ["accelerate", "replicate"])
def test_two_process_training_keeps_critic_weights_identical(tmp_path, critic_parallelism):
    """`accelerate`: the critic prepared by Accelerate (DDP policy); `replicate`: the torch DDP copy used beside a
    DeepSpeed or FSDP policy, exercised here with a DDP policy since neither runs on CPU."""
    script = Path(__file__).parent / "scripts" / "ddp_train.py"
    accelerate = Path(sys.executable).parent / "accelerate"
    command = [
        str(accelerate),
        "launch",
        "--multi_gpu",  # the multi-process launcher (torchrun); without GPUs it runs on CPU with gloo
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        str(script),
        str(tmp_path),
        critic_parallelism,
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    assert (tmp_path / "world_size.txt").read_text() == "2"
    assert (tmp_path / "critic_wrapper.txt").read_text() == "DistributedDataParallel"

    rank0 = load_file(tmp_path / "critic_rank0.safetensors")
    rank1 = load_file(tmp_path / "critic_rank1.safetensors")
    initial = load_file(tmp_path / "critic_initial.safetensors")
    assert rank0.keys() == rank1.keys()
    for name in rank0:
        assert torch.equal(rank0[name], rank1[name]), f"critic weight {name} differs between processes"
    assert any(not torch.equal(rank0[n], initial[n]) for n in rank0), "the critic did not learn"
    assert (tmp_path / "critic" / "model.safetensors").is_file()

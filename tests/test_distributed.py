# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`accelerate launch --num_processes 2` on CPU: training runs and the critic stays identical on both processes."""

import os
import subprocess
import sys
import time
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


def test_reward_stuck_on_one_process_ends_the_job_within_its_deadline(tmp_path):
    """The reward function never returns on process 1: its deadline (`reward_timeout=3`) ends the job with an error
    naming the function, the process and the phase, instead of process 0 waiting in a collective for 30 minutes; and
    `ddp_timeout` reaches the gloo process group."""
    script = Path(__file__).parent / "scripts" / "ddp_hung_reward.py"
    accelerate = Path(sys.executable).parent / "accelerate"
    command = [str(accelerate), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1"]
    command += ["--mixed_precision", "no", "--dynamo_backend", "no", str(script), str(tmp_path)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    ended = time.time()
    log = result.stdout + result.stderr
    assert result.returncode != 0
    # From the start of training (each process wrote its file just before) to the end of the job: the deadline, one
    # step of the toy model and the launcher's clean-up.
    assert ended - (tmp_path / "pg_timeout_rank1.txt").stat().st_mtime < 3 + 30
    assert "Reward function 'hangs_on_process_1' on process 1 (phase: scoring the rollouts of global step 0)" in log
    assert "did not return within reward_timeout=3 s" in log
    for rank in (0, 1):
        assert float((tmp_path / f"pg_timeout_rank{rank}.txt").read_text()) == 40.0

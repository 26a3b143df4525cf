# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`trl-srppo train` killed with SIGKILL (during a step, and while a checkpoint is being written), then relaunched
with `--resume_from_checkpoint true` with no one stepping in, ends with the weights of an uninterrupted run."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from helpers import run_weights

from trl_srppo.runtime.checkpoints import CHECKPOINT_COMPLETE

ROOT = Path(__file__).resolve().parents[1]
TRAIN = [str(Path(sys.executable).parent / "trl-srppo"), "train", "--config", str(ROOT / "recipes/cpu/srppo_toy.yaml")]
# 16 prompts, 8 per step: two steps per epoch, three epochs; a checkpoint after every step.
SMALL = ["--per_device_train_batch_size", "8", "--max_steps", "6", "--save_steps", "1", "--logging_steps", "1"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}


def launch(toy, output_dir, resume):
    model_dir, data_file = toy
    command = [*TRAIN, *SMALL, "--model_name_or_path", model_dir, "--dataset_name", data_file]
    command += ["--output_dir", str(output_dir)]
    if resume:
        command += ["--resume_from_checkpoint", "true"]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)


def kill_when(process, ready, timeout=120):
    """SIGKILL `process` as soon as `ready()` holds (polled every millisecond); False if it ended first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        if ready():
            process.send_signal(signal.SIGKILL)
            process.wait()
            return True
        time.sleep(0.001)
    process.wait()
    return False


@pytest.mark.slow
def test_kill_nine_at_several_moments_then_resume_true_gives_the_uninterrupted_weights(tmp_path):
    from trl_srppo.tasks.toy import save_toy

    toy = save_toy(str(tmp_path / "toy"), num_prompts=16)
    reference = tmp_path / "reference"
    result = launch(toy, reference, resume=False)
    assert result.wait(timeout=300) == 0, result.stderr.read()[-3000:]

    out = tmp_path / "killed"
    # 1. While the step-2 checkpoint (the end of the first epoch) is being written: its folder has just appeared.
    assert kill_when(launch(toy, out, resume=False), lambda: (out / "checkpoint-2").exists())
    # 2. While the step-3 checkpoint is being written, after a resume: the policy's weights are in, the rest is not.
    assert kill_when(launch(toy, out, resume=True), lambda: (out / "checkpoint-3" / "model.safetensors").exists())
    # 3. In the middle of step 5, after its checkpoint-4 is complete.
    assert kill_when(launch(toy, out, resume=True), lambda: (out / "checkpoint-4" / CHECKPOINT_COMPLETE).exists())
    finish = launch(toy, out, resume=True)
    assert finish.wait(timeout=300) == 0, finish.stderr.read()[-3000:]

    expected, got = run_weights(reference), run_weights(out)
    assert expected.keys() == got.keys()
    for name, tensor in expected.items():
        assert torch.equal(got[name], tensor), f"{name} differs from the uninterrupted run"

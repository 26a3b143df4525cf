# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""A scheduler's SIGTERM or SIGUSR1 during training (`save_on_preemption`, `trl_srppo.runtime.preemption`): a complete
checkpoint at the step reached, a message that says how to resume, exit status 128 + the signal's number, and a
resume that ends with the uninterrupted run's weights and logs; a second signal ends the run at once; the option off
leaves the signals their default action; two processes stop at the same step when one of them is signalled."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import run_weights, script_env, two_process_launch
from transformers import TrainerControl, TrainerState

from trl_srppo.runtime.checkpoints import TRAINER_STATE, is_complete_checkpoint, list_checkpoints
from trl_srppo.runtime.preemption import RESUME_HOW, PreemptionCallback

ROOT = Path(__file__).resolve().parents[1]
TRAIN = [str(Path(sys.executable).parent / "trl-srppo"), "train", "--config", str(ROOT / "recipes/cpu/srppo_toy.yaml")]
# 16 prompts, 8 per step, six steps; no periodic checkpoint before the last step, so any other is the preemption's.
SMALL = ["--per_device_train_batch_size", "8", "--max_steps", "6", "--save_steps", "1000", "--logging_steps", "1"]
SCRIPT = Path(__file__).parent / "scripts" / "preempt_run.py"


def train_command(toy, output_dir, *extra):
    model_dir, data_file = toy
    command = [*TRAIN, *SMALL, "--model_name_or_path", model_dir, "--dataset_name", data_file]
    return command + ["--output_dir", str(output_dir), *extra]


def signal_after_first_logged_step(command, signum, timeout=300) -> tuple[int, str]:
    """Run `command`, send it `signum` once it has logged its first step; its exit status and whole output."""
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
        env=script_env(PYTHONUNBUFFERED="1"),
    )
    lines = []
    for line in process.stdout:
        lines.append(line)
        if line.startswith("{'loss'"):
            process.send_signal(signum)
            break
    lines += process.stdout.readlines()
    return process.wait(timeout=timeout), "".join(lines)


def step_logs(output_dir) -> list[dict]:
    """The per-step log entries of the last checkpoint's trainer state, without the wall-clock and memory ones (a
    resumed process holds another amount of memory)."""
    with open(os.path.join(list_checkpoints(str(output_dir))[-1], TRAINER_STATE)) as f:
        history = json.load(f)["log_history"]
    return [
        {k: v for k, v in entry.items() if k != "step_time" and not k.startswith("memory/")}
        for entry in history
        if "loss" in entry
    ]


@pytest.mark.slow
def test_sigterm_mid_run_saves_a_complete_checkpoint_and_the_resume_ends_as_the_uninterrupted_run(tmp_path):
    from trl_srppo.tasks.toy import save_toy

    toy = save_toy(str(tmp_path / "toy"), num_prompts=16)
    reference = subprocess.run(
        train_command(toy, tmp_path / "reference"), capture_output=True, text=True, cwd=ROOT, env=script_env()
    )
    assert reference.returncode == 0, reference.stderr[-3000:]

    out = tmp_path / "preempted"
    status, log = signal_after_first_logged_step(train_command(toy, out), signal.SIGTERM)
    assert status == 128 + signal.SIGTERM, log[-3000:]
    checkpoints = list_checkpoints(str(out))
    assert len(checkpoints) == 1, checkpoints  # the preemption's, and nothing after train(): no final model
    checkpoint = checkpoints[0]
    step = int(checkpoint.rsplit("-", 1)[1])
    assert 2 <= step <= 6 and is_complete_checkpoint(checkpoint)  # 2 unless this test lagged behind the run
    assert not (out / "model.safetensors").exists()
    assert "SIGTERM received: the run stops with a checkpoint at the end of this optimizer step" in log
    assert f"Stopped by SIGTERM at global step {step}, with the complete checkpoint {checkpoint}." in log
    assert RESUME_HOW in log

    resumed = subprocess.run(
        train_command(toy, out, "--resume_from_checkpoint", "true"),
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=script_env(),
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    expected, got = run_weights(tmp_path / "reference"), run_weights(out)
    assert expected.keys() == got.keys()
    for name, tensor in expected.items():
        assert torch.equal(got[name], tensor), f"{name} differs from the uninterrupted run"
    assert step_logs(out) == step_logs(tmp_path / "reference")


def run_script(tmp_path, signals, on_process="every", save_on_preemption="true"):
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path), signals, on_process, save_on_preemption],
        capture_output=True,
        text=True,
        timeout=300,
        env=script_env(),
    )


def test_sigusr1_during_a_reward_call_stops_at_that_step_with_a_complete_checkpoint(tmp_path):
    # SLURM's --signal=USR1@<seconds> arriving while a reward function runs under its deadline (reward_timeout): the
    # deadline's handler passes it on to the preemption handler.
    result = run_script(tmp_path, "SIGUSR1")
    assert result.returncode == 128 + signal.SIGUSR1, result.stderr[-3000:]
    assert list_checkpoints(str(tmp_path)) == [str(tmp_path / "checkpoint-2")]
    assert is_complete_checkpoint(str(tmp_path / "checkpoint-2"))  # with save_strategy="no"
    outcome = json.loads((tmp_path / "outcome_rank0.json").read_text())
    assert outcome == {
        "signal": "SIGUSR1",
        "step": 2,
        "checkpoint": str(tmp_path / "checkpoint-2"),
        "code": 128 + signal.SIGUSR1,
    }
    assert f"Stopped by SIGUSR1 at global step 2, with the complete checkpoint {tmp_path / 'checkpoint-2'}" in (
        result.stderr
    )


def test_a_second_signal_ends_the_run_at_once_without_a_checkpoint(tmp_path):
    result = run_script(tmp_path, "SIGUSR1,SIGTERM")
    assert result.returncode == -signal.SIGTERM, result.stderr[-3000:]
    assert "SIGTERM received a second time: ending now, without a checkpoint." in result.stderr
    assert list_checkpoints(str(tmp_path)) == []


def test_save_on_preemption_off_leaves_sigterm_its_default_action(tmp_path):
    result = run_script(tmp_path, "SIGTERM", save_on_preemption="false")
    assert result.returncode == -signal.SIGTERM, result.stderr[-3000:]
    assert list_checkpoints(str(tmp_path)) == []
    assert "SIGTERM received" not in result.stderr


def test_a_signal_on_one_of_two_processes_stops_both_at_the_same_step_with_one_checkpoint(tmp_path):
    # Only process 1 is signalled: without agreement, it would save alone and wait in the save's collectives while
    # process 0 went on to generate step 3 (ddp_timeout=60 would then end the job with an error).
    command = two_process_launch(SCRIPT, tmp_path, "SIGTERM", "1", "true")
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=script_env())
    assert result.returncode != 0
    for rank in (0, 1):
        outcome = json.loads((tmp_path / f"outcome_rank{rank}.json").read_text())
        assert outcome["signal"] == "SIGTERM" and outcome["step"] == 2, (outcome, result.stderr[-3000:])
        assert outcome["code"] == 128 + signal.SIGTERM
    checkpoint = tmp_path / "checkpoint-2"
    assert list_checkpoints(str(tmp_path)) == [str(checkpoint)]
    assert is_complete_checkpoint(str(checkpoint))
    assert json.loads((checkpoint / "checkpoint_complete.json").read_text())["num_processes"] == 2


@pytest.mark.slow
def test_sigterm_to_a_two_process_accelerate_launch_reaches_both_processes_which_stop_with_one_checkpoint(tmp_path):
    # What a scheduler signals: the launcher, which passes SIGTERM on to its processes (torchrun's agent).
    command = two_process_launch(SCRIPT, tmp_path, "SIGTERM", "none", "true", "12")
    status, log = signal_after_first_logged_step(command, signal.SIGTERM)
    assert status != 0
    steps = set()
    for rank in (0, 1):
        outcome = json.loads((tmp_path / f"outcome_rank{rank}.json").read_text())
        assert outcome["signal"] == "SIGTERM" and outcome["code"] == 128 + signal.SIGTERM, (outcome, log[-3000:])
        steps.add(outcome["step"])
    assert len(steps) == 1 and 2 <= min(steps) < 12
    checkpoint = tmp_path / f"checkpoint-{steps.pop()}"
    assert list_checkpoints(str(tmp_path)) == [str(checkpoint)] and is_complete_checkpoint(str(checkpoint))
    assert f"Stopped by SIGTERM at global step {checkpoint.name.split('-')[1]}" in log


def test_a_signal_during_a_periodic_save_stops_after_that_save_without_another_step():
    callback = PreemptionCallback()
    callback._on_signal(signal.SIGTERM, None)  # the handler's work, without sending this process a signal
    control = TrainerControl()
    callback.on_save(None, TrainerState(global_step=3), control)
    assert control.should_training_stop and not control.should_save  # the checkpoint of step 3 is the one
    assert callback.stopped == (signal.SIGTERM, 3)


def test_a_signal_with_a_handler_of_its_own_is_left_to_it_and_the_others_are_restored():
    def own(signum, frame):
        pass

    before = signal.signal(signal.SIGUSR1, own)
    callback = PreemptionCallback()
    try:
        callback.install()
        assert signal.getsignal(signal.SIGUSR1) is own
        assert signal.getsignal(signal.SIGTERM) == callback._on_signal
    finally:
        callback.restore()
        signal.signal(signal.SIGUSR1, before)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_the_preemption_exception_crosses_a_process_boundary():
    """A run stopped by SIGTERM in a `ProcessPoolExecutor` worker reaches the caller as `TrainingPreempted` (its
    pickled form), not as a broken pool, which would send the other workers a second SIGTERM and lose their
    checkpoints."""
    import pickle
    import signal

    from trl_srppo.runtime.preemption import TrainingPreempted

    error = TrainingPreempted(signal.SIGTERM, 69, "/runs/checkpoint-69")
    copy = pickle.loads(pickle.dumps(error))
    assert isinstance(copy, TrainingPreempted) and copy.code == 143
    assert (copy.step, copy.checkpoint, copy.signal_name, str(copy)) == (
        69,
        "/runs/checkpoint-69",
        "SIGTERM",
        str(error),
    )

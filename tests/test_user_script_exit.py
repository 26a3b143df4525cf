# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""A user's own script exits 0 after every launch that finished (`make test-sharded`): `tests/scripts/user_script.py`,
built on the public API alone (config, `SRPPOTrainer`, `train()`, `save_model()`, end of script; not `trl-srppo
train`), under `accelerate launch --config_file recipes/accelerate/{zero3,fsdp2}.yaml` on 2 CPU processes over gloo.

A gloo worker thread drops its last references to a collective's tensors after the collective returns, and that may
take the GIL; one that asks for it once the interpreter has begun to shut down aborts its process ("terminate called
without an active exception", exit signal 6) after a run that finished. The trainer registers an `atexit` handler
that gives the workers the GIL first (`trl_srppo.runtime.teardown.drain_gloo_at_exit`). The race is rare in a plain
script, so the first test repeats fresh launches and resumes; the second makes it certain, with a collective whose
Python callback runs in a gloo worker as the script ends (every launch of it aborted without the handler).
"""

import subprocess
from pathlib import Path

import pytest
from helpers import config_launch, script_env

pytestmark = pytest.mark.sharded

SCRIPT = Path(__file__).parent / "scripts" / "user_script.py"
ROUNDS = 3  # per engine: a launch to step 2 with its checkpoint, then a fresh launch that resumes it to step 4


def launch(config: str, output_dir: Path, model_dir: Path, steps: int, *flags: str) -> subprocess.CompletedProcess:
    output_dir.mkdir(parents=True, exist_ok=True)
    command = config_launch(config, SCRIPT, output_dir, model_dir, steps, *flags)
    env = script_env(DS_ACCELERATOR="cpu")
    return subprocess.run(command, capture_output=True, text=True, timeout=600, env=env, cwd=output_dir)


def failure(result: subprocess.CompletedProcess, steps: int) -> str | None:
    """What went wrong with a launch meant to train to `steps`, with its output; None when it trained and exited 0."""
    if result.returncode == 0 and f"trained to step {steps}" in result.stdout:
        return None
    return f"exit {result.returncode}:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"


@pytest.mark.parametrize("config", ["zero3", "fsdp2"])
def test_a_user_script_exits_0_after_every_launch_and_resume(tmp_path, toy_model_folder, config):
    failures = {}
    for round_ in range(ROUNDS):
        folder = tmp_path / f"round{round_}"
        for steps, flags in ((2, ()), (4, ("resume",))):  # the resume is a fresh launch from `checkpoint-2`
            problem = failure(launch(config, folder, toy_model_folder, steps, *flags), steps)
            if problem is not None:
                failures[(round_, steps)] = problem
    assert not failures, "\n\n".join(f"round {r}, launch to step {s}: {p}" for (r, s), p in failures.items())


@pytest.mark.parametrize("config", ["zero3", "fsdp2"])
def test_a_gloo_worker_that_asks_for_the_gil_as_the_script_ends_does_not_abort_it(tmp_path, toy_model_folder, config):
    result = launch(config, tmp_path, toy_model_folder, 1, "late_work")
    assert failure(result, 1) is None, failure(result, 1)
    assert "terminate called" not in result.stderr

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""A sharded run resumed on another number of processes (`make test-sharded`), as a preemptible cluster resumes it:
a checkpoint written on 2 processes resumed on 1, and one written on 1 resumed on 2, through `accelerate launch` of
`tests/scripts/sharded_policy_run.py` with the repository's configs, 8 prompts a step over all processes.

- **FSDP2**: the policy and every critic resume. The policy's checkpoint is Accelerate's full state dict, the critic's
  weights and optimizer state are saved whole (a policy LoRA critic's sharded adapter gathered), so both load on any
  number of processes. Each generated completion is the policy's argmax (`greedy`): sampled ones come from one random
  stream per process, which no resume on another count can replay. With that, the maths is the same on 1 and 2
  processes (the losses are normalised by the tokens over all processes), so the runs on 1 and on 2 processes, and
  the resumes each way, agree within `TOLERANCE` (float32 sums in another order) on every loss and final weight.
- **DeepSpeed ZeRO-3**: the policy's engine checkpoint is partitioned over the processes that wrote it, and DeepSpeed
  loads it on another number only from its universal form. The run refuses at start, each way, with the command
  that converts the checkpoint and the config line that loads it.
"""

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import config_launch, script_env
from test_sharded_policy import STEPS, assert_runs_agree

pytestmark = pytest.mark.sharded

SCRIPT = Path(__file__).parent / "scripts" / "sharded_policy_run.py"
CRITICS = ("separate", "lora_critic", "policy_head", "policy_lora")  # `policy_lora` sits on a LoRA policy
# Every loss and final weight within `test_sharded_policy.TOLERANCE` (1e-5) of the run on 2 processes (measured, 1
# process or a resume on another count: at most 2.4e-7 on a critic loss, 4.4e-7 on a weight).


def launch(config: str, processes: int, output_dir: Path, model_dir: Path, case: str, *flags: str):
    """`accelerate launch` of the script on `processes` processes; the finished process."""
    command = config_launch(
        config, SCRIPT, output_dir, model_dir, case, STEPS, *flags, flags=("--num_processes", str(processes))
    )
    output_dir.mkdir(parents=True, exist_ok=True)
    env = script_env(DS_ACCELERATOR="cpu")
    return subprocess.run(command, capture_output=True, text=True, timeout=900, env=env, cwd=output_dir)


def outcome_of(result: subprocess.CompletedProcess, output_dir: Path) -> dict:
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    return json.loads((output_dir / "outcome.json").read_text())


@pytest.fixture(scope="module")
def fsdp2_runs(tmp_path_factory, toy_model_folder):
    """`runs[(case, n)]`: the uninterrupted greedy run on `n` processes; `runs[(case, n, "resumed")]`: the run on `n`
    processes resumed from the other count's checkpoint of step 2."""
    root = tmp_path_factory.mktemp("fsdp2_resume")
    runs = {}
    for case in CRITICS:
        for processes in (2, 1):
            folder = root / f"{case}-{processes}"
            runs[(case, processes)] = (
                folder,
                outcome_of(launch("fsdp2", processes, folder, toy_model_folder, case, "greedy"), folder),
            )
        for processes, other in ((1, 2), (2, 1)):
            folder = root / f"{case}-{processes}-from-{other}"
            folder.mkdir()
            shutil.copytree(runs[(case, other)][0] / "checkpoint-2", folder / "checkpoint-2")
            result = launch("fsdp2", processes, folder, toy_model_folder, case, "greedy", "resume")
            runs[(case, processes, "resumed")] = (folder, outcome_of(result, folder), result.stderr)
    return runs


@pytest.mark.parametrize("case", CRITICS)
def test_fsdp2_runs_on_1_and_2_processes_agree(fsdp2_runs, case):
    one, two = fsdp2_runs[(case, 1)], fsdp2_runs[(case, 2)]
    assert one[1]["engine"] == two[1]["engine"] == "FSDP" and one[1]["policy_wrapper"].startswith("FSDP")
    assert_runs_agree(one, two)


@pytest.mark.parametrize("case", CRITICS)
@pytest.mark.parametrize("processes, other", [(1, 2), (2, 1)])
def test_fsdp2_resumes_on_another_number_of_processes_where_the_uninterrupted_run_ends(
    fsdp2_runs, case, processes, other
):
    folder, outcome, log = fsdp2_runs[(case, processes, "resumed")]
    assert f"written by {other} process(es), on {processes}" in log  # said at start, with what is not restored
    assert outcome["global_step"] == STEPS
    # Steps 1 and 2 are the checkpoint's own log history (written on `other` processes); steps 3 and 4 trained here.
    assert_runs_agree((folder, outcome), fsdp2_runs[(case, other)])
    assert_runs_agree((folder, outcome), fsdp2_runs[(case, processes)])


@pytest.mark.parametrize("processes, other", [(1, 2), (2, 1)])
def test_zero3_on_another_number_of_processes_refuses_at_start_with_the_conversion(
    tmp_path,
    toy_model_folder,
    processes,
    other,
):
    written = tmp_path / "written"
    outcome_of(launch("zero3", other, written, toy_model_folder, "separate"), written)
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    shutil.copytree(written / "checkpoint-2", resumed / "checkpoint-2")
    result = launch("zero3", processes, resumed, toy_model_folder, "separate", "resume")
    assert result.returncode != 0
    message = (
        f"written by {other} process(es) and this run has {processes}, but the policy runs under DeepSpeed ZeRO-3"
    )
    assert message in result.stderr, result.stderr[-4000:]
    assert "deepspeed.checkpoint.ds_to_universal --inject_missing_state" in result.stderr
    assert '"checkpoint": {"load_universal": true}' in result.stderr
    assert not (resumed / "outcome.json").exists() and not list(resumed.glob("checkpoint-[34]"))

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The policy sharded for real (`make test-sharded`): SR-PPO launched with `accelerate launch --config_file
recipes/accelerate/{zero2,zero3,fsdp2}.yaml` on 2 CPU processes over gloo (`--num_processes 2 --mixed_precision no`
on the command line, the repository's configs as they are), beside the DDP run of `cpu_2proc.yaml` with the same seed,
data and model folder (`tests/scripts/sharded_policy_run.py`).

What each case checks: the policy's parameters partitioned as the engine says (ZeRO-2: half the float32 master
weights per process; ZeRO-3: every parameter partitioned, half its elements per process; FSDP2: every parameter a
DTensor, half its elements per process), the critic's too where its mode shards (a DeepSpeed engine of the policy's
stage, FSDP2; a policy head's `H + 1` weights are whole on every process), the losses and the final weights equal to
the DDP run's within `TOLERANCE`, a resume in a fresh launch from the checkpoint of step 2 ending bit for bit where the
uninterrupted run ends, and the saved policy and critic whole, loadable by `from_pretrained`. The critic options
that cannot sit beside a sharded policy are refused at start with a message that names what to use instead.

FSDP2 on a CPU needs the harness's relabelling of Accelerate's state (see the script); the package itself does not
touch Accelerate's internals, and without it the run says that it trains under DDP
(`tests/test_train_cli.py::test_fsdp_config_on_a_cpu_says_at_start_that_it_trains_under_ddp`).
"""

import json
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
import torch
from helpers import config_launch, free_port, script_env
from safetensors.torch import load_file

pytestmark = pytest.mark.sharded

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path(__file__).parent / "scripts" / "sharded_policy_run.py"
ENGINES = ("zero2", "zero3", "fsdp2")
TRAINED = ("separate", "lora_critic", "lora_policy", "policy_head", "policy_lora")
# What an engine rules out, refused at start: ZeRO-3 partitions the critic adapter with the policy's weights but
# handles the gradients of the policy optimizer's parameters alone.
REFUSED = {("zero3", "policy_lora"): "critic_type='policy_lora' cannot run beside a DeepSpeed ZeRO-3 policy"}
CASES = [(engine, case) for engine in ENGINES for case in TRAINED if (engine, case) not in REFUSED]
# Prompt sampling (`pass_at_k`, a pool of 2 batches) with the critics that read the policy's own modules: their pool
# forward runs through the engine's policy.
POOLED = [
    (engine, case) for engine in ENGINES for case in ("policy_head", "policy_lora") if (engine, case) not in REFUSED
]
STEPS = 4  # a checkpoint at step 2 (save_steps 2), and the end at step 4
# ZeRO-2 does the DDP run's maths; ZeRO-3 and FSDP2 gather the weights and reduce-scatter the gradients, which may sum
# in another order: float32 rounding after 4 steps (measured: at most 3.4e-7 on the weights and 2.4e-7 on a critic
# loss, the policy losses equal).
TOLERANCE = 1e-5


def launch(config: str, output_dir: Path, model_dir: Path, case: str, *flags: str) -> dict:
    """`accelerate launch` of the script under `recipes/accelerate/<config>.yaml`, 2 processes, with the script's
    `flags` (`resume`, `pool`); its outcome."""
    command = config_launch(config, SCRIPT, output_dir, model_dir, case, STEPS, *flags)
    output_dir.mkdir(parents=True, exist_ok=True)
    env = script_env(DS_ACCELERATOR="cpu")
    result = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env, cwd=output_dir)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    return json.loads((output_dir / "outcome.json").read_text())


@pytest.fixture(scope="module")
def model_dir(toy_model_folder):
    return toy_model_folder


@pytest.fixture(scope="module")
def runs(tmp_path_factory, model_dir):
    """Launch every case once: `runs[(config, case)]` is `(output_dir, outcome)`; `(engine, case, "resume")` is the
    case resumed in a fresh launch from the uninterrupted run's checkpoint of step 2."""
    root = tmp_path_factory.mktemp("sharded")
    out = {}
    for config, case in [("cpu_2proc", case) for case in TRAINED] + CASES:
        folder = root / f"{config}-{case}"
        out[(config, case)] = (folder, launch(config, folder, model_dir, case))
    for config, case in [("cpu_2proc", "policy_head"), ("cpu_2proc", "policy_lora"), *POOLED]:
        folder = root / f"{config}-{case}-pool"
        out[(config, case, "pool")] = (folder, launch(config, folder, model_dir, case, "pool"))
    for engine, case in CASES:
        folder = root / f"{engine}-{case}-resume"
        folder.mkdir()
        shutil.copytree(out[(engine, case)][0] / "checkpoint-2", folder / "checkpoint-2")
        out[(engine, case, "resume")] = (folder, launch(engine, folder, model_dir, case, "resume"))
    return out


def _halved(held: dict) -> bool:
    """Whether process 0 holds about half of the elements: half, or a little more where a split is uneven or padded
    (FSDP2 gives the first process the larger chunk of an odd dimension; ZeRO pads its partitions)."""
    return held["whole"] > 0 and 0.5 * held["whole"] <= held["local"] <= 0.51 * held["whole"]


@pytest.mark.parametrize("engine, case", CASES)
def test_the_launchs_engine_shards_the_policy_and_the_critic(runs, engine, case):
    outcome = runs[(engine, case)][1]
    assert outcome["global_step"] == STEPS
    policy = outcome["policy_at_end"]
    if engine == "zero2":
        assert outcome["engine"] == "DEEPSPEED" and outcome["policy_zero_stage"] == 2
        master = outcome["policy_master_weights"]  # the trainable parameters' float32 copies, partitioned
        assert _halved(master) and master["whole"] == policy["whole"] - frozen(case, outcome)
    elif engine == "zero3":
        assert outcome["engine"] == "DEEPSPEED" and outcome["policy_zero_stage"] == 3
        assert policy["zero3_partitioned"] == policy["count"] and _halved(policy), policy
        start = outcome["policy_at_start"]  # the base's weights partitioned from the load on (zero3_init_flag)
        assert start["zero3_partitioned"] == len(list(toy_policy().parameters())) and start["whole"] == policy["whole"]
    else:
        assert outcome["engine"] == "FSDP" and outcome["policy_wrapper"].startswith("FSDP")
        assert policy["dtensors"] == policy["count"] and _halved(policy), policy
    critic = outcome["critic_at_start"]
    hidden_size = toy_policy().config.hidden_size
    if case == "policy_head":  # a linear head on the policy's hidden states, whole on every process
        assert outcome["critic_class"] == "PolicyHeadCritic" and critic["local"] == critic["whole"] == hidden_size + 1
    elif case == "policy_lora" and engine == "zero2":  # ZeRO-2 keeps the weights whole, the critic adapter's too
        assert outcome["critic_class"] == "PolicyLoraCritic" and critic["local"] == critic["whole"]
    elif case == "policy_lora":  # FSDP2 shards the critic adapter with the policy's layers; the head is whole
        critic = outcome["critic_at_end"]
        assert outcome["critic_class"] == "FSDPPolicyLoraCritic" and critic["dtensors"] == critic["count"] - 2
        adapter = {key: critic[key] - (hidden_size + 1) for key in ("local", "whole")}
        assert _halved(adapter), critic
    elif case == "lora_critic":  # a LoRA critic is replicated: its adapter and head are small, its base frozen
        assert outcome["critic_class"] == "ReplicatedCritic" and critic["local"] == critic["whole"]
    elif engine == "fsdp2":
        assert outcome["critic_class"] == "FSDPCritic" and critic["dtensors"] == critic["count"] and _halved(critic)
    else:
        assert outcome["critic_class"] == "DeepSpeedCritic" and outcome["critic_zero_stage"] == int(engine[-1])
        if engine == "zero3":
            assert critic["zero3_partitioned"] == critic["count"] and _halved(critic), critic
        else:
            master = outcome["critic_master_weights"]
            assert _halved(master) and master["whole"] == critic["whole"]


def toy_policy():
    from trl_srppo.tasks.toy import build_model, build_tokenizer

    return build_model(build_tokenizer(), seed=0)


def frozen(case: str, outcome: dict) -> int:
    """The policy's elements that the policy's optimizer does not hold: a LoRA policy's frozen base, and the critic
    adapter of a `policy_lora` critic (trained by the critic's optimizer)."""
    base = sum(p.numel() for p in toy_policy().parameters())
    if case == "policy_lora":
        return base + outcome["critic_at_start"]["whole"] - (toy_policy().config.hidden_size + 1)
    return base if case == "lora_policy" else 0


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    """The saved weights of a model folder, each file's keyed by its name: a whole model's, a LoRA adapter's (a LoRA
    policy, a LoRA critic), a policy head's, a policy LoRA critic's adapter and head."""
    names = ("model.safetensors", "adapter_model.safetensors", "adapter/adapter_model.safetensors")
    weights = {}
    for name in (*names, "value_head.safetensors"):
        if (folder / name).is_file():
            weights.update({f"{name}:{key}": value for key, value in load_file(folder / name).items()})
    assert weights, f"no weights in {folder}: {sorted(p.name for p in folder.iterdir())}"
    return weights


def assert_runs_agree(run: tuple, reference: tuple) -> None:
    """Two `(output_dir, outcome)` runs of `STEPS` steps log the same losses and critic losses and save the same
    policy and critic weights, within `TOLERANCE`."""
    (folder, outcome), (reference_folder, expected) = run[:2], reference[:2]
    for key in ("losses", "critic_losses"):
        assert outcome[key].keys() == expected[key].keys() == {str(s) for s in range(1, STEPS + 1)}
        for step, value in expected[key].items():
            assert outcome[key][step] == pytest.approx(value, abs=TOLERANCE), (key, step)
    for sub in ("", "critic"):
        weights, reference_weights = _weights(folder / sub), _weights(reference_folder / sub)
        assert weights.keys() == reference_weights.keys()
        for name, tensor in reference_weights.items():
            torch.testing.assert_close(weights[name], tensor, rtol=0, atol=TOLERANCE, msg=f"{sub or 'policy'} {name}")


@pytest.mark.parametrize("engine, case", CASES)
def test_losses_and_weights_equal_the_ddp_run(runs, engine, case):
    ddp = runs[("cpu_2proc", case)]
    assert ddp[1]["engine"] == "MULTI_CPU" and ddp[1]["policy_wrapper"] == "DistributedDataParallel"
    assert_runs_agree(runs[(engine, case)], ddp)


@pytest.mark.parametrize("engine, case", POOLED)
def test_prompt_sampling_values_its_pool_through_the_engines_policy_as_the_ddp_run_does(runs, engine, case):
    outcome, ddp = runs[(engine, case, "pool")][1], runs[("cpu_2proc", case, "pool")][1]
    assert ddp["pool_values"].keys() == outcome["pool_values"].keys() == {str(s) for s in range(1, STEPS + 1)}
    for key in ("pool_values", "losses", "critic_losses"):
        for step, value in ddp[key].items():
            assert outcome[key][step] == pytest.approx(value, abs=TOLERANCE), (key, step)
    assert outcome["pool_values"] != runs[(engine, case)][1]["pool_values"]  # none without prompt sampling


@pytest.mark.parametrize("engine, case", CASES)
def test_a_resume_in_a_fresh_launch_ends_where_the_uninterrupted_run_ends(runs, engine, case):
    (folder, outcome), (whole_folder, whole) = runs[(engine, case, "resume")], runs[(engine, case)]
    assert outcome["global_step"] == STEPS and outcome["losses"] == whole["losses"]
    assert outcome["critic_losses"] == whole["critic_losses"]
    for sub in ("", "critic"):
        resumed, uninterrupted = _weights(folder / sub), _weights(whole_folder / sub)
        assert resumed.keys() == uninterrupted.keys()
        for name, tensor in uninterrupted.items():
            assert torch.equal(resumed[name], tensor), f"{sub or 'policy'} {name}"  # bit for bit


@pytest.mark.parametrize("engine", ENGINES)
def test_the_saved_policy_and_critic_load_whole(runs, engine, model_dir):
    from transformers import AutoModelForCausalLM, AutoModelForTokenClassification

    folder, outcome = runs[(engine, "separate")]
    policy = AutoModelForCausalLM.from_pretrained(folder)  # ZeRO-3: the 16-bit gather of zero3_save_16bit_model
    assert sum(p.numel() for p in policy.parameters()) == outcome["policy_at_end"]["whole"]
    initial = AutoModelForCausalLM.from_pretrained(model_dir)
    moved = [n for n, p in policy.named_parameters() if not torch.equal(p, dict(initial.named_parameters())[n])]
    assert moved, "the saved policy is the initial one"
    critic = AutoModelForTokenClassification.from_pretrained(folder / "critic")
    assert critic.config.num_labels == 1
    assert sum(p.numel() for p in critic.parameters()) == outcome["critic_at_start"]["whole"]


@pytest.mark.parametrize("config, case, message", [(*key, message) for key, message in REFUSED.items()])
def test_critics_that_cannot_sit_beside_a_sharded_policy_are_refused_at_start(
    tmp_path, model_dir, config, case, message
):
    outcome = launch(config, tmp_path / "run", model_dir, case)
    assert message in outcome["refused"]
    assert not list((tmp_path / "run").glob("checkpoint-*"))


def test_sigterm_to_the_launcher_under_zero3_stops_every_process_at_one_step_with_a_complete_checkpoint(
    tmp_path, monkeypatch
):
    from test_preemption import SCRIPT as PREEMPT_SCRIPT
    from test_preemption import signal_after_first_logged_step

    from trl_srppo.runtime.checkpoints import is_complete_checkpoint, list_checkpoints

    command = config_launch("zero3", PREEMPT_SCRIPT, tmp_path, "SIGTERM", "none", "true", "12")
    monkeypatch.setenv("DS_ACCELERATOR", "cpu")  # the launch's environment is this one's (script_env)
    status, log = signal_after_first_logged_step(command, signal.SIGTERM)
    assert status != 0, log[-3000:]
    steps = set()
    for rank in (0, 1):
        outcome = json.loads((tmp_path / f"outcome_rank{rank}.json").read_text())
        assert outcome["signal"] == "SIGTERM", (outcome, log[-3000:])
        steps.add(outcome["step"])
    assert len(steps) == 1 and 2 <= min(steps) < 12, steps
    checkpoint = tmp_path / f"checkpoint-{steps.pop()}"
    assert list_checkpoints(str(tmp_path)) == [str(checkpoint)] and is_complete_checkpoint(str(checkpoint))
    # Every process's part: DeepSpeed's partitioned engine state of the policy and of the critic.
    assert len(list(checkpoint.glob("global_step*/*optim_states.pt"))) == 2, sorted(checkpoint.rglob("*"))
    assert len(list((checkpoint / "critic").rglob("*optim_states.pt"))) == 2, sorted(checkpoint.rglob("*"))


def launch_two_machines(output_dir: Path, model_dir: Path, resume: bool = False) -> tuple[dict, list[str]]:
    """`recipes/accelerate/multinode_zero2.yaml` as two machines of one process each on this one (`--num_machines 2
    --machine_rank 0/1 --main_process_ip 127.0.0.1`), the same launch line on both; the outcome and each's output."""
    port = free_port()
    output_dir.mkdir(parents=True, exist_ok=True)
    processes = []
    for rank in (0, 1):
        machine = ("--num_machines", "2", "--machine_rank", str(rank), "--main_process_ip", "127.0.0.1")
        script_args = (output_dir, model_dir, "separate", STEPS, *(["resume"] if resume else []))
        command = config_launch("multinode_zero2", SCRIPT, *script_args, port=port, flags=machine)
        processes.append(
            subprocess.Popen(
                command,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env=script_env(DS_ACCELERATOR="cpu"),
            )
        )
    logs = [process.communicate(timeout=900)[0] for process in processes]
    for process, log in zip(processes, logs):
        assert process.returncode == 0, log[-5000:]
    return json.loads((output_dir / "outcome.json").read_text()), logs


def test_two_machines_train_save_and_resume_as_one_machine_does(runs, model_dir, tmp_path):
    from trl_srppo.runtime.checkpoints import is_complete_checkpoint

    outcome, logs = launch_two_machines(tmp_path / "run", model_dir)
    one_machine = runs[("zero2", "separate")][1]
    assert outcome["engine"] == "DEEPSPEED" and outcome["policy_zero_stage"] == 2 == outcome["critic_zero_stage"]
    assert outcome["losses"] == one_machine["losses"] and outcome["critic_losses"] == one_machine["critic_losses"]
    # Each machine's first process logs the steps (Transformers' `log_on_each_node`); the run's one main process
    # writes the outcome and the final model.
    assert [log.count("{'loss'") for log in logs] == [STEPS, STEPS]
    checkpoint = tmp_path / "run" / "checkpoint-2"
    assert is_complete_checkpoint(str(checkpoint))
    assert json.loads((checkpoint / "checkpoint_complete.json").read_text())["num_processes"] == 2
    # Every process's own files, from both machines: its RNG state and its ZeRO partitions (policy and critic).
    assert sorted(p.name for p in checkpoint.glob("rng_state_*.pth")) == ["rng_state_0.pth", "rng_state_1.pth"]
    assert len(list(checkpoint.glob("global_step2/*optim_states.pt"))) == 2
    assert len(list((checkpoint / "critic").rglob("*optim_states.pt"))) == 2

    resumed_dir = tmp_path / "resumed"
    resumed_dir.mkdir()
    shutil.copytree(checkpoint, resumed_dir / "checkpoint-2")
    resumed, _ = launch_two_machines(resumed_dir, model_dir, resume=True)
    assert resumed["losses"] == outcome["losses"] and resumed["global_step"] == STEPS
    for sub in ("", "critic"):
        mine, uninterrupted = _weights(resumed_dir / sub), _weights(tmp_path / "run" / sub)
        assert all(torch.equal(mine[name], tensor) for name, tensor in uninterrupted.items()), sub or "policy"


RESUME_LAUNCHES = 5  # the reporter saw 1 abort in 4 launches (rank 1, SIGABRT after the last step); about 2.5 min


def test_every_zero3_resume_of_the_cli_exits_0(tmp_path):
    """`trl-srppo train` (`-m trl_srppo.train`) under `recipes/accelerate/zero3.yaml`, the separate critic in its own
    DeepSpeed engine, resumed from `checkpoint-2` to step 4 in `RESUME_LAUNCHES` fresh launches: each one's launcher
    exits 0 (it exits non-zero, naming the rank, when any process does) and no process aborts at exit. Gloo's threads
    outlive their destroyed groups under ZeRO-3 (DeepSpeed and the partitioned parameters hold the groups), and a
    process that shut its interpreter down beside them could abort ("terminate called without an active exception")
    after a run that finished; `trl_srppo.runtime.teardown.exit_process` ends it without that shutdown."""
    from trl_srppo.tasks.toy import save_toy

    model_dir, data_file = save_toy(str(tmp_path / "toy"), num_prompts=64)

    def launch(output_dir: Path, resume: bool) -> subprocess.CompletedProcess:
        command = config_launch(
            "zero3", "-m", "trl_srppo.train", "--config", ROOT / "recipes" / "cpu" / "srppo_toy.yaml",
            *("--model_name_or_path", model_dir, "--dataset_name", data_file, "--output_dir", output_dir),
            *("--max_steps", STEPS, "--save_steps", "2", "--per_device_train_batch_size", "4", "--logging_steps", "1"),
            *(("--resume_from_checkpoint", "true") if resume else ()),
        )  # fmt: skip
        output_dir.mkdir(parents=True, exist_ok=True)
        env = script_env(DS_ACCELERATOR="cpu")
        return subprocess.run(command, capture_output=True, text=True, timeout=600, env=env, cwd=output_dir)

    first = launch(tmp_path / "run", resume=False)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-6000:]
    statuses = []
    for i in range(RESUME_LAUNCHES):
        folder = tmp_path / f"resume{i}"
        shutil.copytree(tmp_path / "run" / "checkpoint-2", folder / "checkpoint-2")
        result = launch(folder, resume=True)
        output = result.stdout + result.stderr
        statuses.append((result.returncode, "terminate called" in output))
        assert json.loads((folder / "checkpoint-4" / "trainer_state.json").read_text())["global_step"] == STEPS
        assert output.count("'loss'") == STEPS - 2, output[-3000:]  # steps 3 and 4, logged by process 0
    assert statuses == [(0, False)] * RESUME_LAUNCHES, statuses

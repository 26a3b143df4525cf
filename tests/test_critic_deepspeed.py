# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`critic_parallelism="deepspeed"` in one process: the mode `auto` picks, the engine's config, clear errors, the
engine's state round trip, and the critic warm-up's hook on a real ZeRO optimizer. The two-process training, saving
and resuming tests are in `tests/test_distributed.py`."""

import contextlib
import os

import pytest
import torch
import torch.distributed as dist
from torch import nn

from trl_srppo.method.critics.build import policy_zero_stage, resolve_parallelism
from trl_srppo.method.critics.deepspeed_engine import engine_config
from trl_srppo.method.critics.optimizer_state import torch_optimizer

if not torch.cuda.is_available():
    os.environ.setdefault("DS_ACCELERATOR", "cpu")  # DeepSpeed's CPU accelerator, chosen at its first use

NO_DEEPSPEED = "DeepSpeed is not installed (`pip install trl-srppo[deepspeed]`)"


@pytest.mark.parametrize(
    "requested, stage, fsdp, peft, expected",
    [
        ("auto", None, False, False, "accelerate"),
        ("auto", 3, False, False, "deepspeed"),
        ("auto", 2, False, False, "deepspeed"),
        ("auto", 1, False, False, "replicate"),  # ZeRO-1 leaves the policy's weights and gradients whole too
        ("auto", 3, False, True, "replicate"),  # a LoRA critic is small already
        ("auto", None, True, False, "fsdp"),
        ("auto", None, True, True, "replicate"),
        ("deepspeed", None, False, False, "deepspeed"),  # explicit: beside any policy backend
        ("replicate", 3, False, False, "replicate"),
    ],
)
def test_auto_shards_a_full_critic_like_the_policy(requested, stage, fsdp, peft, expected):
    assert resolve_parallelism(requested, stage, fsdp, peft) == expected


def test_engine_config_takes_the_policys_zero_stage_and_offload():
    policy = {
        "zero_optimization": {
            "stage": 3,
            "offload_optimizer": {"device": "cpu", "pin_memory": True},
            "offload_param": {"device": "none"},
            "reduce_bucket_size": "auto",
        },
        "train_micro_batch_size_per_gpu": "auto",
    }
    assert policy_zero_stage(policy) == 3 and policy_zero_stage(None) is None
    config = engine_config(policy, zero_stage=1, micro_batch_size=4, world_size=8, max_grad_norm=0.5, bf16=True)
    assert config["zero_optimization"] == {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": True}}
    assert config["train_batch_size"] == 32 and config["gradient_accumulation_steps"] == 1
    assert config["gradient_clipping"] == 0.5 and config["bf16"] == {"enabled": True}

    # ZeRO-2 policy: parameter offload is ZeRO-3 only.
    policy["zero_optimization"].update(stage=2, offload_param={"device": "cpu"})
    config = engine_config(policy, zero_stage=1, micro_batch_size=4, world_size=8, max_grad_norm=None, bf16=False)
    assert config["zero_optimization"] == {"stage": 2, "offload_optimizer": {"device": "cpu", "pin_memory": True}}
    assert config["gradient_clipping"] == 0.0
    # NVMe offload: the critic swaps in a folder of its own (DeepSpeed clears an engine's swap folder at its start).
    policy["zero_optimization"].update(stage=3, offload_param={"device": "nvme", "nvme_path": "/local_nvme"})
    config = engine_config(policy, zero_stage=1, micro_batch_size=4, world_size=8, max_grad_norm=None, bf16=False)
    assert config["zero_optimization"]["offload_param"] == {"device": "nvme", "nvme_path": "/local_nvme/critic"}
    assert policy["zero_optimization"]["offload_param"]["nvme_path"] == "/local_nvme"  # the policy's is untouched
    # No DeepSpeed policy: `critic_zero_stage`, no offload.
    config = engine_config(None, zero_stage=3, micro_batch_size=2, world_size=2, max_grad_norm=1.0, bf16=False)
    assert config["zero_optimization"] == {"stage": 3}


def test_critic_zero_stage_is_checked(tmp_path):
    from conftest import cpu_config

    with pytest.raises(ValueError, match="critic_zero_stage must be 1, 2 or 3"):
        cpu_config(tmp_path, critic_zero_stage=4)
    with pytest.raises(ValueError, match="Stage 0 partitions nothing.*critic_parallelism='replicate'"):
        cpu_config(tmp_path, critic_zero_stage=0)
    with pytest.raises(ValueError, match="ZeRO-0.*critic_parallelism='replicate'"):
        resolve_parallelism("deepspeed", 0, fsdp=False, peft_critic=False)
    assert resolve_parallelism("auto", 0, fsdp=False, peft_critic=False) == "replicate"


def test_trainer_with_deepspeed_critic_in_one_process_is_a_clear_error(toy, tmp_path):
    pytest.importorskip("deepspeed", reason=NO_DEEPSPEED)
    from conftest import cpu_config

    from trl_srppo import SRPPOTrainer
    from trl_srppo.rewards import chain_reward

    tokenizer, build_model, dataset = toy
    args = cpu_config(tmp_path, critic_parallelism="deepspeed")
    with pytest.raises(ValueError, match="critic_parallelism='deepspeed'.*accelerate launch"):
        SRPPOTrainer(build_model(), chain_reward, args, dataset, processing_class=tokenizer)


def test_warmup_beside_an_optimizer_without_a_torch_optimizer_is_a_clear_error(toy, tmp_path):
    from types import SimpleNamespace

    from conftest import cpu_config

    from trl_srppo import SRPPOTrainer
    from trl_srppo.rewards import chain_reward

    tokenizer, build_model, dataset = toy
    args = cpu_config(tmp_path, critic_warmup_steps=1)
    trainer = SRPPOTrainer(build_model(), chain_reward, args, dataset, processing_class=tokenizer)
    trainer.lr_scheduler = object()  # the policy's schedule exists: only the critic's and the hooks are made
    trainer.optimizer = SimpleNamespace(optimizer=SimpleNamespace(step=lambda: None))  # not a torch optimizer
    with pytest.raises(ValueError, match="critic_warmup_steps=1 .*wraps no torch optimizer.*critic_warmup_steps=0"):
        trainer.create_scheduler(num_training_steps=2)


def test_checkpoint_of_a_deepspeed_critic_in_another_mode_is_a_clear_error(toy, tmp_path):
    from conftest import cpu_config

    from trl_srppo import SRPPOTrainer
    from trl_srppo.rewards import chain_reward

    tokenizer, build_model, dataset = toy

    def trainer(max_steps):
        args = cpu_config(tmp_path, max_steps=max_steps, save_strategy="steps", save_steps=1)
        return SRPPOTrainer(build_model(), chain_reward, args, dataset, processing_class=tokenizer)

    trainer(max_steps=1).train()
    (tmp_path / "checkpoint-1" / "critic" / "deepspeed").mkdir()  # as a DeepSpeed critic's checkpoint has
    with pytest.raises(ValueError, match="another critic_parallelism mode.*'deepspeed' for a DeepSpeed engine"):
        trainer(max_steps=2).train(resume_from_checkpoint=str(tmp_path / "checkpoint-1"))


@pytest.fixture(scope="module")
def one_process_group():
    """A one-process gloo group for this module's tests, torn down after them (ZeRO over one process: every
    partition is whole). One group for all: DeepSpeed keeps the groups it derives from the first one it sees."""
    if dist.is_initialized():
        pytest.skip("a process group already exists in this process")
    with pytest.MonkeyPatch.context() as monkeypatch:
        for name, value in {"LOCAL_RANK": "0", "RANK": "0", "WORLD_SIZE": "1"}.items():  # as torchrun sets them
            monkeypatch.setenv(name, value)
        dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
        yield
        dist.destroy_process_group()


def _engine(module, stage, lr=0.1):
    from trl_srppo.method.critics.deepspeed_engine import wrap_critic

    optimizer = torch.optim.AdamW(module.parameters(), lr=lr, weight_decay=0.0)
    config = engine_config(None, zero_stage=stage, micro_batch_size=1, world_size=1, max_grad_norm=None, bf16=False)
    return wrap_critic(module, optimizer, config)


@pytest.mark.parametrize("stage", [2, 3])
def test_engine_state_round_trips_into_weights_and_master_weights(toy, one_process_group, stage):
    deepspeed = pytest.importorskip("deepspeed", reason=NO_DEEPSPEED)
    from trl_srppo.method.critics.deepspeed_engine import gather_state_dict, load_state_dict, local_bytes
    from trl_srppo.method.critics.model import critic_from_policy

    tokenizer, build_model, _ = toy
    critic = critic_from_policy(build_model())
    reference = {k: v.clone() for k, v in critic.state_dict().items()}
    engine = _engine(critic, stage)
    assert isinstance(engine, deepspeed.DeepSpeedEngine) and not isinstance(critic, deepspeed.DeepSpeedEngine)
    gathered = gather_state_dict(engine)
    assert gathered.keys() == reference.keys()
    for name, tensor in reference.items():
        assert torch.equal(gathered[name], tensor), name

    # Loaded weights reach the float32 master copy: a step with zero gradients and no weight decay keeps them.
    changed = {k: v + 1.0 for k, v in reference.items()}
    load_state_dict(engine, changed)
    engine.set_gradient_accumulation_boundary(True)
    engine.backward(engine(input_ids=torch.tensor([[3, 4, 5]])).logits.sum() * 0.0, scale_wrt_gas=False)
    engine.step()
    for name, tensor in gather_state_dict(engine).items():
        assert torch.equal(tensor, changed[name]), name
    counts = local_bytes(engine)  # one process: everything is whole
    weight_bytes = 4 * sum(t.numel() for t in reference.values())
    assert counts["parameters"] == weight_bytes
    assert weight_bytes <= counts["master"] <= weight_bytes * 1.01  # ZeRO pads its flat partitions
    assert counts["optimizer"] == 2 * counts["master"]  # AdamW's two moments


@pytest.mark.parametrize("stage", [2, 3])
def test_an_engine_trains_the_value_head_at_its_own_rate(toy, one_process_group, stage):
    # `critic_head_learning_rate` reaches the engine's optimizer as a group of its own. The fresh head's weight is
    # zero, so the first step moves only the head (by about its rate: AdamW's first step is lr g / (|g| + eps)); the
    # second moves the rest of the critic by at most the critic's rate.
    from types import SimpleNamespace

    pytest.importorskip("deepspeed", reason=NO_DEEPSPEED)
    from trl_srppo.method.critics.deepspeed_engine import gather_state_dict, wrap_critic
    from trl_srppo.method.critics.engine import critic_adamw
    from trl_srppo.method.critics.model import critic_from_policy, value_output_layer

    tokenizer, build_model, _ = toy
    critic = critic_from_policy(build_model())
    args = SimpleNamespace(critic_learning_rate=1e-3, critic_head_learning_rate=0.3, adam_beta1=0.9, adam_beta2=0.999,
                           adam_epsilon=1e-8, critic_weight_decay=0.0)  # fmt: skip
    head = dict(value_output_layer(critic).named_parameters())
    names = {name for name, p in critic.named_parameters() if any(p is h for h in head.values())}
    optimizer = critic_adamw([p for p in critic.parameters() if p.requires_grad], args, critic)
    config = engine_config(None, zero_stage=stage, micro_batch_size=1, world_size=1, max_grad_norm=None, bf16=False)
    start = {k: v.clone() for k, v in critic.state_dict().items()}
    engine = wrap_critic(critic, optimizer, config)
    moves = []
    for _ in range(2):
        engine.set_gradient_accumulation_boundary(True)
        engine.backward(engine(input_ids=torch.tensor([[3, 4, 5]])).logits.sum(), scale_wrt_gas=False)
        engine.step()
        now = gather_state_dict(engine)
        moves.append({k: float((now[k] - start[k]).abs().max()) for k in start})
    head_weight = next(name for name in names if name.endswith("weight"))
    assert 0.29 < moves[0][head_weight] <= 0.3 + 1e-6
    assert max(v for k, v in moves[0].items() if k not in names) == 0.0
    rest = max(v for k, v in moves[1].items() if k not in names)
    assert 1e-4 < rest <= 1e-3 + 1e-7


@pytest.mark.parametrize("stage", [2, 3])
def test_a_lora_critic_adapter_loaded_into_an_engine_survives_its_next_step(toy, one_process_group, stage):
    # What a weights-only resume (save_only_model) does for a LoRA critic in a DeepSpeed engine.
    pytest.importorskip("deepspeed", reason=NO_DEEPSPEED)
    from peft import LoraConfig, get_peft_model, get_peft_model_state_dict, set_peft_model_state_dict

    from trl_srppo.method.critics.deepspeed_engine import load_into
    from trl_srppo.method.critics.model import critic_from_policy

    tokenizer, build_model, _ = toy
    lora = LoraConfig(task_type="TOKEN_CLS", r=2, target_modules=["q_proj"], modules_to_save=["score"])
    critic = get_peft_model(critic_from_policy(build_model()), lora)
    adapter = {k: v.clone() + 0.5 for k, v in get_peft_model_state_dict(critic).items()}  # "the checkpoint's"
    optimizer = torch.optim.AdamW([p for p in critic.parameters() if p.requires_grad], lr=0.1, weight_decay=0.0)
    config = engine_config(None, zero_stage=stage, micro_batch_size=1, world_size=1, max_grad_norm=None, bf16=False)
    from trl_srppo.method.critics.deepspeed_engine import wrap_critic

    engine = wrap_critic(critic, optimizer, config)
    load_into(engine, lambda module: set_peft_model_state_dict(module, adapter))
    engine.set_gradient_accumulation_boundary(True)
    engine.backward(engine(input_ids=torch.tensor([[3, 4, 5]])).logits.sum() * 0.0, scale_wrt_gas=False)
    engine.step()  # zero gradients, no weight decay: the loaded weights stay
    import deepspeed

    with (
        deepspeed.zero.GatheredParameters(list(engine.module.parameters())) if stage == 3 else contextlib.nullcontext()
    ):
        after = {k: v.clone() for k, v in get_peft_model_state_dict(engine.module).items()}
    assert after.keys() == adapter.keys()
    for name, tensor in adapter.items():
        assert torch.equal(after[name], tensor), name


def test_warmup_hook_on_the_zero_optimizer_skips_the_policy_step(one_process_group):
    """The policy under DeepSpeed: Accelerate's wrapper holds DeepSpeed's ZeRO optimizer (not a torch optimizer),
    which holds the torch AdamW; the trainer's warm-up hook on that AdamW leaves the weights and AdamW's state as they
    were, while the same step without the hook moves them."""
    pytest.importorskip("deepspeed", reason=NO_DEEPSPEED)
    from types import SimpleNamespace

    from trl_srppo import SRPPOTrainer

    def run(with_hook):
        torch.manual_seed(0)
        engine = _engine(nn.Linear(3, 1), stage=2)
        before = [p.detach().clone() for p in engine.module.parameters()]
        accelerate_wrapper = SimpleNamespace(optimizer=engine.optimizer)  # what `trainer.optimizer.optimizer` is
        assert not isinstance(engine.optimizer, torch.optim.Optimizer)
        adamw = torch_optimizer(accelerate_wrapper)
        assert isinstance(adamw, torch.optim.AdamW)
        if with_hook:
            in_warmup = SimpleNamespace(_in_critic_warmup=lambda: True)
            adamw.register_step_pre_hook(
                lambda opt, args, kwargs: SRPPOTrainer._skip_policy_step_in_warmup(in_warmup, opt, args, kwargs)
            )

        def adam_state():  # moments and step counts (ZeRO may leave an empty entry behind)
            return [v.clone() for state in adamw.state.values() for v in state.values()]

        state_before = adam_state()
        engine.set_gradient_accumulation_boundary(True)
        engine.backward(engine(torch.ones(2, 3)).sum(), scale_wrt_gas=False)
        engine.step()
        moved = any(not torch.equal(p, b) for p, b in zip(engine.module.parameters(), before))
        state_after = adam_state()
        state_moved = len(state_after) != len(state_before) or any(
            not torch.equal(x, y) for x, y in zip(state_after, state_before)
        )
        return moved, state_moved

    assert run(with_hook=False) == (True, True)
    assert run(with_hook=True) == (False, False)


def test_an_optimizer_that_wraps_no_torch_optimizer_is_found_out():
    from types import SimpleNamespace

    assert torch_optimizer(SimpleNamespace(optimizer=SimpleNamespace(step=lambda: None))) is None
    adamw = torch.optim.AdamW(nn.Linear(2, 1).parameters())
    assert torch_optimizer(adamw) is adamw


def test_engine_checkpoint_of_another_stage_or_unconvertible_is_a_clear_error(one_process_group, tmp_path):
    """DeepSpeed loads a ZeRO checkpoint under its own stage only; a checkpoint of another process count that does not
    convert to a universal checkpoint names the process count and the conversion command."""
    pytest.importorskip("deepspeed", reason=NO_DEEPSPEED)
    from trl_srppo.method.critics.deepspeed_engine import ENGINE_FOLDER, checkpoint_processes, load_checkpoint

    engine = _engine(nn.Linear(3, 1), stage=2)
    with pytest.raises(
        ValueError, match="written under ZeRO-3 and this critic's engine runs ZeRO-2.*critic_zero_stage"
    ):
        load_checkpoint(engine, str(tmp_path), zero_stage=3)
    files = tmp_path / ENGINE_FOLDER / "checkpoint"
    files.mkdir(parents=True)
    (files / "zero_pp_rank_0_mp_rank_00_model_states.pt").write_bytes(b"")  # what ZeRO-3 writes (ZeRO-1/2 do not)
    with pytest.raises(ValueError, match="written under ZeRO-3"):
        load_checkpoint(engine, str(tmp_path))
    (files / "zero_pp_rank_0_mp_rank_00_model_states.pt").unlink()
    for rank in range(2):  # two processes' partitions, not loadable ones
        (files / f"zero_pp_rank_{rank}_mp_rank_00_optim_states.pt").write_bytes(b"")
    assert checkpoint_processes(str(tmp_path)) == 2
    with pytest.raises(RuntimeError, match=r"written by 2 process\(es\).*Resume on 2 process\(es\).*ds_to_universal"):
        load_checkpoint(engine, str(tmp_path), zero_stage=2)
    assert sorted(p.name for p in (tmp_path / ENGINE_FOLDER).iterdir()) == ["checkpoint"]  # nothing half-converted


def test_an_engine_checkpoint_written_again_in_place_keeps_no_earlier_partitions(one_process_group, tmp_path):
    pytest.importorskip("deepspeed", reason=NO_DEEPSPEED)
    from trl_srppo.method.critics.deepspeed_engine import (
        ENGINE_FOLDER,
        UNIVERSAL_FOLDER,
        checkpoint_processes,
        save_checkpoint,
    )

    engine = _engine(nn.Linear(3, 1), stage=2)
    save_checkpoint(engine, str(tmp_path))
    assert checkpoint_processes(str(tmp_path)) == 1
    # What an earlier write of the same step on two processes left: a second partition, and its universal form.
    (tmp_path / ENGINE_FOLDER / "checkpoint" / "zero_pp_rank_1_mp_rank_00_optim_states.pt").write_bytes(b"")
    (tmp_path / ENGINE_FOLDER / UNIVERSAL_FOLDER).mkdir()
    assert checkpoint_processes(str(tmp_path)) == 2
    save_checkpoint(engine, str(tmp_path))
    assert checkpoint_processes(str(tmp_path)) == 1
    assert not (tmp_path / ENGINE_FOLDER / UNIVERSAL_FOLDER).exists()


def test_a_policy_instance_partitioned_by_zero3_gives_its_whole_weights_to_the_critic():
    # A policy loaded while a ZeRO-3 config is alive holds empty local shards; the critic copies the whole weights,
    # gathering one module at a time (never the whole policy at once beside the critic).
    import json
    import subprocess
    import sys
    from pathlib import Path

    from helpers import free_port, script_env

    pytest.importorskip("deepspeed", reason=NO_DEEPSPEED)
    script = Path(__file__).parent / "scripts" / "zero3_policy_instance.py"
    result = subprocess.run(
        [sys.executable, str(script), str(free_port())], capture_output=True, text=True, timeout=300, env=script_env()
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    expected = {"partitioned": True, "copied": 24, "equal": True, "gathered_once": True, "one_module_at_a_time": True}
    assert outcome == expected

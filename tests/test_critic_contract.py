# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The contract every critic mode keeps (`trl_srppo.method.critics.Critic`), checked on each mode one process can run:

- the values that make the advantages are the critic's values *before* it learns from the batch, and it then learns;
- a checkpoint's critic loads back whole: weights, optimizer state, step count and learning rate;
- a run resumed from a checkpoint ends bit-identical to the run that was not interrupted, policy and critic.

The modes that need several processes (`accelerate` under DDP, `fsdp`, `deepspeed` ZeRO-2/3) are checked for the
first in two processes (`tests/scripts/critic_contract_run.py`); their checkpoints are restored as saved, on another
number of processes too, in `tests/test_distributed.py` (`_assert_resumed_as_saved`), and their training matches the
whole critic's in `tests/test_critic_sharding.py` and `tests/test_critic_deepspeed.py`.
"""

import inspect
import json
import subprocess
from pathlib import Path

import pytest
import torch
from helpers import (
    critic_full_optimizer_state,
    critic_full_weights,
    script_env,
    toy_grpo_trainer,
    toy_trainer,
    two_process_launch,
)

from trl_srppo.method.critics.checkpoint import load_critic_checkpoint

MODES = {  # name -> (config fields, LoRA policy), one per critic class a single process runs
    "accelerate": ({}, False),
    "accelerate-lora-critic": ({"critic_use_peft": True, "critic_lora_r": 4}, False),
    "replicate": ({"critic_parallelism": "replicate"}, False),
    "policy_head": ({"critic_type": "policy_head"}, False),
    "policy_lora": ({"critic_type": "policy_lora"}, True),
}
CLASSES = {
    "accelerate": "AccelerateCritic",
    "accelerate-lora-critic": "AccelerateCritic",
    "replicate": "ReplicatedCritic",
    "policy_head": "PolicyHeadCritic",
    "policy_lora": "PolicyLoraCritic",
}


def make_trainer(toy, output_dir, mode, **overrides):
    from peft import LoraConfig

    fields, lora_policy = MODES[mode]
    peft_config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]) if lora_policy else None
    fields = dict(critic_learning_rate=1e-2, save_strategy="steps", save_steps=1, **fields)
    return toy_trainer(toy, output_dir, peft_config=peft_config, **{**fields, **overrides})


@pytest.mark.parametrize("mode", list(MODES))
def test_building_the_critic_draws_nothing_from_the_policys_random_stream(toy, tmp_path, mode, monkeypatch):
    """After the set-up torch's random state is the one GRPO's set-up leaves (same seed, same policy: LoRA or not), so
    runs that differ only in their critic sample the same completions until their policies part: the pairs of a paired
    comparison share their seed's samples. The GPUs' generators are seeded as GRPO seeds them too (per process: a
    critic that reseeded them all with `seed` would give every process the same samples)."""
    from peft import LoraConfig

    gpu_seeds = []
    monkeypatch.setattr(torch.cuda, "manual_seed_all", gpu_seeds.append)  # `torch.manual_seed` and `set_seed` call it
    lora = (lambda: LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])) if MODES[mode][1] else None
    toy_grpo_trainer(toy, tmp_path / "grpo", peft_config=lora and lora())
    after_grpo, grpo_gpu_seeds = torch.get_rng_state(), list(gpu_seeds)
    torch.manual_seed(1234)  # a different state in between: the set-up must restore the seed's stream itself
    gpu_seeds.clear()
    make_trainer(toy, tmp_path / "srppo", mode)
    assert torch.equal(torch.get_rng_state(), after_grpo)
    assert grpo_gpu_seeds and gpu_seeds == grpo_gpu_seeds


def policy_weights(trainer) -> dict:
    return {n: p.detach().clone() for n, p in trainer.accelerator.unwrap_model(trainer.model).named_parameters()}


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "separate_passes"])
def test_advantages_use_the_values_before_the_update(toy, tmp_path, mode, fused):
    trainer = make_trainer(toy, tmp_path, mode, max_steps=1, critic_fused_forward=fused)
    critic = trainer.critic_backend
    assert type(critic).__name__ == CLASSES[mode]
    seen = {}
    learn = critic.learn

    def spy(batch, mask, estimate, steps, global_step):
        # The reference: the critic's values on this batch as it is now, before its update.
        seen["before"], seen["mask"] = critic.values(batch, global_step), mask  # (B, C)
        result = learn(batch, mask, estimate, steps, global_step)
        seen["used"], seen["after"] = result.values, critic.values(batch, global_step)
        seen["fused"] = critic._fuses(steps)
        return result

    critic.learn = spy
    trainer.train()
    assert seen["fused"] is fused
    mask = seen["mask"].bool()
    torch.testing.assert_close(seen["used"][mask], seen["before"][mask], atol=1e-6, rtol=1e-5)
    assert (seen["after"][mask] - seen["before"][mask]).abs().max() > 1e-4, "the critic did not learn from the batch"
    assert critic.steps == 1


RESUMED = [*((mode, {}) for mode in MODES), ("accelerate", {"critic_head_learning_rate": 0.1})]


@pytest.mark.parametrize("mode, extra", RESUMED, ids=[*MODES, "accelerate-head-rate"])
def test_a_checkpoint_restores_the_critic_and_a_resume_is_bit_identical(toy, tmp_path, mode, extra):
    full = make_trainer(toy, tmp_path / "full", mode, max_steps=3, **extra)
    full.train()
    checkpoint = tmp_path / "full" / "checkpoint-2"
    assert (checkpoint / "critic").is_dir()

    # Round trip: a fresh trainer loads the checkpoint's critic as the run had it at step 2.
    at_two = make_trainer(toy, tmp_path / "at_two", mode, max_steps=2, **extra)
    at_two.train()
    loaded = make_trainer(toy, tmp_path / "loaded", mode, max_steps=2, **extra)
    loaded.create_optimizer_and_scheduler(num_training_steps=2)
    load_critic_checkpoint(loaded.critic_backend, str(checkpoint))
    for name, tensor in critic_full_weights(at_two).items():
        assert torch.equal(critic_full_weights(loaded)[name], tensor), name
    expected, restored = critic_full_optimizer_state(at_two), critic_full_optimizer_state(loaded)
    assert expected.keys() == restored.keys() and len(expected) > 0
    for name, entry in expected.items():
        for key, tensor in entry.items():
            assert torch.equal(restored[name][key], tensor), (name, key)
    assert loaded.critic_backend.steps == at_two.critic_backend.steps == 2
    assert loaded.critic_lr_scheduler.get_last_lr() == at_two.critic_lr_scheduler.get_last_lr()

    # Exact resume: step 3 from the checkpoint gives the uninterrupted run's weights, bit for bit.
    resumed = make_trainer(toy, tmp_path / "resumed", mode, max_steps=3, **extra)
    resumed.train(resume_from_checkpoint=str(checkpoint))
    assert resumed.critic_backend.steps == full.critic_backend.steps == 3
    for name, tensor in critic_full_weights(full).items():
        assert torch.equal(critic_full_weights(resumed)[name], tensor), f"critic {name}"
    full_policy = policy_weights(full)
    for name, tensor in policy_weights(resumed).items():
        assert torch.equal(tensor, full_policy[name]), f"policy {name}"


@pytest.mark.parametrize("mode", list(MODES))
def test_the_value_head_trains_at_its_own_rate(toy, tmp_path, mode):
    """`critic_head_learning_rate` gives the value head's parameters, and only them, a group of their own at that
    rate. AdamW moves a weight by at most about its rate per step (its first step by `lr g / (|g| + eps)`). The
    fresh head's weight is zero, so no gradient reaches the rest of the critic on the first step: over two steps the
    head's weights move by 0.3 to 0.6, every other critic weight by at most the critic's 1e-2 (one step)."""
    from trl_srppo.method.critics.model import value_output_layer

    trainer = make_trainer(
        toy, tmp_path, mode, max_steps=2, critic_head_learning_rate=0.3, lr_scheduler_type="constant"
    )
    trainer.create_optimizer_and_scheduler(num_training_steps=2)
    critic = trainer.critic_backend
    head = value_output_layer(critic.unwrapped())
    head_ids = {id(p) for p in head.parameters()}
    groups = critic.optimizer.param_groups
    assert [{id(p) for p in g["params"]} for g in groups if g["lr"] == 0.3] == [head_ids]
    rest = [p for g in groups if g["lr"] != 0.3 for p in g["params"]]
    assert all(g["lr"] == 1e-2 for g in groups if g["lr"] != 0.3)
    assert {id(p) for p in rest} | head_ids == {id(p) for p in critic.trainable_parameters()}
    assert bool(rest) == (mode != "policy_head")  # the policy head's critic is its head
    before = [p.detach().clone() for p in rest]
    assert not head.weight.any()  # fresh: its bias is set from the first batch, its weight stays zero until it learns
    trainer.train()
    trained = critic.optimizer.param_groups  # the optimizer that trained (the trainer may have made it again)
    assert sorted({id(p) for p in g["params"]} == head_ids for g in trained) == sorted([False] * bool(rest) + [True])
    assert [g["lr"] for g in trained] == [*([1e-2] if rest else []), 0.3]  # the head's group last
    logged = [log for log in trainer.state.log_history if "critic/head_learning_rate" in log]
    assert logged and all(log["critic/head_learning_rate"] == 0.3 for log in logged)
    assert 0.29 < head.weight.detach().abs().max() <= 0.61  # AdamW's second step can reach about 1.0015 x the rate
    moved = max(((p.detach() - b).abs().max() for p, b in zip(rest, before)), default=torch.tensor(0.0))
    assert moved <= 1e-2 + 1e-6
    assert mode == "policy_head" or moved > 1e-3


def test_without_a_head_rate_the_critic_has_one_group(toy, tmp_path):
    trainer = make_trainer(toy, tmp_path, "accelerate", max_steps=1)
    trainer.create_optimizer_and_scheduler(num_training_steps=1)
    groups = trainer.critic_backend.optimizer.param_groups
    assert len(groups) == 1 and groups[0]["lr"] == 1e-2
    trainer.train()
    assert not any("critic/head_learning_rate" in log for log in trainer.state.log_history)


TWO_PROCESS_MODES = {  # name -> (critic_parallelism, config fields, the class it builds)
    "accelerate-ddp": ("accelerate", {}, "AccelerateCritic"),
    "fsdp": ("fsdp", {}, "FSDPCritic"),
    "deepspeed-zero2": ("deepspeed", {"critic_zero_stage": 2}, "DeepSpeedCritic"),
    "deepspeed-zero3": ("deepspeed", {"critic_zero_stage": 3, "critic_fused_forward": False}, "DeepSpeedCritic"),
    # A value head at a rate of its own: its parameters form the optimizer's second group, sharded or not.
    "fsdp-head-rate": ("fsdp", {"critic_head_learning_rate": 0.1}, "FSDPCritic"),
    "deepspeed-zero2-head-rate": (
        "deepspeed",
        {"critic_zero_stage": 2, "critic_head_learning_rate": 0.1},
        "DeepSpeedCritic",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("mode", list(TWO_PROCESS_MODES))
def test_two_processes_use_the_values_before_the_update(tmp_path, mode):
    parallelism, fields, name = TWO_PROCESS_MODES[mode]
    env = {}
    if parallelism == "deepspeed":
        pytest.importorskip("deepspeed", reason="DeepSpeed is not installed (`pip install trl-srppo[deepspeed]`)")
        env = {} if torch.cuda.is_available() else {"DS_ACCELERATOR": "cpu"}
    spec = {"output_dir": str(tmp_path), "critic_parallelism": parallelism, "overrides": fields}
    script = Path(__file__).parent / "scripts" / "critic_contract_run.py"
    result = subprocess.run(
        two_process_launch(script, json.dumps(spec)),
        capture_output=True,
        text=True,
        timeout=600,
        env=script_env(**env),
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    for rank in (0, 1):
        record = json.loads((tmp_path / f"contract_rank{rank}.json").read_text())
        assert record["mode"] == name and record["steps"] == 2 and len(record["updates"]) == 2
        head_rate = fields.get("critic_head_learning_rate")
        assert record["group_lrs"] == ([1e-2] if head_rate is None else [1e-2, head_rate])
        assert record["head_group_is_the_head"] is (head_rate is not None)
        for update in record["updates"]:
            assert update["fused"] is fields.get("critic_fused_forward", True)
            assert update["used_vs_before"] < 1e-5, (rank, update)
            assert update["learned"] > 1e-4, (rank, update)


# What the trainer may call on a critic, whatever its type and mode: its values, its turn on a batch (values, estimate
# and update: `learn`), its update alone,
# its optimizer's creation, the start of a fresh head, two questions about how it runs, and the two hooks a critic
# type defines (`forward`, `trainable`). Its files are `trl_srppo.method.critics.checkpoint`'s, its mode's mechanics
# its engine's (`critic.engine`).
INTERFACE = {
    "values",
    "learn",
    "update",
    "create_optimizer_and_scheduler",
    "start_value_head",
    "dropout_active",
    "saving_policy",
    "unwrapped",
    "trainable_parameters",
    "forward",
    "trainable",
}


def public_methods(cls) -> set[str]:
    return {name for name, member in inspect.getmembers(cls, inspect.isroutine) if not name.startswith("_")}


def test_the_critic_interface_is_narrow():
    from trl_srppo.method.critics import Critic  # the package imports every critic class its registries build

    def subclasses(cls):
        return [sub for direct in cls.__subclasses__() for sub in (direct, *subclasses(direct))]

    assert public_methods(Critic) == INTERFACE
    found = {cls.__name__ for cls in subclasses(Critic) if cls.__module__.startswith("trl_srppo.")}
    assert {"AccelerateCritic", "DeepSpeedCritic", "FSDPCritic", "PolicyHeadCritic", "RunningMeanCritic"} <= found
    for cls in subclasses(Critic):
        if cls.__module__.startswith("trl_srppo."):
            assert public_methods(cls) - INTERFACE <= {"build", "features"}, cls.__name__  # a class adds its builder


def test_each_critic_type_is_built_by_its_registry_entry(toy, tmp_path):
    from trl_srppo.method.critics import CRITIC_TYPES
    from trl_srppo.method.critics.build import CRITIC_PARALLELISMS

    assert CRITIC_TYPES.names() == ("separate", "policy_head", "policy_lora", "running_mean")
    assert CRITIC_PARALLELISMS.names() == ("auto", "accelerate", "replicate", "fsdp", "deepspeed")
    builds = [name for name in CRITIC_PARALLELISMS if CRITIC_PARALLELISMS[name].build is not None]
    assert builds == ["accelerate", "replicate", "fsdp", "deepspeed"]  # "auto" picks one of them
    refusal = r"^critic_type must be 'separate', 'policy_head', 'policy_lora' or 'running_mean', got 'x'\.$"
    with pytest.raises(ValueError, match=refusal):
        CRITIC_TYPES.check("x")
    for mode in ("replicate", "policy_head"):
        trainer = make_trainer(toy, tmp_path / mode, mode, max_steps=1)
        assert type(trainer.critic_backend).__name__ == CLASSES[mode]

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`critic_parallelism="fsdp"` in one process: clear errors, and the pieces that need no second process. The
two-process training, saving and resuming tests are in `tests/test_distributed.py`."""

import pytest
import torch
import torch.distributed as dist
from torch import nn

from trl_srppo.method.critics.fsdp2 import (
    gather_state_dict,
    is_sharded,
    keyed_by_name,
    load_optimizer_state_dict,
    load_state_dict,
    local_bytes,
    optimizer_state_dict,
    parameter_names,
    shard_critic,
)
from trl_srppo.method.critics.model import critic_from_policy


@pytest.fixture
def one_process_group():
    """A one-process gloo group, torn down after the test (FSDP2 over one process: every shard is whole)."""
    if dist.is_initialized():
        pytest.skip("a process group already exists in this process")
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    yield
    dist.destroy_process_group()


def test_fsdp_critic_without_a_process_group_is_a_clear_error(toy):
    tokenizer, build_model, _ = toy
    critic = critic_from_policy(build_model())
    with pytest.raises(ValueError, match="critic_parallelism='fsdp'.*no process group"):
        shard_critic(critic, torch.device("cpu"))


def test_trainer_with_fsdp_critic_in_one_process_is_a_clear_error(toy, tmp_path):
    from conftest import cpu_config

    from trl_srppo import SRPPOTrainer
    from trl_srppo.rewards import chain_reward

    tokenizer, build_model, dataset = toy
    args = cpu_config(tmp_path, critic_parallelism="fsdp")
    with pytest.raises(ValueError, match="accelerate launch"):
        SRPPOTrainer(build_model(), chain_reward, args, dataset, processing_class=tokenizer)


def test_fsdp_shards_each_decoder_layer_and_round_trips_state(toy, one_process_group):
    tokenizer, build_model, _ = toy
    critic = critic_from_policy(build_model())
    with torch.no_grad():
        critic.score.weight.normal_()  # a non-zero head, so the state dicts below are not trivially equal
    reference = {k: v.clone() for k, v in critic.state_dict().items()}
    ids = torch.tensor([[3, 4, 5, 6]])
    with torch.no_grad():
        expected = critic(input_ids=ids).logits

    shard_critic(critic, torch.device("cpu"))
    assert is_sharded(critic)
    assert all(is_sharded(layer) for layer in critic.model.layers)
    with torch.no_grad():  # as the trainer's value pass
        torch.testing.assert_close(critic(input_ids=ids).logits, expected)
    assert local_bytes(critic.parameters()) == 4 * sum(t.numel() for t in reference.values() if t.is_floating_point())
    for param in critic.parameters():  # sharded again after a no-grad forward, the root's parameters included
        assert type(param).__name__ == "DTensor"

    gathered = gather_state_dict(critic)
    assert gathered.keys() == reference.keys()
    for name, tensor in reference.items():
        assert torch.equal(gathered[name], tensor), name
    changed = {k: v + 1.0 for k, v in reference.items()}
    load_state_dict(critic, dict(changed))  # torch may replace the given dict's values with shards
    for name, tensor in gather_state_dict(critic).items():
        assert torch.equal(tensor, changed[name]), name

    optimizer = torch.optim.AdamW(critic.parameters(), lr=1e-3)
    critic(input_ids=ids).logits.sum().backward()
    optimizer.step()
    state = optimizer_state_dict(critic, optimizer)
    assert set(state["state"]) == set(reference)  # keyed by name, so it loads on any number of processes


def test_optimizer_state_carries_between_sharded_and_whole_critics(toy, one_process_group):
    """The sharded critic's optimizer state (keyed by name) loads into a whole critic's optimizer (keyed by index) and
    the whole critic's into a sharded one's, so a checkpoint of either mode resumes in the other."""
    tokenizer, build_model, _ = toy
    ids = torch.tensor([[3, 4, 5, 6]])

    def critic_and_optimizer(shard, steps):
        critic = critic_from_policy(build_model())
        if shard:
            shard_critic(critic, torch.device("cpu"))
        optimizer = torch.optim.AdamW(critic.parameters(), lr=1e-2)
        for _ in range(steps):
            critic(input_ids=ids).logits.square().sum().backward()
            optimizer.step()
            optimizer.zero_grad()
        return critic, optimizer

    def assert_same(state, expected):
        assert state["state"].keys() == expected["state"].keys() and len(expected["state"]) == 26
        for name, entry in expected["state"].items():
            assert entry.keys() == {"step", "exp_avg", "exp_avg_sq"}
            for key, value in entry.items():
                assert torch.equal(state["state"][name][key], value), (name, key)
        assert float(expected["state"]["score.weight"]["step"]) == 2

    whole, whole_optimizer = critic_and_optimizer(shard=False, steps=2)
    whole_state = keyed_by_name(whole_optimizer.state_dict(), parameter_names(whole, whole_optimizer))
    sharded, sharded_optimizer = critic_and_optimizer(shard=True, steps=0)
    load_optimizer_state_dict(sharded, sharded_optimizer, whole_optimizer.state_dict())  # keyed by index
    assert_same(optimizer_state_dict(sharded, sharded_optimizer), whole_state)

    sharded, sharded_optimizer = critic_and_optimizer(shard=True, steps=2)
    sharded_state = optimizer_state_dict(sharded, sharded_optimizer)  # keyed by name
    whole, whole_optimizer = critic_and_optimizer(shard=False, steps=0)
    load_optimizer_state_dict(whole, whole_optimizer, sharded_state)
    assert_same(keyed_by_name(whole_optimizer.state_dict(), parameter_names(whole, whole_optimizer)), sharded_state)

    with pytest.raises(ValueError, match="groups of \\[2\\] parameters.*another critic"):
        load_optimizer_state_dict(whole, whole_optimizer, {"state": {}, "param_groups": [{"params": [0, 1]}]})
    renamed = {**sharded_state, "param_groups": [{**sharded_state["param_groups"][0]}]}
    renamed["param_groups"][0]["params"] = ["other." + n for n in sharded_state["param_groups"][0]["params"]]
    with pytest.raises(ValueError, match="names parameters this critic does not have"):
        load_optimizer_state_dict(whole, whole_optimizer, renamed)


def test_unshardable_critics_are_clear_errors(toy, one_process_group):
    from peft import LoraConfig, get_peft_model

    tokenizer, build_model, _ = toy
    lora = get_peft_model(
        critic_from_policy(build_model()), LoraConfig(task_type="TOKEN_CLS", r=2, target_modules=["q_proj"])
    )
    with pytest.raises(ValueError, match="critic_use_peft=True.*'replicate'"):
        shard_critic(lora, torch.device("cpu"))
    with pytest.raises(ValueError, match="_no_split_modules.*'replicate'"):
        shard_critic(nn.Sequential(nn.Linear(2, 1)), torch.device("cpu"))


def test_fsdp_bf16_computes_in_bf16_and_keeps_float32_shards(toy, one_process_group):
    tokenizer, build_model, _ = toy
    critic = shard_critic(critic_from_policy(build_model()), torch.device("cpu"), bf16=True)
    logits = critic(input_ids=torch.tensor([[3, 4, 5, 6]])).logits
    assert logits.dtype == torch.bfloat16  # all-gathered weights cast to bf16 for the forward
    logits.float().sum().backward()
    for param in critic.parameters():
        assert param.dtype == torch.float32 and param.grad.dtype == torch.float32  # what AdamW updates


def test_a_critic_loaded_off_the_first_local_rank_under_fsdp_ram_efficient_loading_has_a_real_zero_head(
    toy, tmp_path, one_process_group, monkeypatch
):
    # What `accelerate launch` with an FSDP config sets: transformers then reads the checkpoint on local rank 0 only,
    # and leaves what the checkpoint lacks (a causal LM has no value head) on the meta device elsewhere.
    from trl_srppo.method.critics.model import load_critic, value_output_layer

    tokenizer, build_model, _ = toy
    build_model().save_pretrained(tmp_path / "policy")
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    monkeypatch.setenv("FSDP_CPU_RAM_EFFICIENT_LOADING", "true")
    monkeypatch.setenv("LOCAL_RANK", "1")
    critic = load_critic(str(tmp_path / "policy"), {"dtype": torch.float32})
    head = value_output_layer(critic)
    assert not any(p.is_meta for p in critic.parameters())
    assert not head.weight.any() and not head.bias.any()  # the fresh head, as on local rank 0
    shard_critic(critic, torch.device("cpu"))
    assert is_sharded(critic)

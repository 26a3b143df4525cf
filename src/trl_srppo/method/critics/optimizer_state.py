# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The critic optimizer's state keyed by parameter name or by index: a checkpoint of a sharded critic (keyed by name)
loads into a whole one and the other way round, on any number of processes; and the torch optimizer under an
optimizer's wrappers ([`torch_optimizer`]), for the critic's and the policy's."""

import torch
from torch import nn


def parameter_names(critic: nn.Module, optimizer: torch.optim.Optimizer) -> list[list[str]]:
    """The name in the critic (a DDP wrapper's prefix left out) of each parameter of each of the optimizer's groups."""
    module = critic.module if isinstance(critic, nn.parallel.DistributedDataParallel) else critic
    by_id = {id(param): name for name, param in module.named_parameters()}
    return [[by_id[id(param)] for param in group["params"]] for group in optimizer.param_groups]


def is_keyed_by_name(state: dict) -> bool:
    return any(isinstance(key, str) for group in state["param_groups"] for key in group["params"])


def check_groups(state: dict, names: list[list[str]]) -> None:
    saved = [len(group["params"]) for group in state["param_groups"]]
    if saved != [len(group) for group in names]:
        raise ValueError(
            f"The checkpoint's critic optimizer state has parameter groups of {saved} parameters, this critic's "
            f"optimizer {[len(group) for group in names]}: it was written for another critic. Resume with the "
            "critic (critic_model_name_or_path, critic_use_peft) the checkpoint was written with, and with "
            "critic_head_learning_rate set or unset as it was (a head rate of its own is a group of its own)."
        )


def keyed_by_name(state: dict, names: list[list[str]]) -> dict:
    """A torch optimizer state dict (keyed by index) keyed by parameter name instead, the form a sharded critic
    saves; `names` holds the names of each group's parameters, in the optimizer's order."""
    check_groups(state, names)
    rename = {}
    for group, group_names in zip(state["param_groups"], names):
        rename.update(zip(group["params"], group_names))
    return {
        "state": {rename[key]: value for key, value in state["state"].items()},
        "param_groups": [
            {**group, "params": [rename[key] for key in group["params"]]} for group in state["param_groups"]
        ],
    }


def keyed_by_index(state: dict, names: list[list[str]]) -> dict:
    """The inverse of [`keyed_by_name`]: a state keyed by parameter name as a torch optimizer's `load_state_dict`
    takes it (indices in the order of `names`)."""
    check_groups(state, names)
    index = {name: i for i, name in enumerate(name for group in names for name in group)}
    missing = sorted({key for group in state["param_groups"] for key in group["params"]} - index.keys())
    if missing:
        raise ValueError(
            f"The checkpoint's critic optimizer state names parameters this critic does not have ({missing[:3]}): it "
            "was written for another critic. Resume with the critic the checkpoint was written with."
        )
    return {
        "state": {index[key]: value for key, value in state["state"].items()},
        "param_groups": [
            {**group, "params": [index[key] for key in group["params"]]} for group in state["param_groups"]
        ],
    }


def load_whole(module: nn.Module, optimizer: torch.optim.Optimizer, state: dict) -> None:
    """Load `state` (keyed by name or by index) into the optimizer of a critic every process holds whole."""
    names = parameter_names(module, optimizer)
    check_groups(state, names)
    optimizer.load_state_dict(keyed_by_index(state, names) if is_keyed_by_name(state) else state)


def torch_optimizer(optimizer):
    """The torch optimizer under Accelerate's wrapper and DeepSpeed's ZeRO optimizer: the one whose `step()` updates
    the weights (over ZeRO's float32 partitions), so its pre-step hooks run at every real step."""
    from accelerate.optimizer import AcceleratedOptimizer

    inner = optimizer
    while isinstance(inner, AcceleratedOptimizer) or not isinstance(inner, torch.optim.Optimizer):
        if getattr(inner, "optimizer", None) is None:
            return None
        inner = inner.optimizer
    return inner

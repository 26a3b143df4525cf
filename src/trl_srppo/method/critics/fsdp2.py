# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The critic sharded with FSDP2 (`critic_parallelism="fsdp"`): each process holds 1/N of its weights, gradients and
optimizer state, as the policy does under FSDP.

`torch.distributed.fsdp.fully_shard` is applied to every decoder layer (the model's `_no_split_modules`, as
Accelerate's transformer-based wrapping does) and then to the whole critic, over all processes of the default process
group. The parameters become `DTensor` shards; the critic's own AdamW, created over them by the trainer, keeps its
state sharded too. The forward all-gathers one layer at a time; the backward reduce-scatters the gradients after every
micro-batch (FSDP2 has no `no_sync`; deferring the reduction would keep whole, unsharded gradients between
micro-batches, the memory this mode exists to save). The reduction averages over processes, as DDP's does, so the
trainer's loss scaling is the same in every mode.

Saving gathers: `critic/` is the same safetensors folder as in the other modes (the full state dict is collected on
CPU on process 0, which writes it), and the optimizer state is saved whole (keyed by parameter name), so a checkpoint
resumes on any number of processes, and in the whole modes too (`"accelerate"`, `"replicate"`, whose optimizer state,
keyed by index, also loads into a sharded critic). Every function here that takes a sharded critic is a collective:
call it on every process.
"""

import torch
import torch.distributed as dist
from torch import nn

from .base import Critic
from .engine import Engine, HandAveragedEngine
from .optimizer_state import (
    check_groups,
    is_keyed_by_name,
    keyed_by_index,
    keyed_by_name,
    load_whole,
    parameter_names,
)


def is_sharded(module: nn.Module) -> bool:
    """Whether `module` was sharded by [`shard_critic`] (an FSDP2 module)."""
    from torch.distributed.fsdp import FSDPModule

    return isinstance(module, FSDPModule)


def _decoder_layers(critic: nn.Module) -> list[nn.Module]:
    base = critic.get_base_model() if hasattr(critic, "get_base_model") else critic
    names = set(getattr(base, "_no_split_modules", None) or [])
    layers = [m for m in critic.modules() if type(m).__name__ in names]
    if not layers:
        raise ValueError(
            f"critic_parallelism='fsdp' shards the critic per decoder layer, but {type(base).__name__} names no layer "
            "class in `_no_split_modules`. Use critic_parallelism='replicate' for this critic."
        )
    return layers


def shard_critic(critic: nn.Module, device: torch.device, bf16: bool = False) -> nn.Module:
    """Shard `critic` in place with FSDP2 over all processes and return it.

    Args:
        critic (`nn.Module`):
            The critic, whole, on any device (each layer is moved to `device` as it is sharded, so a critic built on
            CPU never sits whole on the accelerator).
        device (`torch.device`):
            The device of this process (`accelerator.device`); its type names the device mesh.
        bf16 (`bool`, *optional*, defaults to `False`):
            Compute in bfloat16: the all-gathered parameters are cast to bfloat16, the gradients are reduced in
            float32 and the sharded parameters (what the optimizer updates) keep the critic's dtype.

    Returns:
        `nn.Module`: the same module, its parameters now `DTensor` shards.
    """
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    if not dist.is_available() or not dist.is_initialized():
        raise ValueError(
            "critic_parallelism='fsdp' shards the critic over the processes of a distributed run, but no process "
            "group is initialised. Launch with `accelerate launch` (or torchrun), or use critic_parallelism='auto' "
            "for a single process."
        )
    if hasattr(critic, "peft_config"):
        raise ValueError(
            "critic_parallelism='fsdp' does not shard a LoRA critic (critic_use_peft=True): its trainable state is "
            "already small; use critic_parallelism='replicate'."
        )
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    if bf16:
        mp_policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    else:
        mp_policy = MixedPrecisionPolicy()
    for layer in _decoder_layers(critic):
        fully_shard(layer, mesh=mesh, mp_policy=mp_policy)
    # The root holds the embeddings, final norm and value head. FSDP2 leaves a root unsharded after its forward
    # unless told otherwise; then, after the trainer's no-grad value pass, `critic.parameters()` would list whole
    # tensors that are not the optimizer's (gradient clipping would miss the head's gradients).
    fully_shard(critic, mesh=mesh, mp_policy=mp_policy, reshard_after_forward=True)
    return critic


def gather_state_dict(critic: nn.Module) -> dict[str, torch.Tensor] | None:
    """The full state dict of a sharded critic, on CPU, on process 0 (an empty dict on the others); `None` for a
    critic that is not sharded (its own `state_dict()` is already whole)."""
    if not is_sharded(critic):
        return None
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(critic, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def load_state_dict(critic: nn.Module, state_dict: dict[str, torch.Tensor]) -> None:
    """Load a full (unsharded) state dict, given on every process, into the critic, sharded or not."""
    if not is_sharded(critic):
        critic.load_state_dict(state_dict)
        return
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    set_model_state_dict(critic, state_dict, options=StateDictOptions(full_state_dict=True))


def optimizer_state_dict(critic: nn.Module, optimizer: torch.optim.Optimizer) -> dict:
    """The critic optimizer's state to checkpoint: whole and keyed by parameter name, on CPU, on process 0 (empty on
    the others) for a sharded critic; the optimizer's own `state_dict()` (keyed by index) otherwise."""
    if not is_sharded(critic):
        return optimizer.state_dict()
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

    return get_optimizer_state_dict(
        critic, optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
    )


def load_optimizer_state_dict(critic: nn.Module, optimizer: torch.optim.Optimizer, state: dict) -> None:
    """Load a state written by [`optimizer_state_dict`], given on every process, into the critic's optimizer, whatever
    the number of processes and whether the critic that wrote it was sharded (keyed by name) or not (by index)."""
    if not is_sharded(critic):
        load_whole(critic, optimizer, state)
        return
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    names = parameter_names(critic, optimizer)
    check_groups(state, names)

    state = state if is_keyed_by_name(state) else keyed_by_name(state, names)
    set_optimizer_state_dict(critic, optimizer, state, options=StateDictOptions(full_state_dict=True))


def local_bytes(tensors) -> int:
    """Bytes this process holds for `tensors` (the local shard of a `DTensor`, the whole of a plain tensor)."""
    from torch.distributed.tensor import DTensor

    total = 0
    for tensor in tensors:
        if isinstance(tensor, DTensor):
            tensor = tensor.to_local()
        total += tensor.numel() * tensor.element_size()
    return total


class FSDP2Engine(Engine):
    """The critic sharded with FSDP2: its weights gathered for a checkpoint, its optimizer state saved whole and keyed
    by parameter name (see the module's docstring)."""

    whole = False

    def gather_state_dict(self) -> dict:
        return gather_state_dict(self.model)

    def optimizer_state_dict(self, optimizer: torch.optim.Optimizer, folder: str | None) -> dict:
        return optimizer_state_dict(self.model, optimizer)

    def load_state_dict(self, state_dict: dict) -> None:
        load_state_dict(self.model, state_dict)

    def load_optimizer_state(self, optimizer: torch.optim.Optimizer, state: dict) -> None:
        load_optimizer_state_dict(self.model, optimizer, state)


class FSDPCritic(Critic):
    """`critic_parallelism="fsdp"`: the critic sharded with FSDP2 (see the module's docstring)."""

    engine_class = FSDP2Engine

    @classmethod
    def build(cls, critic: nn.Module, args, accelerator) -> "FSDPCritic":
        return cls(shard_critic(critic, accelerator.device, bf16=bool(args.bf16)), args, accelerator)


def is_dtensor(tensor) -> bool:
    from torch.distributed.tensor import DTensor

    return isinstance(tensor, DTensor)


def whole_tensor(tensor: torch.Tensor) -> torch.Tensor:
    """A `DTensor` made whole (a collective: every process calls it), or a plain tensor as it is."""
    return tensor.full_tensor() if is_dtensor(tensor) else tensor


def whole_parameters(module: nn.Module) -> dict[str, torch.Tensor]:
    """`module`'s parameters, whole, detached, on CPU, keyed as its `named_parameters` names them (a collective where
    some are `DTensor`s: every process calls it and gets them all)."""
    return {name: whole_tensor(param).detach().cpu() for name, param in module.named_parameters()}


def distribute_like(value: torch.Tensor, param: torch.Tensor) -> torch.Tensor:
    """The whole tensor `value`, the same on every process, as a `DTensor` cut as the `DTensor` `param` is (its mesh
    and placements, on its device; a collective)."""
    from torch.distributed.tensor import distribute_tensor

    return distribute_tensor(value.to(param.device), param.device_mesh, param.placements)


def copy_whole_into(param: torch.Tensor, value: torch.Tensor) -> None:
    """Copy the whole tensor `value`, the same on every process, into `param`: into this process's shard where
    `param` is a `DTensor` (cut as its placements cut it; a collective), in full otherwise."""
    if is_dtensor(param):
        param.to_local().copy_(distribute_like(value.to(param.dtype), param).to_local())
    else:
        param.copy_(value)


class PolicyShardedEngine(HandAveragedEngine):
    """A critic whose trained parameters sit partly in the modules of an FSDP2 policy, sharded with them, and partly
    outside, whole on every process: a policy LoRA critic's adapter (`DTensor` shards, their gradients
    reduce-scattered to their mean over the processes by FSDP2 in the backward) and its value head (plain tensors,
    averaged by hand). The gradient norm is taken over both; a checkpoint holds the weights and the optimizer state
    whole and keyed by parameter name, so it resumes on any number of processes. Every method is a collective."""

    whole = False

    def average_gradients(self, params: list[nn.Parameter]) -> None:
        super().average_gradients([p for p in params if not is_dtensor(p)])

    def gradient_norm(self, grads: list[torch.Tensor]) -> torch.Tensor:
        """The 2-norm of `grads`, `DTensor` shards and plain tensors mixed, as a plain float32 tensor."""
        sharded = [g for g in grads if is_dtensor(g)]
        plain = [g for g in grads if not is_dtensor(g)]
        norms = [whole_tensor(torch.nn.utils.get_total_norm(group)).float() for group in (sharded, plain) if group]
        return torch.linalg.vector_norm(torch.stack(norms)) if norms else torch.zeros(())

    def clip(self, params: list[nn.Parameter], grad_norm: torch.Tensor) -> None:
        coefficient = torch.clamp(self.args.max_grad_norm / (grad_norm + 1e-6), max=1.0)  # as torch's clipping
        for param in params:
            if param.grad is not None:
                param.grad.mul_(coefficient.item())

    def gather_state_dict(self) -> dict:
        return whole_parameters(self.unwrapped())

    def optimizer_state_dict(self, optimizer: torch.optim.Optimizer, folder: str | None) -> dict:
        state = optimizer.state_dict()
        state["state"] = {
            index: {
                key: whole_tensor(value).cpu() if torch.is_tensor(value) else value for key, value in values.items()
            }
            for index, values in state["state"].items()
        }
        return keyed_by_name(state, parameter_names(self.unwrapped(), optimizer))

    def load_optimizer_state(self, optimizer: torch.optim.Optimizer, state: dict) -> None:
        names = parameter_names(self.unwrapped(), optimizer)
        check_groups(state, names)
        state = keyed_by_index(state, names) if is_keyed_by_name(state) else state
        params = [param for group in optimizer.param_groups for param in group["params"]]

        def placed(param: torch.Tensor, value):  # a moment of a sharded parameter, cut as the parameter is
            sharded = is_dtensor(param) and torch.is_tensor(value) and value.shape == param.shape
            return distribute_like(value, param) if sharded else value

        state = {
            **state,
            "state": {
                index: {key: placed(params[index], value) for key, value in values.items()}
                for index, values in state["state"].items()
            },
        }
        optimizer.load_state_dict(state)

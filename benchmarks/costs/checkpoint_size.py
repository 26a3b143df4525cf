# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""How many bytes of tensors a `checkpoint-N` folder of `SRPPOTrainer` holds, from the policy's architecture and the
run's settings: the numbers of `docs/checkpoints.md` (`python -m scripts.checkpoint_sizes` writes its tables).

What each part is, as this package and the Trainer save it (`benchmarks/tests/test_checkpoint_size.py` compares the
sums with the tensors and files of real checkpoints):

- policy weights (`model.safetensors`): every parameter of the causal LM in the dtype it was loaded in (`dtype` of
  `trl-srppo train`, whose default is float32; the Qwen3 recipes set bfloat16), tied embeddings once. `bf16=True`
  changes the compute, not the stored weights. A LoRA policy (`use_peft`): its adapter alone
  (`adapter_model.safetensors`), in float32, where PEFT keeps adapters whatever the base model's dtype.
- policy optimizer (`optimizer.pt`): AdamW's two moments of every trainable parameter, in that parameter's dtype.
  A policy under DeepSpeed ZeRO (`policy_zero_stage`) writes an engine checkpoint instead (`global_step<N>/`), laid
  out as the critic's below, and its weights in the engine's dtype (bf16 with `bf16=True`; at ZeRO-3 the 16-bit
  weights that `zero3_save_16bit_model: true`, as in `recipes/accelerate/zero3.yaml`, gathers).
- critic weights (`critic/`): `critic_type="separate"`: the policy's backbone (no output head; embeddings once) and a
  value head `H -> 1`, in `critic_dtype` (float32 by default), or, with `critic_use_peft`, its LoRA adapter (float32)
  and head; `"policy_head"`: the value head alone; `"policy_lora"`: a second adapter
  of the policy adapter's shape (float32) and a head `H -> 1`. Under `critic_parallelism="deepspeed"` with bf16 (or
  `critic_dtype="bfloat16"`) the weights are the engine's bf16 copy.
- critic optimizer (`critic/critic_training_state.pt`): AdamW's two moments of the critic's parameters, whole in every
  mode but `"deepspeed"` (FSDP's are gathered to process 0 and written once).
- critic DeepSpeed engine (`critic/deepspeed/`, `critic_parallelism="deepspeed"` only, in place of the critic
  optimizer): ZeRO's float32 master weights and two float32 moments (12 bytes per parameter, over one file per
  process), and with ZeRO-1/2 the module's weights again, in the engine's dtype.

`save_only_model=True` writes the weights alone (no optimizer, no engine): such a checkpoint cannot resume a run. Not
counted: the tokenizer files, the configs and JSON, `rng_state*.pth`, `scheduler.pt`, the training arguments, each
file's header (together some kB to a few MB for a 150k-token tokenizer).
"""

from dataclasses import dataclass

import torch
from torch import nn

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
ADAM_MOMENTS = 2  # exp_avg and exp_avg_sq, each the size of its parameter
DEEPSPEED_OPTIMIZER_BYTES = 12  # ZeRO's float32 master weights and two float32 moments, per parameter
LORA_DTYPE = "float32"  # PEFT's adapters, whatever the base model's dtype


@dataclass(frozen=True)
class ModelCounts:
    """Parameter counts of a causal LM, as [`checkpoint_size`] reads them.

    Args:
        total (`int`): its parameters, tied embeddings counted once.
        output_head (`int`): those of an output head not tied to the input embeddings (0 when tied).
        hidden_size (`int`): width `H` of its hidden states.
        linear_sizes (`dict[str, int]`): for each name of a linear layer of its decoder (`q_proj`, `down_proj`, ...),
            the sum of `in_features + out_features` over the layers of that name: a LoRA of rank `r` on them has `r`
            times that many parameters.
    """

    total: int
    output_head: int
    hidden_size: int
    linear_sizes: dict

    def lora(self, r: int, target_modules=None) -> int:
        """Parameters of a LoRA adapter of rank `r` on `target_modules` (names; `None` or `"all-linear"`: every linear
        layer of the decoder)."""
        if target_modules is None or target_modules == "all-linear":
            return r * sum(self.linear_sizes.values())
        missing = sorted(set(target_modules) - set(self.linear_sizes))
        if missing:
            raise ValueError(f"No linear layer named {missing} in this model; its are {sorted(self.linear_sizes)}.")
        return r * sum(self.linear_sizes[name] for name in target_modules)


def count_parameters(config) -> ModelCounts:
    """[`ModelCounts`] of the causal LM that `config` (a transformers config) describes, built on the meta device
    (no memory, nothing downloaded)."""
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    head = model.get_output_embeddings()
    tied = head is not None and head.weight is model.get_input_embeddings().weight
    output_head = 0 if head is None or tied else sum(p.numel() for p in head.parameters())
    linear_sizes: dict[str, int] = {}
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear) and module is not head:
            short = name.rsplit(".", 1)[-1]
            linear_sizes[short] = linear_sizes.get(short, 0) + module.in_features + module.out_features
    return ModelCounts(
        total=sum(p.numel() for p in model.parameters()),
        output_head=output_head,
        hidden_size=config.get_text_config().hidden_size,
        linear_sizes=linear_sizes,
    )


def value_head_parameters(hidden_size: int) -> int:
    """Parameters of a value head `H -> 1` (weight and bias)."""
    return hidden_size + 1


def deepspeed_engine_bytes(parameters: int, zero_stage: int, weight_bytes: int) -> int:
    """Tensor bytes of a DeepSpeed engine's checkpoint of `parameters` parameters (all processes' files together)."""
    module_copy = parameters * weight_bytes if zero_stage < 3 else 0
    return parameters * DEEPSPEED_OPTIMIZER_BYTES + module_copy


def checkpoint_size(
    counts: ModelCounts,
    critic_type: str = "separate",
    critic_parallelism: str = "replicate",
    dtype: str = "float32",
    critic_dtype: str = "float32",
    bf16: bool = False,
    policy_lora_r: int | None = None,
    lora_target_modules=None,
    critic_use_peft: bool = False,
    critic_lora_r: int = 16,
    critic_lora_target_modules=None,
    critic_zero_stage: int = 2,
    policy_zero_stage: int | None = None,
    save_only_model: bool = False,
) -> dict[str, int]:
    """Tensor bytes of one checkpoint, by part (module docstring): `policy weights`, `policy optimizer` (or `policy
    DeepSpeed engine`), `critic weights`, `critic optimizer` (or `critic DeepSpeed engine`). The arguments are the
    `SRPPOConfig` fields of the same names, `dtype` the policy's (`model_init_kwargs["dtype"]`), `policy_lora_r` the
    rank of a LoRA policy (`None`: a full policy) on `lora_target_modules` (`None`: all linear layers), and
    `policy_zero_stage` the ZeRO stage of a policy under DeepSpeed (`None`: not under DeepSpeed)."""
    lora = LORA_DTYPE
    if policy_lora_r is None:
        policy_dtype = "bfloat16" if policy_zero_stage is not None and bf16 else dtype
        policy = [(counts.total, policy_dtype)]
    elif policy_zero_stage is not None:
        raise ValueError("A LoRA policy under DeepSpeed is not counted here: give policy_zero_stage=None.")
    else:
        policy = [(counts.lora(policy_lora_r, lora_target_modules), lora)]
    head = value_head_parameters(counts.hidden_size)
    if critic_type == "policy_head":
        critic = [(value_head_parameters(counts.hidden_size), critic_dtype)]
    elif critic_type == "policy_lora":
        if policy_lora_r is None:
            raise ValueError("critic_type='policy_lora' needs a LoRA policy: give policy_lora_r.")
        critic = [(counts.lora(policy_lora_r, lora_target_modules), lora), (head, critic_dtype)]
    elif critic_type == "separate":
        if critic_use_peft:
            critic = [(counts.lora(critic_lora_r, critic_lora_target_modules), lora), (head, critic_dtype)]
        else:
            critic = [(counts.total - counts.output_head + head, critic_dtype)]
    else:
        raise ValueError(f"critic_type must be 'separate', 'policy_head' or 'policy_lora', got {critic_type!r}.")
    deepspeed = critic_parallelism == "deepspeed" and critic_type == "separate" and not critic_use_peft
    if deepspeed and (bf16 or critic_dtype == "bfloat16"):
        critic = [(n, "bfloat16") for n, _ in critic]

    def weights(parts):
        return sum(n * DTYPE_BYTES[d] for n, d in parts)

    size = {"policy weights": weights(policy)}
    if policy_zero_stage is None:
        size["policy optimizer"] = ADAM_MOMENTS * weights(policy)
    else:
        size["policy DeepSpeed engine"] = deepspeed_engine_bytes(
            counts.total, policy_zero_stage, DTYPE_BYTES[policy[0][1]]
        )
    size["critic weights"] = weights(critic)
    if deepspeed:
        size["critic DeepSpeed engine"] = deepspeed_engine_bytes(
            sum(n for n, _ in critic), critic_zero_stage, DTYPE_BYTES[critic[0][1]]
        )
    else:
        size["critic optimizer"] = ADAM_MOMENTS * weights(critic)
    if save_only_model:
        size = {part: (0 if "optimizer" in part or "engine" in part else n) for part, n in size.items()}
    return size

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""GPU memory of SR-PPO with vLLM colocated beside the policy and the critic on one GPU, from parameter counts: the
table of `docs/vllm.md`, and a `vllm_gpu_memory_utilization` for each Qwen3 size.

    python -m scripts.vllm_memory  # the docs' table: 80 GiB GPU, 8 x (1k + 4k) tokens
    python -m scripts.vllm_memory --gpu-gib 141 --sequences 16 --tokens 9438

What it counts (the package's defaults, `SRPPOConfig` with `bf16=True`, one process per GPU, no DeepSpeed / FSDP):

- policy: bf16 weights (TRL loads the checkpoint's dtype, bf16 for Qwen3), bf16 gradients and torch AdamW's two
  moments in the weights' dtype: 8 bytes per parameter;
- critic (`critic_type="separate"`, `critic_dtype="float32"`): the policy's backbone (its output head left out where
  it is not tied to the embeddings) in float32, float32 gradients and AdamW moments: 16 bytes per parameter;
- vLLM (`vllm_mode="colocate"`): its own bf16 copy of the policy (2 bytes per parameter), the KV cache for
  `sequences` x `tokens` (2 x layers x key-value heads x head_dim x 2 bytes per token), and `--vllm-overhead-gib`
  for its activations, CUDA graphs and the CUDA context.

Training activations are not counted: they depend on the batch, the lengths and gradient checkpointing; the
`headroom` column is what is left for them. vLLM reserves `vllm_gpu_memory_utilization` x the GPU's memory for the
engine (weights, activations and KV cache), so the value to set is at least `vllm_total / gpu`, and training has
what the rest leaves.
"""

import argparse
import math

GIB = 2**30

# Published shapes of the Qwen3 family (config.json of each Hub model).
QWEN3 = {
    "Qwen3-0.6B": dict(hidden=1024, layers=28, intermediate=3072, heads=16, kv_heads=8, head_dim=128, tied=True),
    "Qwen3-1.7B": dict(hidden=2048, layers=28, intermediate=6144, heads=16, kv_heads=8, head_dim=128, tied=True),
    "Qwen3-4B": dict(hidden=2560, layers=36, intermediate=9728, heads=32, kv_heads=8, head_dim=128, tied=True),
    "Qwen3-8B": dict(hidden=4096, layers=36, intermediate=12288, heads=32, kv_heads=8, head_dim=128, tied=False),
}
VOCAB = 151936


def parameter_count(shape: dict, vocab: int = VOCAB, output_head: bool = True) -> int:
    """Parameters of a Qwen3 causal LM of `shape`; `output_head=False` leaves out an untied output head (the critic's
    backbone)."""
    h, d = shape["hidden"], shape["head_dim"]
    attention = h * shape["heads"] * d * 2 + h * shape["kv_heads"] * d * 2 + 2 * d  # q, o; k, v; q/k norms
    layer = attention + 3 * h * shape["intermediate"] + 2 * h  # + gate, up, down; two RMSNorms
    total = vocab * h + shape["layers"] * layer + h  # embeddings, layers, final norm
    if output_head and not shape["tied"]:
        total += vocab * h
    return total


def kv_bytes_per_token(shape: dict, dtype_bytes: int = 2) -> int:
    """KV cache bytes of one token: keys and values of every layer's key-value heads."""
    return 2 * shape["layers"] * shape["kv_heads"] * shape["head_dim"] * dtype_bytes


def budget(shape: dict, gpu_gib: float, sequences: int, tokens: int, overhead_gib: float = 2.0) -> dict:
    """GiB of each part for one Qwen3 `shape` on a GPU of `gpu_gib`, and the `vllm_gpu_memory_utilization` to set
    (rounded up to 0.05), with what is left for training activations."""
    policy_params = parameter_count(shape)
    critic_params = parameter_count(shape, output_head=False) + shape["hidden"] + 1  # + the value head
    policy = policy_params * 8 / GIB
    critic = critic_params * 16 / GIB
    vllm_weights = policy_params * 2 / GIB
    kv = kv_bytes_per_token(shape) * sequences * tokens / GIB
    vllm_total = vllm_weights + kv + overhead_gib
    utilization = math.ceil(vllm_total / gpu_gib * 20) / 20
    return {
        "parameters_b": policy_params / 1e9,
        "policy": policy,
        "critic": critic,
        "vllm_weights": vllm_weights,
        "kv_cache": kv,
        "vllm_total": vllm_total,
        "utilization": utilization,
        "headroom": gpu_gib * (1 - utilization) - policy - critic,
    }


def table(gpu_gib: float, sequences: int, tokens: int, overhead_gib: float = 2.0) -> str:
    """The Markdown table of every size in [`QWEN3`]."""
    lines = [
        "| model | params | policy (bf16 + AdamW) | critic (fp32 + AdamW) | vLLM weights | KV cache | "
        "vllm_gpu_memory_utilization | left for activations |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, shape in QWEN3.items():
        b = budget(shape, gpu_gib, sequences, tokens, overhead_gib)
        left = f"{b['headroom']:.1f} GiB" if b["headroom"] > 0 else f"none ({b['headroom']:.1f} GiB)"
        lines.append(
            f"| {name} | {b['parameters_b']:.2f} B | {b['policy']:.1f} GiB | {b['critic']:.1f} GiB | "
            f"{b['vllm_weights']:.1f} GiB | {b['kv_cache']:.1f} GiB | {b['utilization']:.2f} | {left} |"
        )
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpu-gib", type=float, default=80.0, help="GPU memory in GiB")
    parser.add_argument("--sequences", type=int, default=8, help="rollouts generated at once (KV cache)")
    parser.add_argument("--tokens", type=int, default=5120, help="prompt + completion tokens of each rollout")
    parser.add_argument("--vllm-overhead-gib", type=float, default=2.0, help="vLLM activations, graphs, context")
    args = parser.parse_args(argv)
    print(table(args.gpu_gib, args.sequences, args.tokens, args.vllm_overhead_gib))


if __name__ == "__main__":
    main()

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The tables of `docs/checkpoints.md`: one checkpoint's size per model size and critic mode, from
`benchmarks.costs.checkpoint_size` and the models' public configs (built on the meta device: nothing downloaded).

    python -m scripts.checkpoint_sizes  # prints the tables, as docs/checkpoints.md has them
"""

from transformers import LlamaConfig, Qwen2Config, Qwen3Config

from benchmarks.costs.checkpoint_size import checkpoint_size, count_parameters
from trl_srppo.evaluation.markdown import markdown_table

_QWEN3 = dict(vocab_size=151936, num_key_value_heads=8, head_dim=128)
# Each model's config.json on the Hub, the fields that set its parameter count.
MODELS = {
    "SmolLM2-135M": LlamaConfig(
        vocab_size=49152,
        hidden_size=576,
        intermediate_size=1536,
        num_hidden_layers=30,
        num_attention_heads=9,
        num_key_value_heads=3,
        tie_word_embeddings=True,
    ),
    "Qwen2.5-0.5B": Qwen2Config(
        vocab_size=151936,
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        tie_word_embeddings=True,
    ),
    "Qwen3-1.7B": Qwen3Config(
        **_QWEN3,
        hidden_size=2048,
        intermediate_size=6144,
        num_hidden_layers=28,
        num_attention_heads=16,
        tie_word_embeddings=True,
    ),
    "Qwen3-4B": Qwen3Config(
        **_QWEN3,
        hidden_size=2560,
        intermediate_size=9728,
        num_hidden_layers=36,
        num_attention_heads=32,
        tie_word_embeddings=True,
    ),
    "Qwen3-8B": Qwen3Config(
        **_QWEN3,
        hidden_size=4096,
        intermediate_size=12288,
        num_hidden_layers=36,
        num_attention_heads=32,
        tie_word_embeddings=False,
    ),
}

LORA_POLICY = dict(policy_lora_r=16)  # on every linear layer of the decoder
# column -> checkpoint_size arguments
MODES = {
    "separate": {},
    "separate, ZeRO-2": dict(critic_parallelism="deepspeed", critic_zero_stage=2, policy_zero_stage=2),
    "separate, ZeRO-3": dict(critic_parallelism="deepspeed", critic_zero_stage=3, policy_zero_stage=3),
    "LoRA critic": dict(critic_use_peft=True),
    "policy_head": dict(critic_type="policy_head"),
    "LoRA policy, separate": LORA_POLICY,
    "LoRA policy, policy_lora": dict(LORA_POLICY, critic_type="policy_lora"),
    "save_only_model": dict(save_only_model=True),
}
# table title -> the dtype settings of every column
DTYPES = {
    "Policy in float32 (`dtype: float32`, the default of `trl-srppo train`), critic in float32": dict(dtype="float32"),
    "Policy in bfloat16 (`dtype: bfloat16`, as the Qwen3 recipes), `bf16: true`, critic in float32 (`critic_dtype`'s "
    "default)": dict(dtype="bfloat16", bf16=True),
    "Policy and critic in bfloat16 (`dtype: bfloat16`, `bf16: true`, `critic_dtype: bfloat16`)": dict(
        dtype="bfloat16", bf16=True, critic_dtype="bfloat16"
    ),
}
GIB = 2**30


def gib(size: int) -> str:
    return f"{size / GIB:.2f}" if size < 10 * GIB else f"{size / GIB:.1f}"


def tables() -> str:
    counts = {name: count_parameters(config) for name, config in MODELS.items()}
    out = ["#### Parameters\n", markdown_table(
        ["model", "parameters", "of them an untied output head", "hidden size"],
        [[name, f"{c.total / 1e9:.3f} B", f"{c.output_head / 1e9:.3f} B", str(c.hidden_size)] for name, c in
         counts.items()],
    )]  # fmt: skip
    for title, dtypes in DTYPES.items():
        rows = [[name] + [gib(sum(checkpoint_size(c, **dtypes, **mode).values())) for mode in MODES.values()]
                for name, c in counts.items()]  # fmt: skip
        out += [f"\n#### {title}: GiB per checkpoint\n", markdown_table(["model", *MODES], rows)]
        parts = list(checkpoint_size(counts["SmolLM2-135M"], **dtypes))
        rows = [[name] + [gib(checkpoint_size(c, **dtypes)[part]) for part in parts] for name, c in counts.items()]
        out += ["\nThe separate critic's checkpoint by part (GiB):\n\n", markdown_table(["model", *parts], rows)]
    return "".join(out)


if __name__ == "__main__":
    print(tables(), end="")

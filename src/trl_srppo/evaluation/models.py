# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Resolve what to evaluate (a Hub id, a local model folder, a training output folder, a LoRA adapter folder) and load
the model and tokenizer with transformers (and peft for adapters)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..runtime.checkpoints import latest_checkpoint
from ..runtime.safe_loading import refuse_pickle_only, safetensors_required

__all__ = [
    "ModelSource",
    "load_model",
    "load_tokenizer",
    "resolve_model",
]

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")


@dataclass(frozen=True)
class ModelSource:
    """
    Where the weights and the tokenizer of a model to evaluate come from.

    Args:
        model_path (`str`):
            Hub id or local folder of the full model (the base model when `adapter_path` is set).
        adapter_path (`str` or `None`):
            Local folder of a peft adapter (with `adapter_config.json`) applied on top of `model_path`.
        tokenizer_path (`str`):
            Hub id or local folder of the tokenizer: the adapter or training folder when it holds tokenizer files
            (training saves the tokenizer, possibly with a modified chat template), otherwise `model_path`.
        revision (`str` or `None`):
            Hub revision of `model_path` (branch, tag or commit).
    """

    model_path: str
    adapter_path: str | None
    tokenizer_path: str
    revision: str | None = None

    @property
    def label(self) -> str:
        """A short name for tables and plots."""
        return Path(self.adapter_path or self.model_path).name or str(self.model_path)


def resolve_model(model: str, revision: str | None = None) -> ModelSource:
    """
    Work out how to load `model`.

    * A folder with `adapter_config.json`: the base model named in it (`base_model_name_or_path`) plus the adapter.
    * A folder with `config.json`: a full model.
    * A training output folder with neither but with `checkpoint-<step>` subfolders: its latest checkpoint.
    * Anything else: a Hub id.

    Args:
        model (`str`):
            Hub id or local folder.
        revision (`str` or `None`, *optional*):
            Hub revision, for Hub ids (and the base model of an adapter when that is a Hub id).

    Returns:
        [`ModelSource`].
    """
    path = Path(model).expanduser()
    if not path.is_dir():
        if model.startswith((".", "/", "~")) or model.count("/") > 1:
            # A path that is not there: fail here rather than with a confusing Hub error later.
            raise FileNotFoundError(f"Model folder {model} does not exist.")
        return ModelSource(model_path=model, adapter_path=None, tokenizer_path=model, revision=revision)
    if not (path / "adapter_config.json").is_file() and not (path / "config.json").is_file():
        checkpoint = latest_checkpoint(path)
        if checkpoint is None:
            raise FileNotFoundError(
                f"{path} holds neither a model (config.json), an adapter (adapter_config.json) nor checkpoint-* "
                "folders."
            )
        print(f"[trl-srppo] {path} has no final model; using its latest checkpoint {checkpoint.name}.")
        path = checkpoint
    has_tokenizer = any((path / name).is_file() for name in _TOKENIZER_FILES)
    if (path / "adapter_config.json").is_file():
        adapter_config = json.loads((path / "adapter_config.json").read_text(encoding="utf-8"))
        base = adapter_config.get("base_model_name_or_path")
        if not base:
            raise ValueError(f"{path / 'adapter_config.json'} does not name its base model (base_model_name_or_path).")
        relative = base.startswith((".", "~")) or (base.count("/") > 1 and not os.path.isabs(base))  # not `org/name`
        if relative:  # a local path, relative to the folder the training ran in
            if not Path(base).expanduser().is_dir():
                raise FileNotFoundError(
                    f"{path / 'adapter_config.json'} names its base model by the relative path {base!r}, which is no "
                    f"folder from here ({os.getcwd()}): run from the folder the training ran in, or set "
                    "base_model_name_or_path in that file to the base model's absolute path or Hub id."
                )
        return ModelSource(
            model_path=str(base),
            adapter_path=str(path),
            tokenizer_path=str(path) if has_tokenizer else str(base),
            revision=revision,
        )
    return ModelSource(model_path=str(path), adapter_path=None, tokenizer_path=str(path), revision=None)


def load_tokenizer(source: ModelSource, trust_remote_code: bool = False):
    """
    Load the tokenizer of `source` with `transformers.AutoTokenizer`.

    Args:
        source ([`ModelSource`]):
            The resolved model.
        trust_remote_code (`bool`, *optional*, defaults to `False`):
            Allow custom tokenizer code from the Hub. Off unless asked for.

    Returns:
        `transformers.PreTrainedTokenizerBase`.
    """
    from transformers import AutoTokenizer

    revision = source.revision if source.tokenizer_path == source.model_path else None
    return AutoTokenizer.from_pretrained(source.tokenizer_path, revision=revision, trust_remote_code=trust_remote_code)


def load_model(
    source: ModelSource,
    dtype: str = "auto",
    device: str = "auto",
    trust_remote_code: bool = False,
    merge_adapter: bool = True,
):
    """
    Load the causal LM of `source` with `transformers.AutoModelForCausalLM` from safetensors weights only (a model or
    adapter with only pickle weights, such as `pytorch_model.bin`, is refused with how to convert it), apply its peft
    adapter if any, and put it in eval mode on `device`.

    Args:
        source ([`ModelSource`]):
            The resolved model.
        dtype (`str`, *optional*, defaults to `"auto"`):
            `"auto"` (the checkpoint's dtype), `"float32"`, `"bfloat16"` or `"float16"`.
        device (`str`, *optional*, defaults to `"auto"`):
            `"auto"` (CUDA when available, else CPU) or a torch device string.
        trust_remote_code (`bool`, *optional*, defaults to `False`):
            Allow custom model code from the Hub. Off unless asked for.
        merge_adapter (`bool`, *optional*, defaults to `True`):
            Merge the LoRA weights into the base model (faster generation).

    Returns:
        `transformers.PreTrainedModel` (or a `peft.PeftModel` when `merge_adapter` is `False`).
    """
    import torch
    from transformers import AutoModelForCausalLM

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    torch_dtype = dtype if dtype == "auto" else getattr(torch, dtype)
    if source.adapter_path is not None:
        # peft has no safetensors-only switch: it falls back to adapter_model.bin by itself, so look first.
        refuse_pickle_only(source.adapter_path)
    with safetensors_required(source.model_path):
        model = AutoModelForCausalLM.from_pretrained(
            source.model_path,
            revision=source.revision,
            dtype=torch_dtype,
            trust_remote_code=trust_remote_code,
            use_safetensors=True,
        )
    if source.adapter_path is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, source.adapter_path)
        if merge_adapter:
            model = model.merge_and_unload()
    model.to(device)
    model.eval()
    return model

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Resolve what to evaluate (a Hub id, a local model folder, a training output folder, a LoRA adapter folder) and load
the model and tokenizer with transformers (and peft for adapters)."""

from __future__ import annotations

import contextlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ModelSource",
    "load_model",
    "load_tokenizer",
    "pickle_only_weights",
    "resolve_model",
    "safetensors_required",
    "unsafe_weights_message",
]

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")

# Weight files of a model or adapter (sharded, or with a variant such as `model.fp16.safetensors`): safetensors, and
# the pickle files that `torch.load` reads, to which transformers and peft fall back without `use_safetensors=True`.
_SAFE_WEIGHTS = re.compile(r"(model|adapter_model)\S*\.safetensors(\.index\.json)?")
_PICKLE_WEIGHTS = re.compile(r"(pytorch_model|adapter_model)\S*\.bin(\.index\.json)?")


def pickle_only_weights(folder: str | os.PathLike) -> list[str]:
    """The pickle weight files (`pytorch_model.bin`, `adapter_model.bin`, ...) of a local folder that has no
    safetensors weights; empty when the folder has safetensors weights, no weights, or is not a folder.

    Args:
        folder (`str` or `os.PathLike`):
            A model or adapter folder.

    Returns:
        `list[str]`: the file names, sorted.
    """
    if not os.path.isdir(folder):
        return []
    names = sorted(os.listdir(folder))
    if any(_SAFE_WEIGHTS.fullmatch(name) for name in names):
        return []
    return [name for name in names if _PICKLE_WEIGHTS.fullmatch(name)]


def refuse_pickle_only(folder: str | os.PathLike) -> None:
    """Raise an `OSError` naming the rule and how to convert when `folder` (a model or adapter folder) has only pickle
    weights ([`pickle_only_weights`]); nothing for any other folder or a Hub id.

    Args:
        folder (`str` or `os.PathLike`):
            A model or adapter folder, or a Hub id.
    """
    pickled = pickle_only_weights(folder)
    if pickled:
        raise OSError(unsafe_weights_message(str(folder), pickled))


def safetensors_only(model_init_kwargs: dict | None) -> dict:
    """`model_init_kwargs` with `use_safetensors=True` (transformers otherwise falls back to `pytorch_model.bin`); a
    `ValueError` naming the rule when they set it to `False`.

    Args:
        model_init_kwargs (`dict`, *optional*):
            The keyword arguments a model is loaded with.

    Returns:
        `dict`: a copy, with `use_safetensors=True`.
    """
    kwargs = dict(model_init_kwargs or {})
    if kwargs.get("use_safetensors") is False:
        raise ValueError(
            "model_init_kwargs sets use_safetensors=False, but trl-srppo loads weights only from safetensors files "
            "(loading a pickle file can run code hidden in it). Remove it, and convert a model's pickle weights to "
            "safetensors once, in an environment you trust (`from_pretrained(...).save_pretrained(folder)`)."
        )
    kwargs["use_safetensors"] = True
    return kwargs


def unsafe_weights_message(name_or_path: str, files: list[str] | None = None) -> str:
    """Why a model without safetensors weights is not loaded, and how to convert its weights.

    Args:
        name_or_path (`str`):
            Hub id or local folder of the model.
        files (`list[str]`, *optional*):
            Its pickle weight files, when known (a local folder).

    Returns:
        `str`: the error message.
    """
    found = f"only PyTorch pickle weights ({', '.join(files)})" if files else "no safetensors weights"
    if files and any(name.startswith("adapter_model") for name in files):
        how = (
            f"`PeftModel.from_pretrained(base_model, {name_or_path!r}).save_pretrained(folder)` (peft writes "
            "adapter_model.safetensors)"
        )
    else:
        how = (
            f"`AutoModelForCausalLM.from_pretrained({name_or_path!r}, use_safetensors=False).save_pretrained(folder)` "
            "with the model's own class (AutoModelForTokenClassification for a saved critic); transformers >= 5 "
            "always writes safetensors, older versions need `save_pretrained(folder, safe_serialization=True)`"
        )
    hub = "" if os.path.isdir(name_or_path) else " For a Hub model, a revision that has safetensors weights works too."
    return (
        f"{name_or_path} has {found}, and trl-srppo loads weights only from safetensors files: loading a pickle "
        f"file can run code hidden in it. Convert the weights once, in an environment you trust: {how}; then use "
        f"`folder` instead.{hub}"
    )


def _missing_safetensors(err: OSError, name_or_path: str) -> bool:
    """Whether `err` is transformers' refusal of `name_or_path` for want of safetensors weights under
    `use_safetensors=True` (a local folder: "no file named model.safetensors found in directory"; a Hub id: "cannot
    be loaded with `safetensors`")."""
    message = str(err)
    if str(name_or_path) not in message or ".safetensors" not in message:
        return False
    return "cannot be loaded with `safetensors`" in message or "found in directory" in message


@contextlib.contextmanager
def safetensors_required(name_or_path: str):
    """Turn transformers' error for a model without safetensors weights, loaded with `use_safetensors=True`, into one
    that names the rule and how to convert the weights ([`unsafe_weights_message`]); any other error passes through.
    A local folder without any weights keeps transformers' message.

    Args:
        name_or_path (`str`):
            Hub id or local folder being loaded inside the block.
    """
    try:
        yield
    except OSError as err:
        if not _missing_safetensors(err, name_or_path):
            raise
        files = pickle_only_weights(name_or_path)
        if os.path.isdir(name_or_path) and not files:
            raise  # a folder with no weights at all: transformers' message says what is missing
        raise OSError(unsafe_weights_message(name_or_path, files)) from err


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


def latest_checkpoint(folder: Path) -> Path | None:
    """The newest checkpoint of a training output folder: the newest complete one when the run marks them (a run of
    this package: a newer one without the marker was cut short while saving), else the newest."""
    from ..reliability import is_complete_checkpoint, list_checkpoints

    checkpoints = [Path(p) for p in list_checkpoints(str(folder))]  # oldest step first
    complete = [p for p in checkpoints if is_complete_checkpoint(str(p))]
    if complete and complete[-1] != checkpoints[-1]:
        skipped = ", ".join(p.name for p in checkpoints[checkpoints.index(complete[-1]) + 1 :])
        print(f"[trl-srppo] {folder}: skipping {skipped}, cut short while saving (no completeness marker).")
    return (complete or checkpoints or [None])[-1]


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

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Weights are loaded from safetensors files only: loading a pickle file (`pytorch_model.bin`, `adapter_model.bin`) can
run code hidden in it. The rules that training (the policy, the critic, reward models) and evaluation apply to every
model and adapter they load: [`refuse_pickle_only`] for a local folder, [`safetensors_only`] for a model's loading
arguments, and [`safetensors_required`] around a load, for the error of a model without safetensors weights."""

import contextlib
import os
import re

__all__ = [
    "pickle_only_weights",
    "refuse_pickle_only",
    "safetensors_only",
    "safetensors_required",
    "unsafe_weights_message",
]

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

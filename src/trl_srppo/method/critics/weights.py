# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The critic's weights in a `critic/` folder, whatever its mode: a `save_pretrained` folder (safetensors), a LoRA
critic's adapter one folder down (`critic/adapter/`, never read as a policy adapter), or a plain torch module's
`model.safetensors`; and how they are read back."""

import os
from collections.abc import Callable

import torch
from torch import nn

from .model import CRITIC_ADAPTER_SUBFOLDER


def write_weights(critic: nn.Module, folder: str, state_dict: dict[str, torch.Tensor] | None = None) -> None:
    """Write the weights of `critic` (unwrapped) to `folder`.

    Args:
        critic (`nn.Module`):
            The critic without its mode's wrapper.
        folder (`str`):
            The `critic/` folder, which exists.
        state_dict (`dict`, *optional*):
            The whole state dict, where the critic is split over processes and its mode gathered it.
    """
    if hasattr(critic, "peft_config"):  # a LoRA critic: one folder down, never read as a policy adapter
        folder = os.path.join(folder, CRITIC_ADAPTER_SUBFOLDER)
    if hasattr(critic, "save_pretrained"):
        critic.save_pretrained(folder, state_dict=state_dict, safe_serialization=True)
        return
    from safetensors.torch import save_file  # a plain torch module as `critic_model`: its weights alone

    weights = state_dict if state_dict is not None else critic.state_dict()
    # Copies: safetensors refuses tensors that share storage (tied weights).
    save_file({k: v.detach().clone().contiguous() for k, v in weights.items()}, f"{folder}/model.safetensors")


def adapter_loader(critic: nn.Module, folder: str) -> Callable[[nn.Module], object] | None:
    """For a LoRA critic (`critic_use_peft`), what loads the adapter [`write_weights`] wrote in `folder` into the
    critic's module (to run on it as its mode holds it: `Critic.load_into`); `None` for any other critic."""
    if not hasattr(critic, "peft_config"):
        return None
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    adapter = load_file(os.path.join(folder, CRITIC_ADAPTER_SUBFOLDER, "adapter_model.safetensors"))
    return lambda module: set_peft_model_state_dict(module, adapter)


def read_state_dict(folder: str) -> dict[str, torch.Tensor]:
    """The whole state dict of every `.safetensors` file in `folder`, in name order."""
    from safetensors.torch import load_file

    state_dict = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".safetensors"):
            state_dict.update(load_file(os.path.join(folder, name)))
    return state_dict

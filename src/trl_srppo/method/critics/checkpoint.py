# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The critic's files: what a `critic/` folder holds, and how a [`~trl_srppo.method.critics.base.Critic`] is written
to it and read back, whatever its mode.

A `critic/` folder, beside the policy in a model folder or a checkpoint, holds:

- the weights: a `save_pretrained` folder (safetensors) of a critic model of its own; a LoRA critic's adapter one
  folder down (`adapter/`, so the Trainer never reads it as a policy adapter); a policy head's
  `value_head.safetensors` and [`POLICY_HEAD_CONFIG`]; a policy LoRA critic's `adapter/`, `value_head.safetensors`
  and [`POLICY_LORA_CRITIC_CONFIG`]; a running mean's `running_mean.safetensors` and [`RUNNING_MEAN_CONFIG`]; or a
  plain torch module's `model.safetensors`;
- [`CRITIC_SETTINGS`]: the settings the critic was trained with ([`CRITIC_SETTING_FIELDS`]);
- in a checkpoint, [`CRITIC_TRAINING_STATE`]: the learning-rate schedule, the critic's step count and (unless the
  engine writes its own) the whole optimizer state; and, for a DeepSpeed critic, [`ENGINE_FOLDER`]`/`, the engine's
  own checkpoint of the optimizer state.

What the trainer calls: [`save_critic`] (the weights and settings), [`save_critic_training_state`] and
[`load_critic_checkpoint`], each a collective under a distributed run (call it on every process); the mode-specific
pieces (gathering the weights of a sharded critic, the optimizer state's form, an engine checkpoint) are asked of
`critic.engine`, an [`~trl_srppo.method.critics.engine.Engine`]. Besides: [`check_resume_settings`] before a resume
loads anything, and [`CriticPushCallback`], which puts the critic beside the policy in every Hub push of a
checkpoint.
"""

import json
import os
import shutil
from collections.abc import Callable

import torch
from torch import nn
from transformers import TrainerCallback
from transformers.utils import logging

logger = logging.get_logger(__name__)

CRITIC_SUBFOLDER = "critic"
CRITIC_TRAINING_STATE = "critic_training_state.pt"
# A LoRA critic's adapter is saved one folder down, `critic/adapter/`: the Trainer loads any direct subfolder of a
# checkpoint that holds adapter weights into a PEFT policy as an extra adapter.
CRITIC_ADAPTER_SUBFOLDER = "adapter"
ENGINE_FOLDER = "deepspeed"  # a DeepSpeed critic's engine checkpoint, inside a checkpoint's `critic/` folder
# What the trainer records beside a saved critic, in its `critic/` folder: how it was trained, so that a resume with
# other settings and an analysis of its values read it as it was (a linear PPO critic is not a probability).
CRITIC_SETTINGS = "srppo_critic.json"
CRITIC_SETTING_FIELDS = ("srppo_method", "critic_type", "critic_head", "critic_use_peft")
# The file that marks the `critic/` folder of each critic type that is not a model of its own (each type's registry
# entry names its own, `critics.build.CriticType.marker`); the separate critic cannot load such a folder (a
# `policy_lora` folder's adapter would load without its trained, trainable value head).
POLICY_LORA_CRITIC_CONFIG = "policy_lora_critic.json"
POLICY_HEAD_CONFIG = "value_head_config.json"
RUNNING_MEAN_CONFIG = "running_mean_critic.json"


def read_critic_settings(folder: str) -> dict:
    """The settings a saved critic was trained with ([`CRITIC_SETTINGS`] in its folder), or `{}` for a critic saved
    without them (not by the trainer)."""
    path = os.path.join(folder, CRITIC_SETTINGS)
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def critic_settings(args, policy_peft: bool) -> dict:
    """What a `critic/` folder records of how its critic was trained ([`CRITIC_SETTINGS`]): the run's
    [`CRITIC_SETTING_FIELDS`], and whether the policy is a LoRA adapter (`policy_peft`; `use_peft` on the command
    line)."""
    return {**{name: getattr(args, name) for name in CRITIC_SETTING_FIELDS}, "policy_peft": policy_peft}


def check_resume_settings(checkpoint: str, settings: dict) -> None:
    """Refuse, before anything is loaded, a resume from `checkpoint` whose critic was written with other `settings`
    than this run's ([`critic_settings`]): its critic would not load into this run's, with a deep state-dict error,
    or would load as another critic."""
    saved = read_critic_settings(os.path.join(checkpoint, CRITIC_SUBFOLDER))
    differ = {
        name: (saved[name], settings[name]) for name in saved if name in settings and saved[name] != settings[name]
    }
    if differ:
        listed = ", ".join(f"{name}={was!r} (this run: {now!r})" for name, (was, now) in differ.items())
        raise ValueError(
            f"Checkpoint {checkpoint} was written with {listed}. Resume with the settings it was written with "
            "(on the command line, the same flags as the run that wrote it), or start a new run."
        )


# ---- the weights ----------------------------------------------------------------------------------------------------


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
    critic's module (to run on it as its engine holds it: `Engine.load_into`); `None` for any other critic."""
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


def load_weights(critic, folder: str) -> None:
    """Load the weights [`save_critic`] wrote in `folder` into `critic` (a [`Critic`]): through the network's own
    `load_critic_folder(folder)` where it has one (a critic with a layout of its own, a policy LoRA critic), else a
    LoRA critic's adapter or the whole state dict, through its engine."""
    network = critic.unwrapped()
    load_folder = getattr(network, "load_critic_folder", None)
    if load_folder is not None:
        load_folder(folder)
        return
    load_adapter = adapter_loader(network, folder)
    if load_adapter is not None:
        critic.engine.load_into(load_adapter)
    else:
        critic.engine.load_state_dict(read_state_dict(folder))


# ---- saving ---------------------------------------------------------------------------------------------------------


def save_critic(critic, folder: str, settings: dict, should_save: bool) -> None:
    """Write the critic's weights (safetensors, [`write_weights`]) and `settings` ([`CRITIC_SETTINGS`]) to `folder`,
    the `critic/` of a model folder or checkpoint. Every process calls it (a sharded critic's weights are gathered);
    only where `should_save` (the Trainer's `args.should_save`) anything is written."""
    state_dict = critic.engine.gather_state_dict()
    if not should_save or (state_dict is not None and not critic.accelerator.is_main_process):
        return
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, CRITIC_SETTINGS), "w", encoding="utf-8") as f:
        json.dump(settings, f, indent=2)
    write_weights(critic.unwrapped(), folder, state_dict)


def save_critic_training_state(critic, folder: str, should_save: bool) -> None:
    """Write the optimizer state, the schedule and the step count ([`CRITIC_TRAINING_STATE`]; a DeepSpeed critic's
    optimizer state as its engine checkpoint) to `folder`, the checkpoint's `critic/`. Every process calls it."""
    if critic.optimizer is None:
        return
    engine = critic.engine
    optimizer_state = engine.optimizer_state_dict(critic.optimizer, folder)
    if not should_save or not (engine.whole or critic.accelerator.is_main_process):
        return
    state = {
        "lr_scheduler": critic.lr_scheduler.state_dict(),
        "critic_step": critic.steps,
        "num_processes": critic.accelerator.num_processes,
    }
    if optimizer_state is not None:
        state["optimizer"] = optimizer_state
    state.update(engine.extra_training_state())
    torch.save(state, os.path.join(folder, CRITIC_TRAINING_STATE))


def copy_critic_files(source: str, target: str) -> None:
    """Copy the critic's weights and settings (every file of the `critic/` folder `source` but
    [`CRITIC_TRAINING_STATE`], and a LoRA critic's `adapter/`) into `target`: what a Hub push of the model holds."""
    os.makedirs(target, exist_ok=True)
    for name in os.listdir(source):
        if name != CRITIC_TRAINING_STATE and os.path.isfile(os.path.join(source, name)):
            shutil.copy(os.path.join(source, name), os.path.join(target, name))
    adapter = os.path.join(source, CRITIC_ADAPTER_SUBFOLDER)
    if os.path.isdir(adapter):
        shutil.copytree(adapter, os.path.join(target, CRITIC_ADAPTER_SUBFOLDER), dirs_exist_ok=True)


class CriticPushCallback(TrainerCallback):
    """Puts the critic beside the policy in every Hub push of a checkpoint, whatever the `hub_strategy`.

    The Trainer pushes `output_dir` after copying the policy's files into it from the checkpoint it just saved
    (`Trainer._push_from_checkpoint`); it calls `on_push_begin` once its own guards let the push go (process zero, a
    `hub_strategy` other than `"end"`, no upload still reading `output_dir` unless `hub_always_push`). The trainer
    sets `checkpoint_folder` for the length of that call; this callback then copies the checkpoint's critic weights
    and settings into `output_dir/critic/` ([`copy_critic_files`]). `push_to_hub`, whose `save_model` writes the
    critic itself, copies nothing.
    """

    def __init__(self):
        self.checkpoint_folder = None  # the checkpoint being pushed, while `Trainer._push_from_checkpoint` runs

    def on_push_begin(self, args, state, control, **kwargs):
        if self.checkpoint_folder is None:
            return
        source = os.path.join(self.checkpoint_folder, CRITIC_SUBFOLDER)
        if os.path.isdir(source):
            copy_critic_files(source, os.path.join(args.output_dir, CRITIC_SUBFOLDER))


# ---- resuming -------------------------------------------------------------------------------------------------------


def has_engine_checkpoint(folder: str) -> bool:
    """Whether a checkpoint's `critic/` folder holds an engine checkpoint of the optimizer state (`critic/deepspeed/`)
    rather than the whole optimizer state inside [`CRITIC_TRAINING_STATE`]."""
    return os.path.isdir(os.path.join(folder, ENGINE_FOLDER))


def other_mode_error(checkpoint: str, engine_checkpoint: bool) -> ValueError:
    """The error of a checkpoint whose critic optimizer state another `critic_parallelism` wrote."""
    return ValueError(
        f"Checkpoint {checkpoint} holds the critic's optimizer state of another critic_parallelism mode "
        f"(its `{CRITIC_SUBFOLDER}/` has {'no ' if not engine_checkpoint else 'a '}DeepSpeed engine "
        "checkpoint); resume with the critic_parallelism it was written with ('deepspeed' for a DeepSpeed "
        "engine checkpoint; any of 'accelerate', 'replicate' and 'fsdp' otherwise)."
    )


def _restore(critic, checkpoint: str, folder: str, state: dict | None) -> None:
    """Load the weights and, with `state` ([`CRITIC_TRAINING_STATE`], `None` under `save_only_model`), the optimizer
    state of the checkpoint's `critic/` folder: the whole optimizer state inside `state` (keyed by name, `fsdp`, or by
    index, which loads on any number of processes), or the engine's own checkpoint (the float32 master weights and
    the partitioned optimizer state)."""
    engine, engine_checkpoint = critic.engine, has_engine_checkpoint(folder)
    if engine.engine_checkpoint:
        if state is not None and not engine_checkpoint:
            raise other_mode_error(checkpoint, engine_checkpoint)
        if engine_checkpoint:
            engine.load_engine_checkpoint(folder, state)
        else:  # written with `save_only_model=True`: the safetensors weights alone
            load_weights(critic, folder)
        return
    if state is not None and (engine_checkpoint or "optimizer" not in state):
        raise other_mode_error(checkpoint, engine_checkpoint)
    load_weights(critic, folder)
    if state is not None:
        engine.load_optimizer_state(critic.optimizer, state["optimizer"])


def load_critic_checkpoint(critic, checkpoint: str) -> None:
    """Restore what [`save_critic`] and [`save_critic_training_state`] wrote in `checkpoint`'s `critic/`: the
    weights, the optimizer state, the schedule and the step count (the weights alone, with a warning, from a
    checkpoint written with `save_only_model=True`)."""
    folder = os.path.join(checkpoint, CRITIC_SUBFOLDER)
    if not os.path.isdir(folder):
        raise FileNotFoundError(
            f"Checkpoint {checkpoint} has no `{CRITIC_SUBFOLDER}/` folder, so the critic cannot be restored. "
            "Resume from a checkpoint written by SRPPOTrainer."
        )
    state_file = os.path.join(folder, CRITIC_TRAINING_STATE)
    state = torch.load(state_file, map_location="cpu", weights_only=True) if os.path.isfile(state_file) else None
    _restore(critic, checkpoint, folder, state)
    if state is None and critic.optimizer is None:  # a critic with no optimizer (a running mean): its state is whole
        return
    if state is None:  # `save_only_model=True`: weights only, as for the policy
        logger.warning(
            f"Checkpoint {checkpoint} has the critic's weights but not its optimizer state "
            f"({CRITIC_SUBFOLDER}/{CRITIC_TRAINING_STATE}; written unless save_only_model=True): the critic "
            "resumes with a fresh optimizer and learning-rate schedule."
        )
        return
    critic.lr_scheduler.load_state_dict(state["lr_scheduler"])
    critic.steps = state["critic_step"]

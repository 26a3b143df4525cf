# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The trainer's reward functions as GRPOTrainer reads its `reward_funcs` argument: which are reward models, their
names, and the reward models given by name loaded from safetensors weights only; [`safe_model_loading`], the one call
that makes every model GRPO loads by name load from safetensors weights only."""

import contextlib

import torch
from trl.trainer.utils import get_callable_name, get_config_model_id

from .safe_loading import refuse_pickle_only, safetensors_only, safetensors_required

__all__ = ["is_reward_model", "load_reward_models", "reward_func_list", "reward_func_name", "safe_model_loading"]


def is_reward_model(reward_func) -> bool:
    """Whether GRPOTrainer loads `reward_func` as a sequence-classification reward model: a Hub id or folder, or a
    model instance."""
    return isinstance(reward_func, (str, torch.nn.Module))


def reward_func_name(reward_func) -> str:
    """The name GRPOTrainer gives a reward function (`reward_func_names`), without loading a reward model."""
    if isinstance(reward_func, str):
        return reward_func.rstrip("/").split("/")[-1]
    if isinstance(reward_func, torch.nn.Module):
        return get_config_model_id(reward_func.config).split("/")[-1]
    return get_callable_name(reward_func)


def reward_func_list(reward_funcs) -> list:
    """The trainer's `reward_funcs` argument as a list, as GRPOTrainer reads it (one function, a list, or `None`)."""
    if reward_funcs is None:
        return []
    return reward_funcs if isinstance(reward_funcs, list) else [reward_funcs]


def load_reward_models(reward_funcs, args) -> list:
    """`reward_funcs` with each reward model given by Hub id or folder loaded as `GRPOTrainer` loads it (a
    sequence-classification model with one label, `model_init_kwargs`), from safetensors weights only: beside a policy
    passed as a model, GRPO would load them with `model_init_kwargs` as they are, without the rule.

    Args:
        reward_funcs:
            The trainer's `reward_funcs` argument (one function, a list, or `None`).
        args ([`SRPPOConfig`]):
            The run's settings: `model_init_kwargs`, `trust_remote_code` and the distributed setup.

    Returns:
        `list`: the reward functions, each reward model given by name replaced by the model.
    """
    from transformers import AutoModelForSequenceClassification

    kwargs = safetensors_only(args.model_init_kwargs)
    if args.distributed_state.distributed_type in ["MULTI_GPU", "DEEPSPEED"]:
        kwargs["device_map"] = None  # as GRPO: "auto" fails under distributed training
    kwargs.setdefault("trust_remote_code", args.trust_remote_code)
    loaded = []
    for func in reward_func_list(reward_funcs):
        if isinstance(func, str):
            with safetensors_required(func):
                func = AutoModelForSequenceClassification.from_pretrained(func, num_labels=1, **kwargs)
        loaded.append(func)
    return loaded


@contextlib.contextmanager
def safe_model_loading(model, reward_funcs, args):
    """The context to build a `GRPOTrainer` in so that every model it loads by name (the policy, reward models)
    loads from safetensors weights only, as the critic does; it yields the reward functions to hand GRPO.

    On entering:
    - a policy given by name: `args.model_init_kwargs` get `use_safetensors=True` (GRPO loads the policy, and then
      the reward models, with them);
    - any model given by name whose folder holds only pickle weights is refused, before anything loads;
    - reward models given by name beside a policy given as a model are loaded (GRPO would load them with
      `model_init_kwargs` as they are, without the rule), and yielded in their place.

    Inside, transformers' error for a Hub model without safetensors weights becomes one that names the rule.

    Args:
        model (`str` or `PreTrainedModel`):
            The trainer's `model` argument.
        reward_funcs:
            The trainer's `reward_funcs` argument (one function, a list, or `None`).
        args ([`SRPPOConfig`]):
            The run's settings (`model_init_kwargs` is updated in place).
    """
    by_name = [model] if isinstance(model, str) else []
    by_name += [f for f in reward_func_list(reward_funcs) if isinstance(f, str)]
    if isinstance(model, str):
        args.model_init_kwargs = safetensors_only(args.model_init_kwargs)
    for name in by_name:
        refuse_pickle_only(name)
    if not isinstance(model, str) and by_name:
        reward_funcs = load_reward_models(reward_funcs, args)
    with contextlib.ExitStack() as loading:
        for name in by_name:
            loading.enter_context(safetensors_required(name))
        yield reward_funcs

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""A pipeline written against TRL's old `PPOTrainer`, on `SRPPOConfig(srppo_method="ppo")`.

TRL has no PPO trainer any more (neither in `trl` nor in `trl.experimental`) and no value-head models, so
`srppo_method="ppo"` is PPO with a critic on TRL's current stack: GRPO's generation, clipped surrogate and KL term,
with a learned critic, GAE and a linear value head. [`PPO_FIELDS`] says what each field of the old `PPOConfig` maps
to, [`PPO_REFUSED`] what has no counterpart here and why, and [`srppo_config_from_ppo`] builds the config from such
settings. The old trainer's models map to `SRPPOTrainer`'s arguments: `model` (its `sft_model_path`),
`reward_funcs=<reward model id or module>` (its `reward_model`; GRPO scores with a sequence-classification model),
`critic_model=<value model id, folder or module>` (its `value_model`), and the reference model GRPO builds itself when
`beta > 0` (its `ref_model`).
"""

from typing import Any

__all__ = ["PPO_FIELDS", "PPO_REFUSED", "srppo_config_from_ppo"]

# `PPOConfig` field -> the `SRPPOConfig` field that does its job.
PPO_FIELDS = {
    "cliprange": "epsilon",  # the policy ratio's clipping range
    "cliprange_value": "critic_cliprange_value",  # the critic's value clipping around its old values
    "lam": "gae_lambda",  # GAE's lambda
    "kl_coef": "beta",  # the KL to the reference (GRPO's k3 term in the loss, not a penalty in the reward)
    "num_ppo_epochs": "num_iterations",  # optimisation passes over each generated batch
    "num_mini_batches": "steps_per_generation",  # optimizer steps per generated batch
    "response_length": "max_completion_length",
    "temperature": "temperature",
}

# `PPOConfig` field -> (the values accepted, what they mean here, why any other value is refused).
PPO_REFUSED: dict[str, tuple[tuple, str]] = {
    "gamma": (
        (1, 1.0),
        "the advantage is undiscounted (gamma = 1): the verifiable outcome arrives at the last token, and a discount "
        "would only shrink the credit of early tokens",
    ),
    "vf_coef": (
        (),
        "the critic is a model of its own with its own optimizer, so no summed loss weighs it against the policy's; "
        "set critic_learning_rate to scale its steps",
    ),
    "whiten_rewards": (
        (False,),
        "rewards are the outcome as the reward functions score it; with srppo_method='ppo' the linear critic takes "
        "raw scores, and srppo_outcome / srppo_outcome_threshold reshape them",
    ),
    "kl_estimator": (
        ("k3",),
        "the KL term is GRPO's k3 estimator in the loss (beta); TRL's PPOTrainer's k1 in the reward has no "
        "counterpart",
    ),
    "missing_eos_penalty": (
        (None,),
        "a completion cut at max_completion_length can be left out of the policy's loss (mask_truncated_completions="
        "True), or scored by a reward function of your own",
    ),
}


def srppo_config_from_ppo(ppo_settings: dict[str, Any], **fields):
    """An [`SRPPOConfig`] with `srppo_method="ppo"` from the settings of a pipeline written for TRL's old `PPOTrainer`.

    Args:
        ppo_settings (`dict`):
            `PPOConfig` keyword arguments. The fields of [`PPO_FIELDS`] are renamed; those of [`PPO_REFUSED`] are
            accepted at the values that mean the same here and refused, with the reason, otherwise; a field
            `SRPPOConfig` has too (a `TrainingArguments` field such as `learning_rate`, `output_dir`,
            `per_device_train_batch_size`) passes through as it is, and any other is refused.
        **fields:
            `SRPPOConfig` fields, which win over the translated ones.

    Raises:
        `ValueError`: naming every setting that has no counterpart here, each with why and what to do instead.
    """
    import dataclasses

    from .srppo_config import SRPPOConfig

    known = {f.name for f in dataclasses.fields(SRPPOConfig)}
    problems, settings = [], {"srppo_method": "ppo"}
    for name, value in ppo_settings.items():
        if name in PPO_REFUSED:
            accepted, why = PPO_REFUSED[name]
            if value not in accepted:
                problems.append(f"{name}={value!r}: {why}")
        elif (field := PPO_FIELDS.get(name, name)) in known:
            settings[field] = value
        else:  # `sft_model_path`, `total_episodes`, `stop_token`, ...: the trainer's arguments or no counterpart
            problems.append(
                f"{name}={value!r}: not a setting here (the models are SRPPOTrainer's arguments; the run's "
                "length is max_steps)"
            )
    if problems:
        raise ValueError(
            "These PPOTrainer settings have no counterpart in SR-PPO's PPO (srppo_method='ppo'); remove them: "
            + "; ".join(problems)
            + "."
        )
    return SRPPOConfig(**{**settings, **fields})

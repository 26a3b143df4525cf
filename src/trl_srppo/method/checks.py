# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""SR-PPO's own checks, so that a run that cannot work stops at once with the fix instead of hours in.

At construction: reward models whose raw scores would become the sigmoid critic's outcome ([`check_reward_models`]),
GRPO settings that do nothing here ([`warn_ignored_grpo_settings`]), the outcome settings against the reward functions
([`outcome_settings`], [`warn_summed_outcome`]), a critic that cannot read the policy's token ids
([`check_critic_tokenizer`]); once the trainer is built, [`check_trainer_inputs`] runs every check of what it was given
(the outcome's reward functions, the critic's tokenizer, the prompts, what the warm start and prompt sampling need of
the dataset). At each step: the sigmoid critic's outcome must lie in `[0, 1]`
([`check_outcome_range`]; the error says which setting fixes it). The checks any run gets are `trl_srppo.runtime`'s.
"""

import logging
import os
import warnings

import torch

from ..runtime.reward_models import is_reward_model, reward_func_list, reward_func_name
from ..runtime.startup_checks import check_prompts
from .core import CRITIC_HEADS, OUTCOME_MODES, PROMPT_SAMPLING_MODES
from .prompt_sampling import check_prompt_sampling
from .warm_start import check_warm_start_dataset

__all__ = [
    "check_critic_tokenizer",
    "check_critic_vocabulary",
    "check_outcome_range",
    "check_reward_models",
    "check_trainer_inputs",
    "outcome_settings",
    "warn_ignored_grpo_settings",
    "warn_summed_outcome",
]

logger = logging.getLogger(__name__)


def check_reward_models(reward_funcs, args) -> None:
    """Refuse, at construction, a reward model whose raw scores would become the sigmoid critic's outcome.

    Args:
        reward_funcs:
            The trainer's `reward_funcs` argument (one function, a list, or `None`), before GRPO loads any model.
        args ([`SRPPOConfig`]):
            The run's settings.
    """
    if not CRITIC_HEADS[args.critic_head].logits or args.srppo_outcome_threshold is not None:
        return
    models = [reward_func_name(f) for f in reward_func_list(reward_funcs) if is_reward_model(f)]
    if OUTCOME_MODES[args.srppo_outcome].needs_reward_func and args.srppo_outcome_reward_func not in models:
        return  # the success signal is a reward function; the reward models are only logged
    if models:
        raise ValueError(
            f"The reward functions include the reward model(s) {models}, whose raw scores are not success "
            "probabilities, but SR-PPO's sigmoid critic needs an outcome in [0, 1]. Set srppo_outcome_threshold=<t> "
            "(success where the weighted reward reaches t), or srppo_outcome='reward_func' with "
            "srppo_outcome_reward_func=<name of a [0, 1] reward function> (the reward models are then only logged), "
            "or use srppo_method='ppo' (linear critic) to train on the raw scores."
        )


def warn_ignored_grpo_settings(args) -> None:
    """Warn about the GRPO settings that shape group-normalised advantages, which SR-PPO replaces with critic-based
    ones, when they are not at their neutral value."""
    if args.scale_rewards != "none":
        warnings.warn(
            f"scale_rewards={args.scale_rewards!r} has no effect with SRPPOTrainer: its advantages w_k * (Y - qhat) "
            "come from the critic and are never scaled by group or batch statistics. Leave scale_rewards='none'.",
            UserWarning,
            stacklevel=3,
        )
    if args.multi_objective_aggregation != "sum_then_normalize":
        warnings.warn(
            f"multi_objective_aggregation={args.multi_objective_aggregation!r} has no effect with SRPPOTrainer: the "
            "outcome is made from the reward functions as `srppo_outcome` says (the weighted sum by default), "
            "never normalised per group. To combine rewards on different scales use "
            "srppo_outcome='normalized_sum' with srppo_outcome_reward_max.",
            UserWarning,
            stacklevel=3,
        )


def outcome_settings(args, reward_func_names: list[str]) -> tuple[int | None, torch.Tensor | None]:
    """The column of `srppo_outcome_reward_func` and the `(F,)` maxima of `srppo_outcome_reward_max`, checked
    against the trainer's reward functions.

    Args:
        args ([`SRPPOConfig`]):
            The run's settings.
        reward_func_names (`list[str]`):
            The names of the trainer's `F` reward functions (`trainer.reward_func_names`, an environment's included).

    Returns:
        `tuple`: the index of `srppo_outcome_reward_func` among the functions (`None` unless
        `srppo_outcome="reward_func"`), and the maxima as a float32 tensor (`None` unless set).
    """
    index = None
    if OUTCOME_MODES[args.srppo_outcome].needs_reward_func:
        names = reward_func_names
        if names.count(args.srppo_outcome_reward_func) != 1:
            found = "is not among" if args.srppo_outcome_reward_func not in names else "names several of"
            raise ValueError(
                f"srppo_outcome_reward_func={args.srppo_outcome_reward_func!r} {found} the reward functions "
                f"{names}; set it to exactly one of these names."
            )
        index = names.index(args.srppo_outcome_reward_func)
    reward_max = None
    if args.srppo_outcome_reward_max is not None:
        if len(args.srppo_outcome_reward_max) != len(reward_func_names):
            raise ValueError(
                f"srppo_outcome_reward_max has {len(args.srppo_outcome_reward_max)} values for "
                f"{len(reward_func_names)} reward functions {reward_func_names} (an environment's reward "
                "counts as one); give one maximum per function, in this order."
            )
        reward_max = torch.tensor(args.srppo_outcome_reward_max, dtype=torch.float32)
    return index, reward_max


def warn_summed_outcome(args, reward_func_names: list[str], reward_weights) -> None:
    """Warn, at construction, that `srppo_outcome="weighted_sum"` of several reward functions can pass 1 (a format
    and an accuracy reward that both score 1 on one rollout), which stops the run at the first rollout that does,
    possibly hours in. Functions that never score together (one per task, `None` for the others) are fine.

    Args:
        args ([`SRPPOConfig`]):
            The run's settings.
        reward_func_names (`list[str]`):
            The names of the trainer's reward functions.
        reward_weights (`torch.Tensor` of shape `(F,)`):
            Their weights (`trainer.reward_weights`).
    """
    if (
        not CRITIC_HEADS[args.critic_head].logits
        or not OUTCOME_MODES[args.srppo_outcome].adds_scores
        or args.srppo_outcome_threshold
    ):
        return
    weights = [float(w) for w in reward_weights]
    if len(weights) < 2 or sum(w for w in weights if w > 0) <= 1:
        return
    warnings.warn(
        f"srppo_outcome='weighted_sum' adds the reward functions {reward_func_names} with weights {weights}:"
        " where more than one scores on the same rollout, the sum can pass 1, and SR-PPO's sigmoid critic needs "
        "an outcome in [0, 1], so training would stop at the first rollout that passes it. For functions that "
        "score together (a format and an accuracy reward), set srppo_outcome='normalized_sum' (the sum over its "
        "maximum), srppo_outcome='reward_func' with srppo_outcome_reward_func=<the success function>, or "
        "srppo_outcome_threshold=<t>. Functions that never score on the same rollout (one per task, None for the "
        "others) are fine as they are.",
        UserWarning,
        stacklevel=3,
    )


# ---- the critic ----------------------------------------------------------------------------------------------------


def check_critic_vocabulary(
    policy_vocab_size: int, critic_vocab_size: int, policy_vocab: dict | None, critic_vocab: dict | None
) -> str | None:
    """Check that the critic can read the policy's token ids: raise a `ValueError` when it cannot, return a warning
    when it cannot be told, else `None`.

    Args:
        policy_vocab_size (`int`):
            Rows of the policy's input embeddings: every id the policy can generate is below it.
        critic_vocab_size (`int`):
            Rows of the critic's input embeddings.
        policy_vocab (`dict[str, int]`, *optional*):
            The policy tokenizer's vocabulary (`get_vocab()`).
        critic_vocab (`dict[str, int]`, *optional*):
            The vocabulary of the tokenizer saved with the critic's checkpoint; `None` when it has none.
    """
    if critic_vocab_size < policy_vocab_size:
        raise ValueError(
            f"The critic's vocabulary ({critic_vocab_size} token embeddings) is smaller than the policy's "
            f"({policy_vocab_size}): token ids the policy generates would be out of the critic's range. Start the "
            "critic from a checkpoint with the policy's tokenizer (by default the policy's own)."
        )
    differ = 0
    if policy_vocab is not None and critic_vocab is not None:
        differ = sum(critic_vocab.get(token) != index for token, index in policy_vocab.items())
    if differ:
        raise ValueError(
            f"The critic's tokenizer is not the policy's: {differ} of the policy's {len(policy_vocab)} tokens have "
            "another id (or none) in it. The critic reads the policy's token ids, so it must share its tokenizer; "
            "start it from a checkpoint of the policy's family (by default the policy's own)."
        )
    if critic_vocab_size > policy_vocab_size and critic_vocab is None:
        return (
            f"The critic has {critic_vocab_size} token embeddings and the policy {policy_vocab_size}, and the "
            "critic's checkpoint has no tokenizer to compare: make sure both use the same tokenizer, as the critic "
            "reads the policy's token ids."
        )
    return None


def check_critic_tokenizer(policy, critic, processing_class, critic_path: str | None) -> None:
    """[`check_critic_vocabulary`] on a trainer's policy and critic: the sizes of their input embeddings, and the
    policy tokenizer's vocabulary against that of the tokenizer saved with the critic, when there is one. Logs the
    warning it returns; nothing for a custom critic or policy without input embeddings.

    Args:
        policy (`torch.nn.Module`):
            The policy, as the trainer holds it.
        critic (`torch.nn.Module`):
            The critic, before any wrapping.
        processing_class:
            The policy's tokenizer or processor.
        critic_path (`str`, *optional*):
            The folder or Hub id the critic was loaded from, whose tokenizer files (if any) are compared.
    """
    tokenizer = getattr(processing_class, "tokenizer", processing_class)
    policy_embeddings = policy.get_input_embeddings()
    get_embeddings = getattr(critic, "get_input_embeddings", None)
    critic_embeddings = get_embeddings() if get_embeddings is not None else None
    if policy_embeddings is None or critic_embeddings is None or not hasattr(tokenizer, "get_vocab"):
        return  # a custom critic or policy: nothing to compare
    critic_vocab = None
    tokenizer_files = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")
    if critic_path is not None and os.path.isdir(critic_path):
        if not any(os.path.isfile(os.path.join(critic_path, name)) for name in tokenizer_files):
            critic_path = None  # saved without a tokenizer: only the sizes can be compared
    if critic_path is not None:
        from transformers import AutoTokenizer

        try:
            critic_vocab = AutoTokenizer.from_pretrained(critic_path).get_vocab()
        except (OSError, ValueError, TypeError, KeyError):  # a checkpoint saved without its tokenizer
            critic_vocab = None
    warning = check_critic_vocabulary(
        policy_embeddings.num_embeddings, critic_embeddings.num_embeddings, tokenizer.get_vocab(), critic_vocab
    )
    if warning:
        logger.warning(warning)


def check_trainer_inputs(trainer, critic, critic_path: str | None) -> None:
    """Every check of what a built `SRPPOTrainer` was given, before any step: the summed outcome's reward functions
    ([`warn_summed_outcome`]), the critic's tokenizer against the policy's ([`check_critic_tokenizer`]; `critic` is
    the critic model built before the policy, `critic_path` where it was loaded from), the training prompts
    (`trl_srppo.runtime.startup_checks.check_prompts`: the critic reads qhat(s_0) at a prompt's last token), and what
    the warm start and prompt sampling need of the dataset, and that `gradient_nsr_steps` can read the policy whole."""
    args = trainer.args
    warn_summed_outcome(args, trainer.reward_func_names, trainer.reward_weights)
    check_critic_tokenizer(trainer.model, critic, trainer.processing_class, critic_path)
    check_prompts(
        trainer.train_dataset,
        trainer.processing_class,
        trainer.model.config,
        trainer.max_completion_length,
        trainer.chat_template_kwargs,
    )
    check_warm_start_dataset(args, trainer.train_dataset)
    if PROMPT_SAMPLING_MODES[args.prompt_sampling].draws:
        check_prompt_sampling(trainer)
    if args.gradient_nsr_steps:
        check_gradient_nsr(trainer)


def check_gradient_nsr(trainer) -> None:
    """`gradient_nsr_steps` differentiates the whole policy on each process: refused under ZeRO-3 and FSDP, which
    hold a shard of it."""
    sharded = trainer.is_fsdp_enabled
    if trainer.is_deepspeed_enabled:
        config = trainer.accelerator.state.deepspeed_plugin.deepspeed_config
        sharded = int(config.get("zero_optimization", {}).get("stage", 0)) == 3
    if sharded:
        raise ValueError(
            "gradient_nsr_steps needs the whole policy on each process, and this run shards it (DeepSpeed ZeRO-3 or "
            "FSDP); set gradient_nsr_steps=0, or measure the NSR of a saved checkpoint with `trl-srppo analyze nsr`."
        )


def check_outcome_range(rewards: torch.Tensor, args, step: int) -> None:
    """With the sigmoid critic (a `critic_head` whose values are probabilities), raise a `ValueError` naming the first
    outcome outside `[0, 1]` and the settings that fix it (the `srppo_outcome`'s own first, its
    [`~trl_srppo.method.core.OutcomeMode`]'s `range_fix`); NaN (an unscorable rollout) is left alone.

    Args:
        rewards (`torch.Tensor` of shape `(N,)`):
            The outcome of each rollout (`trl_srppo.method.core.outcome_from_rewards`).
        args ([`SRPPOConfig`]):
            The run's settings: `critic_head` and `srppo_outcome`.
        step (`int`):
            The global step of the run, for the message.
    """
    if not CRITIC_HEADS[args.critic_head].logits:
        return
    bad = torch.isfinite(rewards) & ((rewards < 0) | (rewards > 1))
    if bad.any():
        raise ValueError(
            f"SR-PPO got the outcome {rewards[bad][0].item():.4g} (srppo_outcome={args.srppo_outcome!r}), "
            f"outside [0, 1], at global step {step}. Its sigmoid critic predicts the "
            "probability of success, so the outcome must be in [0, 1]. "
            + OUTCOME_MODES[args.srppo_outcome].range_fix
            + "Either: srppo_outcome_threshold=<t> (success where the outcome reaches t, for rewards of any "
            "range, e.g. +1 / -1); srppo_outcome='reward_func' with srppo_outcome_reward_func=<name> (one "
            "function's score is the success signal); rescale `reward_weights`; or srppo_method='ppo' (linear "
            "critic) for unbounded rewards."
        )

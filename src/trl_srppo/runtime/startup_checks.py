# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""What a trainer checks once, before its first step, so that a run that cannot work stops at once with the fix
instead of hours in.

At construction (`SRPPOTrainer`): reward models whose raw scores would become the sigmoid critic's outcome
([`check_reward_models`]), GRPO settings that do nothing here ([`warn_ignored_grpo_settings`]), the outcome settings
against the reward functions ([`outcome_settings`], [`warn_summed_outcome`]), a critic that cannot read the policy's
token ids ([`check_critic_tokenizer`]), and prompts that are not text or chat messages, are empty, or leave no room
for a completion ([`check_prompts`]). When training starts (`ReliableTrainerMixin.train`, both trainers): a dataset
smaller than one generated batch ([`check_one_generated_batch`]) and reward functions that need a column the dataset
lacks ([`check_reward_columns`]).
"""

import inspect
import logging
import os
import warnings

import torch
from datasets import Dataset
from trl.data_utils import maybe_apply_chat_template

from .reward_models import is_reward_model, reward_func_list, reward_func_name

__all__ = [
    "REWARD_KEYWORDS",
    "check_critic_tokenizer",
    "check_critic_vocabulary",
    "check_one_generated_batch",
    "check_prompt_lengths",
    "check_prompt_value",
    "check_prompts",
    "check_reward_columns",
    "check_reward_models",
    "engine_mismatch",
    "outcome_settings",
    "warn_ignored_grpo_settings",
    "warn_summed_outcome",
]

logger = logging.getLogger(__name__)

# The keywords GRPO passes every reward function besides the dataset's columns.
REWARD_KEYWORDS = (
    "prompts",
    "completions",
    "completion_ids",
    "trainer_state",
    "log_extra",
    "log_metric",
    "environments",
)


# ---- the settings --------------------------------------------------------------------------------------------------

# engine -> (the variable `accelerate launch` sets from a config that asks for it, Accelerate's `DistributedType` name,
# what to do instead on a CPU)
ENGINE_REQUESTS = {
    "FSDP": (
        "ACCELERATE_USE_FSDP",
        "FSDP",
        "Accelerate turns FSDP on only on GPUs and other accelerators; on a CPU, launch with "
        "recipes/accelerate/cpu_2proc.yaml (DDP) to say so, or with zero2.yaml / zero3.yaml and use_cpu: true",
    ),
    "DeepSpeed": (
        "ACCELERATE_USE_DEEPSPEED",
        "DEEPSPEED",
        "Accelerate(cpu=True), --cpu and ACCELERATE_USE_CPU turn DeepSpeed off; on a CPU, launch without --cpu and "
        "set use_cpu: true in the training config (DS_ACCELERATOR=cpu)",
    ),
}


def engine_mismatch(environ, distributed_type) -> str | None:
    """One line when the launch asked for FSDP or DeepSpeed (`accelerate launch` sets `ACCELERATE_USE_FSDP` /
    `ACCELERATE_USE_DEEPSPEED` from its config) but Accelerate chose another engine, which then trains the policy
    unsharded without a word (FSDP on a CPU becomes DDP); None when the run got what it asked for.

    Args:
        environ (`Mapping[str, str]`):
            The process's environment (`os.environ`).
        distributed_type (`accelerate.utils.DistributedType`):
            The engine Accelerate chose (`trainer.accelerator.distributed_type`).
    """
    got = getattr(distributed_type, "name", str(distributed_type))
    for engine, (variable, expected, instead) in ENGINE_REQUESTS.items():
        if str(environ.get(variable, "false")).lower() in ("true", "1", "yes") and got != expected:
            return (
                f"The Accelerate config asks for {engine} ({variable}=true), but this run trains under {got}: the "
                f"policy is not sharded. {instead}."
            )
    return None


def check_reward_models(reward_funcs, args) -> None:
    """Refuse, at construction, a reward model whose raw scores would become the sigmoid critic's outcome.

    Args:
        reward_funcs:
            The trainer's `reward_funcs` argument (one function, a list, or `None`), before GRPO loads any model.
        args ([`SRPPOConfig`]):
            The run's settings.
    """
    if args.critic_head != "sigmoid" or args.srppo_outcome_threshold is not None:
        return
    models = [reward_func_name(f) for f in reward_func_list(reward_funcs) if is_reward_model(f)]
    if args.srppo_outcome == "reward_func" and args.srppo_outcome_reward_func not in models:
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
    if args.srppo_outcome == "reward_func":
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
    if args.critic_head != "sigmoid" or args.srppo_outcome != "weighted_sum" or args.srppo_outcome_threshold:
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


# ---- the data ------------------------------------------------------------------------------------------------------


def check_prompt_lengths(
    lengths: list[int], max_positions: int, max_completion_length: int, rotary: bool = False
) -> str | None:
    """Prompts that leave no room for a completion in the model's `max_positions` positions: a `ValueError` with their
    count for a model of learned absolute positions (a position past its table fails inside the forward), a warning
    text for a rotary model (`rotary=True`), which runs past them as GRPO lets it, outside the lengths it was
    trained on; `None` when every prompt fits."""
    limit = max_positions - max_completion_length
    long = [n for n in lengths if n > limit]
    if not long:
        return None
    message = (
        f"{len(long)} of {len(lengths)} prompt(s) are longer than {limit} tokens (the longest: {max(long)}), so "
        f"with max_completion_length={max_completion_length} they do not fit the model's {max_positions} positions "
        "(max_position_embeddings)."
    )
    fix = (
        "Filter them out of the dataset (for example `dataset.filter(...)` on the tokenized length) or lower "
        "max_completion_length."
    )
    if rotary:
        return f"{message} Its rotary positions run past them, beyond the lengths the model was trained on. {fix}"
    raise ValueError(f"{message} {fix}")


def check_prompt_value(prompt, index: int) -> None:
    """A row's `prompt` must be text or a non-empty list of chat messages (dicts with a "role"), as GRPOTrainer
    reads it; anything else is a `ValueError` that names the row, the column and the expected type."""
    if isinstance(prompt, str):
        return
    if isinstance(prompt, list) and prompt and all(isinstance(m, dict) and "role" in m for m in prompt):
        return
    shown = repr(prompt) if len(repr(prompt)) <= 60 else repr(prompt)[:57] + "..."
    raise ValueError(
        f"train_dataset row {index}: column 'prompt' must be a string or a non-empty list of chat messages "
        f"([{{'role': 'user', 'content': '...'}}]), got {type(prompt).__name__} {shown}. Fix the row, or remove "
        "it (for example with `dataset.filter(...)`)."
    )


def check_prompts(
    dataset, processing_class, model_config, max_completion_length: int, chat_template_kwargs: dict
) -> None:
    """Refuse, before the first step, prompts that are neither text nor chat messages (the tokenizer's own error
    names neither the row nor the column), empty prompts (the critic reads qhat(s_0) at the last prompt token, which
    an empty prompt does not have), and prompts that leave no room for a completion in the context of a model of
    absolute positions (a rotary model runs past its positions, as under GRPO: a warning, logged). A dataset that is
    not a `datasets.Dataset` with a `prompt` column is not checked.

    Args:
        dataset:
            The trainer's `train_dataset`.
        processing_class:
            The policy's tokenizer or processor.
        model_config (`transformers.PretrainedConfig`):
            The policy's config: its `max_position_embeddings` (or `n_positions`) and rotary settings.
        max_completion_length (`int`):
            The longest completion GRPO generates.
        chat_template_kwargs (`dict`):
            GRPO's `chat_template_kwargs`, with which the prompts are rendered.
    """
    max_positions = getattr(model_config, "max_position_embeddings", None) or getattr(
        model_config, "n_positions", None
    )
    if not isinstance(dataset, Dataset) or "prompt" not in dataset.column_names:
        return
    tokenizer = getattr(processing_class, "tokenizer", processing_class)
    lengths = []
    for start in range(0, len(dataset), 1024):
        prompts = dataset[start : start + 1024]["prompt"]
        for offset, prompt in enumerate(prompts):
            check_prompt_value(prompt, start + offset)
        texts = [
            maybe_apply_chat_template({"prompt": p}, tokenizer, **chat_template_kwargs)["prompt"] for p in prompts
        ]
        lengths += [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
    empty = [index for index, length in enumerate(lengths) if length == 0]
    if empty:
        more = f" (and {len(empty) - 1} more row(s))" if len(empty) > 1 else ""
        raise ValueError(
            f"train_dataset row {empty[0]}{more}: column 'prompt' is empty (it has no tokens), but SR-PPO's "
            "critic reads the prompt's value qhat(s_0) at its last token. Give every row a prompt, or remove the "
            "empty ones (for example `dataset.filter(lambda row: row['prompt'].strip())`)."
        )
    if max_positions:
        rotary = any(getattr(model_config, name, None) for name in ("rope_parameters", "rope_scaling", "rope_theta"))
        warning = check_prompt_lengths(lengths, max_positions, max_completion_length, rotary)
        if warning:
            logger.warning(warning)


def check_one_generated_batch(dataset, args, num_generations: int, num_processes: int) -> None:
    """Refuse a `train_dataset` with fewer prompts than one generated batch: GRPO's sampler yields whole generated
    batches only, so the run would train no step, save an untrained model and exit as if it had trained. A dataset
    without a length (none, or an iterable dataset) is not checked.

    Args:
        dataset:
            The trainer's `train_dataset`.
        args (`GRPOConfig`):
            The run's settings: `generation_batch_size`, `per_device_train_batch_size`, `steps_per_generation`.
        num_generations (`int`):
            Rollouts per prompt.
        num_processes (`int`):
            Processes of the run.
    """
    try:
        size = len(dataset)
    except TypeError:  # none, or an iterable dataset: no length to check
        return
    prompts_per_batch = args.generation_batch_size // num_generations
    pool = getattr(args, "prompt_pool_factor", 1) if getattr(args, "prompt_sampling", "none") != "none" else 1
    if pool > 1 and size < pool * prompts_per_batch:
        raise ValueError(
            f"train_dataset has {size} prompt(s), fewer than one pool of candidates of {pool * prompts_per_batch} "
            f"(prompt_pool_factor {pool} x the generated batch's {prompts_per_batch} prompts), so no step would be "
            f"trained. Give it at least {pool * prompts_per_batch} rows, or lower prompt_pool_factor."
        )
    if size < prompts_per_batch:
        raise ValueError(
            f"train_dataset has {size} prompt(s), fewer than one generated batch of {prompts_per_batch} "
            f"(per_device_train_batch_size {args.per_device_train_batch_size} x "
            f"{num_processes} process(es) x steps_per_generation {args.steps_per_generation}"
            f" / num_generations {num_generations}), so no step would be trained. Give it at least "
            f"{prompts_per_batch} rows (max_train_samples on the command line), or lower those settings."
        )


def check_reward_columns(dataset, reward_funcs, rollout_func=None) -> None:
    """Refuse a reward function that needs a dataset column the dataset lacks: GRPO passes a reward function every
    dataset column as a keyword (with `prompts`, `completions`, ...), so it would fail at the first generated batch
    with a bare `TypeError`. Not checked for a dataset without known columns (an iterable one), nor with a
    `rollout_func`, whose extra fields reach the reward functions by name too.

    Args:
        dataset:
            The trainer's `train_dataset`.
        reward_funcs (`list`):
            The trainer's reward functions; reward models and what has no signature to read are skipped.
        rollout_func (`Callable`, *optional*):
            The trainer's `rollout_func`.
    """
    columns = getattr(dataset, "column_names", None)
    if columns is None:  # an iterable dataset without known columns
        return
    if rollout_func is not None:  # its extra fields reach the reward functions too, by name
        return
    given = {*(c for c in columns if c not in ("prompt", "completion", "completion_ids")), *REWARD_KEYWORDS}
    for func in reward_funcs:
        if isinstance(func, torch.nn.Module) or not callable(func):
            continue
        try:
            parameters = inspect.signature(func).parameters.values()
        except (TypeError, ValueError):  # a callable without a signature to read
            continue
        required = [
            p.name
            for p in parameters
            if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in given
        ]
        if required:
            name = getattr(func, "__name__", type(func).__name__)
            raise ValueError(
                f"Reward function {name!r} needs the dataset column(s) {required}, which GRPO does not pass it: "
                f"it passes {', '.join(REWARD_KEYWORDS[:3])} and every column of train_dataset but prompt "
                f"(its columns: {sorted(columns)}). Add the column to the data, rename one to that name "
                "(dataset_column_map on the command line), or give the function's parameter a default."
            )

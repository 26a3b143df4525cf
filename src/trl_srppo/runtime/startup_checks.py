# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""What a trainer checks once, before its first step, so that a run that cannot work stops at once with the fix
instead of hours in.

At construction: prompts that are not text or chat messages, are empty, or leave no room for a completion
([`check_prompts`]). When training starts (`ReliableTrainerMixin.train`, both trainers): a dataset smaller than one
generated batch ([`check_one_generated_batch`]) and reward functions that need a column the dataset lacks
([`check_reward_columns`]). SR-PPO's own checks (its outcome, reward models and critic) are
`trl_srppo.method.checks`.
"""

import inspect
import logging

import torch
from datasets import Dataset
from trl.data_utils import maybe_apply_chat_template

__all__ = [
    "REWARD_KEYWORDS",
    "check_one_generated_batch",
    "check_prompt_lengths",
    "check_prompt_value",
    "check_prompts",
    "check_reward_columns",
    "engine_mismatch",
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


def check_one_generated_batch(dataset, args, num_generations: int, num_processes: int, pool_factor: int = 1) -> None:
    """Refuse a `train_dataset` with fewer prompts than one generated batch: GRPO's sampler yields whole generated
    batches only, so the run would train no step, save an untrained model and exit as if it had trained; nor fewer
    than one pool of `pool_factor` generated batches, for a trainer that draws each batch's prompts from one. A
    dataset without a length (none, or an iterable dataset) is not checked.

    Args:
        dataset:
            The trainer's `train_dataset`.
        args (`GRPOConfig`):
            The run's settings: `generation_batch_size`, `per_device_train_batch_size`, `steps_per_generation`.
        num_generations (`int`):
            Rollouts per prompt.
        num_processes (`int`):
            Processes of the run.
        pool_factor (`int`, *optional*, defaults to `1`):
            The generated batches of prompts the data loader gives for each generated batch (1: no pool).
    """
    try:
        size = len(dataset)
    except TypeError:  # none, or an iterable dataset: no length to check
        return
    prompts_per_batch = args.generation_batch_size // num_generations
    pool = pool_factor
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

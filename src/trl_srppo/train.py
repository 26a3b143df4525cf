# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`trl-srppo train`: SR-PPO (or TRL's GRPO, for the baseline) from a YAML recipe.

    python -m trl_srppo.tasks.toy outputs/toy && trl-srppo train --config recipes/cpu/srppo_toy.yaml
    accelerate launch --config_file recipes/accelerate/ddp.yaml -m trl_srppo.train \\
        --config recipes/qwen3-1.7b/deepscaler/srppo_onpolicy.yaml --learning_rate 2e-6

A recipe is one flat YAML mapping whose keys are fields of the script arguments below, of `SRPPOConfig` (or, with
`trainer: grpo`, of `GRPORuntimeConfig`: `GRPOConfig` with the runtime's `reward_timeout` and `save_on_preemption`)
and of TRL's `ModelConfig`. Any key can be overridden on the command line (`--key value`); an unknown key is an
error that names it. The script is one straight sequence: parse, seed, data, model, rewards, trainer, train
(resuming from the last checkpoint when asked), save, model card, push.
"""

import dataclasses
import enum
import logging
import os
import sys
from dataclasses import dataclass, field

import yaml

logger = logging.getLogger(__name__)

TRAINERS = ("srppo", "grpo")


@dataclass
class TrainScriptArguments:
    r"""
    Script arguments of `trl-srppo train`.

    Args:
        trainer (`str`, *optional*, defaults to `"srppo"`):
            `"srppo"` (this package's `SRPPOTrainer`) or `"grpo"` (TRL's `GRPOTrainer`, the multi-rollout baseline,
            trained on the same data with the same rewards).
        task (`str`, *optional*, defaults to `"math"`):
            A task registered in `trl_srppo.tasks.registry`: `"math"`, `"countdown"`, `"knights_knaves"`,
            `"multiple_choice"` or `"chain"` (chains of digit operations, the CPU toy family, whose model folder and
            data file `python -m trl_srppo.tasks.toy <folder>` writes, and the benchmarks' task).
        dataset_name (`str`, *optional*):
            Hub dataset name (e.g. `agentica-org/DeepScaleR-Preview-Dataset`) or a local `.json` / `.jsonl` /
            `.parquet` file with the task's fields.
        dataset_config (`str`, *optional*):
            Hub dataset configuration.
        dataset_train_split (`str`, *optional*, defaults to `"train"`):
            Split to train on.
        dataset_column_map (`dict[str, str]`, *optional*):
            Task field -> dataset column, e.g. `{"problem": "question"}` (a JSON object on the command line:
            `--dataset_column_map '{"problem": "question"}'`).
        system_prompt (`str`, *optional*):
            System message put before every prompt.
        on_bad_row (`str`, *optional*, defaults to `"skip"`):
            What to do with malformed rows (missing field, empty problem, unparsable gold answer): `"skip"` (leave
            them out, log and count them) or `"error"` (stop with the list of rows).
        check_answers (`bool`, *optional*, defaults to `True`):
            Check every math gold answer with the verifier before training.
        max_train_samples (`int`, *optional*):
            Keep only the first N usable rows, N >= 1 (rows after them are not read or checked).
        reward_funcs (`list[str]`, *optional*):
            Reward functions by registered name or dotted path; defaults to the task's verifier.
    """

    trainer: str = field(default="srppo", metadata={"help": "'srppo' or 'grpo' (TRL's GRPOTrainer, the baseline)."})
    task: str = field(
        default="math",
        metadata={"help": "A registered task: 'math', 'countdown', 'knights_knaves', 'multiple_choice' or 'chain'."},
    )
    dataset_name: str | None = field(default=None, metadata={"help": "Hub dataset name or local json/jsonl/parquet."})
    dataset_config: str | None = field(default=None, metadata={"help": "Hub dataset configuration."})
    dataset_train_split: str = field(default="train", metadata={"help": "Split to train on."})
    dataset_column_map: dict | str | None = field(
        default=None, metadata={"help": 'Task field -> dataset column, e.g. \'{"problem": "question"}\'.'}
    )
    system_prompt: str | None = field(default=None, metadata={"help": "System message put before every prompt."})
    on_bad_row: str = field(
        default="skip", metadata={"help": "'skip' (leave out, log and count) or 'error' for malformed rows."}
    )
    check_answers: bool = field(default=True, metadata={"help": "Check math gold answers parse before training."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Keep only the first N usable rows."})
    reward_funcs: list[str] | None = field(
        default=None, metadata={"help": "Reward functions by name or dotted path; defaults to the task's verifier."}
    )

    def __post_init__(self):
        if self.trainer not in TRAINERS:
            raise ValueError(f"trainer must be one of {TRAINERS}, got {self.trainer!r}.")
        from .tasks.data import parse_column_map

        self.dataset_column_map = parse_column_map(self.dataset_column_map)
        if self.max_train_samples is not None and self.max_train_samples < 1:
            raise ValueError(
                f"max_train_samples must be >= 1 (the number of usable rows to train on), got "
                f"{self.max_train_samples}; leave it unset to train on every row."
            )
        if self.on_bad_row not in ("skip", "error"):
            raise ValueError(f"on_bad_row must be 'skip' or 'error', got {self.on_bad_row!r}.")
        from .tasks.registry import get_task

        get_task(self.task)  # an unknown task is an error that lists the registered ones
        if self.dataset_name is None:
            raise ValueError("dataset_name is required: a Hub dataset name or a local json/jsonl/parquet file.")


# What a flag's value looks like, for the error when it is given without one.
_VALUE_HINTS = {"config": "recipe.yaml", "trainer": "srppo|grpo", "num_generations": "N"}


def _flag_value(argv: list[str], flag: str) -> str:
    """The value after `flag` in `argv`; an error that names the flag when it is the last word or followed by another
    flag (rather than an `IndexError`, or the next flag taken as the value)."""
    index = argv.index(flag)
    if index + 1 == len(argv) or argv[index + 1].startswith("--"):
        hint = _VALUE_HINTS.get(flag[2:], "value")
        raise ValueError(f"{flag} is given without a value; write `{flag} <{hint}>` (or `{flag}=<{hint}>`).")
    return argv[index + 1]


def _normalize_argv(argv: list[str]) -> list[str]:
    """`argv` with `--config=<recipe>` written as `--config <recipe>`, the only form TRL's parser reads, and a clear
    error for `--config` without a recipe."""
    normalized = []
    for arg in argv:
        if arg.startswith("--config="):
            normalized.append("--config")
            if arg != "--config=":  # `--config=` alone fails below, as `--config` without a value
                normalized.append(arg.split("=", 1)[1])
        else:
            normalized.append(arg)
    if "--config" in normalized:
        _flag_value(normalized, "--config")
    return normalized


def _resume_argument(value):
    """`resume_from_checkpoint` as `Trainer.train` takes it: `True` (the newest complete checkpoint of output_dir) for
    "true" / "last", `None` (start afresh) for "false" / "none" / "", any other value (a checkpoint folder) as is;
    the words in any case, since the command line gives them as text."""
    if isinstance(value, str):
        word = value.strip().lower()
        if word in ("true", "last"):
            return True
        if word in ("false", "none", ""):
            return None
    return value


def _requested(argv: list[str], key: str, default=None):
    """A field's value from the command line (`--key value` or `--key=value`) or else the recipe, read before the full
    parse (which picks the config class, and whose checks may fail on the value before naming it)."""
    flag = f"--{key}"
    argv = _normalize_argv(argv)
    if flag in argv:
        return _flag_value(argv, flag)
    for arg in argv:
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return _recipe(argv).get(key, default)


def _recipe(argv: list[str]) -> dict:
    """The mapping of the recipe that `--config` names in `argv` (normalized), or `{}` without one (or for a recipe
    that is not a mapping, which TRL's parser then refuses)."""
    if "--config" not in argv:
        return {}
    with open(_flag_value(argv, "--config")) as f:
        recipe = yaml.safe_load(f) or {}
    return recipe if isinstance(recipe, dict) else {}


def _requested_trainer(argv: list[str]) -> str:
    return _requested(argv, "trainer", "srppo")


def make_parser(trainer: str = "srppo"):
    from trl import ModelConfig, TrlParser

    from .method.srppo_config import SRPPOConfig
    from .runtime.config import GRPORuntimeConfig

    config_class = SRPPOConfig if trainer == "srppo" else GRPORuntimeConfig
    import argparse

    return TrlParser(
        (TrainScriptArguments, config_class, ModelConfig),
        prog="trl-srppo train",
        description=__doc__ + "\nOptions (each also a recipe key; --config <recipe.yaml> reads a recipe):",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def parse_args(argv: list[str] | None = None):
    """Parse a recipe and command-line overrides into `(script_args, training_args, model_args)`."""
    argv = _normalize_argv(sys.argv[1:] if argv is None else list(argv))
    trainer = _requested_trainer(argv)
    if trainer not in TRAINERS:
        raise ValueError(f"trainer must be one of {TRAINERS}, got {trainer!r}.")
    num_generations = _requested(argv, "num_generations")
    least = 1 if trainer == "srppo" else 2  # GRPO's group baseline needs two rollouts
    if num_generations is not None and str(num_generations).lstrip("-").isdigit() and int(num_generations) < least:
        # Checked here: GRPOConfig divides by it before its own check would name it.
        raise ValueError(
            f"num_generations must be >= {least} for trainer: {trainer} (rollouts per prompt), got {num_generations}."
        )
    if trainer == "grpo":
        _check_no_srppo_settings(argv)
    # The recipes' `gradient_checkpointing` is read as transformers' newer `activation_checkpointing`, without its
    # deprecation warning, by both configs (`trl_srppo.runtime.config.RuntimeConfig`).
    return make_parser(trainer).parse_args_and_config(argv)


def _srppo_only_fields() -> set[str]:
    from .method.srppo_config import SRPPOConfig
    from .runtime.config import GRPORuntimeConfig

    return {f.name for f in dataclasses.fields(SRPPOConfig)} - {f.name for f in dataclasses.fields(GRPORuntimeConfig)}


def _check_no_srppo_settings(argv: list[str]) -> None:
    """`trainer: grpo` runs TRL's GRPOTrainer, which has no SR-PPO settings: an SR-PPO recipe switched to GRPO by
    `--trainer grpo` is an error that names the settings to drop (TRL's parser would call them unknown arguments)."""
    given = {*_recipe(argv), *(arg[2:].split("=", 1)[0] for arg in argv if arg.startswith("--"))}
    srppo_settings = sorted(given & _srppo_only_fields())
    sampling = [name for name in srppo_settings if name.startswith("prompt_")]
    if sampling:
        raise ValueError(
            f"trainer: grpo cannot sample prompts ({', '.join(sampling)}): the draw values every candidate prompt "
            "with SR-PPO's critic (qhat(s_0)) before generating, and TRL's GRPOTrainer has no critic (its baseline is "
            "the group of rollouts, known only after generating). Remove them for a GRPO run, or keep trainer: srppo."
        )
    if srppo_settings:
        raise ValueError(
            f"trainer: grpo runs TRL's GRPOTrainer, which has no SR-PPO settings, but the recipe or command line sets "
            f"{', '.join(srppo_settings)}. Remove them for a GRPO run (recipes/qwen3-1.7b/deepscaler/grpo.yaml is a "
            "GRPO recipe), or keep trainer: srppo."
        )


def build_dataset(script_args: TrainScriptArguments):
    from .tasks.data import load_task_prompts

    dataset, bad = load_task_prompts(
        script_args.dataset_name,
        script_args.task,
        script_args.dataset_config,
        script_args.dataset_train_split,
        column_map=script_args.dataset_column_map,
        system_prompt=script_args.system_prompt,
        on_bad_row=script_args.on_bad_row,
        check_answers=script_args.check_answers,
        max_rows=script_args.max_train_samples,
    )
    logger.info("Training rows: %d usable, %d skipped as malformed.", len(dataset), len(bad))
    return dataset


def build_rewards(script_args: TrainScriptArguments):
    from .rewards import get_reward_func
    from .tasks.registry import get_task

    names = script_args.reward_funcs or [get_task(script_args.task).reward]
    return [get_reward_func(name) for name in names]


def build_model(model_args, training_args) -> str:
    """The policy as TRL expects it: a Hub id or a local folder, loaded by the trainer with `model_init_kwargs`
    (filled here from the model arguments; the critic is loaded with the same options), from safetensors weights only
    (`use_safetensors=True`: a local folder with only pickle weights is refused here, with how to convert them)."""
    name = model_args.model_name_or_path
    if name is None:
        raise ValueError("model_name_or_path is required: a Hub id or a local folder with a causal LM.")
    if not os.path.isdir(name) and (name.startswith((".", "/", "~")) or name.count("/") > 1):
        raise FileNotFoundError(
            f"model_name_or_path {name!r} is a local path (a Hub id is 'org/name') and there is no folder there. "
            "Check the path; the CPU recipe's model folder is written by `python -m trl_srppo.tasks.toy outputs/toy`."
        )
    from trl import get_quantization_config

    from .runtime.safe_loading import refuse_pickle_only, safetensors_only

    kwargs = safetensors_only(training_args.model_init_kwargs)
    refuse_pickle_only(name)
    kwargs.setdefault("revision", model_args.model_revision)
    kwargs.setdefault("attn_implementation", model_args.attn_implementation)
    kwargs.setdefault("dtype", model_args.dtype)
    # `trust_remote_code` is a field of GRPOConfig in TRL >= 1.16 (of ModelConfig before): off unless the user sets it.
    trust = getattr(training_args, "trust_remote_code", None) or getattr(model_args, "trust_remote_code", False)
    kwargs.setdefault("trust_remote_code", bool(trust))
    quantization_config = get_quantization_config(model_args)
    if quantization_config is not None:
        from accelerate import PartialState

        kwargs["device_map"] = {"": PartialState().local_process_index}  # each process loads its own quantized copy
        kwargs["quantization_config"] = quantization_config
    training_args.model_init_kwargs = {k: v for k, v in kwargs.items() if v is not None}
    if os.path.isdir(name):  # a local folder by its absolute path, which a LoRA adapter records as its base model:
        name = os.path.abspath(os.path.expanduser(name))  # `eval` of the run then works from any folder
    return name


def _hub_dataset_name(script_args: TrainScriptArguments) -> str | None:
    """The dataset's Hub name for the model card, or None for a local file (which has no Hub page)."""
    from .tasks.data import LOCAL_FORMATS

    name = script_args.dataset_name
    return None if os.path.splitext(name)[1].lower() in LOCAL_FORMATS or os.path.exists(name) else name


def setup_logging(training_args) -> None:
    """INFO lines on the main process only (or at `log_level` where set); the other processes log warnings and
    errors (`log_level_replica`), and leave Python's warnings, which every process would give alike, to the main
    process."""
    if training_args.should_log:
        level = logging.INFO if training_args.log_level == "passive" else training_args.get_process_log_level()
    else:
        level = training_args.get_process_log_level()
        logging.captureWarnings(True)  # as log records of `py.warnings`, at WARNING: below what is shown here
        logging.getLogger("py.warnings").setLevel(logging.ERROR)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def _plain(value):
    """A parsed setting as YAML writes it: an enum as its value, containers element by element."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def settings_used(argv: list[str], parsed: tuple, model: str) -> str:
    """The recipe of `argv` with its command-line overrides applied, as YAML: every key the recipe or the command
    line sets, with the value the run parsed (`model`, the policy as loaded, for `model_name_or_path`), under a
    comment with the command. What `trl-srppo train` writes to `<output_dir>/recipe.yaml` and the model card quotes:
    a run given `--model_name_or_path` names that model, not the recipe's."""
    recipe = _flag_value(argv, "--config")
    overrides = [a for i, a in enumerate(argv) if a != "--config" and (i == 0 or argv[i - 1] != "--config")]
    keys = list(_recipe(argv))
    for arg in overrides:
        key = arg[2:].split("=", 1)[0] if arg.startswith("--") else None
        if key and key not in keys:
            keys.append(key)
    values = {}
    for key in keys:
        holder = next((args for args in parsed if hasattr(args, key)), None)
        if holder is not None:
            values[key] = model if key == "model_name_or_path" else _plain(getattr(holder, key))
    command = f"# trl-srppo train --config {recipe} {' '.join(overrides)}".rstrip()
    note = "# The recipe's settings with the command line's overrides applied, as the run used them.\n"
    return f"{command}\n{note}" + yaml.safe_dump(values, sort_keys=False, allow_unicode=True)


def main(argv: list[str] | None = None) -> int:
    argv = _normalize_argv(sys.argv[1:] if argv is None else list(argv))
    if argv and argv[0] in ("-h", "--help"):
        make_parser(_requested_trainer(argv[1:]) if "--trainer" in argv else "srppo").print_help()
        return 0
    script_args, training_args, model_args = parse_args(argv)
    setup_logging(training_args)

    from transformers import set_seed
    from trl import get_peft_config

    from .method.model_card import RECIPE_FILE
    from .method.srppo_trainer import SRPPOTrainer
    from .runtime.mixin import grpo_trainer_class
    from .runtime.preemption import TrainingPreempted
    from .runtime.safe_loading import safetensors_required
    from .runtime.teardown import end_distributed
    from .runtime.vllm_cpu import shutdown_engine

    set_seed(training_args.seed)
    dataset = build_dataset(script_args)
    model = build_model(model_args, training_args)
    reward_funcs = build_rewards(script_args)

    if training_args.process_index == 0 and "--config" in argv:
        os.makedirs(training_args.output_dir, exist_ok=True)
        with open(os.path.join(training_args.output_dir, RECIPE_FILE), "w", encoding="utf-8") as f:
            f.write(settings_used(argv, (script_args, training_args, model_args), model))

    # Both trainers mark checkpoints complete, resume with `true` from the newest complete one, and resume exactly.
    trainer_class = SRPPOTrainer if script_args.trainer == "srppo" else grpo_trainer_class()
    # The trainer loads the policy with `use_safetensors=True`; a Hub model without safetensors weights (a local folder
    # was checked by `build_model`) then fails with transformers' advice to drop that option: name the rule instead.
    with safetensors_required(model):
        trainer = trainer_class(
            model=model,
            reward_funcs=reward_funcs,
            args=training_args,
            train_dataset=dataset,
            peft_config=get_peft_config(model_args),
        )
    try:
        trainer.train(resume_from_checkpoint=_resume_argument(training_args.resume_from_checkpoint))
    except TrainingPreempted:  # stopped by SIGTERM/SIGUSR1 with a checkpoint: exits with 128 + the signal's number
        end_distributed(trainer.accelerator)
        raise

    trainer.save_model(training_args.output_dir)
    dataset_name = _hub_dataset_name(script_args)
    trainer.create_model_card(dataset_name=dataset_name, tags=[f"task:{script_args.task}"])
    if training_args.push_to_hub:
        trainer.push_to_hub(dataset_name=dataset_name, tags=[f"task:{script_args.task}"])
    shutdown_engine(trainer)  # a colocated vLLM first: its teardown destroys process groups of its own
    end_distributed(trainer.accelerator)  # trackers, process groups, and no abort at exit on gloo
    return 0


if __name__ == "__main__":
    from .runtime.teardown import exit_process

    exit_process(main())  # launched: no abort at exit while gloo's threads outlive their destroyed groups

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The settings shared by the analyses of `trl-srppo analyze`: [`AnalysisConfig`] (the models and the output folder)
and [`RolloutAnalysisConfig`] (plus the prompts, the reward and the sampling of `num_generations` rollouts per
prompt). Each analysis module adds its own fields in a subclass. The names are the training ones where the idea is
the same (`model_name_or_path`, `critic_model_name_or_path`, `dataset_name`, `reward_funcs`, `num_generations`,
`max_completion_length`, `pass_at_k`, ...); the options are parsed like `trl-srppo train` and `trl-srppo eval`."""

from dataclasses import dataclass, field

from ..evaluation.config import json_mapping

__all__ = ["AnalysisConfig", "MissingSetting", "RolloutAnalysisConfig"]

DTYPES = ("auto", "float32", "bfloat16", "float16")


class MissingSetting(ValueError):
    """A setting that an analysis needs is not set; the message names the field."""


@dataclass
class AnalysisConfig:
    r"""
    Settings shared by every analysis.

    Args:
        model_name_or_path (`str`):
            The policy: Hub id, local model folder, training output folder or LoRA adapter folder (loaded like
            `trl-srppo eval` loads it, see [`~evaluation.models.resolve_model`]); its tokenizer is used.
        output_dir (`str`):
            Folder of `run_config.json`, `summary.json`, `results.md` and the analysis' PNG figure.
        critic_model_name_or_path (`str`, *optional*):
            The critic checkpoint, as training takes it: a critic's folder or Hub id, a run's `output_dir` or
            `checkpoint-N` (whose `critic/` is read) or `org/name/critic` on the Hub; loaded with
            [`~critic.load_critic`]. Required by the analyses that use critic values.
        critic_head (`str`, *optional*):
            The critic's head: `"sigmoid"` or `"linear"`. Defaults to the head its run was trained with (recorded in
            its `critic/` folder), else `"sigmoid"`.
        model_revision (`str`, *optional*):
            Hub revision (branch, tag, commit) of the policy.
        trust_remote_code (`bool`, *optional*, defaults to `False`):
            Allow custom model code from the Hub.
        device (`str`, *optional*, defaults to `"auto"`):
            `"auto"` (CUDA when available), `"cpu"`, `"cuda"`, ...
        dtype (`str`, *optional*, defaults to `"float32"`):
            Weight dtype: `auto`, `float32`, `bfloat16` or `float16`.
        batch_size (`int`, *optional*, defaults to `8`):
            Rows per forward pass (and prompts per `generate` call).
    """

    model_name_or_path: str | None = field(
        default=None,
        metadata={"help": "Policy: Hub id, model folder, training output folder or LoRA adapter folder."},
    )
    output_dir: str | None = field(
        default=None, metadata={"help": "Folder of run_config.json, summary.json, results.md and the figure."}
    )
    critic_model_name_or_path: str | None = field(
        default=None,
        metadata={"help": "Critic checkpoint: its folder or Hub id, a run folder or checkpoint, or org/name/critic."},
    )
    critic_head: str | None = field(
        default=None,
        metadata={"help": "The critic's head: sigmoid or linear. Defaults to the head its run was trained with."},
    )
    model_revision: str | None = field(default=None, metadata={"help": "Hub revision (branch, tag, commit)."})
    trust_remote_code: bool = field(default=False, metadata={"help": "Allow custom model code from the Hub."})
    device: str = field(default="auto", metadata={"help": "'auto' (cuda when available), 'cpu', 'cuda', ..."})
    dtype: str = field(default="float32", metadata={"help": "Weight dtype: auto, float32, bfloat16 or float16."})
    batch_size: int = field(default=8, metadata={"help": "Rows per forward pass (and prompts per generate call)."})

    def __post_init__(self):
        missing = [name for name in ("model_name_or_path", "output_dir") if not getattr(self, name)]
        if missing:
            raise ValueError(f"{', '.join(missing)} required: set them in the --config file or as --key value flags.")
        if self.critic_head is not None:
            from ..method.core import CRITIC_HEADS  # the trainer's registry of heads, and its one message

            CRITIC_HEADS.check(self.critic_head)
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, got {self.dtype!r}.")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {self.batch_size}.")

    @property
    def critic_head_or_default(self) -> str:
        """`critic_head`, or `"sigmoid"` (SR-PPO's) when it is unset and no saved critic recorded one."""
        return self.critic_head or "sigmoid"

    def require_critic(self, analysis: str) -> str:
        """The critic's path; a `ValueError` naming the field when it is not set."""
        if not self.critic_model_name_or_path:
            raise MissingSetting(f"{analysis} needs the critic's values: set critic_model_name_or_path.")
        return self.critic_model_name_or_path


@dataclass
class RolloutAnalysisConfig(AnalysisConfig):
    r"""
    Settings of the analyses that sample `num_generations` rollouts per prompt and score them (on top of
    [`AnalysisConfig`]).

    Args:
        dataset_name (`str`):
            Hub dataset name or local json/jsonl/parquet file (read by [`~data.load_source`]) with a prompt column.
        reward_funcs (`list[str]`):
            One registered reward name (`math`, `countdown`, ...) or dotted path (`pkg.module.func`); a rollout is
            correct when its reward reaches [`~tasks.CORRECT_THRESHOLD`].
        dataset_config (`str`, *optional*):
            Hub dataset configuration.
        dataset_train_split (`str`, *optional*, defaults to `"train"`):
            Split of a Hub dataset.
        task (`str`, *optional*):
            A registered task (`math`, `countdown`, `knights_knaves`, `multiple_choice`, `chain`): the dataset is
            read as `trl-srppo train --task` reads it (its fields, prompt template and reward columns; malformed rows
            left out), so the file a policy was trained on can be analysed as it is, and the task's verifier is the
            default of `reward_funcs`. Without it, `prompt_column` holds the prompts as they are.
        dataset_column_map (`dict`, *optional*):
            With `task`: task field -> dataset column, as in training (JSON on the command line, e.g.
            `'{"problem": "question"}'`).
        prompt_column (`str`, *optional*, defaults to `"prompt"`):
            Without `task`: column of the prompts (strings or chat messages); the other columns go to the reward
            function.
        max_prompts (`int`, *optional*):
            Use only the first `max_prompts` prompts (default: all).
        num_generations (`int`, *optional*, defaults to `8`):
            Rollouts per prompt (the paper's bins use 8).
        temperature (`float`, *optional*, defaults to `1.0`):
            Sampling temperature (`0`: greedy).
        max_completion_length (`int`, *optional*, defaults to `256`):
            Completion length limit in tokens.
        seed (`int`, *optional*, defaults to `0`):
            Seed of the sampling (and of a random sketch).
        pass_at_k (`int`, *optional*, defaults to `2`):
            k of the Pass@k weight ("without the weight" uses k = 1); the trainer's default k.
        gae_lambda (`float`, *optional*, defaults to `1.0`):
            GAE lambda of the advantages (1: SR-PPO's Monte Carlo advantage).
        system_prompt (`str`, *optional*):
            System message put before every prompt (as in training and evaluation).
        use_chat_template (`bool`, *optional*, defaults to `True`):
            Render prompts with the tokenizer's chat template (plain text when it has none).
        chat_template_kwargs (`dict`, *optional*):
            Extra variables of the chat template, e.g. `{"enable_thinking": false}` (JSON on the command line).
    """

    dataset_name: str | None = field(
        default=None, metadata={"help": "Hub dataset name or local json/jsonl/parquet file with a prompt column."}
    )
    reward_funcs: list[str] | None = field(
        default=None, metadata={"help": "One registered reward name (math, countdown, ...) or dotted path."}
    )
    dataset_config: str | None = field(default=None, metadata={"help": "Hub dataset configuration."})
    dataset_train_split: str = field(default="train", metadata={"help": "Split of a Hub dataset."})
    task: str | None = field(
        default=None,
        metadata={
            "help": "Read the dataset as `trl-srppo train --task` does (math, countdown, ...); else prompt_column."
        },
    )
    dataset_column_map: dict | str | None = field(
        default=None, metadata={"help": "With task: task field -> dataset column, as JSON, as in training."}
    )
    prompt_column: str = field(default="prompt", metadata={"help": "Without task: column of the prompts."})
    max_prompts: int | None = field(default=None, metadata={"help": "Use only the first N prompts (default: all)."})
    num_generations: int = field(default=8, metadata={"help": "Rollouts per prompt (bins: 8 in the paper)."})
    temperature: float = field(default=1.0, metadata={"help": "Sampling temperature (0: greedy)."})
    max_completion_length: int = field(default=256, metadata={"help": "Completion length limit in tokens."})
    seed: int = field(default=0, metadata={"help": "Seed of the sampling."})
    pass_at_k: int = field(default=2, metadata={"help": "k of the Pass@k weight ('without' uses k = 1)."})
    gae_lambda: float = field(default=1.0, metadata={"help": "GAE lambda of the advantages."})
    system_prompt: str | None = field(default=None, metadata={"help": "System message put before every prompt."})
    use_chat_template: bool = field(
        default=True, metadata={"help": "Render prompts with the chat template (--no_use_chat_template: plain)."}
    )
    chat_template_kwargs: dict | str | None = field(
        default=None, metadata={"help": "Chat template variables as JSON, e.g. '{\"enable_thinking\": false}'."}
    )

    def __post_init__(self):
        super().__post_init__()
        self.chat_template_kwargs = json_mapping(
            self.chat_template_kwargs, "chat_template_kwargs", '{"enable_thinking": false}'
        )
        from ..tasks.data import parse_column_map

        self.dataset_column_map = parse_column_map(self.dataset_column_map)
        if self.task is not None:
            from ..tasks.registry import get_task

            task = get_task(self.task)  # an unknown task is an error that lists the registered ones
            if self.reward_funcs is None:
                self.reward_funcs = [task.reward]
        elif self.dataset_column_map:
            raise ValueError(
                "dataset_column_map maps a task's fields to dataset columns: set task too (e.g. --task math), or "
                "name the prompts' column with prompt_column."
            )
        if self.reward_funcs is not None and len(self.reward_funcs) != 1:
            raise ValueError(
                f"reward_funcs takes one reward function here (correct: reward >= threshold), got {self.reward_funcs}."
            )
        if self.num_generations < 1:
            raise ValueError(f"num_generations must be at least 1, got {self.num_generations}.")
        if self.pass_at_k < 1:
            raise ValueError(f"pass_at_k must be at least 1, got {self.pass_at_k}.")
        if self.max_completion_length < 1:
            raise ValueError(f"max_completion_length must be at least 1, got {self.max_completion_length}.")

    def require_rollout_settings(self, analysis: str) -> None:
        """A `ValueError` naming the fields that sampling and scoring rollouts need and that are not set."""
        missing = [name for name in ("dataset_name", "reward_funcs") if not getattr(self, name)]
        if missing:
            raise MissingSetting(f"{analysis} samples rollouts: set {', '.join(missing)}.")

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Rollouts for the analyses: prompts, `n` sampled completions per prompt, their rewards, critic values and the
SR-PPO advantages the trainer would give them.

Rows are grouped by prompt: row `p * n + r` is rollout `r` of prompt `p`. Prompts are left-padded and completions
right-padded, the layout of TRL's GRPO batches, so [`trl_srppo.method.critics.model.prefix_values`] and
[`trl_srppo.method.core.srppo_advantages`] apply unchanged.
"""

import logging
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from ..method.core import AdvantageEstimate, critic_values, srppo_advantages
from ..method.critics.model import prefix_values
from ..tasks.registry import CORRECT_THRESHOLD
from .config import AnalysisConfig, RolloutAnalysisConfig
from .difficulty import prompt_bins

if TYPE_CHECKING:
    from ..evaluation.engines import Completion

logger = logging.getLogger(__name__)


@dataclass
class Rollouts:
    """`n` rollouts of each of `num_prompts` prompts, prompt-major (row `p * n + r`)."""

    prompts: list  # (num_prompts,) prompt as given (string or chat messages)
    prompt_ids: torch.Tensor  # (B, P) left-padded
    prompt_mask: torch.Tensor  # (B, P)
    completion_ids: torch.Tensor  # (B, C) right-padded, up to and including the first EOS
    completion_mask: torch.Tensor  # (B, C)
    completions: list[str]  # (B,) decoded completions
    prompt_index: torch.Tensor  # (B,) prompt of each row
    num_rollouts: int  # n
    rewards: torch.Tensor | None = None  # (B,) NaN = unscorable
    values: torch.Tensor | None = None  # (B, C) critic values V(s_0) .. V(s_{C-1})
    columns: dict = field(default_factory=dict)  # other dataset columns, one value per prompt

    @property
    def num_prompts(self) -> int:
        return len(self.prompts)

    @property
    def input_ids(self) -> torch.Tensor:  # (B, P + C)
        return torch.cat([self.prompt_ids, self.completion_ids], dim=1)

    @property
    def attention_mask(self) -> torch.Tensor:  # (B, P + C)
        return torch.cat([self.prompt_mask, self.completion_mask], dim=1)

    @property
    def correct(
        self,
    ) -> torch.Tensor:  # (B,) bool, `trl_srppo.tasks.registry.is_correct`; unscorable (NaN) is not correct
        return torch.nan_to_num(self.rewards, nan=-math.inf) >= CORRECT_THRESHOLD

    @property
    def scorable(self) -> torch.Tensor:  # (B,) bool, finite reward (NaN = unscorable), as in `srppo_advantages`
        return torch.isfinite(self.rewards)

    def prompt_bins(self) -> list[str | None]:
        """Difficulty bin of each prompt from its scorable rollouts, `None` when it has none (see
        [`trl_srppo.analysis.difficulty.prompt_bins`])."""
        return prompt_bins(self.correct, self.prompt_index, self.num_prompts, self.scorable)

    def rollout_bins(self) -> list[str | None]:
        bins = self.prompt_bins()
        return [bins[p] for p in self.prompt_index.tolist()]


def load_prompts(
    dataset: str,
    split: str = "train",
    num_prompts: int | None = None,
    prompt_column: str = "prompt",
    dataset_config: str | None = None,
):
    """Rows of a local json/jsonl/parquet file or a Hub dataset (read by `trl_srppo.tasks.data.load_source`), as a
    `datasets.Dataset` with a `prompt_column`."""
    from ..tasks.data import load_source

    data = load_source(dataset, dataset_config, split=split)
    if prompt_column not in data.column_names:
        raise ValueError(f"dataset {dataset!r} has no {prompt_column!r} column (columns: {data.column_names}).")
    if num_prompts is not None:
        data = data.select(range(min(num_prompts, len(data))))
    return data


def task_prompts(config: RolloutAnalysisConfig):
    """The prompts of `config.dataset_name` built as `trl-srppo train --task` builds them
    ([`~data.build_prompts`]: the task's prompt template, as chat messages, and its reward columns; malformed rows
    left out and logged), the first `config.max_prompts` usable ones. The system prompt is added at rendering, as for
    the other prompts."""
    from ..tasks.data import load_task_prompts

    return load_task_prompts(
        config.dataset_name,
        config.task,
        config.dataset_config,
        config.dataset_train_split,
        column_map=config.dataset_column_map,
        max_rows=config.max_prompts,
    )[0]


def resolve_reward_func(name: str) -> Callable:
    """A reward function by registered name (`math`, `countdown`, ...) or dotted path (`pkg.module.func`)."""
    from ..rewards import get_reward_func

    return get_reward_func(name)


def load_policy(config: AnalysisConfig):
    """The policy and its tokenizer named by `config.model_name_or_path` (a Hub id, model folder, training output
    folder or LoRA adapter folder), loaded as `trl-srppo eval` loads it (a LoRA adapter merged), on `config.device` in
    `config.dtype`, every weight differentiable."""
    from ..evaluation.models import load_model, load_tokenizer, resolve_model

    source = resolve_model(config.model_name_or_path, config.model_revision)
    tokenizer = load_tokenizer(source, config.trust_remote_code)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = load_model(source, config.dtype, config.device, config.trust_remote_code)
    # The gradient analyses differentiate with respect to every weight, as full fine-tuning moves them; PEFT leaves
    # the base weights of a merged LoRA policy frozen, which would leave them nothing to differentiate.
    model.requires_grad_(True)
    return model, tokenizer


def load_analysis_critic(config: AnalysisConfig, analysis: str, policy: torch.nn.Module | None = None):
    """The critic of `config.critic_model_name_or_path` (required: a `ValueError` names the field), in eval mode on
    the policy's device: a critic model, a `critic_type="policy_head"` run's value head on `policy` (the policy of
    `config.model_name_or_path`, loaded here when not given), or a `critic_type="policy_lora"` run's critic adapter
    and head on a copy of that LoRA policy loaded with its adapter unmerged."""
    from ..method.critics.build import CRITIC_TYPES, holds_saved_critic, load_saved_critic, saved_critic_mode
    from ..method.critics.checkpoint import read_critic_settings
    from ..method.critics.model import resolve_critic_source

    # A run's folder or checkpoint: its `critic/`; `org/name/critic` at the policy's revision, as training reads it.
    path = resolve_critic_source(config.require_critic(analysis), config.model_revision)
    if not holds_saved_critic(path, config.model_revision, config.trust_remote_code):
        raise ValueError(
            f"{config.critic_model_name_or_path!r} holds no critic saved by SRPPOTrainer (a GRPO run, or a model): "
            "its values would be those of a fresh value head, the same for every prefix. Point "
            "critic_model_name_or_path at an SR-PPO run's folder, checkpoint or `critic/` folder."
        )
    if config.critic_head is None:  # the head the critic was trained with, as its run recorded it
        config.critic_head = read_critic_settings(path).get("critic_head", config.critic_head_or_default)
    if CRITIC_TYPES[saved_critic_mode(path)].reads_policy:  # a value head on its run's policy, or an adapter
        _check_critic_policy(path, config.model_name_or_path)
    critic = load_saved_critic(
        path,
        policy=lambda: policy if policy is not None else load_policy(config)[0],
        lora_policy=lambda: _unmerged_lora_policy(config, path),
        model_init_kwargs={} if config.dtype == "auto" else {"dtype": getattr(torch, config.dtype)},
    )
    device = config.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return critic.to(device).eval()


def _unmerged_lora_policy(config: AnalysisConfig, critic_folder: str):
    """The LoRA policy of `config.model_name_or_path` as a `PeftModel` (its adapter not merged), for a
    `critic_type="policy_lora"` critic to sit on; a clear error when it has no adapter."""
    from ..evaluation.models import load_model, resolve_model

    source = resolve_model(config.model_name_or_path, config.model_revision)
    if source.adapter_path is None:
        raise ValueError(
            f"The critic in {critic_folder!r} was saved with critic_type='policy_lora': a LoRA adapter on its run's "
            f"LoRA policy. model_name_or_path ({config.model_name_or_path!r}) has no LoRA adapter; point it at that "
            "run's folder or checkpoint."
        )
    return load_model(source, config.dtype, config.device, config.trust_remote_code, merge_adapter=False)


def _check_critic_policy(critic_folder: str, model_name_or_path: str) -> None:
    """A warning when a critic that reads its run's policy (a policy value head, or a critic adapter on the LoRA
    policy's base) is read on another policy than the one saved beside it (its folder's parent: the run's `output_dir`
    or `checkpoint-N`): its values would be those of features it was not trained on."""
    run = os.path.dirname(os.path.realpath(critic_folder))
    saved_policy = any(os.path.isfile(os.path.join(run, name)) for name in ("config.json", "adapter_config.json"))
    if not saved_policy or not os.path.isdir(model_name_or_path):
        return  # a critic on its own, or a policy from the Hub: nothing to compare
    if os.path.realpath(model_name_or_path) != run:
        logger.warning(
            "The critic %s was trained on the policy saved beside it, %s, but the analysed policy is %s: its "
            "values read another policy's hidden states. Set model_name_or_path to %s to analyse that run.",
            critic_folder,
            run,
            model_name_or_path,
            run,
        )


def sample_rollouts(config: RolloutAnalysisConfig, analysis: str, model, tokenizer, critic=None) -> "Rollouts":
    """Sample `config.num_generations` rollouts per prompt of `config.dataset_name`, score them with
    `config.reward_funcs` and, with a critic, compute its values: the rollouts every rollout analysis starts from."""
    config.require_rollout_settings(analysis)
    if config.task is not None:  # as `trl-srppo train --task` builds its prompts
        data, prompt_column = task_prompts(config), "prompt"
    else:
        data, prompt_column = (
            load_prompts(
                config.dataset_name,
                config.dataset_train_split,
                config.max_prompts,
                config.prompt_column,
                config.dataset_config,
            ),
            config.prompt_column,
        )
    columns = {c: data[c] for c in data.column_names if c != prompt_column}
    rollouts = generate_rollouts(
        model,
        tokenizer,
        data[prompt_column],
        num_rollouts=config.num_generations,
        temperature=config.temperature,
        max_new_tokens=config.max_completion_length,
        seed=config.seed,
        batch_size=config.batch_size,
        columns=columns,
        system_prompt=config.system_prompt,
        use_chat_template=config.use_chat_template,
        chat_template_kwargs=config.chat_template_kwargs,
    )
    score_rollouts(rollouts, resolve_reward_func(config.reward_funcs[0]))
    if critic is not None:
        critic_rollout_values(critic, rollouts, config.critic_head_or_default, config.batch_size)
    return rollouts


def generate_rollouts(
    model,
    tokenizer,
    prompts: list,
    num_rollouts: int = 8,
    temperature: float = 1.0,
    max_new_tokens: int = 256,
    seed: int = 0,
    batch_size: int = 8,
    columns: dict | None = None,
    system_prompt: str | None = None,
    use_chat_template: bool = True,
    chat_template_kwargs: dict | None = None,
) -> Rollouts:
    """Sample `num_rollouts` completions per prompt with the evaluation's transformers engine
    ([`~evaluation.engines.TransformersEngine`]), prompts rendered and tokenized as evaluation renders them
    ([`~evaluation.prompts.render_prompt`]).

    Args:
        model (`PreTrainedModel`):
            The policy.
        tokenizer (`PreTrainedTokenizerBase`):
            Its tokenizer.
        prompts (`list`):
            Prompt strings or conversations (`[{"role": ..., "content": ...}]`).
        num_rollouts (`int`, *optional*, defaults to `8`):
            `n`, completions per prompt.
        temperature (`float`, *optional*, defaults to `1.0`):
            Sampling temperature (`0` = greedy).
        max_new_tokens (`int`, *optional*, defaults to `256`):
            Completion length limit.
        seed (`int`, *optional*, defaults to `0`):
            Seed of the sampling.
        batch_size (`int`, *optional*, defaults to `8`):
            Prompts per `generate` call.
        columns (`dict`, *optional*):
            Other dataset columns (one value per prompt), kept for the reward function.
        system_prompt (`str`, *optional*):
            System message put before every prompt.
        use_chat_template (`bool`, *optional*, defaults to `True`):
            Render with the tokenizer's chat template (plain text when it has none).
        chat_template_kwargs (`dict`, *optional*):
            Extra variables of the chat template.

    Returns:
        [`Rollouts`]: the rollouts, prompt-major, without rewards or critic values.
    """
    from ..evaluation.engines import TransformersEngine
    from ..evaluation.prompts import render_prompt, tokenize_prompts, uses_chat_template
    from ..evaluation.sampling import SamplingConfig

    templated = uses_chat_template(tokenizer, use_chat_template)
    texts = [render_prompt(tokenizer, p, system_prompt, use_chat_template, chat_template_kwargs) for p in prompts]
    prompt_lists = tokenize_prompts(tokenizer, texts, templated)
    engine = TransformersEngine(model, tokenizer, batch_size=batch_size * num_rollouts)
    sampling = SamplingConfig(temperature=temperature, top_p=1.0, top_k=0, max_new_tokens=max_new_tokens, seed=seed)
    generated = engine.generate(prompt_lists, num_rollouts, sampling, seed=seed)  # num_prompts x n completions

    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    return Rollouts(
        prompts=list(prompts),
        **pad_rollouts(prompt_lists, generated, num_rollouts, pad_id),
        prompt_index=torch.arange(len(prompts)).repeat_interleave(num_rollouts),
        num_rollouts=num_rollouts,
        columns=dict(columns or {}),
    )


def pad_rollouts(
    prompt_ids: list[list[int]], generated: list[list["Completion"]], num_rollouts: int, pad_id: int
) -> dict[str, Any]:
    """Lay out sampled rollouts as a batch, prompt-major (row `p * num_rollouts + r` is rollout `r` of prompt `p`).

    Args:
        prompt_ids (`list[list[int]]`):
            Token ids of each prompt.
        generated (`list[list[Completion]]`):
            The `num_rollouts` completions of each prompt, with their `token_ids` (up to and including the first
            EOS).
        num_rollouts (`int`):
            `n`, completions per prompt.
        pad_id (`int`):
            Token id of the padding.

    Returns:
        `dict[str, Any]`: with `B = len(prompt_ids) * num_rollouts`, `P` the longest prompt and `C` the longest
        completion (at least 1): `prompt_ids` `(B, P)` left-padded with `pad_id`, `prompt_mask` `(B, P)`,
        `completion_ids` `(B, C)` right-padded, `completion_mask` `(B, C)` (all long), and `completions`, the `B`
        decoded texts.
    """
    batch = len(prompt_ids) * num_rollouts
    prompt_len = max(len(ids) for ids in prompt_ids)
    comp_len = max(1, max(c.num_tokens for completions in generated for c in completions))
    out = {
        "prompt_ids": torch.full((batch, prompt_len), pad_id, dtype=torch.long),
        "prompt_mask": torch.zeros(batch, prompt_len, dtype=torch.long),
        "completion_ids": torch.full((batch, comp_len), pad_id, dtype=torch.long),
        "completion_mask": torch.zeros(batch, comp_len, dtype=torch.long),
        "completions": [],
    }
    for p, (ids, samples) in enumerate(zip(prompt_ids, generated)):
        for r, sample in enumerate(samples):
            i = p * num_rollouts + r
            out["prompt_ids"][i, prompt_len - len(ids) :] = torch.tensor(ids, dtype=torch.long)  # left padding
            out["prompt_mask"][i, prompt_len - len(ids) :] = 1
            out["completion_ids"][i, : len(sample.token_ids)] = torch.tensor(sample.token_ids, dtype=torch.long)
            out["completion_mask"][i, : len(sample.token_ids)] = 1  # right padding, up to and including the first EOS
            out["completions"].append(sample.text)
    return out


def score_rollouts(rollouts: Rollouts, reward_func: Callable) -> torch.Tensor:
    """Rewards `(B,)` from a TRL-style reward function; `None` becomes NaN (unscorable). Stored on `rollouts`."""
    index = rollouts.prompt_index.tolist()
    kwargs = {name: [values[p] for p in index] for name, values in rollouts.columns.items()}
    completion_ids = [
        ids[mask.bool()].tolist() for ids, mask in zip(rollouts.completion_ids, rollouts.completion_mask)
    ]
    rewards = reward_func(
        prompts=[rollouts.prompts[p] for p in index],
        completions=rollouts.completions,
        completion_ids=completion_ids,
        **kwargs,
    )
    rollouts.rewards = torch.tensor([float("nan") if r is None else float(r) for r in rewards], dtype=torch.float32)
    return rollouts.rewards


@torch.no_grad()
def critic_rollout_values(critic, rollouts: Rollouts, head: str = "sigmoid", batch_size: int = 8) -> torch.Tensor:
    """The critic's values `V(s_0) .. V(s_{C-1})` `(B, C)` of every rollout, as the trainer computes them before an
    update. Stored on `rollouts`."""
    was_training = critic.training
    critic.eval()
    device = next(critic.parameters()).device
    input_ids, attention_mask = rollouts.input_ids, rollouts.attention_mask
    width = rollouts.completion_ids.shape[1]
    chunks = []
    for start in range(0, input_ids.shape[0], batch_size):
        raw = prefix_values(
            critic,
            input_ids[start : start + batch_size].to(device),
            attention_mask[start : start + batch_size].to(device),
            width,
        )  # (b, C)
        chunks.append(critic_values(raw, head).cpu())
    critic.train(was_training)
    rollouts.values = torch.cat(chunks, dim=0)
    return rollouts.values


def rollout_advantages(rollouts: Rollouts, pass_at_k: int, gae_lambda: float = 1.0) -> AdvantageEstimate:
    """[`trl_srppo.method.core.srppo_advantages`] on the rollouts (needs rewards and critic values)."""
    if rollouts.rewards is None or rollouts.values is None:
        raise ValueError("rollout_advantages: score the rollouts and compute critic values first.")
    return srppo_advantages(rollouts.values, rollouts.rewards, rollouts.completion_mask, pass_at_k, 1.0, gae_lambda)

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""What a training run shows its user, for TRL's `GRPOTrainer` and `SRPPOTrainer` alike ([`RunOutputMixin`]):

* the share of completions in which each reward function finds no answer it can read (`rewards/<name>/unreadable`,
  read through each function's `extract_answer`: `trl_srppo.rewards.unreadable`), with a warning once per run when
  most of a batch is unreadable;
* progress during generation with transformers: a bar of decoding steps with the rate, which moves during the
  generate call (the Trainer's own bar only moves between optimizer steps, minutes apart on a CPU);
* completion logs (`log_completions`) printed and saved once per generated batch, never as an empty file;
* no "missing keys" warning on resume for a weight tied to another one (a tied `lm_head`);
* a model card that names the model trained and where the result is, for a local model folder too (TRL's card names
  only Hub models, and writes "None" for the others).
"""

import contextlib
import functools
import os
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch
from tqdm.auto import tqdm

from ..rewards import unreadable
from .memory import memory_metrics
from .policy_drift import build_start_policy, kl_from_start_metrics, start_policy_logps

# ---- answers a reward function cannot read --------------------------------------------------------------------------

#: Above this share of a batch without a readable answer for a reward function, the trainer warns (once per run).
UNREADABLE_WARN_SHARE = 0.5

_NOT_COLUMNS = ("prompt", "completion", "completion_ids")  # as GRPOTrainer leaves them out of the reward kwargs


def unreadable_shares(
    reward_funcs: Sequence[Any],
    inputs: Sequence[dict[str, Any]],
    completions: Sequence[Any],
    gather: Callable[[torch.Tensor], torch.Tensor],
    device: torch.device | str = "cpu",
) -> dict[int, float]:
    """
    The share of a batch's completions, over all processes, in which each reward function reads no answer.

    Every process must call this with the same reward functions (`gather` is a collective).

    Args:
        reward_funcs (sequence):
            The trainer's reward functions (reward models included: they have no reader and are left out).
        inputs (sequence of `dict`):
            This process's examples, one per completion (their dataset columns reach the readers).
        completions (sequence):
            This process's completions (strings or message lists).
        gather (`Callable`):
            Concatenates a tensor over the processes (`accelerator.gather`).
        device (`torch.device` or `str`, *optional*, defaults to `"cpu"`):
            Where the tensor given to `gather` lives.

    Returns:
        `dict[int, float]`: index of each reward function with a reader -> its share of unreadable completions.
    """
    columns = {key: [example[key] for example in inputs] for key in inputs[0] if key not in _NOT_COLUMNS}
    flags = {i: unreadable(func, completions, **columns) for i, func in enumerate(reward_funcs)}
    flags = {i: rows for i, rows in flags.items() if rows is not None}
    if not flags:
        return {}
    local = torch.tensor(list(flags.values()), dtype=torch.float32, device=device).T  # (B, readers)
    shares = gather(local.reshape(len(completions), len(flags))).mean(dim=0)  # (readers,)
    return {i: float(share) for i, share in zip(flags, shares)}


def warn_unreadable(
    shares: dict[int, float], reward_funcs: Sequence[Any], names: Sequence[str], warned: set[int], step: int
) -> None:
    """
    Warn, once per reward function (`warned` holds those already named), when more than [`UNREADABLE_WARN_SHARE`] of
    a batch's completions hold no answer it can read.
    """
    for index, share in shares.items():
        if share <= UNREADABLE_WARN_SHARE or index in warned:
            continue
        warned.add(index)
        name = names[index]
        expected = getattr(reward_funcs[index], "answer_format", None) or "the format its extract_answer reads"
        warnings.warn(
            f"Reward function '{name}' found no answer it can read in {share:.0%} of the completions of the batch "
            f"scored at global step {step}: it reads {expected}. These completions get reward 0 whether or not the "
            "model solved the problem, so this is a format problem, not (only) wrong answers. Say in the prompt or "
            "system prompt where the answer goes (e.g. 'Put the final answer in \\boxed{}.'), check that an instruct "
            "model is prompted with its chat template, or use a reward function that reads the model's format. The "
            f"share is logged as rewards/{name}/unreadable (this warning is shown once per run).",
            UserWarning,
            stacklevel=2,
        )


# ---- progress, completion logs, model card --------------------------------------------------------------------------


class GenerationProgress:
    """A progress bar of the decoding steps of one `generate` call: each forward of the policy's input embeddings is
    one step (the first reads the prompts, every one produces one token of each row).

    Args:
        rows (`int`):
            Sequences generated together.
        max_new_tokens (`int`):
            Most tokens each row may get (the bar's total).
        disable (`bool`):
            Show nothing (other processes than the main one, or `disable_tqdm`).
    """

    def __init__(self, rows: int, max_new_tokens: int, disable: bool = False):
        self.rows = rows
        self.steps = 0
        self.start = time.perf_counter()
        self.bar = tqdm(
            total=max_new_tokens, desc=f"Generating {rows} completion(s)", unit="step", leave=False, disable=disable
        )

    def step(self, *_) -> None:
        """Called by the forward hook at every decoding step."""
        self.steps += 1
        self.bar.update(1)
        self.bar.set_postfix_str(self.rate_text(), refresh=False)

    def rate_text(self) -> str:
        """Tokens per second over all rows: rows that have already ended count as still generating, so this is the
        pace of the decoding steps, an upper bound of the tokens kept."""
        elapsed = max(time.perf_counter() - self.start, 1e-9)
        return f"{self.rows * self.steps / elapsed:.1f} tok/s"

    def close(self) -> None:
        self.bar.close()


@contextlib.contextmanager
def generation_progress(model: torch.nn.Module, rows: int, max_new_tokens: int, disable: bool = False):
    """[`GenerationProgress`] over the forwards of `model`'s input embeddings while the block runs."""
    progress = GenerationProgress(rows, max_new_tokens, disable=disable)
    handle = model.get_input_embeddings().register_forward_hook(progress.step)
    try:
        yield progress
    finally:
        handle.remove()
        progress.close()


def tied_missing_keys(model: torch.nn.Module, missing_keys: list[str]) -> list[str]:
    """The keys of `missing_keys` that name a parameter sharing its storage with a parameter the checkpoint had (a
    tied weight, restored with the one it is tied to)."""
    missing = set(missing_keys)
    loaded_storage = set()
    named = list(model.named_parameters(remove_duplicate=False))
    for name, param in named:
        if name not in missing:
            loaded_storage.add(param.data_ptr())
    return [name for name, param in named if name in missing and param.data_ptr() in loaded_storage]


def name_local_models(card: str, base_model: str | None, trained_model: str) -> str:
    """TRL's model card `card` with the names it leaves as "None" filled in: `base_model` (the policy's folder or Hub
    id; a folder has no Hub link) and `trained_model` (the Hub repository pushed to, or the output folder) in the
    quick-start example."""
    if base_model is not None:
        if os.path.isdir(base_model):
            named = f"the model in the local folder `{os.path.abspath(base_model)}`"
        else:
            named = f"[{base_model}](https://huggingface.co/{base_model})"
        card = card.replace("[None](https://huggingface.co/None)", named)
    return card.replace('model="None"', f'model="{trained_model}"')


class RunOutputMixin:
    """Progress during generation, completion logs once per generated batch and no warning for a tied weight on
    resume, for a TRL `GRPOTrainer` (put the mixin before it).

    Overrides `GRPOTrainer._generate_single_turn`, `GRPOTrainer._calculate_rewards`,
    `GRPOTrainer._generate_and_score_completions`, `GRPOTrainer.log`, `BaseTrainer.create_model_card` and
    `Trainer._issue_warnings_after_load`.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._unreadable_warned = set()  # reward functions already named by the unreadable-answers warning
        self._generated_batches = 0  # generated batches so far in this process
        self._logged_batches = 0  # the value of `_generated_batches` when completions were last logged
        self._start_policy = build_start_policy(self) if self.args.log_kl_from_start else None  # `log_kl_from_start`

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)  # (N, F)
        shares = unreadable_shares(
            self.reward_funcs, inputs, completions, self.accelerator.gather, rewards_per_func.device
        )
        mode = "train" if self.model.training else "eval"
        for index, share in shares.items():
            self._metrics[mode][f"rewards/{self.reward_func_names[index]}/unreadable"].append(share)
        if self.accelerator.is_main_process:
            warn_unreadable(
                shares, self.reward_funcs, self.reward_func_names, self._unreadable_warned, self.state.global_step
            )
        return rewards_per_func

    def create_model_card(self, model_name=None, dataset_name=None, tags=None, **kwargs):
        if model_name is None:  # as GRPO names the card of a checkpoint
            hub_id = self.hub_model_id or self.args.hub_model_id
            model_name = hub_id.split("/")[-1] if hub_id else os.path.basename(os.path.normpath(self.args.output_dir))
        super().create_model_card(model_name=model_name, dataset_name=dataset_name, tags=tags, **kwargs)
        if not self.is_world_process_zero():
            return
        from trl.trainer.utils import get_config_model_id

        path = os.path.join(self.args.output_dir, "README.md")
        with open(path, encoding="utf-8") as f:
            card = f.read()
        trained = self.hub_model_id or self.args.hub_model_id or os.path.abspath(self.args.output_dir)
        base = get_config_model_id(self.accelerator.unwrap_model(self.model).config) or None
        with open(path, "w", encoding="utf-8") as f:
            f.write(name_local_models(card, base, trained))

    def _generate_single_turn(self, prompt_ids, *args, **kwargs):
        if self.use_vllm:  # vLLM reports its own progress
            return super()._generate_single_turn(prompt_ids, *args, **kwargs)
        model = self.accelerator.unwrap_model(self.model)
        disable = self.args.disable_tqdm or not self.accelerator.is_main_process
        with generation_progress(model, len(prompt_ids), self.args.max_completion_length, disable=disable):
            return super()._generate_single_turn(prompt_ids, *args, **kwargs)

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        self._generated_batches += 1
        if self.args.log_kl_from_start and self.model.training:
            logps, start = start_policy_logps(self, self._start_policy, output)  # (B, C) each
            mask = output["completion_mask"]  # (B, C)
            reduce = functools.partial(self.accelerator.reduce, reduction="sum")
            for name, value in kl_from_start_metrics(logps, start, mask, reduce).items():
                self._metrics["train"][name].append(value)
        return output

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        # GRPO prints and saves the completions of its buffer at every log: once per optimizer step, though a
        # generated batch serves `steps_per_generation` of them, and as an empty table after a resume in the middle
        # of a batch (whose completions were logged before the stop).
        fresh = self._generated_batches != self._logged_batches and len(self._logs["prompt"]) > 0
        if "loss" in logs:  # a training step's log: the process's memory beside it (`memory/*`)
            logs = {**logs, **memory_metrics()}
        log_completions = self.log_completions
        self.log_completions = log_completions and fresh
        try:
            super().log(logs, start_time)
        finally:
            self.log_completions = log_completions
        if fresh and log_completions:
            self._logged_batches = self._generated_batches

    def _issue_warnings_after_load(self, load_result) -> None:
        tied = set(tied_missing_keys(self.accelerator.unwrap_model(self.model), load_result.missing_keys))
        if tied:
            load_result = load_result._replace(missing_keys=[k for k in load_result.missing_keys if k not in tied])
        super()._issue_warnings_after_load(load_result)

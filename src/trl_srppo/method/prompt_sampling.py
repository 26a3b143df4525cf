# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Prompt sampling (`prompt_sampling`): generate where the gradient is.

SR-PPO spends one rollout on every prompt of a batch and then scales its gradient by the Pass@k weight
`w_k(s_0) = k (1 - qhat(s_0)) ** (k - 1)`, which is known before generating. With `prompt_sampling="pass_at_k"` the
data loader gives each process a pool of `prompt_pool_factor` (`m`) times its prompts per generated batch; the critic
values each prompt alone (one forward on the prompt tokens); `B` prompts are drawn from the pool of `N = m B`, with
replacement, with probability `p_i = (1 - eps) w_i / sum_j w_j + eps / N`, and only those are generated for; each
drawn rollout's Pass@k weight is multiplied by `1 / (N p_i)`, so that it carries the importance weight `w_i / (N p_i)`
and the batch's expected gradient is SR-PPO's over the whole pool (the maths: `trl_srppo.method.core.sample_prompts`).

Choices, and why:

- **With replacement.** The draws are independent, so each drawn rollout's importance weight is exactly
  `w_i / (N p_i)` and the estimator is unbiased draw by draw. Without replacement the inclusion probabilities of a
  weighted draw have no closed form (Horvitz-Thompson weights would need them). A prompt drawn twice gets two
  independent rollouts, each with its own weight.
- **Each process draws from its own pool (DDP).** The pools of the processes are disjoint slices of the data
  loader's batch, of equal size, so the mean of the processes' unbiased estimates is unbiased for the mean over the
  global pool (a stratified draw, each stratum the same size). Nothing but the metrics crosses processes: no prompt
  rows (Python objects) are gathered or scattered, every process generates as many rollouts as without sampling, and
  the critic's forward on the pool (a collective under FSDP or DeepSpeed) runs on every process on as many rows. The
  draw is slightly noisier than one from a gathered pool would be, when the processes' pools differ in difficulty.
- **The draw's random numbers** come from a generator of its own per process (seeded with `seed + process_index`),
  not from torch's global one, so the policy's sampling is untouched; its state is saved in every checkpoint
  (`prompt_sampling/process_<rank>.pt`) and restored on resume, so a resumed run draws the prompts an uninterrupted
  one does.
- **The weight a drawn rollout carries** is the Pass@k weight of the critic's values on prompt + completion (what
  the trainer reads without sampling) times the ratio `1 / (N p_i)` from the pool's values: both come from the critic
  as it is before the batch, at the last prompt token, so they agree up to rounding, and `eps = 1` (ratio exactly 1)
  gives back the trainer's own weights to the bit.
- `"near_half"` keeps the `B` prompts of the pool nearest `qhat(s_0) = 0.5`, each with its plain `w_k(s_0)`: the
  selection is the curriculum (and the bias); keeping SR-PPO's weight means it differs from the default only in which
  prompts are generated, and with `pass_at_k=1` it is prompt curriculum learning's weight 1.

Cost: one no-grad forward of the critic over the pool's prompt tokens per generated batch,
`per_device_train_batch_size` rows at a time (`prompt_sampling/pool_forward_seconds`). With `critic_type="policy_head"`
that forward is the policy's (its hidden states at the last prompt token, read by the head), in eval mode: `m B`
prompts of the policy's forward, beside the `B` prompt + completion forward the head already makes; with
`"policy_lora"` it is the policy's base model with the critic's adapter.
"""

import copy
import os
import time

import torch
from transformers.utils import logging
from trl.trainer.utils import RepeatSampler

from .core import sample_prompts
from .critics.base import CriticBatch

__all__ = [
    "PROMPT_SAMPLING_STATE",
    "PromptSampler",
    "check_prompt_sampling",
    "pool_dataloader",
    "pool_sampler",
    "pool_values",
]

logger = logging.get_logger(__name__)

PROMPT_SAMPLING_STATE = "prompt_sampling"  # a checkpoint's folder of each process's draw generator


def check_prompt_sampling(trainer) -> None:
    """Refuse, when the trainer is built, what the pool's valuation cannot handle, naming the fix: a `rollout_func`
    or an `environment_factory` (they make the prompt tokens themselves, so the critic cannot value the prompts
    before generating) and an iterable dataset (the pool needs GRPO's indexed sampler)."""
    from torch.utils.data import IterableDataset

    mode = trainer.args.prompt_sampling
    if getattr(trainer, "rollout_func", None) is not None or getattr(trainer, "environment_factories", None):
        raise ValueError(
            f"prompt_sampling={mode!r} values each candidate prompt's tokens with the critic before generating, but "
            "a rollout_func or environment_factory makes the prompt tokens itself while generating. Set "
            "prompt_sampling='none'."
        )
    if isinstance(trainer.train_dataset, IterableDataset):
        raise ValueError(
            f"prompt_sampling={mode!r} makes the data loader's generated batches prompt_pool_factor times larger "
            "through GRPO's sampler, which an iterable (streaming) dataset does not use. Load the dataset as a "
            "map-style `datasets.Dataset`, or set prompt_sampling='none'."
        )


def pool_dataloader(trainer):
    """GRPO's training loader of `trainer`, built as GRPO builds it (`get_train_dataloader`), each of whose generated
    batches holds `prompt_pool_factor` times the prompts (an indexed dataset: [`check_prompt_sampling`])."""
    args = trainer.args
    return trainer._get_dataloader(
        dataset=trainer.train_dataset,
        description="Training",
        batch_size=trainer._train_batch_size * args.steps_per_generation * args.prompt_pool_factor,
        sampler_fn=trainer._get_train_sampler,
        is_training=True,
    )


def pool_sampler(sampler, factor: int):
    """GRPO's sampler `sampler` (TRL's `RepeatSampler`, or the runtime's, exact on resume) with its chunk of prompts
    per generated batch `factor` times larger, each chunk repeated as GRPO repeats it."""
    if not isinstance(sampler, RepeatSampler):
        raise TypeError(
            f"prompt_sampling needs GRPO's RepeatSampler to enlarge the generated batches, got "
            f"{type(sampler).__name__}; set prompt_sampling='none'."
        )
    return type(sampler)(
        data_source=sampler.data_source,
        mini_repeat_count=sampler.mini_repeat_count,
        batch_size=sampler.batch_size * factor,
        repeat_count=sampler.repeat_count,
        shuffle=sampler.shuffle,
        seed=sampler.seed,
    )


@torch.no_grad()
def pool_values(trainer, inputs: list[dict]) -> torch.Tensor:
    """`(N,)` `qhat(s_0)` of the `N` prompts of `inputs`, from the trainer's critic as it is before the batch.

    The prompts are tokenised as GRPO tokenises them for generation (`_tokenize_prompts`: its chat template, tools
    and template arguments) and left-padded; one token (a copy of the last) is appended so that the critic's value
    read before it (`logits_to_keep=1`: `prefix_values` reads position `P - 1`) is the one at the last prompt token,
    the `qhat(s_0)` the trainer reads after generating.
    """
    from trl.trainer.utils import pad

    if "image" in inputs[0] or "images" in inputs[0]:
        raise ValueError(
            f"prompt_sampling={trainer.args.prompt_sampling!r} values the prompts' tokens alone, and these prompts "
            "carry images. Set prompt_sampling='none' for multimodal data."
        )
    prompts = copy.deepcopy([x["prompt"] for x in inputs])
    prompt_ids, _, _ = trainer._tokenize_prompts(prompts)
    device = trainer.accelerator.device
    ids = pad(
        [torch.tensor(p) for p in prompt_ids], padding_value=trainer._tokenizer.pad_token_id, padding_side="left"
    )
    ids = torch.cat([ids, ids[:, -1:]], dim=1).to(device)  # (N, P + 1)
    mask = pad([torch.ones(len(p), dtype=torch.long) for p in prompt_ids], padding_value=0, padding_side="left")
    mask = torch.cat([mask, torch.ones_like(mask[:, -1:])], dim=1).to(device)  # (N, P + 1)
    batch = CriticBatch(
        input_ids=ids, attention_mask=mask, logits_to_keep=1, batch_size=trainer.args.per_device_train_batch_size
    )
    return trainer.critic_backend.values(batch, trainer.state.global_step)[:, 0]  # (N,)


class PromptSampler:
    """One process's draw of the prompts to generate for, from its pool, and the generator of the draw.

    Args:
        args ([`SRPPOConfig`]):
            The run's configuration (`prompt_sampling`, `prompt_pool_factor`, `prompt_sampling_floor`, `pass_at_k`,
            `seed`).
        process_index (`int`):
            This process's rank: its generator is seeded with `seed + process_index`.
    """

    def __init__(self, args, process_index: int):
        self.args = args
        self.process_index = process_index
        self.generator = torch.Generator().manual_seed(int(args.seed) + process_index)

    def draw(self, trainer, inputs: list[dict]) -> tuple[list[dict], dict]:
        """Value the pool `inputs` (`N = m B` rows), draw `B = N / m` of them; returns the drawn rows (in draw order)
        and the draw: `ratios` `(B,)` (the factor on each drawn rollout's Pass@k weight), `indices` `(B,)` into the
        pool, the pool's `q0` `(N,)` and `seconds` (tokenising, the critic's forward and the draw)."""
        start = time.perf_counter()
        q0 = pool_values(trainer, inputs)  # (N,)
        num_prompts = len(inputs) // self.args.prompt_pool_factor
        draw = sample_prompts(
            q0,
            num_prompts,
            mode=self.args.prompt_sampling,
            pass_at_k=self.args.pass_at_k,
            floor=float(self.args.prompt_sampling_floor),
            generator=self.generator,
        )
        draw = {**draw, "q0": q0.detach().double().cpu(), "seconds": time.perf_counter() - start}
        return [inputs[i] for i in draw["indices"].tolist()], draw

    def state_file(self, checkpoint: str) -> str:
        return os.path.join(checkpoint, PROMPT_SAMPLING_STATE, f"process_{self.process_index}.pt")

    def save(self, checkpoint: str) -> None:
        """Write this process's generator state into `checkpoint`."""
        path = self.state_file(checkpoint)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        torch.save({"generator": self.generator.get_state(), "settings": self.settings()}, path)

    def settings(self) -> dict:
        """The settings the draw's state belongs to, recorded with it."""
        fields = ("prompt_sampling", "prompt_pool_factor", "prompt_sampling_floor", "seed")
        return {name: getattr(self.args, name) for name in fields}

    def load(self, checkpoint: str) -> None:
        """Restore this process's generator state from `checkpoint`; a checkpoint without it (written without
        prompt sampling, or by fewer processes) leaves the generator at its seed, with a warning: the run then draws
        other prompts than an uninterrupted one."""
        path = self.state_file(checkpoint)
        if not os.path.isfile(path):
            logger.warning(
                f"Checkpoint {checkpoint} has no draw state for process {self.process_index} ({path}: written without "
                "prompt_sampling, or by fewer processes): this run draws its prompts from a fresh generator, not the "
                "ones an uninterrupted run would."
            )
            return
        state = torch.load(path, map_location="cpu", weights_only=True)
        self.generator.set_state(state["generator"])
        saved, current = state.get("settings", {}), self.settings()
        differ = [
            f"{name}={saved[name]!r} (this run: {current[name]!r})" for name in saved if saved[name] != current[name]
        ]
        if differ:
            logger.warning(
                f"Checkpoint {checkpoint} was written with {', '.join(differ)}: from here on this run draws other "
                "prompts (another pool size also changes which candidates each generated batch holds) than the run "
                "that wrote it would have."
            )


def draw_metrics(draw: dict, weights: torch.Tensor, gather) -> dict[str, float]:
    """The draw's logged numbers over every process: the pool's and the drawn prompts' mean `qhat(s_0)`, the
    effective sample size of the drawn rollouts' weights (`(sum w) ** 2 / sum w ** 2` over the `B` rollouts of every
    process, divided by their number: 1 when every weight is equal), the share of each pool drawn at least once and
    the pool forward's seconds (the slowest process).

    Args:
        draw (`dict`):
            [`PromptSampler.draw`]'s draw.
        weights (`torch.Tensor` of shape `(B,)`):
            The weights the drawn rollouts carry into the advantages (before `pass_at_k_normalize`).
        gather (`Callable`):
            Accelerate's `gather`.
    """
    q0 = draw["q0"]  # (N,)
    indices = draw["indices"]  # (B,)
    local = torch.tensor(
        [
            q0.sum().item(),
            q0.numel(),
            q0[indices].sum().item(),
            indices.numel(),
            indices.unique().numel(),
            draw["seconds"],
        ],
        dtype=torch.float64,
        device=weights.device,
    )
    gathered = gather(local.view(1, -1))  # (processes, 6)
    pool_sum, pool_size, drawn_sum, drawn, distinct = gathered[:, :5].sum(dim=0).tolist()
    seconds = gathered[:, 5].max().item()
    weights = gather(weights.detach().double())  # (B_total,)
    ess = (weights.sum() ** 2 / (weights**2).sum()).item() / weights.numel() if (weights**2).sum() > 0 else 0.0
    return {
        "prompt_sampling/pool_q0_mean": pool_sum / pool_size,
        "prompt_sampling/drawn_q0_mean": drawn_sum / drawn,
        "prompt_sampling/ess": ess,
        "prompt_sampling/pool_drawn_share": distinct / pool_size,
        "prompt_sampling/pool_forward_seconds": seconds,
    }

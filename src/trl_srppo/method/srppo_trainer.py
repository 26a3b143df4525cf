# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`SRPPOTrainer`: single-rollout Pass@k policy optimization on top of TRL's `GRPOTrainer`.

How SR-PPO departs from GRPO, in the order the trainer runs it for every generated batch:

1. Generation, rewards, reference and old log-probabilities: GRPO's own code, unchanged (transformers, vLLM
   colocate or server). One rollout per prompt by default (`num_generations=1`).
2. The outcome `Y` of each rollout is the weighted sum of the reward functions (`reward_weights`, default 1 each), as
   in GRPO's `sum_then_normalize` but *not* normalised; a function returning `None` counts as 0, and a rollout every
   function scores `None` is unscorable (no advantage, left out of the critic's loss). With the sigmoid critic, `Y`
   must lie in `[0, 1]` (a success probability); non-binary rewards in that range are fine. `srppo_outcome` and
   `srppo_outcome_threshold` make `Y` from other rewards: the sum over its maximum, one named function, a threshold
   (`trl_srppo.method.core.outcome_from_rewards`).
3. The critic's values `qhat(s_0) .. qhat(s_{T-1})` on prompt + completion, computed *before* the critic learns from
   this batch (a baseline must not depend on its own rollout's outcome).
4. Token advantages `A_t = w_k(s_0) * GAE_t` (gamma = 1, lambda = `gae_lambda`, the outcome as terminal reward), with
   the Pass@k weight `w_k(s_0) = k (1 - qhat(s_0))^(k-1)`: see `trl_srppo.method.core`. With
   `advantage_baseline="prompt"`, `A_t = w_k(s_0) * (Y - qhat(s_0))` for every token instead.
5. The critic's update on the same batch, with its own optimizer and learning-rate schedule. When it makes a single
   optimizer step per batch, steps 3 and 5 share one forward pass (`critic_fused_forward`): its values, detached,
   are those before the step.
6. The policy loss: GRPO's clipped surrogate (and KL, and loss aggregation) with `(B, T)` advantages.

With `prompt_sampling`, step 1 is preceded by the draw: the critic values the `m B` prompts of the pool the data
loader gave (`qhat(s_0)`), `B` of them are drawn (`trl_srppo.method.prompt_sampling`), and in step 4 each drawn
rollout's Pass@k weight is multiplied by its importance ratio `1 / (m B p_i)`.

The critic is a [`~trl_srppo.method.critics.Critic`], one class per mode (a model of its own under Accelerate, DDP,
FSDP2 or DeepSpeed; a value head on the policy's hidden states; a second LoRA adapter on the policy), built once by
`trl_srppo.method.critics.build.build_critic`; the trainer calls its `values` and `update` (or `update_fused`, one
forward for both), its files go through `trl_srppo.method.critics.checkpoint`, and it never asks which mode it is.

Launch: `accelerate launch --num_processes 2 your_script.py` (DDP; the critic is wrapped by Accelerate too, so its
gradients are all-reduced and its weights stay identical across processes).

The trainer is the method on trl-srppo's runtime: `SRPPOTrainer(SRPPOMethod, RuntimeMixin, GRPOTrainer)`.
[`SRPPOMethod`] holds SR-PPO's overrides of `GRPOTrainer` / `Trainer` methods, [`METHOD_HOOKS`], each with what it
changes; `trl_srppo.runtime.mixin.RuntimeMixin` holds the rest, `RUNTIME_HOOKS` (complete checkpoints, exact resume,
preemption, reward deadlines, start-up checks, run output), which `trainer: grpo` runs on too.
`tests/test_trl_hooks.py` derives both lists from the classes' MRO. [`SRPPOMethodTrainer`] is the method alone, on
TRL's own runtime.

Hooks and GRPO's state: the method reads GRPO's output and writes its own. Its one hand-off between hooks is
[`ScoredRollouts`]: GRPO's `_generate_and_score_completions` calls `_calculate_rewards`, which fills it with each local
rollout's outcome and length for the caller, for the length of that call. GRPO's metrics, buffers and completions
columns are left as GRPO computes them; SR-PPO adds its own (`critic/*`, `passk/*`, the `srppo_advantage` and
`srppo_value` columns).

Guards: critic values, advantages, the critic's loss and gradients, the policy's loss and gradients are checked for
NaN and inf before any optimizer step uses them, and a reward of +-inf is an error naming its function.
"""

import contextlib
import copy
import dataclasses
import os
import shutil
import time

import torch
from accelerate.utils import gather
from transformers.utils import logging
from trl import GRPOTrainer
from trl.trainer.utils import RepeatSampler

from ..runtime.mixin import RuntimeMixin
from ..runtime.reward_models import load_reward_models, reward_func_list
from ..runtime.safe_loading import refuse_pickle_only, safetensors_only, safetensors_required
from ..runtime.startup_checks import check_prompts
from ..runtime.step_checks import check_finite, check_finite_rewards
from .batch_metrics import batch_metrics
from .checks import (
    check_critic_tokenizer,
    check_outcome_range,
    check_reward_models,
    outcome_settings,
    warn_ignored_grpo_settings,
    warn_summed_outcome,
)
from .core import (
    ADVANTAGE_BASELINES,
    AdvantageEstimate,
    critic_values,
    generated_mask,
    initial_value,
    normalized_weights,
    outcome_from_rewards,
    scorable_mask,
)
from .critics.base import CRITIC_FIX, CriticBatch
from .critics.build import build_critic, critic_model_before_policy
from .critics.checkpoint import load_critic_checkpoint, save_critic, save_critic_training_state
from .critics.model import (
    CRITIC_ADAPTER_SUBFOLDER,
    CRITIC_SETTING_FIELDS,
    CRITIC_SUBFOLDER,
    CRITIC_TRAINING_STATE,
    read_critic_settings,
    resolve_critic_source,
)
from .critics.optimizer_state import torch_optimizer
from .model_card import PAPER, append_srppo_card
from .prompt_sampling import PromptSampler, check_prompt_sampling, draw_metrics
from .srppo_config import SRPPOConfig
from .warm_start import WarmStartPlan, warm_start_critic_steps, warm_start_plan

logger = logging.get_logger(__name__)

# The completions table's columns of each rollout's SR-PPO advantage at its first token, and of its prompt's value
# qhat(s_0) before the critic's update on the batch.
ADVANTAGE_COLUMN = "srppo_advantage"
VALUE_COLUMN = "srppo_value"


@dataclasses.dataclass
class ScoredRollouts:
    """What `_calculate_rewards` hands `_generate_and_score_completions` of the local rollouts it scored, which
    GRPO's output lacks: each one's outcome `Y` (`(B,)`, NaN where unscorable) and number of generated tokens
    (`(B,)`)."""

    outcomes: torch.Tensor | None = None
    lengths: torch.Tensor | None = None


# What to do about a non-finite number in the policy's loss or gradients.
_POLICY_FIX = (
    "Lower learning_rate, set max_grad_norm, prefer bf16 to fp16, and check the policy's starting weights and the "
    "rewards."
)


# Every `GRPOTrainer` / `Trainer` method the method overrides -> what the override changes.
METHOD_HOOKS = {
    "__init__": "builds the critic (and the prompt sampler), after checks of the settings, reward models and prompts",
    "_calculate_rewards": "the outcome `Y` of each rollout from the reward functions, checked to be finite",
    "_generate_and_score_completions": (
        "the critic's values, the token advantages `A_t = w_k(s_0) GAE_t` in place of GRPO's group-normalised ones "
        "(and in the completions table's `srppo_advantage` column), the critic's update on the batch; with "
        "`prompt_sampling`, the draw of the prompts to generate from the pool; with `critic_warm_start_prompts`, "
        "the critic's warm start before the first batch"
    ),
    "_compute_loss": "the policy's loss checked to be finite, and zero during the critic-only warm-up",
    "create_scheduler": "the critic's optimizer and schedule beside the policy's, and the policy optimizer's hooks",
    "create_model_card": "the SR-PPO settings and the training recipe in the model card",
    "save_model": "the critic saved beside the policy, in `critic/`",
    "_save_optimizer_and_scheduler": "the critic's optimizer, schedule and the prompt sampler's state in a checkpoint",
    "_load_optimizer_and_scheduler": "the critic's state and the prompt sampler's restored on resume",
    "_push_from_checkpoint": "the critic pushed to the Hub with the policy",
    "get_train_dataloader": "with `prompt_sampling`, generated batches of `prompt_pool_factor` times the prompts",
    "_get_train_sampler": "with `prompt_sampling`, the sampler's chunk of prompts enlarged as the loader's",
}


class SRPPOMethod:
    """SR-PPO's changes to a TRL `GRPOTrainer` (put the mixin before it): [`METHOD_HOOKS`], and nothing of
    trl-srppo's runtime. [`SRPPOTrainer`] puts it on that runtime, [`SRPPOMethodTrainer`] on TRL's own; both take
    [`SRPPOTrainer`]'s arguments.
    """

    _tag_names = ["trl", "sr-ppo"]
    _name = "SR-PPO"
    _paper = PAPER

    def __init__(
        self, model, reward_funcs=None, args: SRPPOConfig | None = None, *positional, critic_model=None, **kwargs
    ):
        if args is None:
            model_name = model if isinstance(model, str) else model.config._name_or_path
            args = SRPPOConfig(f"{str(model_name).split('/')[-1]}-SR-PPO")
        if not isinstance(args, SRPPOConfig):
            raise TypeError(
                f"{type(self).__name__} needs an SRPPOConfig, got {type(args).__name__}; build the config with "
                "`SRPPOConfig(...)` (it accepts every GRPOConfig field)."
            )
        if args.fp16:
            raise ValueError(
                f"{type(self).__name__} does not support fp16 (the critic has no loss scaler); use bf16=True."
            )
        check_reward_models(reward_funcs, args)  # before GRPO loads a reward model, and before any step
        warn_ignored_grpo_settings(args)
        if critic_model is None:
            critic_model = args.critic_model_name_or_path
        if isinstance(critic_model, str):  # a run's folder, or `org/name/critic` on the Hub: its `critic/` folder
            # At the revision the critic's other loads take, as TRL's reward models: `model_init_kwargs["revision"]`.
            critic_model = resolve_critic_source(critic_model, (args.model_init_kwargs or {}).get("revision"))
        # Models GRPO loads by name, from safetensors weights only, as the critic: the policy, and reward models (a
        # folder with only pickle weights refused before anything loads; a Hub model without safetensors, loaded
        # under `use_safetensors=True`, gets the rule named rather than transformers' advice).
        by_name = [model] if isinstance(model, str) else []
        by_name += [f for f in reward_func_list(reward_funcs) if isinstance(f, str)]
        if isinstance(model, str):  # GRPO loads the policy, and then the reward models, with these
            args.model_init_kwargs = safetensors_only(args.model_init_kwargs)
        for name in by_name:
            refuse_pickle_only(name)
        if not isinstance(model, str) and by_name:  # GRPO would load them without the rule (kwargs for the policy)
            reward_funcs = load_reward_models(reward_funcs, args)
        loading = contextlib.ExitStack()
        for name in by_name:
            loading.enter_context(safetensors_required(name))
        critic = critic_model_before_policy(model, critic_model, args)  # before GRPO wraps the policy
        with loading:
            super().__init__(model, reward_funcs, args, *positional, **kwargs)  # GRPOTrainer's arguments, in its order
        self._outcome_func_index, self._outcome_reward_max = outcome_settings(self.args, self.reward_func_names)
        warn_summed_outcome(self.args, self.reward_func_names, self.reward_weights)
        check_critic_tokenizer(
            self.model, critic, self.processing_class, critic_model if isinstance(critic_model, str) else None
        )
        check_prompts(
            self.train_dataset,
            self.processing_class,
            self.model.config,
            self.max_completion_length,
            self.chat_template_kwargs,
        )
        policy_deepspeed = None  # the policy's DeepSpeed config, whose ZeRO stage a DeepSpeed critic takes
        if self.is_deepspeed_enabled:
            policy_deepspeed = self.accelerator.state.deepspeed_plugin.deepspeed_config
        self.critic_backend = build_critic(
            critic, critic_model, self.model, args, self.accelerator, policy_deepspeed, self.is_fsdp_enabled
        )
        self._warmup_hook = None  # handle of the policy optimizer's pre-step hook during the critic-only warm-up
        self._finite_hook = None  # handle of the policy optimizer's pre-step hook that checks the gradients
        self._value_init_pending = args.critic_value_init == "success_rate"  # see `_start_value_head`
        self._warm_start_pending = args.critic_warm_start_prompts > 0  # see `_warm_start_critic`
        if self._warm_start_pending and not hasattr(self.train_dataset, "__len__"):
            raise ValueError(
                f"critic_warm_start_prompts={args.critic_warm_start_prompts} draws its prompts from the training "
                f"dataset by index, which a {type(self.train_dataset).__name__} has not. Pass a map-style dataset "
                "(`datasets.Dataset`, e.g. `load_dataset(..., streaming=False)`), or set critic_warm_start_prompts=0."
            )
        self._scoring = None  # the batch's `ScoredRollouts` while `_generate_and_score_completions` runs (see there)
        self._prompt_sampler = None  # `prompt_sampling`: the draw of each generated batch's prompts from its pool
        if args.prompt_sampling != "none":
            check_prompt_sampling(self)
            self._prompt_sampler = PromptSampler(args, self.accelerator.process_index)

    # ---- rewards --------------------------------------------------------------------------------------------------

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)  # (N, F)
        check_finite_rewards(rewards_per_func, self.reward_func_names, self.state.global_step)
        args = self.args
        rewards = outcome_from_rewards(
            rewards_per_func,
            self.reward_weights,
            mode=args.srppo_outcome,
            reward_max=self._outcome_reward_max,
            func_index=self._outcome_func_index,
            threshold=args.srppo_outcome_threshold,
        )  # (N,)
        check_outcome_range(rewards, args, self.state.global_step)
        if self._scoring is not None:  # called by `_generate_and_score_completions`: hand it the local rollouts
            rank = self.accelerator.process_index
            self._scoring.outcomes = rewards[rank * len(prompts) : (rank + 1) * len(prompts)]  # (B,)
            self._scoring.lengths = torch.tensor([len(ids) for ids in completion_ids_list])  # (B,)
        return rewards_per_func

    # ---- advantages and the critic's update -----------------------------------------------------------------------

    def _generate_and_score_completions(self, inputs):
        mode = "train" if self.model.training else "eval"
        draw = None
        if mode == "train" and self._prompt_sampler is not None:  # a pool of m x the prompts: generate for B of them
            inputs, draw = self._prompt_sampler.draw(self, inputs)
        if mode == "train" and self._warm_start_pending:  # `critic_warm_start_prompts`, before the first update
            self._warm_start_critic()
        output, rewards, lengths = self._scored_rollouts(inputs)
        if mode == "train" and self._value_init_pending:
            self._start_value_head(rewards)
        completion_mask = output["completion_mask"]  # (B, C), the policy's loss mask
        batch, critic_mask = self._critic_batch(output, lengths, mode)
        if "tool_mask" in output:  # the policy loss also masks tool outputs (tokens the policy did not generate)
            completion_mask = completion_mask * output["tool_mask"]  # (B, C)
        critic, step = self.critic_backend, self.state.global_step
        steps = self._critic_steps_per_generation()
        # (B,) the factor 1 / (N p_i) on each drawn rollout's Pass@k weight (its importance weight), or none.
        scale = None if draw is None else draw["ratios"].to(rewards.device)
        fused = (
            mode == "train"
            and self.args.critic_fused_forward
            and self.args.critic_epochs == 1
            and steps == 1
            and not critic.dropout_active()  # the fused forward runs in train mode
        )
        if fused:
            # Values and update in one forward: a single critic step per batch, whose forward gives the values
            # before the step (detached, for the advantages) and the loss of the step.
            # The loss mask of the estimate, known before the values: tokens of scorable rollouts.
            mask = scorable_mask(rewards, critic_mask, torch.float32)  # (B, C)

            def estimate_rows(values, rows):  # (b, C) values of the rows `rows` -> their estimate
                return self._advantage_estimate(
                    values, rewards[rows], mask[rows], None if scale is None else scale[rows]
                )

            result = critic.update_fused(batch, mask, step, estimate_rows)
            values_old, estimate = result.values, result.estimate
        else:
            # 1. Values of the critic as it is *before* it sees this batch.
            values_old = critic_values(critic.values(batch), self.args.critic_head)  # (B, C)
            check_finite("critic values", values_old, step, CRITIC_FIX)
            # 2. Advantages from those values.
            estimate = self._advantage_estimate(values_old, rewards, critic_mask, scale)
            # 3. Only now does the critic learn from the batch.
            if mode == "train":
                result = critic.update(batch, estimate.mask, steps, step, estimate.returns, values_old)
        if mode == "train":  # the update's (a `CriticUpdate`) loss, learning rate and gradient norm before clipping
            self._metrics["train"]["critic/loss"].append(result.loss)
            self._metrics["train"]["critic/learning_rate"].append(result.learning_rate)
            if result.head_learning_rate is not None:
                self._metrics["train"]["critic/head_learning_rate"].append(result.head_learning_rate)
            self._metrics["train"]["critic/grad_norm"].append(result.grad_norm)
        if draw is not None:
            for name, value in draw_metrics(draw, estimate.weights, gather).items():
                self._metrics["train"][name].append(value)
        estimate = self._normalize_weights(estimate, rewards, completion_mask)
        advantages = estimate.advantages * completion_mask  # (B, C), none for tokens the policy loss masks
        check_finite("advantages", advantages, step, CRITIC_FIX)
        self._log_metrics(mode, values_old, rewards, estimate, advantages, completion_mask)
        output["advantages"] = advantages  # replaces GRPO's group-normalised (B,) advantages
        return output

    def _scored_rollouts(self, inputs) -> tuple[dict, torch.Tensor, torch.Tensor]:
        """GRPO's generation and scoring of `inputs`: its output, and each local rollout's outcome `Y` (`(B,)`, NaN
        where unscorable) and number of generated tokens (`(B,)`)."""
        # The one hand-off between hooks: GRPO's `_generate_and_score_completions` calls `_calculate_rewards`, which
        # fills `self._scoring` with what GRPO's output lacks (each local rollout's outcome and its generated length);
        # it exists only for the length of this call.
        self._scoring = ScoredRollouts()
        try:
            output = super()._generate_and_score_completions(inputs)
            return output, self._scoring.outcomes, self._scoring.lengths
        finally:
            self._scoring = None

    def _critic_batch(self, output: dict, lengths: torch.Tensor, mode: str) -> tuple[CriticBatch, torch.Tensor]:
        """The critic's view of GRPO's scored batch `output` (`lengths`, `(B,)`, its generated tokens): its input, and
        the tokens it learns from, `(B, C)`."""
        completion_mask = output["completion_mask"]  # (B, C), the policy's loss mask
        # (B, C) the tokens the critic learns from: with `mask_truncated_completions` GRPO drops a truncated
        # completion from the policy's mask, but its outcome is part of the success rate the critic estimates.
        critic_mask = generated_mask(lengths, completion_mask) if self.mask_truncated_completions else completion_mask
        args = self.args
        batch = CriticBatch(
            input_ids=torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1),  # (B, P + C)
            attention_mask=torch.cat([output["prompt_mask"], critic_mask], dim=1),  # (B, P + C)
            logits_to_keep=output["completion_ids"].size(1),
            batch_size=args.per_device_train_batch_size if mode == "train" else args.per_device_eval_batch_size,
        )
        return batch, critic_mask

    def _warm_start_plan(self) -> WarmStartPlan:
        args = self.args
        if args.critic_warm_start_prompts == 0:
            return WarmStartPlan([], [])
        return warm_start_plan(
            len(self.train_dataset),
            args.critic_warm_start_prompts,
            args.critic_warm_start_samples,
            args.generation_batch_size,
            args.seed,
        )

    def _warm_start_critic(self) -> None:
        """`critic_warm_start_prompts`: the starting policy samples `critic_warm_start_samples` rollouts of each of
        the plan's prompts (`trl_srppo.method.warm_start`), through GRPO's generation and reward functions, and the
        critic makes `critic_warm_start_epochs` passes over them, each batch's update as an online one (its
        `critic_epochs` included); the first pass learns from each batch as it is generated, the others go over the
        batches kept (their token ids, not a policy head's features). The policy does not move. GRPO's metrics and
        completion logs of these batches are dropped (the trainer state's token count keeps them);
        `critic/warm_start_*` are logged with the first step's metrics. A run resumed from a checkpoint does not warm
        start again (its critic already has)."""
        self._warm_start_pending = False
        start = time.perf_counter()
        plan, args, critic = self._warm_start_plan(), self.args, self.critic_backend
        metrics = {mode: {name: list(values) for name, values in kept.items()} for mode, kept in self._metrics.items()}
        completion_logs = copy.deepcopy(self._logs)
        steps, kept, losses, tokens = self._critic_steps_per_generation(), [], [], 0

        def learn(batch, mask, returns, values):  # one batch's update; a critic's per-batch cache is not kept
            losses.append(critic.update(batch, mask, steps, 0, returns, values).loss)
            batch.cache.clear()  # a policy head's features, (B, C, H): recomputed if the batch is seen again

        for index in range(len(plan.batches)):  # the first pass learns from each batch as it is generated
            rows = plan.local_rows(index, self.accelerator.process_index, self.accelerator.num_processes)
            output, rewards, lengths = self._scored_rollouts([self.train_dataset[row] for row in rows])
            if self._value_init_pending:  # the warm start's first batch gives the fresh head its start
                self._start_value_head(rewards)
            batch, critic_mask = self._critic_batch(output, lengths, "train")
            values = critic_values(critic.values(batch), args.critic_head)  # (B, C)
            check_finite("critic values", values, 0, CRITIC_FIX)
            estimate = self._advantage_estimate(values, rewards, critic_mask)
            tokens += int(gather(lengths.to(rewards.device)).sum())
            learn(batch, estimate.mask, estimate.returns, values)
            if args.critic_warm_start_epochs > 1:
                kept.append((batch, estimate.mask, estimate.returns, values))
        for _ in range(args.critic_warm_start_epochs - 1):  # the other passes, over the batches kept
            for batch, mask, returns, values in kept:
                learn(batch, mask, returns, values)
        for mode, logged in self._metrics.items():  # GRPO's metrics of the warm start's batches are not the run's
            logged.clear()
            logged.update(metrics[mode])
        self._logs = completion_logs
        warm_start = {
            "prompts": len(plan.prompts),
            "completions": sum(len(b) for b in plan.batches),
            "tokens": tokens,
            "seconds": time.perf_counter() - start,
            "loss": sum(losses) / max(len(losses), 1),
        }
        for name, value in warm_start.items():
            self._metrics["train"][f"critic/warm_start_{name}"].append(value)
        logger.info(
            f"Critic warm start: {warm_start['completions']} rollouts of {warm_start['prompts']} prompts "
            f"({tokens} generated tokens) in {warm_start['seconds']:.1f} s, final loss {losses[-1]:.4f}."
        )

    def _start_value_head(self, rewards) -> None:
        """`critic_value_init="success_rate"`: before the first batch's values are read, a fresh value head (all zero)
        is set to output the batch's success rate (`rewards`, `(B,)` local, NaN where unscorable; the rate is over
        every process's scorable rollouts) for every prefix; a batch with no scorable rollout leaves it for the next.
        A loaded, trained or resumed head is left as it is (it is not all zero)."""
        self._value_init_pending = False
        raw = initial_value(self.accelerator.gather(rewards), self.args.critic_head)
        if raw is None:  # no scorable rollout in the batch: try the next one
            self._value_init_pending = True
        elif self.critic_backend.start_value_head(raw):
            logger.info(f"The value head starts at {raw:.4f} (raw), the first batch's success rate.")

    def _normalize_weights(
        self, estimate: AdvantageEstimate, rewards: torch.Tensor, policy_mask: torch.Tensor
    ) -> AdvantageEstimate:
        """`pass_at_k_normalize`: the estimate with its Pass@k weights divided by their mean over the rows, of every
        process, that move the policy: a scorable outcome (`rewards`, `(B,)`, NaN where unscorable) and a token in the
        policy's loss mask (`policy_mask`, `(B, C)`; none for a truncated completion under
        `mask_truncated_completions`). `A_t = w_k GAE_t`, so the advantages are divided by the same mean."""
        if not self.args.pass_at_k_normalize:
            return estimate
        moves = scorable_mask(rewards, policy_mask).bool().any(dim=1)  # (B,)
        weights = estimate.weights  # (B,)
        local = torch.stack([(weights * moves).sum(), moves.sum().to(weights.dtype)])  # (2,)
        weight_sum, rows = self.accelerator.gather(local).view(-1, 2).sum(dim=0).tolist()  # every process's rows
        if rows == 0 or weight_sum <= 0:  # nothing moves the policy (or every such prompt has weight 0)
            return estimate
        batch_mean = weight_sum / rows
        return estimate.replace(
            weights=normalized_weights(weights, batch_mean),  # (B,)
            advantages=estimate.advantages / batch_mean,  # (B, C)
        )

    def _advantage_estimate(
        self, values: torch.Tensor, rewards: torch.Tensor, mask: torch.Tensor, scale: torch.Tensor | None = None
    ) -> AdvantageEstimate:
        """Advantages, critic targets, Pass@k weights and loss mask of rows `(B, C)`, row by row; `scale` `(B,)`
        multiplies each row's Pass@k weight (the importance ratio of a drawn prompt, `prompt_sampling`)."""
        args = self.args
        estimator = ADVANTAGE_BASELINES[args.advantage_baseline]  # `srppo_advantages`, `prompt_baseline_advantages`
        return estimator(values, rewards, mask, args.pass_at_k, lam=args.gae_lambda, prompt_scale=scale)

    def _critic_steps_per_generation(self) -> int:
        # One optimizer step per policy step over a generated batch's first pass (at least one); with
        # `num_iterations > 1` the policy makes more, the critic does not. `critic_epochs` multiplies the critic's.
        return max(1, self.args.steps_per_generation // self.args.gradient_accumulation_steps)

    def _log_metrics(self, mode, values, rewards, estimate: AdvantageEstimate, advantages, policy_mask):
        """The batch's critic and advantage metrics (`trl_srppo.method.batch_metrics`), and SR-PPO's advantages in the
        completions table."""
        metrics = self._metrics[mode]
        head = self.args.critic_head
        for name, value in batch_metrics(values, rewards, estimate, advantages, policy_mask, head, gather).items():
            metrics[name].append(value)
        # The completions table: GRPO's own columns stay as GRPO computed them (its `advantage` is group-normalised,
        # 0 with one rollout per prompt); each rollout's SR-PPO advantage at its first token, w_k(s_0) (Y - qhat(s_0)),
        # and its prompt's value qhat(s_0) are columns of their own, beside the columns reward functions add.
        first = gather(advantages[:, 0].float())  # (N,)
        self._logs["extra"][ADVANTAGE_COLUMN].extend(first.tolist())
        self._logs["extra"][VALUE_COLUMN].extend(gather(values[:, 0].float()).tolist())

    # ---- policy loss ----------------------------------------------------------------------------------------------

    def _compute_loss(self, model, inputs):
        loss = super()._compute_loss(model, inputs)
        if model.training:
            check_finite("policy loss", loss, self.state.global_step, _POLICY_FIX)
        if self._in_critic_warmup():
            loss = loss * 0.0  # critic-only warm-up: no gradient reaches the policy
        return loss

    def _in_critic_warmup(self) -> bool:
        return self.model.training and self.state.global_step < self.args.critic_warmup_steps

    def _skip_policy_step_in_warmup(self, optimizer, args, kwargs):
        # Optimizer pre-step hook: during the critic-only warm-up, drop the policy's (zero) gradients so that the
        # optimizer skips every parameter: no weight decay, no Adam moments or step count.
        if self._in_critic_warmup():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    param.grad = None

    def _check_policy_gradients(self, optimizer, args, kwargs):
        # Optimizer pre-step hook: a NaN or inf gradient stops the run before the step writes it into the weights.
        grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        if grads:
            check_finite("policy gradients", torch.nn.utils.get_total_norm(grads), self.state.global_step, _POLICY_FIX)

    # ---- optimizer, saving and resuming ---------------------------------------------------------------------------

    def create_scheduler(self, num_training_steps: int, optimizer=None):
        # Called once per `train()` (after the policy's optimizer exists), on every backend: create the critic's
        # optimizer and schedule beside the policy's.
        scheduler = super().create_scheduler(num_training_steps, optimizer)
        if optimizer is None or optimizer is self.optimizer:
            self._create_critic_optimizer_and_scheduler(num_training_steps)
            # Under Accelerate's wrapper (and DeepSpeed's ZeRO optimizer), the torch optimizer that updates the
            # weights, whose pre-step hooks run at every real step: with its gradients dropped, ZeRO copies back
            # unchanged weights.
            policy_optimizer = torch_optimizer(self.optimizer)
            if self.args.critic_warmup_steps > 0 and self._warmup_hook is None:
                if policy_optimizer is None:
                    raise ValueError(
                        f"critic_warmup_steps={self.args.critic_warmup_steps} skips the policy's optimizer steps "
                        f"through a torch optimizer's pre-step hook, but the policy's optimizer "
                        f"({type(self.optimizer).__name__}) wraps no torch optimizer. Set critic_warmup_steps=0, or "
                        "use an optimizer built on torch.optim.Optimizer."
                    )
                self._warmup_hook = policy_optimizer.register_step_pre_hook(self._skip_policy_step_in_warmup)
            if self._finite_hook is None and not self.is_deepspeed_enabled:
                if policy_optimizer is not None:  # an optimizer that wraps no torch optimizer has no pre-step hooks
                    self._finite_hook = policy_optimizer.register_step_pre_hook(self._check_policy_gradients)
        return scheduler

    def _create_critic_optimizer_and_scheduler(self, num_training_steps: int):
        # Critic steps over the run: one generated batch per `steps_per_generation * num_iterations` micro-steps.
        args = self.args
        micro_steps = max(num_training_steps, 1) * args.gradient_accumulation_steps
        generations = -(-micro_steps // (args.steps_per_generation * self.num_iterations))
        steps_per_batch = self._critic_steps_per_generation() * args.critic_epochs
        warm_start = warm_start_critic_steps(self._warm_start_plan(), args.critic_warm_start_epochs, steps_per_batch)
        self.critic_backend.create_optimizer_and_scheduler(generations * steps_per_batch + warm_start)

    def create_model_card(self, model_name=None, dataset_name=None, tags=None, **kwargs):
        """TRL's model card, plus the SR-PPO settings and, when the run came from a recipe, the recipe itself."""
        super().create_model_card(model_name=model_name, dataset_name=dataset_name, tags=tags, **kwargs)
        if self.is_world_process_zero():
            append_srppo_card(self.args, CRITIC_SUBFOLDER)

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False):
        """Save the policy (as GRPO does) and the critic, in safetensors, to `<output_dir>/critic/`."""
        with self.critic_backend.saving_policy():
            super().save_model(output_dir, _internal_call=_internal_call)
        output_dir = output_dir if output_dir is not None else self.args.output_dir
        folder = os.path.join(output_dir, CRITIC_SUBFOLDER)
        save_critic(self.critic_backend, folder, self._critic_settings(), self.args.should_save)

    def _save_optimizer_and_scheduler(self, output_dir):
        # Called with the checkpoint folder (after `save_model` wrote `critic/` there, before any Hub push), on every
        # process, where the Trainer saves its random number generators.
        super()._save_optimizer_and_scheduler(output_dir)
        folder = os.path.join(output_dir, CRITIC_SUBFOLDER)
        save_critic_training_state(self.critic_backend, folder, self.args.should_save)
        if self._prompt_sampler is not None:
            self._prompt_sampler.save(output_dir)

    def _push_from_checkpoint(self, checkpoint_folder: str) -> None:
        # The Trainer pushes `output_dir` after copying the policy's files into it from the checkpoint; copy the
        # critic's weights and config too, so every `hub_strategy` uploads the critic with the policy.
        # The parent's own guards first: never rewrite files that a running upload may still be reading.
        source = os.path.join(checkpoint_folder, CRITIC_SUBFOLDER)
        pushing = self.args.hub_strategy != "end" and (
            self.args.hub_always_push or self.push_in_progress is None or self.push_in_progress.is_done()
        )
        if self.is_world_process_zero() and pushing and os.path.isdir(source):
            target = os.path.join(self.args.output_dir, CRITIC_SUBFOLDER)
            os.makedirs(target, exist_ok=True)
            for name in os.listdir(source):
                if name != CRITIC_TRAINING_STATE and os.path.isfile(os.path.join(source, name)):
                    shutil.copy(os.path.join(source, name), os.path.join(target, name))
            adapter = os.path.join(source, CRITIC_ADAPTER_SUBFOLDER)  # a LoRA critic's adapter
            if os.path.isdir(adapter):
                shutil.copytree(adapter, os.path.join(target, CRITIC_ADAPTER_SUBFOLDER), dirs_exist_ok=True)
        super()._push_from_checkpoint(checkpoint_folder)

    def _critic_settings(self) -> dict:
        """What `critic/` records of how its critic was trained (`CRITIC_SETTINGS`): the critic's fields, and whether
        the policy is a LoRA adapter (`use_peft` on the command line)."""
        settings = {name: getattr(self.args, name) for name in CRITIC_SETTING_FIELDS}
        return {**settings, "policy_peft": hasattr(self.accelerator.unwrap_model(self.model), "peft_config")}

    def _check_resume_settings(self, checkpoint: str) -> None:
        """Refuse, before anything is loaded, a resume whose critic settings are not the checkpoint's (its critic
        would not load into this run's, with a deep state-dict error, or would load as another critic)."""
        saved, current = read_critic_settings(os.path.join(checkpoint, CRITIC_SUBFOLDER)), self._critic_settings()
        differ = {
            name: (saved[name], current[name]) for name in saved if name in current and saved[name] != current[name]
        }
        if differ:
            listed = ", ".join(f"{name}={was!r} (this run: {now!r})" for name, (was, now) in differ.items())
            raise ValueError(
                f"Checkpoint {checkpoint} was written with {listed}. Resume with the settings it was written with "
                "(on the command line, the same flags as the run that wrote it), or start a new run."
            )

    def _load_optimizer_and_scheduler(self, checkpoint):
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is not None:
            load_critic_checkpoint(self.critic_backend, checkpoint)
            self._warm_start_pending = False  # the checkpoint's critic has had its warm start
            if self._prompt_sampler is not None:
                self._prompt_sampler.load(checkpoint)

    # ---- the data loader of prompt sampling ------------------------------------------------------------------------

    def _pool_factor(self) -> int:
        return self.args.prompt_pool_factor if self.args.prompt_sampling != "none" else 1

    def get_train_dataloader(self):
        """GRPO's loader, each of whose generated batches holds `prompt_pool_factor` times the prompts with prompt
        sampling (an indexed dataset: `check_prompt_sampling`), built as GRPO builds it with the larger batch."""
        factor = self._pool_factor()
        if factor == 1:
            return super().get_train_dataloader()
        return self._get_dataloader(
            dataset=self.train_dataset,
            description="Training",
            batch_size=self._train_batch_size * self.args.steps_per_generation * factor,
            sampler_fn=self._get_train_sampler,
            is_training=True,
        )

    def _get_train_sampler(self, dataset=None):
        # GRPO's sampler (exact on resume: `ReliableTrainerMixin`), its chunk of prompts per generated batch
        # `prompt_pool_factor` times larger with prompt sampling, each chunk repeated as GRPO repeats it.
        sampler = super()._get_train_sampler(dataset)
        factor = self._pool_factor()
        if factor == 1:
            return sampler
        if not isinstance(sampler, RepeatSampler):
            raise TypeError(
                f"prompt_sampling needs GRPO's RepeatSampler to enlarge the generated batches, got "
                f"{type(sampler).__name__}; set prompt_sampling='none'."
            )
        return type(sampler)(  # the same sampler (GRPO's, or the runtime's), with the larger chunk of prompts
            data_source=sampler.data_source,
            mini_repeat_count=sampler.mini_repeat_count,
            batch_size=sampler.batch_size * factor,
            repeat_count=sampler.repeat_count,
            shuffle=sampler.shuffle,
            seed=sampler.seed,
        )

    # ---- the critic's parts, as attributes of the trainer ---------------------------------------------------------

    @property
    def critic(self) -> torch.nn.Module:
        """The critic's network, as its mode wraps it (`trainer.critic_backend.model`)."""
        return self.critic_backend.model

    @property
    def critic_optimizer(self):
        return self.critic_backend.optimizer

    @property
    def critic_lr_scheduler(self):
        return self.critic_backend.lr_scheduler


class SRPPOTrainer(SRPPOMethod, RuntimeMixin, GRPOTrainer):
    """Trainer for SR-PPO (Single-Rollout Pass@k Policy Optimization): the method ([`SRPPOMethod`]) on trl-srppo's
    runtime (`trl_srppo.runtime.mixin.RuntimeMixin`: complete checkpoints, exact resume, preemption, reward deadlines,
    start-up checks, run output).

    Takes every argument of [`~trl.GRPOTrainer`] (model id or instance, `reward_funcs`, datasets, `processing_class`,
    `callbacks`, `peft_config`, ...) plus:

    Args:
        critic_model (`str` or `PreTrainedModel`, *optional*):
            The prefix critic: a Hub id, a local folder (a causal LM, which gets a fresh value head, or a critic saved
            by this trainer) or a model whose forward returns `logits` of shape `(B, L, 1)`, such as
            `AutoModelForTokenClassification` with `num_labels=1` (a torch module without `save_pretrained` is saved
            as its weights alone, `critic/model.safetensors`, which a resume loads back into the module given).
            Defaults to `args.critic_model_name_or_path`, and then to a copy of the policy's backbone with a fresh
            value head (`critic_value_init`).

    The critic is `trainer.critic_backend`, a [`~trl_srppo.method.critics.Critic`] of the run's mode (its network is
    `trainer.critic`, its optimizer and schedule `trainer.critic_optimizer` and `trainer.critic_lr_scheduler`).

    A multi-process CPU run (gloo) needs no call at its end: the trainer gives gloo's worker threads the GIL in an
    `atexit` handler, after the script's last line, so the script exits with its own status, not an abort.
    """


class SRPPOMethodTrainer(SRPPOMethod, GRPOTrainer):
    """SR-PPO on TRL's own runtime: [`SRPPOTrainer`]'s method without trl-srppo's runtime (TRL's checkpoints, resume,
    sampler, logs and model card, and no reward deadline). Takes the same arguments as [`SRPPOTrainer`]."""

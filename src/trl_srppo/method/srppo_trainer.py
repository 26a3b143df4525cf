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

With `critic_warm_start_prompts`, the critic first learns from rollouts of the starting policy, before it is read.
With `prompt_sampling`, step 1 is preceded by the draw: the critic values the `m B` prompts of the pool the data
loader gave (`qhat(s_0)`), `B` of them are drawn (`trl_srppo.method.prompt_sampling`), and in step 4 each drawn
rollout's Pass@k weight is multiplied by its importance ratio `1 / (m B p_i)`.

The critic is a [`~trl_srppo.method.critics.Critic`], one class per mode (a model of its own under Accelerate, DDP,
FSDP2 or DeepSpeed; a value head on the policy's hidden states; a second LoRA adapter on the policy), built once by
`trl_srppo.method.critics.build.build_critic`; the trainer calls its `values` and `learn` (which decides whether one
forward serves both the values and the update), and it never asks which mode it is.

Where the rest lives (the trainer's hooks call one function of each): the critic's files, its Hub pushes
(`CriticPushCallback`) and the resume check of its settings in `trl_srppo.method.critics.checkpoint`; the warm start's
plan and execution in `trl_srppo.method.warm_start`; the prompt pool's loader, sampler and draw in
`trl_srppo.method.prompt_sampling`; the checks of the settings, rewards, critic tokenizer and prompts in
`trl_srppo.method.checks` (`check_trainer_inputs`); safetensors-only loading of the models GRPO loads by name in
`trl_srppo.runtime.reward_models.safe_model_loading`; the choices' meanings on their registry entries (`core`,
`critics.build`, `srppo_config`).

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

Guards: critic values (the prompt pool's too), advantages, the critic's loss and gradients, the policy's loss and
gradients are checked for NaN and inf before any optimizer step or draw uses them, and a reward of +-inf is an error
naming its function.
"""

import dataclasses
import os

import torch
from accelerate.utils import gather
from transformers.utils import logging
from trl import GRPOTrainer

from ..runtime.mixin import RuntimeMixin
from ..runtime.reward_models import safe_model_loading
from ..runtime.step_checks import check_finite, check_finite_rewards
from .batch_metrics import batch_metrics
from .checks import (
    check_outcome_range,
    check_reward_models,
    check_trainer_inputs,
    outcome_settings,
    warn_ignored_grpo_settings,
)
from .core import (
    ADVANTAGE_BASELINES,
    PROMPT_SAMPLING_MODES,
    AdvantageEstimate,
    batch_normalized,
    generated_mask,
    initial_value,
    outcome_from_rewards,
    scorable_mask,
)
from .critics.base import CRITIC_FIX, CriticBatch
from .critics.build import build_critic, critic_model_before_policy
from .critics.checkpoint import (
    CRITIC_SUBFOLDER,
    CriticPushCallback,
    check_resume_settings,
    critic_settings,
    load_critic_checkpoint,
    save_critic,
    save_critic_training_state,
)
from .critics.model import resolve_critic_source
from .critics.optimizer_state import torch_optimizer
from .gradient_noise import measurement_due, policy_gradient_nsr
from .model_card import PAPER, append_srppo_card
from .prompt_sampling import PromptSampler, draw_metrics, pool_dataloader, pool_sampler
from .srppo_config import CRITIC_VALUE_INITS, SRPPOConfig
from .warm_start import run_warm_start, warm_start_critic_steps, warm_start_plan_from_args

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
    "__init__": (
        "builds the critic (and the prompt sampler), after checks of the settings, the reward models, the critic's "
        "tokenizer, the prompts and what the warm start and prompt sampling need of the dataset"
    ),
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
    "_push_from_checkpoint": "hands the checkpoint to `CriticPushCallback`, which pushes the critic with the policy",
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
        with safe_model_loading(model, reward_funcs, args) as reward_funcs:  # safetensors only, as the critic
            critic = critic_model_before_policy(model, critic_model, args)  # before GRPO wraps the policy
            super().__init__(model, reward_funcs, args, *positional, **kwargs)  # GRPOTrainer's arguments, in its order
        self._outcome_func_index, self._outcome_reward_max = outcome_settings(self.args, self.reward_func_names)
        check_trainer_inputs(self, critic, critic_model if isinstance(critic_model, str) else None)
        policy_deepspeed = None  # the policy's DeepSpeed config, whose ZeRO stage a DeepSpeed critic takes
        if self.is_deepspeed_enabled:
            policy_deepspeed = self.accelerator.state.deepspeed_plugin.deepspeed_config
        self.critic_backend = build_critic(
            critic, critic_model, self.model, args, self.accelerator, policy_deepspeed, self.is_fsdp_enabled
        )
        self._critic_push = CriticPushCallback()  # the critic in every Hub push of a checkpoint
        self.add_callback(self._critic_push)
        self._warmup_hook = None  # handle of the policy optimizer's pre-step hook during the critic-only warm-up
        self._finite_hook = None  # handle of the policy optimizer's pre-step hook that checks the gradients
        self._value_init_pending = CRITIC_VALUE_INITS[args.critic_value_init].from_success_rate  # `_start_value_head`
        self._warm_start_pending = args.critic_warm_start_prompts > 0  # `trl_srppo.method.warm_start.run_warm_start`
        self._scoring = None  # the batch's `ScoredRollouts` while `_generate_and_score_completions` runs (see there)
        self._prompt_sampler = None  # `prompt_sampling`: the draw of each generated batch's prompts from its pool
        if PROMPT_SAMPLING_MODES[args.prompt_sampling].draws:
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
        if mode == "train" and self._warm_start_pending:  # `critic_warm_start_prompts`, before the critic is read
            self._warm_start_pending = False
            run_warm_start(self)
        draw = None
        if mode == "train" and self._prompt_sampler is not None:  # a pool of m x the prompts: generate for B of them
            inputs, draw = self._prompt_sampler.draw(self, inputs)
        output, rewards, _, batch, mask = self._scored_batch(inputs, mode)
        completion_mask = output["completion_mask"]  # (B, C), the policy's loss mask
        if "tool_mask" in output:  # the policy loss also masks tool outputs (tokens the policy did not generate)
            completion_mask = completion_mask * output["tool_mask"]  # (B, C)
        critic, step = self.critic_backend, self.state.global_step
        # (B,) the factor 1 / (N p_i) on each drawn rollout's Pass@k weight (its importance weight), or none.
        scale = None if draw is None else draw["ratios"].to(rewards.device)

        def estimate_rows(values, rows, k=None):  # (b, C) values of the rows `rows` -> their estimate
            row_scale = None if scale is None else scale[rows]
            return self._advantage_estimate(values, rewards[rows], mask[rows], row_scale, k)

        update = None
        if mode == "train":
            # The critic's values before it sees this batch, the advantages from them, and only then its update.
            update = critic.learn(batch, mask, estimate_rows, self._critic_steps_per_generation(), step)
            values_old, estimate = update.values, update.estimate
        else:
            values_old = critic.values(batch, step)  # (B, C)
            estimate = estimate_rows(values_old, torch.arange(values_old.size(0), device=values_old.device))
        if draw is not None:
            for name, value in draw_metrics(draw, estimate.weights, gather).items():
                self._metrics["train"][name].append(value)
        if self.args.pass_at_k_normalize:  # the weights over their batch mean
            estimate = batch_normalized(estimate, rewards, completion_mask, self.accelerator.gather)
        advantages = estimate.advantages * completion_mask  # (B, C), none for tokens the policy loss masks
        check_finite("advantages", advantages, step, CRITIC_FIX)
        self._log_metrics(mode, values_old, rewards, estimate, advantages, completion_mask, update)
        nsr_steps = self.args.gradient_nsr_steps
        if mode == "train" and measurement_due(step, self._critic_steps_per_generation(), nsr_steps):
            # The same rollouts and values at k = 1: the gradient without the Pass@k weight.
            unweighted = estimate_rows(values_old, torch.arange(values_old.size(0), device=values_old.device), k=1)
            nsr = policy_gradient_nsr(self, output, rewards, estimate, unweighted, completion_mask)
            for name, value in nsr.items():
                self._metrics["train"][name].append(value)
        output["advantages"] = advantages  # replaces GRPO's group-normalised (B,) advantages
        return output

    def _scored_batch(self, inputs, mode: str) -> tuple[dict, torch.Tensor, torch.Tensor, CriticBatch, torch.Tensor]:
        """GRPO's generation and scoring of `inputs` ([`_scored_rollouts`]), as the critic reads it: GRPO's output,
        each local rollout's outcome `Y` (`(B,)`, NaN where unscorable) and generated length (`(B,)`), the critic's
        batch, and its loss mask (`(B, C)`, the tokens of scorable rollouts). A fresh value head starts here, from
        the first training batch's success rate (`critic_value_init`)."""
        output, rewards, lengths = self._scored_rollouts(inputs)
        if mode == "train" and self._value_init_pending:
            self._start_value_head(rewards)
        batch, critic_mask = self._critic_batch(output, lengths, mode)
        return output, rewards, lengths, batch, scorable_mask(rewards, critic_mask, torch.float32)

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

    def _advantage_estimate(
        self,
        values: torch.Tensor,
        rewards: torch.Tensor,
        mask: torch.Tensor,
        scale: torch.Tensor | None = None,
        k: int | None = None,
    ) -> AdvantageEstimate:
        """Advantages, critic targets, Pass@k weights and loss mask of rows `(B, C)`, row by row; `scale` `(B,)`
        multiplies each row's Pass@k weight (the importance ratio of a drawn prompt, `prompt_sampling`); `k` replaces
        `pass_at_k` (1: the weight left out)."""
        args = self.args
        estimator = ADVANTAGE_BASELINES[args.advantage_baseline]  # `srppo_advantages`, `prompt_baseline_advantages`
        k = args.pass_at_k if k is None else k
        return estimator(values, rewards, mask, k, lam=args.gae_lambda, prompt_scale=scale)

    def _critic_steps_per_generation(self) -> int:
        # One optimizer step per policy step over a generated batch's first pass (at least one); with
        # `num_iterations > 1` the policy makes more, the critic does not. `critic_epochs` multiplies the critic's.
        return max(1, self.args.steps_per_generation // self.args.gradient_accumulation_steps)

    def _log_metrics(self, mode, values, rewards, estimate: AdvantageEstimate, advantages, policy_mask, update=None):
        """The batch's critic and advantage metrics (`trl_srppo.method.batch_metrics`), the critic's update's
        (`update`, a `CriticUpdate`: its loss, learning rate and gradient norm before clipping), and SR-PPO's
        advantages in the completions table."""
        metrics = self._metrics[mode]
        if update is not None:
            metrics["critic/loss"].append(update.loss)
            metrics["critic/learning_rate"].append(update.learning_rate)
            if update.head_learning_rate is not None:
                metrics["critic/head_learning_rate"].append(update.head_learning_rate)
            metrics["critic/grad_norm"].append(update.grad_norm)
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
        plan = warm_start_plan_from_args(args, self.train_dataset)
        warm_start = warm_start_critic_steps(plan, args.critic_warm_start_epochs, steps_per_batch)
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
        # The Trainer's push, whose guards decide; `CriticPushCallback` copies the critic from this folder if it goes.
        self._critic_push.checkpoint_folder = checkpoint_folder
        try:
            super()._push_from_checkpoint(checkpoint_folder)
        finally:
            self._critic_push.checkpoint_folder = None

    def _critic_settings(self) -> dict:
        """What `critic/` records of how its critic was trained (`trl_srppo.method.critics.checkpoint`)."""
        return critic_settings(self.args, hasattr(self.accelerator.unwrap_model(self.model), "peft_config"))

    def _check_resume_settings(self, checkpoint: str) -> None:
        # Called by the runtime before a resume loads anything: a checkpoint written with other critic settings.
        check_resume_settings(checkpoint, self._critic_settings())

    def _load_optimizer_and_scheduler(self, checkpoint):
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is not None:
            load_critic_checkpoint(self.critic_backend, checkpoint)
            self._warm_start_pending = False  # the checkpoint's critic has had its warm start
            if self._prompt_sampler is not None:
                self._prompt_sampler.load(checkpoint)

    # ---- the data loader of prompt sampling ------------------------------------------------------------------------

    def _pool_factor(self) -> int:
        # The prompts of a generated batch in the loader's, per prompt generated for (the runtime's start-up checks).
        return 1 if self._prompt_sampler is None else self.args.prompt_pool_factor

    def get_train_dataloader(self):
        """GRPO's loader; with prompt sampling, each generated batch holds `prompt_pool_factor` times the prompts."""
        if self._prompt_sampler is None:
            return super().get_train_dataloader()
        return pool_dataloader(self)

    def _get_train_sampler(self, dataset=None):
        # GRPO's sampler (exact on resume: `ReliableTrainerMixin`); with prompt sampling, its chunk of prompts per
        # generated batch `prompt_pool_factor` times larger.
        sampler = super()._get_train_sampler(dataset)
        if self._prompt_sampler is None:
            return sampler
        return pool_sampler(sampler, self._pool_factor())

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
    sampler, logs and model card; no reward deadline, and no wait for gloo's threads at exit). Takes the same arguments
    as [`SRPPOTrainer`]."""

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
   (`trl_srppo.core.outcome_from_rewards`).
3. The critic's values `qhat(s_0) .. qhat(s_{T-1})` on prompt + completion, computed *before* the critic learns from
   this batch (a baseline must not depend on its own rollout's outcome).
4. Token advantages `A_t = w_k(s_0) * GAE_t` (gamma = 1, lambda = `gae_lambda`, the outcome as terminal reward), with
   the Pass@k weight `w_k(s_0) = k (1 - qhat(s_0))^(k-1)`: see `trl_srppo.core`. With
   `advantage_baseline="prompt"`, `A_t = w_k(s_0) * (Y - qhat(s_0))` for every token instead.
5. The critic's update on the same batch, with its own optimizer and learning-rate schedule. When it makes a single
   optimizer step per batch, steps 3 and 5 share one forward pass (`critic_fused_forward`): its values, detached,
   are those before the step.
6. The policy loss: GRPO's clipped surrogate (and KL, and loss aggregation) with `(B, T)` advantages.

With `critic_type="policy_head"` the critic is a small value head on the policy's own last hidden states
(`trl_srppo.policy_value_head`), and no forward is added to GRPO's: step 3 reads the hidden states of GRPO's
old-log-probability forward at generation when there is one, and otherwise those of the policy's training forward
(steps 3 and 4 then run per micro-batch inside step 6, before GRPO's loss reads the advantages); step 5 happens in
step 6, on the hidden states of the training forward, the head stepping with the policy's optimizer. With
`critic_type="policy_lora"` (a LoRA policy) the critic is a second LoRA adapter and a value head on the policy's own
base model (`trl_srppo.policy_lora_critic`): steps 3 and 5 as for the separate critic, the critic's adapter switched
in for its forward and backward.

Launch: `accelerate launch --num_processes 2 your_script.py` (DDP; the critic is wrapped by Accelerate too, so its
gradients are all-reduced and its weights stay identical across processes).

Overridden `GRPOTrainer` / `Trainer` methods (`tests/test_trl_hooks.py` fails if TRL renames them):
`_calculate_rewards`, `_generate_and_score_completions`, `_get_per_token_logps_and_entropies`, `_compute_loss`,
`create_scheduler`, `save_model`, `_save_optimizer_and_scheduler`, `_load_optimizer_and_scheduler`,
`create_model_card`, `_push_from_checkpoint`; through `trl_srppo.reliable_trainer.ReliableTrainerMixin` (complete
checkpoints, exact resume): `train`, `_save_checkpoint`, `_init_training_state`, `_get_train_sampler`; through
`trl_srppo.run_output.RunOutputMixin` (what the run shows its user): `_generate_single_turn`, `_calculate_rewards`,
`log`, `create_model_card`, `_issue_warnings_after_load`.

Guards: critic values, advantages, the critic's loss and gradients, the policy's loss and gradients are checked for
NaN and inf before any optimizer step uses them, and a reward of +-inf is an error naming its function; each call of
a Python reward function, sync or async, has a deadline (`reward_timeout`).
"""

import contextlib
import json
import os
import shutil
import textwrap

import torch
from accelerate.utils import gather
from transformers import get_scheduler
from transformers.utils import logging
from trl import GRPOTrainer

from . import critic_deepspeed, critic_sharding, policy_lora_critic, policy_value_head
from .core import (
    critic_loss,
    critic_values,
    initial_value,
    normalized_weights,
    outcome_from_rewards,
    prompt_baseline_advantages,
    srppo_advantages,
)
from .critic import (
    CRITIC_ADAPTER_SUBFOLDER,
    CRITIC_SETTING_FIELDS,
    CRITIC_SETTINGS,
    CRITIC_SUBFOLDER,
    CRITIC_TRAINING_STATE,
    build_critic,
    prefix_values,
    read_critic_settings,
    resolve_critic_source,
    start_value_head_at,
)
from .guards import check_finite, check_finite_rewards, check_outcome_range
from .reliable_trainer import ReliableTrainerMixin
from .reward_deadline import guard_reward_func
from .reward_models import load_reward_models, reward_func_list
from .run_output import RunOutputMixin
from .safetensors_rules import refuse_pickle_only, safetensors_only, safetensors_required
from .srppo_config import SRPPOConfig
from .startup_checks import (
    check_critic_tokenizer,
    check_prompts,
    check_reward_models,
    outcome_settings,
    warn_ignored_grpo_settings,
    warn_summed_outcome,
)

RECIPE_FILE = "recipe.yaml"  # written to the output folder by `trl-srppo train`, quoted in the model card
logger = logging.get_logger(__name__)


# What to do about a non-finite number, by where it appeared.
_CRITIC_FIX = (
    "Check the critic's starting weights (critic_model_name_or_path, or the checkpoint resumed from), lower "
    "critic_learning_rate, set max_grad_norm (it clips the critic's gradients too) and keep critic_dtype='float32'."
)
_POLICY_FIX = (
    "Lower learning_rate, set max_grad_norm, prefer bf16 to fp16, and check the policy's starting weights and the "
    "rewards."
)


def _has_active_dropout(model: torch.nn.Module) -> bool:
    """Whether a forward in train mode would drop anything: a dropout module, or an attention-dropout rate (applied
    functionally by transformers' attention layers), above 0."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout) and module.p > 0:
            return True
        rate = getattr(module, "attention_dropout", 0.0)
        if isinstance(rate, float) and rate > 0:
            return True
    return False


class SRPPOTrainer(ReliableTrainerMixin, RunOutputMixin, GRPOTrainer):
    """Trainer for SR-PPO (Single-Rollout Pass@k Policy Optimization).

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
    """

    _tag_names = ["trl", "sr-ppo"]
    _name = "SR-PPO"
    _paper = {
        "title": "Learning with a Single Rollout via Monte Carlo Pass@k Critic",
        "id": "2606.25451",
        # docstyle-ignore
        "citation": textwrap.dedent("""\
            @article{che2026single,
                title        = {{Learning with a Single Rollout via Monte Carlo Pass@k Critic}},
                author       = {Fengdi Che and Yang Liu and Lei Yu and Meng Cao and Tong Che and
                                Rupam Mahmood and Dale Schuurmans},
                year         = 2026,
                eprint       = {arXiv:2606.25451},
            }"""),
    }

    def __init__(
        self, model, reward_funcs=None, args: SRPPOConfig | None = None, *positional, critic_model=None, **kwargs
    ):
        if args is None:
            model_name = model if isinstance(model, str) else model.config._name_or_path
            args = SRPPOConfig(f"{str(model_name).split('/')[-1]}-SR-PPO")
        if not isinstance(args, SRPPOConfig):
            raise TypeError(
                f"SRPPOTrainer needs an SRPPOConfig, got {type(args).__name__}; build the config with "
                "`SRPPOConfig(...)` (it accepts every GRPOConfig field)."
            )
        if args.fp16:
            raise ValueError("SRPPOTrainer does not support fp16 (the critic has no loss scaler); use bf16=True.")
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
        separate = args.critic_type == "separate"
        critic = build_critic(model, critic_model, args) if separate else None  # before GRPO wraps the policy
        with loading:
            super().__init__(model, reward_funcs, args, *positional, **kwargs)  # GRPOTrainer's arguments, in its order
        self._outcome_func_index, self._outcome_reward_max = outcome_settings(self.args, self.reward_func_names)
        warn_summed_outcome(self.args, self.reward_func_names, self.reward_weights)
        critic_source = critic_model
        check_critic_tokenizer(
            self.model, critic, self.processing_class, critic_source if isinstance(critic_source, str) else None
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
        if separate:
            parallelism = critic_deepspeed.resolve_parallelism(
                args.critic_parallelism,
                critic_deepspeed.policy_zero_stage(policy_deepspeed),
                self.is_fsdp_enabled,
                hasattr(critic, "peft_config"),  # a LoRA critic is small enough to replicate
            )
        else:
            parallelism = args.critic_type  # the value head lives on the policy, wherever the policy is
        if parallelism == "accelerate" and (self.is_deepspeed_enabled or self.is_fsdp_enabled):
            raise ValueError(
                "critic_parallelism='accelerate' cannot be used when the policy runs under DeepSpeed or FSDP "
                "(Accelerate wraps one model per run there); use critic_parallelism='fsdp', 'replicate' or 'auto'."
            )
        if parallelism == "replicate":
            self.critic = self._replicate_critic(critic)
        elif parallelism == "fsdp":
            self.critic = critic_sharding.shard_critic(critic, self.accelerator.device, bf16=bool(args.bf16))
        elif parallelism == "deepspeed":
            config = critic_deepspeed.engine_config(
                policy_deepspeed,
                args.critic_zero_stage,
                args.per_device_train_batch_size,
                self.accelerator.num_processes,
                args.max_grad_norm,
                bf16=bool(args.bf16) or args.critic_dtype == "bfloat16",
            )
            self.critic = critic_deepspeed.wrap_critic(critic, self._new_critic_optimizer(critic), config)
        elif parallelism == "policy_head":
            self.critic = self._build_policy_value_head(critic_source)
        elif parallelism == "policy_lora":
            self.critic = self._build_policy_lora_critic(critic_source)
        else:
            self.critic = self.accelerator.prepare_model(critic)
        self.critic_optimizer = None
        self.critic_lr_scheduler = None
        self._critic_step = 0  # optimizer steps of the critic so far
        self._warmup_hook = None  # handle of the policy optimizer's pre-step hook during the critic-only warm-up
        self._srppo_rewards = None  # (B,) outcome of the local rollouts of the batch being scored
        self._value_init_pending = args.critic_value_init == "success_rate"  # see `_start_value_head`
        self._srppo_completion_lengths = None  # (B,) generated tokens of each local rollout, before any masking
        self._finite_hook = None  # handle of the policy optimizer's pre-step hook that checks the gradients
        self._value_head_hook = None  # handle of the policy optimizer's pre-step hook that steps a policy value head
        self._value_head_losses = []  # the policy value head's loss on each micro-batch since its last step
        self._policy_head_listener = None  # set around GRPO's code: reads the hidden states of each policy forward
        self._policy_head_batch = None  # a generated batch whose values come from its training forwards
        self.reward_funcs = [
            guard_reward_func(f, n, self.args, self._reward_call_site)
            for f, n in zip(self.reward_funcs, self.reward_func_names)
        ]

    def _reward_call_site(self) -> str:
        # Where a reward function runs when it is called, for the message of a call past its deadline.
        return (
            f"on process {self.accelerator.process_index} (phase: scoring the rollouts of global step "
            f"{self.state.global_step})"
        )

    def _replicate_critic(self, critic):
        """The critic beside a DeepSpeed- or FSDP-sharded policy: a whole copy on every process, kept identical by
        torch DDP's gradient all-reduce. Accelerate prepares one DeepSpeed engine or FSDP wrapping per run, for the
        policy; a second trainable model outside it is simplest as plain data parallelism. Memory: the full critic
        with its optimizer state on every GPU (a LoRA critic, `critic_use_peft=True`, keeps that small)."""
        critic = critic.to(self.accelerator.device)
        if self.accelerator.num_processes > 1:
            device = self.accelerator.device
            critic = torch.nn.parallel.DistributedDataParallel(
                critic, device_ids=[device.index] if device.type == "cuda" else None
            )
        return critic

    def _build_policy_value_head(self, source):
        """`critic_type="policy_head"`: the value head on the policy's hidden states (see
        `trl_srppo.policy_value_head`), on this process's device, its gradients averaged by hand at each step."""
        if self.is_deepspeed_enabled:
            raise ValueError(
                "critic_type='policy_head' does not run under DeepSpeed (its head steps from a pre-step hook on the "
                "policy's optimizer, which DeepSpeed's engine does not call); use critic_type='separate', or DDP/FSDP."
            )
        policy_value_head.policy_backbone(self.model)  # a clear error now if the policy has no backbone to read
        return policy_value_head.build_value_head(self.model, source, self.args).to(self.accelerator.device)

    def _build_policy_lora_critic(self, source):
        """`critic_type="policy_lora"`: a second LoRA adapter and a value head on the policy's `PeftModel` (see
        `trl_srppo.policy_lora_critic`)."""
        if self.is_deepspeed_enabled or self.is_fsdp_enabled:
            raise ValueError(
                "critic_type='policy_lora' runs the critic adapter through the policy's own modules, which DeepSpeed "
                "and FSDP shard; use critic_type='separate' with critic_use_peft=True there."
            )
        return policy_lora_critic.build_policy_lora_critic(self.model, source, self.args)

    def _critic_context(self):
        # A policy LoRA critic's update runs with its adapter active and trainable (and the policy's frozen).
        if self.args.critic_type == "policy_lora":
            return self.critic.active()
        return contextlib.nullcontext()

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
        local = slice(
            self.accelerator.process_index * len(prompts), (self.accelerator.process_index + 1) * len(prompts)
        )
        self._srppo_rewards = rewards[local]  # (B,)
        self._srppo_completion_lengths = torch.tensor([len(ids) for ids in completion_ids_list])  # (B,), local
        return rewards_per_func

    # ---- advantages and the critic's update -----------------------------------------------------------------------

    def _generate_and_score_completions(self, inputs):
        forwards = []  # (log-probs, raw head values) of each forward of the policy GRPO makes here (fused head only)
        if self.args.critic_type == "policy_head" and self.args.critic_fused_forward:
            self._policy_head_listener = lambda logps, hidden: forwards.append((logps, self._head_raw(hidden)))
        try:
            output = super()._generate_and_score_completions(inputs)
        finally:
            self._policy_head_listener = None
        mode = "train" if self.model.training else "eval"
        rewards, self._srppo_rewards = self._srppo_rewards, None  # (B,)
        lengths, self._srppo_completion_lengths = self._srppo_completion_lengths, None  # (B,)
        if mode == "train" and self._value_init_pending:
            start = self._start_value_head(rewards)
            if start is not None and forwards:  # the fresh head (all zero) gave raw value 0 in GRPO's forwards above
                forwards[:] = [(log_probs, raw + start) for log_probs, raw in forwards]
        completion_mask = output["completion_mask"]  # (B, C), the policy's loss mask
        critic_mask = self._critic_mask(completion_mask, lengths)  # (B, C), every generated token
        if "tool_mask" in output:  # the policy loss also masks tool outputs (tokens the policy did not generate)
            completion_mask = completion_mask * output["tool_mask"]  # (B, C)
        input_ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)  # (B, P + C)
        attention_mask = torch.cat([output["prompt_mask"], critic_mask], dim=1)  # (B, P + C)
        logits_to_keep = output["completion_ids"].size(1)
        batch_size = self.args.per_device_train_batch_size if mode == "train" else self.args.per_device_eval_batch_size

        fused = (
            mode == "train"
            and self.args.critic_fused_forward
            and self.args.critic_epochs == 1
            and self._critic_steps_per_generation() == 1
            and not _has_active_dropout(self._critic_network())  # the fused forward runs in train mode
        )
        if self.args.critic_type == "policy_head":
            # 1-2 from the head as it is now; it learns from the batch in the policy's training forward (3).
            values_old, estimate = self._policy_head_estimate(output, rewards, batch_size, forwards, mode)
            if values_old is None:  # on-policy: 1-2 happen in the training forward of each micro-batch
                return output
        elif fused:
            # 1-3 in one forward: a single critic step per batch, whose forward gives the values before the step
            # (detached, for the advantages) and the loss of the step.
            with self._critic_context():
                values_old, estimate = self._update_critic(
                    input_ids, attention_mask, logits_to_keep, None, critic_mask, None, rewards=rewards
                )
        else:
            # 1. Values of the critic as it is *before* it sees this batch.
            raw_old = self._critic_raw_values(input_ids, attention_mask, logits_to_keep, batch_size)  # (B, C)
            values_old = critic_values(raw_old, self.args.critic_head)  # (B, C)
            check_finite("critic values", values_old, self.state.global_step, _CRITIC_FIX)

            # 2. Advantages from those values.
            estimate = self._advantage_estimate(values_old, rewards, critic_mask)

            # 3. Only now does the critic learn from the batch.
            if mode == "train":
                with self._critic_context():
                    self._update_critic(
                        input_ids, attention_mask, logits_to_keep, estimate["returns"], estimate["mask"], values_old
                    )
        estimate = self._normalize_weights(estimate, rewards, completion_mask)
        advantages = estimate["advantages"] * completion_mask  # (B, C), none for tokens the policy loss masks
        check_finite("advantages", advantages, self.state.global_step, _CRITIC_FIX)
        self._log_metrics(mode, values_old, rewards, estimate, advantages, completion_mask)

        output["advantages"] = advantages  # replaces GRPO's group-normalised (B,) advantages
        return output

    def _start_value_head(self, rewards) -> float | None:
        """`critic_value_init="success_rate"`: before the first batch's values are read, a fresh value head (all zero)
        is set to output the batch's success rate (`rewards`, `(B,)` local, NaN where unscorable; the rate is over
        every process's scorable rollouts) for every prefix; a batch with no scorable rollout leaves it for the next.
        A loaded, trained or resumed head is left as it is (it is not all zero); a head resumed from a checkpoint
        written before it started is started here, as the run that wrote it would have.
        Returns the raw value the head now starts at, or `None` where it was left as it was."""
        self._value_init_pending = False
        raw = initial_value(self.accelerator.gather(rewards), self.args.critic_head)
        if raw is None:  # no scorable rollout in the batch: try the next one
            self._value_init_pending = True
            return None
        if critic_deepspeed.is_engine(self.critic):
            started = critic_deepspeed.start_value_head(self.critic, raw)
        else:
            started = start_value_head_at(self.accelerator.unwrap_model(self.critic), raw)
        if not started:
            return None
        logger.info(f"The value head starts at {raw:.4f} (raw), the first batch's success rate.")
        return raw

    def _policy_head_estimate(self, output, rewards, batch_size, forwards, mode):
        """Values `(B, C)` of the policy value head before it learns from this batch, and the advantage estimate; the
        head's targets travel with the batch to `_compute_loss`. The head sees what the policy's training forward
        sees: GRPO's attention mask, `completion_mask`.

        The values come from the forward of GRPO's old log-probabilities (`forwards`, read at generation), or, with
        `critic_fused_forward=False`, from a no-grad forward of the backbone of their own. When GRPO made no such
        forward (on-policy), they come from each micro-batch's training forward instead: this returns `(None, None)`,
        with the batch's outcomes, and its row numbers through GRPO's shuffle and split, in `output`."""
        completion_mask = output["completion_mask"]  # (B, C)
        # The head's loss tokens (those of scorable rollouts), counted over every process's generated batch: the
        # normaliser of its shared-backbone term, as `num_items_in_batch` is GRPO's.
        scorable_tokens = (completion_mask * torch.isfinite(rewards).unsqueeze(1)).sum()
        output["srppo_value_tokens"] = self.accelerator.gather(scorable_tokens.reshape(1)).sum()  # ()
        raw = policy_value_head.values_of_forward(forwards, output.get("old_per_token_logps"))  # (B, C) or None
        if raw is None and self.args.critic_fused_forward:
            del output["advantages"]  # GRPO's; SR-PPO's are made in the first training forward on each row
            output["srppo_rewards"] = rewards  # (B,)
            output["srppo_rows"] = torch.arange(len(rewards), device=rewards.device)  # (B,)
            self._policy_head_batch = {"output": output, "mode": mode, "parts": []}
            return None, None
        if raw is None:
            raw = self._policy_head_values_pass(output, batch_size)  # (B, C)
        values = critic_values(raw, self.args.critic_head)  # (B, C)
        check_finite("critic values", values, self.state.global_step, _CRITIC_FIX)
        estimate = self._advantage_estimate(values, rewards, completion_mask)
        output["srppo_value_targets"] = estimate["returns"]  # (B, C)
        output["srppo_value_mask"] = estimate["mask"]  # (B, C)
        output["srppo_old_values"] = values  # (B, C)
        return values, estimate

    def _policy_head_values_pass(self, output, batch_size):
        """`critic_fused_forward=False`: the head's raw values `(B, C)` from a no-grad forward of the policy's
        backbone of their own, with GRPO's attention mask."""
        input_ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)  # (B, P + C)
        attention_mask = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)  # (B, P + C)
        hidden = policy_value_head.policy_hidden_states(
            policy_value_head.policy_backbone(self.model),
            input_ids,
            attention_mask,
            output["completion_ids"].size(1),
            batch_size,
            autocast=self.accelerator.autocast,
        )  # (B, C, H)
        return self._head_raw(hidden)

    @torch.no_grad()
    def _head_raw(self, hidden):
        # `(B, C, H)` hidden states -> `(B, C)` raw values of the policy value head as it is now.
        return self.critic(hidden)

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, *args, **kwargs):
        # GRPO's forward of the policy (log-probabilities), unchanged. While a policy value head's listener is set,
        # a forward hook on the policy's backbone hands it the `(B, C, H)` hidden states of the prefixes with the
        # log-probabilities `(B, C)`, before GRPO uses them.
        listener = self._policy_head_listener
        if listener is None or model is self.ref_model:
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, *args, **kwargs
            )
        with policy_value_head.capture_hidden_states(policy_value_head.policy_backbone(model)) as captured:
            result = super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, *args, **kwargs
            )
        hidden = torch.cat([policy_value_head.completion_states(h, logits_to_keep) for h in captured])  # (B, C, H)
        listener(result[0], hidden)
        return result

    def _normalize_weights(self, estimate, rewards, policy_mask):
        """`pass_at_k_normalize`: the estimate with its Pass@k weights divided by their mean over the rows, of every
        process, that move the policy: a scorable outcome (`rewards`, `(B,)`, NaN where unscorable) and a token in the
        policy's loss mask (`policy_mask`, `(B, C)`; none for a truncated completion under
        `mask_truncated_completions`). `A_t = w_k GAE_t`, so the advantages are divided by the same mean."""
        if not self.args.pass_at_k_normalize:
            return estimate
        moves = torch.isfinite(rewards) & policy_mask.bool().any(dim=1)  # (B,)
        local = torch.stack([(estimate["weights"] * moves).sum(), moves.sum().to(estimate["weights"].dtype)])  # (2,)
        weight_sum, rows = self.accelerator.gather(local).view(-1, 2).sum(dim=0).tolist()  # every process's rows
        if rows == 0 or weight_sum <= 0:  # nothing moves the policy (or every such prompt has weight 0)
            return estimate
        batch_mean = weight_sum / rows
        weights = normalized_weights(estimate["weights"], batch_mean)  # (B,)
        return {**estimate, "weights": weights, "advantages": estimate["advantages"] / batch_mean}  # (B, C)

    def _advantage_estimate(self, values, rewards, mask):
        """Advantages, critic targets, Pass@k weights and loss mask of rows `(B, C)`, row by row."""
        if self.args.advantage_baseline == "prompt":
            return prompt_baseline_advantages(values, rewards, mask, self.args.pass_at_k)
        return srppo_advantages(values, rewards, mask, self.args.pass_at_k, gamma=1.0, lam=self.args.gae_lambda)

    def _critic_mask(self, completion_mask, lengths):
        """The tokens the critic sees and learns from. With `mask_truncated_completions`, GRPO zeroes the mask of a
        truncated completion so the policy ignores it; the critic still learns from it (its outcome is part of the
        success rate it estimates), so its mask is rebuilt from the number of tokens each completion really has
        (`lengths`, `(B,)`): a completion cut short by a `rollout_func`, stop strings or a context limit keeps its pad
        positions masked."""
        if not self.mask_truncated_completions:
            return completion_mask
        positions = torch.arange(completion_mask.size(1), device=completion_mask.device)  # (C,)
        return (positions.unsqueeze(0) < lengths.to(completion_mask.device).unsqueeze(1)).to(completion_mask.dtype)

    def _critic_network(self) -> torch.nn.Module:
        """What a critic forward runs: the critic, or, for `critic_type="policy_lora"`, the policy's backbone too
        (held by the critic, not registered in it)."""
        critic = self.accelerator.unwrap_model(self.critic)
        if isinstance(critic, policy_lora_critic.PolicyLoraCritic):
            return torch.nn.ModuleList([critic, critic.backbone])
        return self.critic

    def _critic_autocast(self):
        # Explicit, because Accelerate's autocast is a no-op under DeepSpeed, where the critic runs beside the engine.
        return torch.autocast(self.accelerator.device.type, dtype=torch.bfloat16, enabled=bool(self.args.bf16))

    @torch.no_grad()
    def _critic_raw_values(self, input_ids, attention_mask, logits_to_keep, batch_size):
        self.critic.eval()
        chunks = []
        for i in range(0, input_ids.size(0), batch_size):
            rows = slice(i, i + batch_size)
            with self._critic_autocast():
                chunks.append(prefix_values(self.critic, input_ids[rows], attention_mask[rows], logits_to_keep))
        return torch.cat(chunks, dim=0)  # (B, C)

    def _critic_steps_per_generation(self) -> int:
        # One optimizer step per policy step over a generated batch's first pass (at least one); with
        # `num_iterations > 1` the policy makes more, the critic does not. `critic_epochs` multiplies the critic's.
        return max(1, self.args.steps_per_generation // self.args.gradient_accumulation_steps)

    def _update_critic(self, input_ids, attention_mask, logits_to_keep, returns, mask, old_values, rewards=None):
        """The critic's optimizer steps on a generated batch: `critic_epochs` passes, each split into mini-batches.

        Given `rewards` (`(B,)`, the fused step: one optimizer step, `returns` and `old_values` `None`, `mask` the
        critic's token mask), each micro-batch's forward also gives the values before the step: detached, they make
        that micro-batch's advantages, returns and clipping reference (the estimate is row by row, so micro-batches
        give the same numbers as the whole batch). Returns then the values `(B, C)` and the advantage estimate.
        """
        args = self.args
        params = [p for p in self.critic.parameters() if p.requires_grad]
        mini_batches = torch.arange(input_ids.size(0), device=input_ids.device).tensor_split(
            self._critic_steps_per_generation()
        )
        fused = rewards is not None
        if fused:
            if args.critic_epochs != 1 or len(mini_batches) != 1:
                raise ValueError("The fused critic step needs a single optimizer step per generated batch.")
            # The loss mask `srppo_advantages` returns, known before the values: tokens of scorable rollouts.
            mask = mask.float() * torch.isfinite(rewards).unsqueeze(1)  # (B, C)
            values_chunks, estimates = [], []
        self.critic.train()
        losses = []
        for _ in range(args.critic_epochs):
            for rows in mini_batches:
                # Token mean over the mini-batch of *all* processes: DDP averages the processes' gradients, so each
                # process scales its token sum by `num_processes / global tokens`.
                global_tokens = self.accelerator.gather(mask[rows].sum().reshape(1)).sum().clamp(min=1.0)
                scale = self.accelerator.num_processes / global_tokens
                micro_batches = rows.split(args.per_device_train_batch_size)
                step_loss = torch.zeros((), device=input_ids.device)
                for i, idx in enumerate(micro_batches):
                    last = i == len(micro_batches) - 1
                    with self._critic_accumulation(last):  # all-reduce the gradients once per optimizer step
                        with self._critic_autocast():
                            raw = prefix_values(self.critic, input_ids[idx], attention_mask[idx], logits_to_keep)
                        if fused:
                            values = critic_values(raw.detach(), args.critic_head)  # (b, C), before the step
                            check_finite("critic values", values, self.state.global_step, _CRITIC_FIX)
                            estimate = self._advantage_estimate(values, rewards[idx], mask[idx])
                            values_chunks.append(values)
                            estimates.append(estimate)
                            targets, reference = estimate["returns"], values
                        else:
                            targets, reference = returns[idx], old_values[idx]
                        loss = critic_loss(
                            raw,  # (b, C)
                            targets,
                            mask[idx],
                            head=args.critic_head,
                            loss_type=args.critic_loss_type,
                            mse_coef=args.critic_mse_coef,
                            old_values=reference,
                            cliprange_value=args.critic_cliprange_value,
                        )
                        loss = loss * mask[idx].sum().clamp(min=1.0) * scale  # token mean -> share of global mean
                        self._critic_backward(loss)
                    step_loss += loss.detach() / self.accelerator.num_processes
                check_finite("critic loss", step_loss, self.state.global_step, _CRITIC_FIX)
                # The rate of this step, as transformers logs the policy's.
                learning_rate = self.critic_lr_scheduler.get_last_lr()[0]
                self._critic_optimizer_step(params)
                self.critic_lr_scheduler.step()
                self._critic_step += 1
                losses.append(self.accelerator.gather(step_loss.reshape(1)).sum())  # the global token mean
        self._metrics["train"]["critic/loss"].append(torch.stack(losses).mean().item())
        self._metrics["train"]["critic/learning_rate"].append(learning_rate)
        if fused:
            return torch.cat(values_chunks), {key: torch.cat([e[key] for e in estimates]) for key in estimates[0]}

    def _critic_accumulation(self, last: bool):
        # Context for one micro-batch's backward: gradients are reduced across processes at the step's last one.
        if critic_deepspeed.is_engine(self.critic):
            return critic_deepspeed.accumulation_boundary(self.critic, last)
        return contextlib.nullcontext() if last or not hasattr(self.critic, "no_sync") else self.critic.no_sync()

    def _critic_backward(self, loss):
        if critic_deepspeed.is_engine(self.critic):
            self.critic.backward(loss, scale_wrt_gas=False)  # the loss is already this micro-batch's share
        else:
            loss.backward()

    def _critic_optimizer_step(self, params):
        # Check the gradients, clip them (`max_grad_norm`), step and zero them.
        args = self.args
        if critic_deepspeed.is_engine(self.critic):  # the engine clips, and skips a non-finite step
            check_finite("critic gradients", critic_deepspeed.step(self.critic), self.state.global_step, _CRITIC_FIX)
            return
        if args.critic_type == "policy_lora":  # frozen when DDP wrapped the policy: averaged by hand
            policy_lora_critic.average_gradients(params, self.accelerator.num_processes)
        grad_norm = torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None])
        check_finite("critic gradients", grad_norm, self.state.global_step, _CRITIC_FIX)
        if args.max_grad_norm is not None and args.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(params, args.max_grad_norm)
        self.critic_optimizer.step()
        self.critic_optimizer.zero_grad(set_to_none=True)

    def _log_metrics(self, mode, values, rewards, estimate, advantages, policy_mask):
        """Critic and advantage metrics over the global batch, from sums reduced across processes (every process
        makes the same collective calls with tensors of the same shape)."""
        mask = estimate["mask"]  # (B, C), tokens of scorable rollouts the critic sees
        scorable = torch.isfinite(rewards)  # (B,)
        y = torch.where(scorable, rewards, torch.zeros_like(rewards))  # (B,)
        returns = estimate["returns"]  # (B, C)
        adv_mask = policy_mask * scorable.unsqueeze(1)  # (B, C), tokens that carry a policy advantage
        weights = estimate["weights"]  # (B,)
        sums = torch.stack(
            [
                mask.sum(),
                (values * mask).sum(),
                ((values - y.unsqueeze(1)) ** 2 * mask).sum(),  # Brier score of every prefix
                scorable.sum(),
                ((values[:, 0] - y) ** 2 * scorable).sum(),  # Brier score of qhat(s_0)
                (returns * mask).sum(),
                (returns**2 * mask).sum(),
                ((returns - values) * mask).sum(),
                ((returns - values) ** 2 * mask).sum(),
                adv_mask.sum(),
                (advantages * adv_mask).sum(),
                (advantages**2 * adv_mask).sum(),
                (weights * scorable).sum(),
            ]
        ).double()
        totals = gather(sums.reshape(1, -1)).sum(0).tolist()
        n_tok, s_v, s_brier, n_seq, s_brier0, s_y, s_y2, s_e, s_e2, n_adv, s_a, s_a2, s_w = totals
        inf = torch.tensor(float("inf"), device=values.device, dtype=torch.float32)
        extremes = torch.stack(
            [
                torch.where(adv_mask.bool(), advantages, inf).min(),
                -torch.where(adv_mask.bool(), advantages, -inf).max(),
                torch.where(scorable, weights, inf).min(),
                -torch.where(scorable, weights, -inf).max(),
            ]
        )
        a_min, neg_a_max, w_min, neg_w_max = gather(extremes.reshape(1, -1)).min(0).values.tolist()

        metrics = self._metrics[mode]
        if n_tok > 0:
            metrics["critic/value_mean"].append(s_v / n_tok)
            metrics["critic/brier_tokens"].append(s_brier / n_tok)
            var_y = s_y2 / n_tok - (s_y / n_tok) ** 2
            if var_y > 1e-12:  # undefined when every outcome in the batch is the same
                var_e = s_e2 / n_tok - (s_e / n_tok) ** 2
                metrics["critic/explained_variance"].append(1.0 - var_e / var_y)
        if n_seq > 0:
            metrics["critic/brier"].append(s_brier0 / n_seq)
            metrics["passk/weight_mean"].append(s_w / n_seq)
            metrics["passk/weight_min"].append(w_min)
            metrics["passk/weight_max"].append(-neg_w_max)
        if n_adv > 0:
            mean = s_a / n_adv
            metrics["advantages/mean"].append(mean)
            metrics["advantages/std"].append(max(s_a2 / n_adv - mean**2, 0.0) ** 0.5)
            metrics["advantages/min"].append(a_min)
            metrics["advantages/max"].append(-neg_a_max)

        # GRPO logged its group-normalised advantages (all 0 with one rollout per prompt) for the completions table;
        # replace them with each rollout's SR-PPO advantage at its first token, w_k(s_0) * (Y - qhat(s_0)).
        first = gather(advantages[:, 0].float())  # (N,)
        logged = self._logs["advantages"]
        for _ in range(min(len(first), len(logged))):
            logged.pop()
        logged.extend(first.tolist())
        group_size = self.num_generations if mode == "train" else self.num_generations_eval
        if group_size == 1 and metrics["frac_reward_zero_std"]:
            metrics["frac_reward_zero_std"].pop()  # a group of one always has zero spread: meaningless here
            if not metrics["frac_reward_zero_std"]:
                del metrics["frac_reward_zero_std"]  # else logged as None at every step

    # ---- policy loss ----------------------------------------------------------------------------------------------

    def _compute_loss(self, model, inputs):
        if self.args.critic_type == "policy_head":
            loss = self._policy_loss_and_value_head(model, inputs)
        else:
            loss = super()._compute_loss(model, inputs)
        if model.training:
            check_finite("policy loss", loss, self.state.global_step, _POLICY_FIX)
        if self._in_critic_warmup():
            loss = loss * 0.0  # critic-only warm-up: no gradient reaches the policy
        return loss

    def _policy_loss_and_value_head(self, model, inputs):
        """GRPO's loss, whose forward also gives the policy value head its hidden states. On a micro-batch without
        values yet (on-policy), the head's values and the advantages are made from them before GRPO's loss reads the
        advantages. In training, the head's loss is back-propagated into the head (features detached), and with
        `critic_policy_head_coef > 0` added, times the coefficient, to the returned loss through the backbone (the
        head's weights detached there)."""
        args = self.args
        seen = []  # (hidden states (B, C, H), the head's raw values (B, C)) of the training forward

        def read_forward(log_probs, hidden):
            raw = self.critic(hidden.detach())  # (B, C), a graph into the head alone
            if "srppo_old_values" not in inputs:  # the first pass on these rows: the head has not learned them
                self._policy_head_values_from_forward(inputs, raw.detach())
            seen.append((hidden, raw))

        self._policy_head_listener = read_forward
        try:
            loss = super()._compute_loss(model, inputs)
        finally:
            self._policy_head_listener = None
        self._finish_policy_head_batch()
        if not model.training:
            return loss
        hidden, raw = seen[0]  # GRPO's loss makes one forward of the micro-batch
        targets, mask, old = inputs["srppo_value_targets"], inputs["srppo_value_mask"], inputs["srppo_old_values"]

        tokens = mask.sum()  # the head's loss tokens in this micro-batch

        def head_loss_sum(raw):  # (B, C) -> the loss summed over this micro-batch's tokens
            return tokens * critic_loss(
                raw,
                targets,
                mask,
                head=args.critic_head,
                loss_type=args.critic_loss_type,
                mse_coef=args.critic_mse_coef,
                old_values=old,
                cliprange_value=args.critic_cliprange_value,
            )

        # Into the head alone; its step divides the summed gradients by the step's token count over every
        # micro-batch and process, so that it learns the token mean of its step whatever the split, as the
        # separate critic does.
        value_loss_sum = head_loss_sum(raw)
        value_loss_sum.backward()
        self._value_head_losses.append(torch.stack([value_loss_sum.detach(), tokens.detach().to(raw.dtype)]))
        if args.critic_policy_head_coef > 0:
            # Through the backbone, normalised as GRPO's token-level losses are: by the generated batch's token
            # count, spread over its optimizer steps (`num_items_in_batch` for `loss_type="dapo"`).
            steps = args.steps_per_generation / self.current_gradient_accumulation_steps
            batch_tokens = inputs.get("srppo_value_tokens")  # absent from a batch kept by an earlier version
            if batch_tokens is None:  # this micro-batch's count stands for every one of the batch
                batch_tokens = tokens * self.accelerator.num_processes * args.steps_per_generation
            normalizer = batch_tokens.clamp(min=1.0) / (self.accelerator.num_processes * steps)
            shared = head_loss_sum(policy_value_head.shared_backbone_raw(self.critic, hidden)) / normalizer
            loss = loss + args.critic_policy_head_coef * shared
        return loss

    def _policy_head_values_from_forward(self, inputs, raw):
        """On-policy values of a micro-batch from the head's raw values `(b, C)` on its training forward, and its
        advantages and the head's targets, written into `inputs` (GRPO's buffered micro-batch, so that later passes
        over it reuse them) and kept for the generated batch's metrics."""
        values = critic_values(raw, self.args.critic_head)  # (b, C)
        check_finite("critic values", values, self.state.global_step, _CRITIC_FIX)
        completion_mask = inputs["completion_mask"]  # (b, C)
        estimate = self._advantage_estimate(values, inputs["srppo_rewards"], completion_mask)
        policy_mask = completion_mask * inputs["tool_mask"] if "tool_mask" in inputs else completion_mask  # (b, C)
        # Over this micro-batch: the later ones have no values yet.
        estimate = self._normalize_weights(estimate, inputs["srppo_rewards"], policy_mask)
        advantages = estimate["advantages"] * policy_mask  # (b, C)
        check_finite("advantages", advantages, self.state.global_step, _CRITIC_FIX)
        inputs["advantages"] = advantages
        inputs["srppo_value_targets"] = estimate["returns"]  # (b, C)
        inputs["srppo_value_mask"] = estimate["mask"]  # (b, C)
        inputs["srppo_old_values"] = values  # (b, C)
        self._policy_head_batch["parts"].append((inputs["srppo_rows"], values, estimate, advantages, policy_mask))

    def _finish_policy_head_batch(self):
        # Once every row of a generated batch has its on-policy values: the whole batch's values, advantages and
        # targets into its generation output, in its order, and its metrics, as the other paths log them.
        batch = self._policy_head_batch
        if batch is None:
            return
        output, parts = batch["output"], batch["parts"]
        rows = [part[0] for part in parts]
        if sum(len(r) for r in rows) < len(output["srppo_rewards"]):
            return

        def whole(chunks):
            return policy_value_head.in_row_order(rows, chunks)

        values, advantages, policy_mask = (whole([part[i] for part in parts]) for i in (1, 3, 4))  # (B, C)
        estimate = {key: whole([part[2][key] for part in parts]) for key in parts[0][2]}
        output["advantages"] = advantages
        output["srppo_value_targets"] = estimate["returns"]
        output["srppo_value_mask"] = estimate["mask"]
        output["srppo_old_values"] = values
        self._log_metrics(batch["mode"], values, output["srppo_rewards"], estimate, advantages, policy_mask)
        self._policy_head_batch = None

    def _step_value_head(self, optimizer, args, kwargs):
        # Policy optimizer pre-step hook: one step of the policy value head's own optimizer with each of the policy's.
        params = [p for p in self.critic.parameters() if p.requires_grad]
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        # (loss summed over tokens, tokens) of this step's micro-batches here, then over every process.
        losses, self._value_head_losses = self._value_head_losses, []
        totals = torch.stack(losses).sum(dim=0) if losses else torch.zeros(2, device=params[0].device)  # (2,)
        if self.accelerator.num_processes > 1:
            for p in params:
                torch.distributed.all_reduce(p.grad)
            torch.distributed.all_reduce(totals)
        loss_sum, tokens = totals[0], totals[1].clamp(min=1.0)
        for p in params:
            p.grad /= tokens  # the gradient of the step's token mean
        grad_norm = torch.nn.utils.get_total_norm([p.grad for p in params])
        check_finite("critic gradients", grad_norm, self.state.global_step, _CRITIC_FIX)
        if self.args.max_grad_norm is not None and self.args.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(params, self.args.max_grad_norm)
        learning_rate = self.critic_lr_scheduler.get_last_lr()[0]  # this step's, as transformers logs the policy's
        self.critic_optimizer.step()
        self.critic_lr_scheduler.step()
        self.critic_optimizer.zero_grad(set_to_none=True)
        self._critic_step += 1
        if losses:
            loss = loss_sum / tokens  # the step's token mean
            check_finite("critic loss", loss, self.state.global_step, _CRITIC_FIX)
            self._metrics["train"]["critic/loss"].append(loss.item())
        self._metrics["train"]["critic/learning_rate"].append(learning_rate)

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
            if self.args.critic_warmup_steps > 0 and self._warmup_hook is None:
                # Under Accelerate's wrapper (and DeepSpeed's ZeRO optimizer), the torch optimizer that updates the
                # weights: with its gradients dropped, ZeRO copies back unchanged weights.
                policy_optimizer = critic_deepspeed.torch_optimizer(self.optimizer)
                if policy_optimizer is None:
                    raise ValueError(
                        f"critic_warmup_steps={self.args.critic_warmup_steps} skips the policy's optimizer steps "
                        f"through a torch optimizer's pre-step hook, but the policy's optimizer "
                        f"({type(self.optimizer).__name__}) wraps no torch optimizer. Set critic_warmup_steps=0, or "
                        "use an optimizer built on torch.optim.Optimizer."
                    )
                self._warmup_hook = policy_optimizer.register_step_pre_hook(self._skip_policy_step_in_warmup)
            if self._finite_hook is None and not self.is_deepspeed_enabled:
                policy_optimizer = getattr(self.optimizer, "optimizer", self.optimizer)
                self._finite_hook = policy_optimizer.register_step_pre_hook(self._check_policy_gradients)
            if self.args.critic_type == "policy_head" and self._value_head_hook is None:
                policy_optimizer = getattr(self.optimizer, "optimizer", self.optimizer)
                self._value_head_hook = policy_optimizer.register_step_pre_hook(self._step_value_head)
        return scheduler

    def _new_critic_optimizer(self, critic):
        args = self.args
        return torch.optim.AdamW(
            [p for p in critic.parameters() if p.requires_grad],
            lr=args.critic_learning_rate,
            betas=(args.adam_beta1, args.adam_beta2),
            eps=args.adam_epsilon,
            weight_decay=args.critic_weight_decay,
        )

    def _create_critic_optimizer_and_scheduler(self, num_training_steps: int):
        args = self.args
        if critic_deepspeed.is_engine(self.critic):  # the AdamW the engine drives, created with the engine
            self.critic_optimizer = critic_deepspeed.torch_optimizer(self.critic.optimizer)
        else:
            with self._critic_context():  # a policy LoRA critic's adapter is trainable inside
                self.critic_optimizer = self._new_critic_optimizer(self.critic)
        # Critic steps over the run: one generated batch per `steps_per_generation * num_iterations` micro-steps.
        micro_steps = max(num_training_steps, 1) * args.gradient_accumulation_steps
        generations = -(-micro_steps // (args.steps_per_generation * self.num_iterations))
        total = generations * self._critic_steps_per_generation() * args.critic_epochs
        if args.critic_type == "policy_head":
            total = max(num_training_steps, 1)  # the value head steps with the policy's optimizer
        self.critic_lr_scheduler = get_scheduler(
            args.critic_lr_scheduler_type or args.lr_scheduler_type,
            optimizer=self.critic_optimizer,
            num_warmup_steps=args.get_warmup_steps(total),
            num_training_steps=total,
            scheduler_specific_kwargs=args.lr_scheduler_kwargs,
        )

    def create_model_card(self, model_name=None, dataset_name=None, tags=None, **kwargs):
        """TRL's model card, plus the SR-PPO settings and, when the run came from a recipe, the recipe itself."""
        super().create_model_card(model_name=model_name, dataset_name=dataset_name, tags=tags, **kwargs)
        if not self.is_world_process_zero():
            return
        args = self.args
        lines = [
            "",
            "## SR-PPO settings",
            "",
            f"- method: `{args.srppo_method}`; Pass@k weight k = {args.pass_at_k}; GAE lambda = {args.gae_lambda}",
            f"- critic: `{args.critic_head}` head, `{args.critic_loss_type}` loss, learning rate "
            f"{args.critic_learning_rate}; weights in the `{CRITIC_SUBFOLDER}/` folder of this repository",
            f"- rollouts per prompt: {args.num_generations}",
        ]
        recipe = os.path.join(args.output_dir, RECIPE_FILE)
        if os.path.isfile(recipe):
            with open(recipe, encoding="utf-8") as f:
                text = f.read().rstrip()
            lines += ["", "## Training recipe", "", "The recipe with the command line's overrides applied", ""]
            lines += [f"(`{RECIPE_FILE}`):", "", "```yaml", text, "```"]
        with open(os.path.join(args.output_dir, "README.md"), "a", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False):
        """Save the policy (as GRPO does) and the critic, in safetensors, to `<output_dir>/critic/`."""
        saving = contextlib.nullcontext()
        if self.args.critic_type == "policy_lora":  # the policy's folder gets the policy's adapter alone
            saving = policy_lora_critic.policy_adapter_only(self.critic)
        with saving:
            super().save_model(output_dir, _internal_call=_internal_call)
        output_dir = output_dir if output_dir is not None else self.args.output_dir
        if critic_deepspeed.is_engine(self.critic):
            state_dict = critic_deepspeed.gather_state_dict(self.critic)  # every process
        else:
            state_dict = critic_sharding.gather_state_dict(self.critic)  # every process; `None` unless sharded
        if self.args.should_save and (state_dict is None or self.is_world_process_zero()):
            critic = self.accelerator.unwrap_model(self.critic)
            folder = os.path.join(output_dir, CRITIC_SUBFOLDER)
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, CRITIC_SETTINGS), "w", encoding="utf-8") as f:
                json.dump(self._critic_settings(), f, indent=2)
            if hasattr(critic, "peft_config"):  # a LoRA critic: one folder down, never read as a policy adapter
                folder = os.path.join(folder, CRITIC_ADAPTER_SUBFOLDER)
            if hasattr(critic, "save_pretrained"):
                critic.save_pretrained(folder, state_dict=state_dict, safe_serialization=True)
            else:  # a plain torch module as `critic_model`: its weights alone, which a resume loads back into it
                from safetensors.torch import save_file

                os.makedirs(folder, exist_ok=True)
                weights = state_dict if state_dict is not None else critic.state_dict()
                # Copies: safetensors refuses tensors that share storage (tied weights).
                save_file(
                    {k: v.detach().clone().contiguous() for k, v in weights.items()}, f"{folder}/model.safetensors"
                )

    def _save_optimizer_and_scheduler(self, output_dir):
        # Called with the checkpoint folder (after `save_model` wrote `critic/` there, before any Hub push).
        super()._save_optimizer_and_scheduler(output_dir)
        if self.critic_optimizer is None:
            return
        folder = os.path.join(output_dir, CRITIC_SUBFOLDER)
        engine = critic_deepspeed.is_engine(self.critic)
        if engine:  # every process writes its partition of the optimizer state
            critic_deepspeed.save_checkpoint(self.critic, folder)
            optimizer_state = None
        else:
            optimizer_state = critic_sharding.optimizer_state_dict(self.critic, self.critic_optimizer)  # every process
        whole = not (engine or critic_sharding.is_sharded(self.critic))
        if self.args.should_save and (whole or self.is_world_process_zero()):
            state = {
                "lr_scheduler": self.critic_lr_scheduler.state_dict(),
                "critic_step": self._critic_step,
                "num_processes": self.accelerator.num_processes,
            }
            if optimizer_state is not None:  # a DeepSpeed critic's is in `critic/deepspeed/`
                state["optimizer"] = optimizer_state
            else:
                state["zero_stage"] = self.critic.zero_optimization_stage()
            torch.save(state, os.path.join(folder, CRITIC_TRAINING_STATE))

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
        if checkpoint is None:
            return
        folder = os.path.join(checkpoint, CRITIC_SUBFOLDER)
        if not os.path.isdir(folder):
            raise FileNotFoundError(
                f"Checkpoint {checkpoint} has no `{CRITIC_SUBFOLDER}/` folder, so the critic cannot be restored. "
                "Resume from a checkpoint written by SRPPOTrainer."
            )
        engine_checkpoint = os.path.isdir(os.path.join(folder, critic_deepspeed.ENGINE_FOLDER))
        state_file = os.path.join(folder, CRITIC_TRAINING_STATE)
        state = torch.load(state_file, map_location="cpu", weights_only=True) if os.path.isfile(state_file) else None
        if state is not None and (
            critic_deepspeed.is_engine(self.critic) != engine_checkpoint
            or (not engine_checkpoint and "optimizer" not in state)
        ):
            raise ValueError(
                f"Checkpoint {checkpoint} holds the critic's optimizer state of another critic_parallelism mode "
                f"(its `{CRITIC_SUBFOLDER}/` has {'no ' if not engine_checkpoint else 'a '}DeepSpeed engine "
                "checkpoint); resume with the critic_parallelism it was written with ('deepspeed' for a DeepSpeed "
                "engine checkpoint; any of 'accelerate', 'replicate' and 'fsdp' otherwise)."
            )
        if engine_checkpoint and critic_deepspeed.is_engine(self.critic):  # master weights, partitioned optimizer
            zero_stage = state.get("zero_stage") if state is not None else None
            critic_deepspeed.load_checkpoint(self.critic, folder, zero_stage)
        else:
            self._load_critic_weights(folder)
        if state is None:  # `save_only_model=True`: weights only, as for the policy
            logger.warning(
                f"Checkpoint {checkpoint} has the critic's weights but not its optimizer state "
                f"({CRITIC_SUBFOLDER}/{CRITIC_TRAINING_STATE}; written unless save_only_model=True): the critic "
                "resumes with a fresh optimizer and learning-rate schedule."
            )
            return
        if not engine_checkpoint:  # whole, keyed by name (`fsdp`) or by index: loads on any number of processes
            critic_sharding.load_optimizer_state_dict(self.critic, self.critic_optimizer, state["optimizer"])
        self.critic_lr_scheduler.load_state_dict(state["lr_scheduler"])
        self._critic_step = state["critic_step"]

    def _load_critic_weights(self, folder: str):
        from safetensors.torch import load_file

        critic = self.accelerator.unwrap_model(self.critic)
        if self.args.critic_type == "policy_lora":
            critic.load_weights(folder)
            return
        if hasattr(critic, "peft_config"):
            from peft import set_peft_model_state_dict

            adapter = load_file(os.path.join(folder, CRITIC_ADAPTER_SUBFOLDER, "adapter_model.safetensors"))
            if critic_deepspeed.is_engine(self.critic):  # into the whole module and the float32 master copy
                critic_deepspeed.load_into(self.critic, lambda module: set_peft_model_state_dict(module, adapter))
            else:
                set_peft_model_state_dict(critic, adapter)
            return
        state_dict = {}
        for name in sorted(os.listdir(folder)):
            if name.endswith(".safetensors"):
                state_dict.update(load_file(os.path.join(folder, name)))
        if critic_deepspeed.is_engine(self.critic):
            critic_deepspeed.load_state_dict(self.critic, state_dict)
        else:
            critic_sharding.load_state_dict(critic, state_dict)

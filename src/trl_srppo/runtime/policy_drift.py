# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""How far the policy has moved from where it started: the KL divergence from the starting policy, logged with every
generated batch when `log_kl_from_start` is on (`trl_srppo.runtime.config.RuntimeConfig`), for any trainer on the
runtime (SR-PPO's and TRL's GRPO alike).

GRPO computes a KL only with `beta > 0`, against its reference model, and only then logs `kl`. A long run with
`beta = 0` (SR-PPO's and the paper's setting) shows no drift at all, so the runtime keeps a reference of its own:

- with `beta > 0`, GRPO's reference log-probabilities (`ref_per_token_logps`), which it computes anyway;
- a PEFT policy: the same policy with its adapters off, as GRPO does it (or the adapter named `ref` when there is one);
- otherwise a frozen copy of the starting model, loaded as GRPO loads its reference (from the policy's
  `_name_or_path`, safetensors only) and prepared for DeepSpeed, FSDP or plain inference like it. On a resumed run
  that is still the starting policy. It costs one more copy of the model's weights and a forward pass per generated
  batch.

The completions are those of the batch, sampled from the policy that generated it, `pi_old`, so the estimates are of
`KL(pi_old || pi_start)`: [`kl_from_start_metrics`].
"""

from collections.abc import Callable

import torch

__all__ = ["build_start_policy", "completion_inputs", "kl_from_start_metrics", "start_policy_logps"]


def completion_inputs(output: dict) -> tuple[torch.Tensor, torch.Tensor, int]:
    """The policy's input for log-probabilities of GRPO's scored batch `output`: prompt and completion token ids
    `(B, P + C)`, their attention mask `(B, P + C)` and the completions' width `C` (GRPO's `logits_to_keep`)."""
    ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)  # (B, P + C)
    attention = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)  # (B, P + C)
    return ids, attention, output["completion_ids"].size(1)


def kl_from_start_metrics(
    logps: torch.Tensor, start_logps: torch.Tensor, mask: torch.Tensor, reduce: Callable[[torch.Tensor], torch.Tensor]
) -> dict[str, float]:
    """The KL divergence of the sampling policy from the starting one, on a batch of its own completions.

    Args:
        logps (`torch.Tensor` of shape `(B, C)`):
            `log pi_old(y_t | s_{t-1})`, the policy that sampled the completions.
        start_logps (`torch.Tensor` of shape `(B, C)`):
            `log pi_start(y_t | s_{t-1})`, the starting policy's.
        mask (`torch.Tensor` of shape `(B, C)`):
            The completions' tokens (1) and padding (0).
        reduce (`Callable`):
            Sums a tensor over every process (`accelerator.reduce(..., "sum")`; the identity on one process).

    Returns:
        `dict[str, float]`, over every process's completions (empty when there is no token):
        `policy/kl_from_start`, the mean over tokens of `exp(d) - d - 1` with `d = log pi_start - log pi_old` (the
        estimator GRPO logs as `kl`: non-negative, unbiased for the per-token KL), and
        `policy/sequence_kl_from_start`, the mean over completions of `sum_t -d_t`, unbiased for the KL of whole
        completions (it can be negative on a batch).
    """
    mask = mask.float()
    d = (start_logps.float() - logps.float()) * mask  # (B, C)
    per_token = (torch.exp(d) - d - 1) * mask  # (B, C)
    rows = (mask.sum(dim=1) > 0).float()  # (B,) completions with a token
    totals = reduce(torch.stack([per_token.sum(), mask.sum(), -d.sum(), rows.sum()]).double())  # (4,)
    tokens, completions = totals[1].item(), totals[3].item()
    if tokens == 0:
        return {}
    return {
        "policy/kl_from_start": totals[0].item() / tokens,
        "policy/sequence_kl_from_start": totals[2].item() / completions,
    }


def build_start_policy(trainer):
    """The frozen starting policy of `trainer` (a `GRPOTrainer` after its `__init__`), prepared as GRPO prepares its
    reference model; `None` when the trainer needs none (`beta > 0`: GRPO's reference; a PEFT policy: its adapters
    off)."""
    from accelerate.utils import is_peft_model
    from trl.models import prepare_deepspeed, prepare_fsdp
    from trl.trainer.utils import (
        add_fused_lm_head,
        create_model_from_path,
        disable_dropout_in_model,
        get_config_model_id,
    )

    args = trainer.args
    policy = trainer.accelerator.unwrap_model(trainer.model)
    if args.beta != 0.0 or is_peft_model(policy):
        return None
    name = get_config_model_id(policy.config)
    if not name:
        raise ValueError(
            "log_kl_from_start needs the starting policy, loaded from the policy's `config._name_or_path`, which is "
            "empty here; pass the model by name or folder, or save it with `save_pretrained` and pass its folder."
        )
    kwargs = dict(args.model_init_kwargs or {})
    if trainer.args.distributed_state.distributed_type in ("MULTI_GPU", "DEEPSPEED"):
        kwargs["device_map"] = None  # as GRPO's reference: "auto" fails under distributed training
    kwargs.update(
        dtype=policy.dtype,
        attn_implementation=policy.config._attn_implementation,
        trust_remote_code=args.trust_remote_code,
        use_safetensors=True,
    )
    start = create_model_from_path(name, **kwargs)
    if args.disable_dropout:
        disable_dropout_in_model(start)
    add_fused_lm_head(start, temperature=trainer.temperature, cast_lm_head_to_fp32=args.cast_lm_head_to_fp32)
    start.requires_grad_(False)
    if trainer.is_deepspeed_enabled:
        return prepare_deepspeed(start, trainer.accelerator)
    if trainer.is_fsdp_enabled:
        return prepare_fsdp(start, trainer.accelerator)
    return trainer.accelerator.prepare_model(start, evaluation_mode=True)


@torch.no_grad()
def start_policy_logps(trainer, start_policy, output: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """`(log pi_old, log pi_start)` of the completions of GRPO's scored batch `output`, each `(B, C)`: the sampling
    policy's from the batch when GRPO computed them (`old_per_token_logps`), else from a forward pass of the policy;
    the starting policy's from GRPO's reference (`ref_per_token_logps`, `beta > 0`), `start_policy`, or the PEFT
    policy with its adapters off."""
    from trl.trainer.utils import use_adapter

    if any(key.startswith("pixel") for key in output):
        raise ValueError("log_kl_from_start reads text batches only; turn it off for a vision-language policy.")
    ids, attention, width = completion_inputs(output)

    def logps_of(model) -> torch.Tensor:  # (B, C)
        return trainer._get_per_token_logps_and_entropies(model, ids, attention, width, batch_size=len(ids))[0]

    logps = output.get("old_per_token_logps")
    if logps is None:
        logps = logps_of(trainer.model)
    start = output.get("ref_per_token_logps")
    if start is None and start_policy is not None:
        start = logps_of(start_policy)
    elif start is None:  # a PEFT policy: the base model, or the adapter GRPO keeps as its reference
        policy = trainer.accelerator.unwrap_model(trainer.model)
        with use_adapter(policy, adapter_name="ref" if "ref" in policy.peft_config else None):
            start = logps_of(trainer.model)
    return logps, start

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""A LoRA critic on the policy's own base model (`critic_type="policy_lora"`).

When the policy is a LoRA adapter (`peft_config=` or a `PeftModel`), the critic is a second LoRA adapter on the same
`PeftModel` plus a linear value head on the last hidden state: the base weights are held once, and the critic's
training state is the adapter's and the head's weights, gradients and AdamW moments.

- *Forward*: the critic adapter is made the active one (PEFT's `set_adapter`), the policy's backbone runs (its LoRA
  layers now add the critic's deltas, not the policy's), the head reads its last hidden states; then the policy's
  adapter is active again. The output is `(B, L, 1)` logits, as a separate critic's, so the trainer's value pass and
  update run unchanged.
- *Trainability*: PEFT's `set_adapter` makes the active adapter's weights trainable and the others frozen. Outside
  [`PolicyLoraValueModel.active`] the critic adapter is frozen, so the policy's optimizer (built from the trainable
  parameters) and DDP's gradient reducer never hold it; inside (the critic's update), the policy's adapter is frozen,
  so the critic's loss never reaches the policy. The critic's gradients are averaged over processes by hand.
- *Saving*: `critic/` holds `adapter/` (the critic adapter in PEFT's format: `adapter_config.json` and
  `adapter_model.safetensors`, loadable with `PeftModel.from_pretrained` on the base model), `value_head.safetensors`
  and `policy_lora_critic.json`. The policy's own folder gets the policy's adapter alone.
"""

import contextlib
import copy
import functools
import json
import os

import torch
from torch import nn
from transformers.modeling_outputs import TokenClassifierOutput

from .base import Critic
from .checkpoint import CRITIC_ADAPTER_SUBFOLDER, POLICY_LORA_CRITIC_CONFIG
from .engine import HandAveragedEngine
from .fsdp2 import PolicyShardedEngine, copy_whole_into, whole_parameters
from .model import CRITIC_DTYPES
from .policy_head import modules_in_mode, policy_backbone

CRITIC_ADAPTER = "srppo_critic"  # the critic adapter's name inside the policy's PeftModel
ADAPTER_SUBFOLDER = CRITIC_ADAPTER_SUBFOLDER  # `critic/adapter/`: the Trainer never takes it for a policy adapter
VALUE_HEAD_WEIGHTS = "value_head.safetensors"
CRITIC_CONFIG = POLICY_LORA_CRITIC_CONFIG


def _policy_adapter(policy) -> str:
    """The name of the policy's (single, active, LoRA) adapter, or a clear error."""
    from peft import LoraConfig, PeftModel

    if not isinstance(policy, PeftModel):
        raise ValueError(
            f"critic_type='policy_lora' adds the critic as a second LoRA adapter on the policy's PeftModel, but the "
            f"policy is a {type(policy).__name__}. Pass peft_config=LoraConfig(...) to the trainer (or a PeftModel; "
            "on the command line, --use_peft true), "
            "or use critic_type='separate' (with critic_use_peft=True for a LoRA critic on its own base)."
        )
    active = policy.active_adapters
    if len(active) != 1:
        raise ValueError(f"critic_type='policy_lora' needs one active policy adapter, got {active}.")
    name = active[0]
    config = policy.peft_config[name]
    if not isinstance(config, LoraConfig):
        raise ValueError(
            f"critic_type='policy_lora' needs a LoRA policy adapter, got {type(config).__name__}; use "
            "critic_type='separate'."
        )
    if config.modules_to_save or getattr(config, "trainable_token_indices", None):
        raise ValueError(
            "critic_type='policy_lora' does not support a policy adapter with modules_to_save or "
            "trainable_token_indices (fully trained modules the critic adapter would not see); drop them from the "
            "LoraConfig or use critic_type='separate'."
        )
    if CRITIC_ADAPTER in policy.peft_config or name in CRITIC_ADAPTER or CRITIC_ADAPTER in name:
        raise ValueError(
            f"The policy already has an adapter named like the critic's ({name!r} / {CRITIC_ADAPTER!r}); rename it."
        )
    return name


def critic_lora_config(policy_config, args):
    """The critic adapter's LoRA config: the policy adapter's, with `critic_lora_r`, `critic_lora_alpha` and
    `critic_lora_target_modules` where they are set, `critic_lora_dropout`, and nothing trained in full."""
    config = copy.deepcopy(policy_config)
    if args.critic_lora_r is not None:
        config.r = args.critic_lora_r
    if args.critic_lora_alpha is not None:
        config.lora_alpha = args.critic_lora_alpha
    if args.critic_lora_target_modules is not None:
        config.target_modules = set(args.critic_lora_target_modules)
    config.lora_dropout = args.critic_lora_dropout
    config.modules_to_save = None
    config.inference_mode = False
    return config


class PolicyLoraValueModel(nn.Module):
    """The critic adapter `srppo_critic` on the policy's `PeftModel` and a linear value head `H -> 1`.

    The `PeftModel` is held as a plain attribute, not a submodule: `train()`, `eval()`, `to()` and `state_dict()` of
    the critic reach the head alone; its forward runs the policy's backbone in the critic's mode (no dropout in
    `eval()`), then puts the policy's mode back. [`~PolicyLoraValueModel.named_parameters`] gives the head's and the
    critic adapter's parameters (`adapter.<name in the policy>`), the critic's optimizer's parameters.

    Args:
        policy (`peft.PeftModel`):
            The policy, with the critic adapter already added.
        policy_adapter (`str`):
            Name of the policy's adapter, made active again after each critic forward.
        dtype (`torch.dtype`):
            Dtype of the value head.
        through_policy (`bool`, *optional*, defaults to `False`):
            Whether the forward calls the policy model (its LM head computing one position) and reads the backbone's
            output with a hook, rather than calling the backbone: beside an FSDP2 policy, whose root module's hooks
            gather the weights outside the decoder layers (the embeddings, the final norm). Beside a DDP policy the
            backbone is called alone, so that DDP's reducer, which expects the policy adapter's gradients, is not
            involved.
    """

    def __init__(self, policy, policy_adapter: str, dtype: torch.dtype = torch.float32, through_policy: bool = False):
        super().__init__()
        object.__setattr__(self, "policy", policy)  # not registered: see the class docstring
        self.policy_adapter = policy_adapter
        self.through_policy = through_policy
        backbone = policy_backbone(policy)
        object.__setattr__(self, "backbone", backbone)
        self.hidden_size = backbone.config.get_text_config().hidden_size
        self.score = nn.utils.skip_init(nn.Linear, self.hidden_size, 1, dtype=dtype)  # no draw: zeroed below
        with torch.no_grad():  # value 0 (probability 0.5) for every prefix at the start, as the separate critic's
            self.score.weight.zero_()
            self.score.bias.zero_()
        self._depth = 0

    def adapter_named_parameters(self):
        """`(name, parameter)` of the critic adapter, names as in the policy's `PeftModel`."""
        return [(n, p) for n, p in self.policy.named_parameters() if f".{CRITIC_ADAPTER}." in n]

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        yield from super().named_parameters(prefix=prefix, recurse=recurse, remove_duplicate=remove_duplicate)
        for name, param in self.adapter_named_parameters():
            yield f"{prefix}{'.' if prefix else ''}adapter.{name}", param

    @contextlib.contextmanager
    def active(self):
        """Inside: the critic adapter is the policy model's active adapter, trainable, and the policy's adapter is
        frozen. Re-entrant; spans a whole update (forward and backward, which gradient checkpointing recomputes)."""
        if self._depth == 0:
            self.policy.set_adapter(CRITIC_ADAPTER)
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0:
                self.policy.set_adapter(self.policy_adapter)

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, **kwargs):
        kwargs.pop("use_cache", None)
        # The backbone in the critic's own mode, as a separate critic's would be: `eval()` reads values without the
        # policy's dropout even while the policy trains.
        with self.active(), modules_in_mode(self.backbone, self.training):
            kwargs.update(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids)
            hidden = self._last_hidden_state(kwargs)  # (B, L, H)
        return TokenClassifierOutput(logits=self.score(hidden.to(self.score.weight.dtype)))  # (B, L, 1)

    def _last_hidden_state(self, inputs: dict) -> torch.Tensor:
        if not self.through_policy:
            return self.backbone(use_cache=False, **inputs).last_hidden_state
        captured = []
        handle = self.backbone.register_forward_hook(lambda module, args, output: captured.append(output[0]))
        try:
            self.policy(use_cache=False, logits_to_keep=1, **inputs)
        finally:
            handle.remove()
        return captured.pop()

    def save_pretrained(self, folder: str, state_dict: dict | None = None, safe_serialization: bool = True, **kwargs):
        """Write `adapter/` (PEFT format), `value_head.safetensors` and `policy_lora_critic.json` to `folder`.

        Args:
            folder (`str`):
                The `critic/` folder.
            state_dict (`dict`, *optional*):
                The critic's whole weights keyed as [`~PolicyLoraValueModel.named_parameters`] names them (the
                head's, and the adapter's as `adapter.<name in the policy>`), where they are sharded with the
                policy and were gathered ([`~fsdp2.whole_parameters`]); read from the modules otherwise.
        """
        from peft import get_peft_model_state_dict
        from safetensors.torch import save_file

        if state_dict is None:
            state_dict = whole_parameters(self)
        prefix = "adapter."
        adapter_folder = os.path.join(folder, ADAPTER_SUBFOLDER)
        os.makedirs(adapter_folder, exist_ok=True)
        adapter = get_peft_model_state_dict(
            self.policy,
            state_dict={k[len(prefix) :]: v for k, v in state_dict.items() if k.startswith(prefix)},
            adapter_name=CRITIC_ADAPTER,
        )
        save_file(
            {k: v.detach().contiguous().cpu() for k, v in adapter.items()},
            os.path.join(adapter_folder, "adapter_model.safetensors"),
            metadata={"format": "pt"},
        )
        self.policy.peft_config[CRITIC_ADAPTER].save_pretrained(adapter_folder)
        head = {k: v.detach().contiguous().cpu() for k, v in state_dict.items() if not k.startswith(prefix)}
        save_file(head, os.path.join(folder, VALUE_HEAD_WEIGHTS))
        with open(os.path.join(folder, CRITIC_CONFIG), "w", encoding="utf-8") as f:
            json.dump({"critic_type": "policy_lora", "hidden_size": self.hidden_size}, f, indent=2)

    def load_critic_folder(self, folder: str) -> None:
        """Load the adapter and head written by [`~PolicyLoraValueModel.save_pretrained`] into this critic (what
        [`~trl_srppo.method.critics.checkpoint.load_weights`] calls)."""
        from safetensors.torch import load_file

        check_folder(folder)
        adapter = load_file(os.path.join(folder, ADAPTER_SUBFOLDER, "adapter_model.safetensors"))
        # PEFT's file names each weight without the adapter's name (`...q_proj.lora_A.weight`).
        parameters = {n.replace(f".{CRITIC_ADAPTER}", ""): p for n, p in self.adapter_named_parameters()}
        unexpected = sorted(adapter.keys() - parameters.keys())
        missing = sorted(parameters.keys() - adapter.keys())
        shapes = [n for n in sorted(adapter.keys() & parameters.keys()) if adapter[n].shape != parameters[n].shape]
        if unexpected or missing or shapes:
            raise ValueError(
                f"The critic adapter in {folder!r} does not fit the policy: unexpected {unexpected[:5]}, "
                f"missing {missing[:5]}, other shapes {shapes[:5]}. It must come from a run with the same base model "
                "and critic LoRA settings."
            )
        with torch.no_grad():
            for name, param in parameters.items():
                copy_whole_into(param, adapter[name])
        nn.Module.load_state_dict(self, load_file(os.path.join(folder, VALUE_HEAD_WEIGHTS)))


def check_folder(folder: str) -> None:
    if not os.path.isfile(os.path.join(folder, CRITIC_CONFIG)):
        raise FileNotFoundError(
            f"{folder!r} has no {CRITIC_CONFIG}, so it is not a critic saved with critic_type='policy_lora' (the "
            "`critic/` folder of such a run). Point critic_model_name_or_path at one, or leave it unset to start "
            "from a fresh critic adapter."
        )


def build_policy_lora_critic(policy, source, args, through_policy: bool = False) -> PolicyLoraValueModel:
    """Add the critic adapter to the policy's `PeftModel` (frozen until [`PolicyLoraValueModel.active`]) and return the
    critic: fresh (a zero-output head; LoRA's own initialisation, which adds nothing to the base), or loaded from
    `source`, the `critic/` folder of a `critic_type="policy_lora"` run (its adapter config then wins)."""
    if source is not None and not isinstance(source, str):
        raise TypeError(
            "With critic_type='policy_lora', critic_model must be the `critic/` folder of a critic_type='policy_lora' "
            f"run, got {type(source).__name__}."
        )
    dtype = CRITIC_DTYPES[args.critic_dtype]
    if source is not None:
        critic = load_policy_lora_critic(policy, source, dtype)
    else:
        policy_adapter = _policy_adapter(policy)  # a clear error for a policy the critic cannot sit on
        config = critic_lora_config(policy.peft_config[policy_adapter], args)
        critic = _add_critic(policy, policy_adapter, config, dtype, seed=args.seed)
    critic.through_policy = through_policy
    return critic


def load_policy_lora_critic(policy, folder: str, dtype: torch.dtype = torch.float32) -> PolicyLoraValueModel:
    """The critic saved in `folder` (the `critic/` of a `critic_type="policy_lora"` run) on `policy`, a LoRA policy
    (`PeftModel`, its adapter not merged) on the base model the critic was trained on; also how its values are read
    outside the trainer (the analyses)."""
    from peft import LoraConfig

    policy_adapter = _policy_adapter(policy)  # a clear error for a policy the critic cannot sit on, before the folder
    check_folder(folder)
    config = LoraConfig.from_pretrained(os.path.join(folder, ADAPTER_SUBFOLDER))
    config.inference_mode = False
    critic = _add_critic(policy, policy_adapter, config, dtype)
    critic.load_critic_folder(folder)
    return critic


def _add_critic(
    policy, policy_adapter: str, config, dtype: torch.dtype, seed: int | None = None
) -> PolicyLoraValueModel:
    # LoRA's random start is drawn aside from torch's stream (PEFT initialises on the CPU), from `seed` alone for a
    # fresh critic (a loaded one overwrites it), so the policy samples the same completions on a seed whichever critic
    # it trains beside. Only the CPU generator is seeded: the GPUs' keep the per-process seeds GRPO gave them.
    with torch.random.fork_rng(devices=[]):
        if seed is not None:
            torch.default_generator.manual_seed(seed)
        policy.add_adapter(CRITIC_ADAPTER, config)
    policy.set_adapter(policy_adapter)  # the policy's adapter active and trainable, the critic's frozen
    critic = PolicyLoraValueModel(policy, policy_adapter, dtype)
    critic.to(next(p.device for _, p in critic.adapter_named_parameters()))
    return critic


@contextlib.contextmanager
def policy_adapter_only(critic: PolicyLoraValueModel):
    """Inside: `save_pretrained` of the policy's `PeftModel` writes the policy's adapter alone (PEFT would otherwise
    add every adapter, the critic's in a subfolder)."""
    policy = critic.policy
    policy.save_pretrained = functools.partial(
        type(policy).save_pretrained, policy, selected_adapters=[critic.policy_adapter]
    )
    try:
        yield
    finally:
        del policy.save_pretrained


class PolicyLoraCritic(Critic):
    """`critic_type="policy_lora"`: a [`PolicyLoraValueModel`] (a second LoRA adapter and a value head on the policy's
    own base model). Its forward and backward run with the critic adapter active; its gradients are averaged by hand
    ([`~trl_srppo.method.critics.engine.HandAveragedEngine`]: the adapter is frozen when DDP wraps the policy, so DDP's
    reducer does not hold it); the policy's folder gets the policy's adapter alone."""

    engine_class = HandAveragedEngine

    @classmethod
    def build(cls, policy, source, args, accelerator) -> "PolicyLoraCritic":
        return cls(build_policy_lora_critic(policy, source, args), args, accelerator)

    def trainable(self):
        return self.model.active()

    def saving_policy(self):
        return policy_adapter_only(self.model)

    def _network(self) -> nn.Module:
        return nn.ModuleList([self.model, self.model.backbone])


class FSDPPolicyLoraCritic(PolicyLoraCritic):
    """`critic_type="policy_lora"` beside an FSDP2 policy: the critic adapter, inside the policy's modules, is sharded
    with them when the policy is prepared (`DTensor` shards, their gradients reduce-scattered to the mean by FSDP2),
    the value head is whole on every process ([`~trl_srppo.method.critics.fsdp2.PolicyShardedEngine`]); the forward
    calls the policy model, whose root module gathers the weights outside the decoder layers."""

    engine_class = PolicyShardedEngine

    @classmethod
    def build(cls, policy, source, args, accelerator) -> "FSDPPolicyLoraCritic":
        return cls(build_policy_lora_critic(policy, source, args, through_policy=True), args, accelerator)

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""A critic that reads the policy's own hidden states (`critic_type="policy_head"`).

The value head is a linear layer on the last hidden state of the policy's backbone, the tensor the policy's LM head
reads. It holds no copy of the model, so the critic costs the head's `H + 1` parameters and their optimizer state,
and no backward through a second model.

Per generated batch, one no-grad forward of the policy, in eval mode, gives the hidden states of every prefix (called
as TRL calls it: `input_ids`, `attention_mask`, no `position_ids`, so that they are those of the policy's own
forward; its LM head computes one position); the head's values before its update and its update both read them
(detached: the head's loss never moves the policy). The features of a batch are kept until the head has learned from
it: `(B, C, H)` for the `B` rows of a generated batch. The head has its own AdamW (`critic_head_learning_rate`, else
`critic_learning_rate`) and schedule, like a separate critic, and its gradients are averaged over processes by hand
(it is not wrapped by DDP).
"""

import contextlib
import json
import os

import torch
from torch import nn

from .base import Critic, CriticBatch
from .checkpoint import POLICY_HEAD_CONFIG
from .engine import HandAveragedEngine
from .model import CRITIC_DTYPES

VALUE_HEAD_WEIGHTS = "value_head.safetensors"
VALUE_HEAD_CONFIG = POLICY_HEAD_CONFIG


class PolicyValueHead(nn.Module):
    """A scalar value on every position of the policy's last hidden states: a linear layer `H -> 1` that starts at
    zero, so every value starts at 0 (probability 0.5 for a sigmoid critic). It computes in its own dtype (the hidden
    states are cast to it).

    Args:
        hidden_size (`int`):
            Width `H` of the policy's hidden states.
    """

    def __init__(self, hidden_size: int):
        super().__init__()
        self.hidden_size = hidden_size
        # Allocated without an initialisation (zeroed below), so building it draws nothing from torch's random
        # stream: the policy then samples the same completions on a seed whichever critic it trains beside.
        self.layers = nn.Sequential(nn.utils.skip_init(nn.Linear, hidden_size, 1))
        with torch.no_grad():
            self.layers[-1].weight.zero_()
            self.layers[-1].bias.zero_()

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """`(..., H)` hidden states -> `(...)` raw values in float32."""
        weight = self.layers[0].weight
        return self.layers(hidden.to(weight.dtype)).squeeze(-1).float()

    def save_pretrained(self, folder: str, state_dict: dict | None = None, safe_serialization: bool = True, **kwargs):
        """Write `value_head.safetensors` and `value_head_config.json` to `folder` (the trainer's `critic/`)."""
        from safetensors.torch import save_file

        os.makedirs(folder, exist_ok=True)
        state = state_dict if state_dict is not None else self.state_dict()
        save_file(
            {k: v.detach().contiguous().cpu() for k, v in state.items()}, os.path.join(folder, VALUE_HEAD_WEIGHTS)
        )
        config = {"critic_type": "policy_head", "hidden_size": self.hidden_size}
        with open(os.path.join(folder, VALUE_HEAD_CONFIG), "w", encoding="utf-8") as f:
            json.dump(config, f, indent=2)

    @classmethod
    def from_pretrained(cls, folder: str) -> "PolicyValueHead":
        """Load a head written by [`~PolicyValueHead.save_pretrained`]."""
        from safetensors.torch import load_file

        config_file = os.path.join(folder, VALUE_HEAD_CONFIG)
        if not os.path.isfile(config_file):
            raise FileNotFoundError(
                f"{folder!r} has no {VALUE_HEAD_CONFIG}, so it is not a value head saved with "
                "critic_type='policy_head' (the `critic/` folder of such a run). Point critic_model_name_or_path at "
                "one, or leave it unset to start from a fresh head."
            )
        with open(config_file, encoding="utf-8") as f:
            config = json.load(f)
        head = cls(config["hidden_size"])
        head.load_state_dict(load_file(os.path.join(folder, VALUE_HEAD_WEIGHTS)))
        return head


class PolicyHeadValueModel(nn.Module):
    """A policy value head on its policy's backbone, called like a token-classification critic (what the analyses
    and [`~trl_srppo.method.critics.model.prefix_values`] call), for reading a `critic_type="policy_head"` run's values
    outside the trainer.

    Args:
        policy (`nn.Module`):
            The policy the head was trained on (its backbone's last hidden states are the head's input).
        head ([`PolicyValueHead`]):
            The value head.
    """

    def __init__(self, policy: nn.Module, head: PolicyValueHead):
        super().__init__()
        self.backbone = policy_backbone(policy)
        self.head = head

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **kwargs):
        """`(B, T)` token ids -> an output whose `logits` `(B, T, 1)` are the head's raw values. The backbone is
        called as the trainer calls it (no `position_ids`), so the values are the trainer's."""
        from types import SimpleNamespace

        output = self.backbone(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
        return SimpleNamespace(logits=self.head(output.last_hidden_state).unsqueeze(-1))


def policy_backbone(model: nn.Module) -> nn.Module:
    """The module whose output's `last_hidden_state` the policy's LM head reads (for Qwen3, `Qwen3Model`), through
    the Accelerate/DDP and PEFT wrappers."""
    model = getattr(model, "module", model)  # DDP
    if hasattr(model, "get_base_model"):  # PEFT: the transformers model, its layers carrying the adapter
        model = model.get_base_model()
    backbone = getattr(model, "base_model", None)
    if backbone is None or backbone is model:
        raise ValueError(
            f"critic_type='policy_head' reads the hidden states of the policy's backbone, but {type(model).__name__} "
            "has none apart from itself (no `base_model_prefix` module). Use critic_type='separate'."
        )
    return backbone


def build_value_head(policy: nn.Module, source, dtype: torch.dtype) -> PolicyValueHead:
    """The value head for [`SRPPOTrainer`]: `source` if it is a head, loaded from `source` if it is a folder, a fresh
    zero-output head sized to the policy otherwise; in `dtype`."""
    if isinstance(source, PolicyValueHead):
        head = source
    elif isinstance(source, str):
        head = PolicyValueHead.from_pretrained(source)
    elif source is None:
        config = getattr(policy_backbone(policy), "config", None) or policy.config
        head = PolicyValueHead(config.get_text_config().hidden_size)
    else:
        raise TypeError(
            "With critic_type='policy_head', critic_model must be a PolicyValueHead or the folder of a saved one, "
            f"got {type(source).__name__}."
        )
    return head.to(dtype)


def completion_states(hidden: torch.Tensor, logits_to_keep: int) -> torch.Tensor:
    """The hidden states of the prefixes `s_0 .. s_{C-1}`: `(B, P + C, H)` -> `(B, C, H)`, positions
    `P - 1 .. P + C - 2` (column 0 is the last prompt token), as [`~trl_srppo.method.critics.model.prefix_values`]
    reads them."""
    return hidden[:, -logits_to_keep - 1 : -1]


@contextlib.contextmanager
def modules_in_mode(model: nn.Module, training: bool):
    """Inside: every module of `model` in train mode (`training=True`) or eval mode (no dropout); each module's mode
    is put back on leaving."""
    modes = [(module, module.training) for module in model.modules()]
    for module, _ in modes:
        module.training = training
    try:
        yield
    finally:
        for module, training in modes:
            module.training = training


@torch.no_grad()
def policy_hidden_states(
    policy: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    batch_size: int,
    autocast=contextlib.nullcontext,
    through_backbone: bool = False,
) -> torch.Tensor:
    """`(B, C, H)` hidden states of the prefixes, from no-grad forwards of the policy, `batch_size` rows at a time, in
    eval mode (no dropout: the values are a baseline). The policy is called as it is wrapped (DDP, FSDP) and as TRL
    calls it (`input_ids`, `attention_mask`, `use_cache=False`; `logits_to_keep=1`, so the LM head costs one position);
    a forward hook on its backbone catches the last hidden states. With `through_backbone`, the backbone itself is
    called, with the same arguments, and the LM head not at all (under DeepSpeed ZeRO-3, see
    [`PolicyHeadCritic`])."""
    captured = []

    def catch(module, args, output):
        captured.append(output.last_hidden_state if hasattr(output, "last_hidden_state") else output[0])

    chunks = []
    backbone = policy_backbone(policy)
    handle = backbone.register_forward_hook(catch)
    try:
        with modules_in_mode(policy, training=False):
            for start in range(0, input_ids.size(0), batch_size):
                rows = slice(start, start + batch_size)
                inputs = {"input_ids": input_ids[rows], "attention_mask": attention_mask[rows], "use_cache": False}
                with autocast():
                    if through_backbone:
                        backbone(**inputs)
                    else:
                        policy(**inputs, logits_to_keep=1)
                chunks.append(completion_states(captured.pop(), logits_to_keep))
    finally:
        handle.remove()
    return torch.cat(chunks, dim=0)


class PolicyHeadCritic(Critic):
    """`critic_type="policy_head"`: a [`PolicyValueHead`] on the policy's hidden states.

    Args:
        head ([`PolicyValueHead`]):
            The head, on this process's device.
        args, accelerator:
            As for [`Critic`].
        policy (`nn.Module`):
            The trainer's policy (as prepared), whose backbone gives the hidden states.
        through_backbone (`bool`, *optional*, defaults to `False`):
            Whether the head's forward calls the policy's backbone rather than the policy: for a policy under
            DeepSpeed ZeRO-3, whose engine gathers each module's partitioned parameters in that module's forward
            hooks (the backbone's modules, in the order GRPO's own forward runs them).

    The head is `H + 1` parameters, whole on every process, their gradients averaged by hand
    ([`HandAveragedEngine`]); the policy's parameters stay as the policy's engine holds them (DDP, ZeRO-2, ZeRO-3,
    FSDP2). Under ZeRO-3 the forward calls the backbone alone: TRL's GRPO computes the policy's log-probabilities with
    a fused LM head that reads the LM head's weight without calling its module, and DeepSpeed replays the order of
    the modules of its first traced forward; when that forward was the head's, through the policy's LM head module,
    the policy's next backward failed (measured with TRL 1.16, DeepSpeed 0.19).
    """

    engine_class = HandAveragedEngine  # not wrapped by DDP: its gradients are averaged by hand

    def __init__(self, head: PolicyValueHead, args, accelerator, policy: nn.Module, through_backbone: bool = False):
        super().__init__(head, args, accelerator)
        self.policy = policy
        self.through_backbone = through_backbone

    @classmethod
    def build(cls, policy: nn.Module, source, args, accelerator, through_backbone: bool = False) -> "PolicyHeadCritic":
        policy_backbone(policy)  # a clear error now if the policy has no backbone to read
        head = build_value_head(policy, source, CRITIC_DTYPES[args.critic_dtype]).to(accelerator.device)
        return cls(head, args, accelerator, policy, through_backbone)

    def features(self, batch: CriticBatch) -> torch.Tensor:
        """`(B, C, H)` hidden states of the batch's prefixes, computed once per batch (the policy does not change
        while the head learns from it)."""
        if "hidden_states" not in batch.cache:
            batch.cache["hidden_states"] = policy_hidden_states(
                self.policy,
                batch.input_ids,
                batch.attention_mask,
                batch.logits_to_keep,
                batch.batch_size,
                autocast=self.accelerator.autocast,
                through_backbone=self.through_backbone,
            )
        return batch.cache["hidden_states"]

    def forward(self, batch: CriticBatch, rows) -> torch.Tensor:
        return self.model(self.features(batch)[rows])  # (b, C)

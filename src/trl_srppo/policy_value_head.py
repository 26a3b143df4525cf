# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""A critic that reads the policy's own hidden states (`critic_type="policy_head"`).

The value head is a small module (a linear layer, or a one-hidden-layer MLP) on the last hidden state of the policy's
backbone, the tensor the policy's LM head reads. It holds no copy of the model, so the critic costs the head's few
parameters and its optimizer state, and no backward through a second model.

When the trainer uses it, no forward of the backbone is added to GRPO's:

- *Values for the advantages*, from the head as it is before it learns from the batch, read from a forward of the
  policy that GRPO makes anyway (a forward hook on the backbone catches its last hidden states):
  - when GRPO computes the old log-probabilities at generation (`steps_per_generation` or `num_iterations` making
    more than one optimizer step per generated batch, or vLLM's importance-sampling correction), from that forward;
    the advantages are made there, once, and every iteration and micro-batch reuses them;
  - otherwise (on-policy: one optimizer step per generated batch, GRPO's old log-probabilities are the training
    forward's own), from the training forward of each micro-batch, between the backbone's output and GRPO's reading
    of the advantages. The head steps only with the policy's optimizer, after every micro-batch of the generated
    batch has passed, so it has not learned any of the batch's outcomes yet; the values are written into GRPO's
    buffered micro-batch, so that later passes (`num_iterations`) reuse those of the first.
  `critic_fused_forward=False` takes them instead from a no-grad forward of the backbone of their own (one more per
  generated batch), the plain path the fused one is tested against.
- *The head's update*, in the policy's loss: the training forward's hidden states give the head its loss, which is
  back-propagated into the head alone (detached features, by default), and the head's own AdamW steps with the
  policy's optimizer. With `critic_policy_head_coef > 0`, the classic PPO value head, the same loss times the
  coefficient is added to the policy's loss through the backbone (the head's weights detached in that term, so the
  head always learns at its own rate).

Everything here is free of trainer state: the trainer (`SRPPOTrainer`) dispatches to these functions.
"""

import contextlib
import json
import os

import torch
from torch import nn

from .critic import POLICY_HEAD_CONFIG

VALUE_HEAD_WEIGHTS = "value_head.safetensors"
VALUE_HEAD_CONFIG = POLICY_HEAD_CONFIG


class PolicyValueHead(nn.Module):
    """A scalar value on every position of the policy's last hidden states.

    Args:
        hidden_size (`int`):
            Width `H` of the policy's hidden states.
        mlp_size (`int`, *optional*, defaults to `0`):
            0 for a linear head `H -> 1`; otherwise a hidden layer `H -> mlp_size -> 1` with a GELU.
        seed (`int`, *optional*, defaults to `0`):
            Seed of the hidden layer's random initialisation, so that every process of a run builds the same head.

    The output layer starts at zero, so every value starts at 0 (probability 0.5 for a sigmoid critic). The head
    computes in its own dtype (the hidden states are cast to it).
    """

    def __init__(self, hidden_size: int, mlp_size: int = 0, seed: int = 0):
        super().__init__()
        self.hidden_size = hidden_size
        self.mlp_size = mlp_size
        if mlp_size > 0:
            self.layers = nn.Sequential(nn.Linear(hidden_size, mlp_size), nn.GELU(), nn.Linear(mlp_size, 1))
        else:
            self.layers = nn.Sequential(nn.Linear(hidden_size, 1))
        with torch.no_grad():
            generator = torch.Generator().manual_seed(seed)
            first = self.layers[0]  # nn.Linear's own initialisation, from the seeded generator
            nn.init.kaiming_uniform_(first.weight, a=5**0.5, generator=generator)
            first.bias.uniform_(-(hidden_size**-0.5), hidden_size**-0.5, generator=generator)
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
        config = {"critic_type": "policy_head", "hidden_size": self.hidden_size, "mlp_size": self.mlp_size}
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
        head = cls(config["hidden_size"], config.get("mlp_size", 0))
        head.load_state_dict(load_file(os.path.join(folder, VALUE_HEAD_WEIGHTS)))
        return head


class PolicyHeadCritic(nn.Module):
    """A policy value head on its policy's backbone, called like a token-classification critic (what the analyses
    and [`~trl_srppo.critic.prefix_values`] call), for reading a `critic_type="policy_head"` run's values outside the
    trainer.

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
        called as the trainer's training forward calls it (no `position_ids`), so the values are the trainer's."""
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


def build_value_head(policy: nn.Module, source, args) -> PolicyValueHead:
    """The value head for [`SRPPOTrainer`]: `source` if it is a head, loaded from `source` if it is a folder, a fresh
    zero-output head sized to the policy otherwise; in `args.critic_dtype`."""
    if isinstance(source, PolicyValueHead):
        head = source
    elif isinstance(source, str):
        head = PolicyValueHead.from_pretrained(source)
    elif source is None:
        config = getattr(policy_backbone(policy), "config", None) or policy.config
        head = PolicyValueHead(config.get_text_config().hidden_size, args.critic_policy_head_mlp_size, args.seed)
    else:
        raise TypeError(
            "With critic_type='policy_head', critic_model must be a PolicyValueHead or the folder of a saved one, "
            f"got {type(source).__name__}."
        )
    return head.to(getattr(torch, args.critic_dtype))


@contextlib.contextmanager
def capture_hidden_states(backbone: nn.Module):
    """Collect the `last_hidden_state` of every forward of `backbone` inside the block (graph kept) into the list
    this yields, one `(b, L, H)` tensor per call."""
    captured = []

    def hook(module, args, output):
        hidden = output.last_hidden_state if hasattr(output, "last_hidden_state") else output[0]
        captured.append(hidden)

    handle = backbone.register_forward_hook(hook)
    try:
        yield captured
    finally:
        handle.remove()


def completion_states(hidden: torch.Tensor, logits_to_keep: int) -> torch.Tensor:
    """The hidden states of the prefixes `s_0 .. s_{C-1}`: `(B, P + C, H)` -> `(B, C, H)`, positions
    `P - 1 .. P + C - 2` (column 0 is the last prompt token), as [`~trl_srppo.critic.prefix_values`] reads them."""
    return hidden[:, -logits_to_keep - 1 : -1]


def values_of_forward(forwards: list, log_probs: torch.Tensor | None):
    """The head's raw values `(B, C)` from the forward whose log-probabilities GRPO kept as `log_probs` (the same
    tensor, `(B, C)`), among `forwards`, a list of `(log-probs, raw values)` pairs; `None` if none is (GRPO kept no
    old log-probabilities, or took them from another forward: a PEFT policy's reference has its adapter disabled)."""
    if log_probs is None:
        return None
    return next((raw for logps, raw in forwards if logps is log_probs), None)


def in_row_order(rows: list, chunks: list) -> torch.Tensor:
    """Micro-batches back in the order of their generated batch: `chunks`, `(b_i, ...)` tensors whose rows are the
    rows `rows[i]` (`(b_i,)` indices, together a permutation of `0 .. B - 1`) of the batch -> `(B, ...)`."""
    order = torch.cat(rows).argsort()  # (B,): the inverse permutation
    return torch.cat(chunks)[order]


@torch.no_grad()
def policy_hidden_states(
    backbone: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    batch_size: int,
    autocast=contextlib.nullcontext,
) -> torch.Tensor:
    """`(B, C, H)` hidden states of the prefixes, from no-grad forwards of the backbone alone, `batch_size` rows at a
    time, called as TRL's fused LM head calls it (`input_ids`, `attention_mask`, `use_cache=False`), so that they are
    the hidden states of the training forward: the plain path (`critic_fused_forward=False`), one forward more."""
    chunks = []
    for start in range(0, input_ids.size(0), batch_size):
        rows = slice(start, start + batch_size)
        with autocast():
            output = backbone(input_ids=input_ids[rows], attention_mask=attention_mask[rows], use_cache=False)
        chunks.append(completion_states(output.last_hidden_state, logits_to_keep))
    return torch.cat(chunks, dim=0)


def shared_backbone_raw(head: PolicyValueHead, hidden: torch.Tensor) -> torch.Tensor:
    """The head's raw values with its weights detached: `(..., H)` -> `(...)`, a graph into `hidden` only, for the
    term of the shared-backbone setting that trains the policy."""
    params = {name: p.detach() for name, p in head.named_parameters()}
    return torch.func.functional_call(head, params, (hidden,))

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The prefix critic: a causal-LM backbone with a scalar value on every token.

The critic is a `transformers` token-classification model with one label (for Qwen3,
`Qwen3ForTokenClassification`): the policy's architecture, a linear `score` head on the last hidden state. Being a
standard `PreTrainedModel`, it saves and loads with `save_pretrained` / `from_pretrained` (safetensors), works with
PEFT (`task_type="TOKEN_CLS"`) and is prepared by Accelerate like any model. For the causal LMs that transformers gives
no token-classification class, the critic is a [`ValueHeadCritic`]: the base model (`AutoModel`) and the same head.
"""

import contextlib
import logging
import os
from collections.abc import Callable

import torch
from torch import nn
from transformers import (
    MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING,
    AutoConfig,
    AutoModel,
    AutoModelForTokenClassification,
    PretrainedConfig,
    PreTrainedModel,
)
from transformers.modeling_outputs import TokenClassifierOutput

from ...runtime.safe_loading import refuse_pickle_only, safetensors_required
from ..registry import Registry
from .checkpoint import CRITIC_ADAPTER_SUBFOLDER, CRITIC_SETTINGS, CRITIC_SUBFOLDER

logger = logging.getLogger(__name__)


def _value_head(critic: nn.Module) -> tuple[str, nn.Linear]:
    """The name and module of the critic's scalar head (`score` for most causal LMs, `classifier` for some)."""
    base = critic.get_base_model() if hasattr(critic, "get_base_model") else critic
    for name in ("score", "classifier"):
        head = getattr(base, name, None)
        if isinstance(head, nn.Linear):
            return name, head
        if head is not None and isinstance(getattr(head, "original_module", None), nn.Linear):
            return name, head.original_module  # PEFT ModulesToSaveWrapper
    raise ValueError(
        f"Cannot find the value head of the critic {type(base).__name__}: expected a linear `score` or `classifier` "
        "module, as `AutoModelForTokenClassification` with `num_labels=1` builds."
    )


def value_output_layer(critic: nn.Module) -> nn.Linear:
    """The linear layer that writes the critic's raw value, for every kind of critic: the `score` / `classifier` head
    of a token-classification critic (the trained copy under PEFT's `modules_to_save`), the `score` of a LoRA critic on
    the policy, or the last layer of a policy value head (`layers`). `critic` is unwrapped (no DDP wrapper)."""
    layers = getattr(critic, "layers", None)
    if isinstance(layers, nn.Sequential) and isinstance(layers[-1], nn.Linear):
        return layers[-1]
    name, head = _value_head(critic)
    base = critic.get_base_model() if hasattr(critic, "get_base_model") else critic
    wrapper = getattr(base, name)
    copies = getattr(wrapper, "modules_to_save", None)  # PEFT's ModulesToSaveWrapper: the active copy trains
    return head if copies is None else copies[wrapper.active_adapters[0]]


def start_value_head_at(critic: nn.Module, raw_value: float) -> bool:
    """Make a fresh value head (weight and bias all zero) output `raw_value` for every prefix, by its bias.

    Returns `False`, changing nothing, when the head is not fresh (a trained or loaded critic) or has no bias. Works on
    FSDP2-sharded heads (each process sets its own shard).
    """
    head = value_output_layer(critic)
    if head.bias is None:
        return False

    def whole(param):  # an FSDP2 parameter is a DTensor; compare the gathered values
        return param.full_tensor() if hasattr(param, "full_tensor") else param

    with torch.no_grad():
        if bool(whole(head.weight).any()) or bool(whole(head.bias).any()):
            return False
        bias = head.bias.to_local() if hasattr(head.bias, "to_local") else head.bias
        bias.fill_(raw_value)
    return True


def _is_saved_critic(config) -> bool:
    architectures = getattr(config, "architectures", None) or []
    return getattr(config, "num_labels", None) == 1 and any(
        a.endswith("ForTokenClassification") for a in architectures
    )


def _zero_value_head(critic: PreTrainedModel) -> None:
    # A fresh head starts at value 0 for every prefix, rather than at random values that the first updates would have
    # to unlearn; the trainer then moves its bias to the first batch's success rate (`critic_value_init`).
    _, head = _value_head(critic)
    if any(p.is_meta for p in head.parameters()):
        # Under FSDP's RAM-efficient loading (`accelerate launch` with FSDP sets it) transformers reads the checkpoint
        # on local rank 0 only and leaves every other process's weights missing from it, the new head, on the meta
        # device; zeroed here it is the same on every process without a broadcast.
        device = next((p.device for p in critic.parameters() if not p.is_meta), torch.device("cpu"))
        head.to_empty(device=device)
    with torch.no_grad():
        head.weight.zero_()
        if head.bias is not None:
            head.bias.zero_()


class ValueHeadCritic(PreTrainedModel):
    """A critic for causal LMs that transformers gives no `*ForTokenClassification` class: the base model
    (`AutoModel`) with a linear `score` head, `(B, L, 1)` logits like a token-classification model with one label.

    It keeps the backbone's own config (whose `architectures` records `ValueHeadCritic`), so `save_pretrained` writes
    one folder (config and safetensors weights, the backbone's under `model.`) that [`load_critic`] loads back.
    """

    config_class = PretrainedConfig  # the backbone's config, whatever its class
    base_model_prefix = "model"
    supports_gradient_checkpointing = True
    _supports_sdpa = True
    _supports_flash_attn = True

    def __init__(self, config, backbone: PreTrainedModel | None = None):
        if backbone is None:  # first: it sets the attention its architecture runs, which this wrapper then keeps
            backbone = AutoModel.from_config(config)
        super().__init__(config)
        self.model = backbone
        self.score = nn.Linear(config.get_text_config().hidden_size, 1)
        self.post_init()

    def get_input_embeddings(self):
        return self.model.get_input_embeddings()

    def set_input_embeddings(self, value):
        self.model.set_input_embeddings(value)

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, inputs_embeds=None, **kwargs):
        for unused in ("labels", "return_dict", "output_attentions", "output_hidden_states", "use_cache"):
            kwargs.pop(unused, None)  # PEFT's token-classification wrapper passes these
        hidden = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            use_cache=False,
            **kwargs,
        ).last_hidden_state  # (B, L, H)
        return TokenClassifierOutput(logits=self.score(hidden.to(self.score.weight.dtype)))  # (B, L, 1)


def _is_value_head_critic(config) -> bool:
    return ValueHeadCritic.__name__ in (getattr(config, "architectures", None) or [])


def has_token_classification(config) -> bool:
    """Whether `AutoModelForTokenClassification` builds a model for `config`: transformers has a class for its
    config's type (its own, or one registered with `AutoModelForTokenClassification.register`), or the checkpoint's
    code names one in its `auto_map` (which transformers runs under `trust_remote_code`, or refuses)."""
    own_code = AutoModelForTokenClassification.__name__ in (getattr(config, "auto_map", None) or {})
    return type(config) in MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING or own_code


def _token_classification(config, build, fallback):
    """`build()`, a token-classification model, where transformers has one for `config`
    ([`has_token_classification`]); otherwise `fallback()`, a [`ValueHeadCritic`]."""
    return build() if has_token_classification(config) else fallback()


def resolve_critic_source(name_or_path: str, revision: str | None = None) -> str:
    """Where a saved critic is, from what a user points `critic_model_name_or_path` at: a run's folder or checkpoint
    (`output_dir`, `checkpoint-N`), whose critic is its `critic/` folder, or a subfolder of a Hub repository,
    `org/name/critic` (what `push_to_hub` uploads; `org/name/checkpoint-N` reads its `critic/`), downloaded with its
    files and read from the Hub cache; anything else (a critic folder, a causal LM's folder or Hub id, `org/name`, a
    path under an existing local folder) is returned as it is.

    Args:
        name_or_path (`str`):
            The critic's folder or Hub id, as given.
        revision (`str`, *optional*):
            The branch, tag or commit of a Hub repository's subfolder to download (as `model_init_kwargs["revision"]`
            selects those of a Hub id); defaults to the repository's main branch.

    Returns:
        `str`: the folder or Hub id to load the critic from.
    """
    if os.path.isdir(name_or_path):
        inner = os.path.join(name_or_path, CRITIC_SUBFOLDER)
        if os.path.isdir(inner) and os.path.basename(os.path.normpath(name_or_path)) != CRITIC_SUBFOLDER:
            logger.info("Loading the critic that %s holds, %s.", name_or_path, inner)
            return inner
        if not any(os.path.isfile(os.path.join(name_or_path, f)) for f in ("config.json", "adapter_config.json")):
            # A run's folder with no final model (stopped early): its newest complete checkpoint's critic, as
            # `trl-srppo eval` takes that checkpoint's policy.
            from pathlib import Path

            from ...runtime.checkpoints import latest_checkpoint

            checkpoint = latest_checkpoint(Path(name_or_path))
            if checkpoint is not None and (checkpoint / CRITIC_SUBFOLDER).is_dir():
                logger.info("%s has no final critic; loading its checkpoint's, %s.", name_or_path, checkpoint)
                return str(checkpoint / CRITIC_SUBFOLDER)
        return name_or_path
    parts = name_or_path.rstrip("/").split("/")
    hub_subfolder = (
        len(parts) > 2
        and not os.path.isabs(name_or_path)
        and not name_or_path.startswith((".", "~"))
        and all(parts)
        and not os.path.exists(parts[0])  # `outputs/run/checkpoint-9` mistyped is a local path, not a Hub id
    )
    if not hub_subfolder:
        return name_or_path
    from huggingface_hub import snapshot_download

    repo_id, subfolder = "/".join(parts[:2]), "/".join(parts[2:])
    snapshot = snapshot_download(repo_id, revision=revision, allow_patterns=[f"{subfolder}/*", f"{subfolder}/**/*"])
    folder = os.path.join(snapshot, subfolder)
    if os.path.isdir(os.path.join(folder, CRITIC_SUBFOLDER)):  # a pushed checkpoint, `org/name/checkpoint-N`
        folder = os.path.join(folder, CRITIC_SUBFOLDER)
    if not os.path.isdir(folder):
        raise FileNotFoundError(
            f"The Hub repository {repo_id!r} has no folder {subfolder!r}"
            + (f" at revision {revision!r}" if revision else "")
            + f", so {name_or_path!r} is not a critic there. "
            "A run pushed with push_to_hub keeps its critic in `critic/`: point critic_model_name_or_path at "
            f"'{repo_id}/{CRITIC_SUBFOLDER}'."
        )
    return folder


def load_critic(
    name_or_path: str, model_init_kwargs: dict | None = None, policy_base: Callable[[], nn.Module] | None = None
) -> PreTrainedModel:
    """Load a critic from a Hub id or a folder.

    The checkpoint is either a critic saved by [`SRPPOTrainer`] (a token-classification model with one label, or a
    PEFT adapter on one) or a causal LM, in which case a zero-initialised value head is added.

    Args:
        name_or_path (`str`):
            Hub id or local folder.
        model_init_kwargs (`dict`, *optional*):
            Extra keyword arguments for `from_pretrained` (for example `dtype`, `revision`, `trust_remote_code`).
        policy_base (`Callable`, *optional*):
            Builds the base of a saved LoRA critic whose adapter records none (a critic trained beside a policy built
            in memory): a critic from the policy, as the trainer built it then.
    """
    kwargs = dict(model_init_kwargs or {})
    kwargs.setdefault("use_safetensors", True)
    local = os.path.isabs(name_or_path) or name_or_path.startswith((".", "~")) or name_or_path.count("/") > 1
    if local and not os.path.isdir(name_or_path):
        raise FileNotFoundError(
            f"The critic checkpoint {name_or_path!r} is not a folder (and, as a path, cannot be a Hub id of the form "
            "`org/name`). Fix `critic_model_name_or_path`, or leave it unset to start the critic from the policy."
        )
    if os.path.isfile(os.path.join(name_or_path, CRITIC_ADAPTER_SUBFOLDER, "adapter_config.json")):
        name_or_path = os.path.join(name_or_path, CRITIC_ADAPTER_SUBFOLDER)  # a LoRA critic saved by the trainer
    if os.path.isfile(os.path.join(name_or_path, "adapter_config.json")):
        from peft import PeftConfig, PeftModel

        base_name = PeftConfig.from_pretrained(name_or_path).base_model_name_or_path
        if base_name is None and policy_base is None:
            raise ValueError(
                f"The LoRA critic in {name_or_path!r} does not record its base model (it was trained on a model built "
                "in memory, from a config). Pass the policy it was trained beside to the trainer, which rebuilds the "
                "base from it, or pass the critic as a model instance (`critic_model=`)."
            )
        base = load_critic(base_name, model_init_kwargs) if base_name is not None else policy_base()
        refuse_pickle_only(name_or_path)  # PEFT would read adapter_model.bin
        return PeftModel.from_pretrained(base, name_or_path, is_trainable=True)
    trust = kwargs.get("trust_remote_code", False)
    # Weights without safetensors: an error that names the rule and how to convert them (not transformers' own).
    with safetensors_required(name_or_path):
        config = AutoConfig.from_pretrained(name_or_path, trust_remote_code=trust, revision=kwargs.get("revision"))
        if _is_value_head_critic(config):
            return ValueHeadCritic.from_pretrained(name_or_path, config=config, **kwargs)
        if _is_saved_critic(config):
            return AutoModelForTokenClassification.from_pretrained(name_or_path, **kwargs)
        config.num_labels = 1
        config.classifier_dropout = 0.0
        critic = _load_head_swap(name_or_path, config, kwargs)
        logger.info("The critic is %s's backbone with a new value head; its output head is not used.", name_or_path)
    _zero_value_head(critic)
    return critic


# `critic_dtype`: the dtype of the critic's weights each name stands for.
CRITIC_DTYPES = Registry.of("critic_dtype", {"float32": torch.float32, "bfloat16": torch.bfloat16})


def _load_head_swap(name_or_path: str, config, kwargs: dict) -> PreTrainedModel:
    """A critic from the causal LM `name_or_path`: its backbone and a new value head (transformers'
    token-classification class with `config`, else a [`ValueHeadCritic`]). transformers logs the load's report of the
    output head it leaves and the value head it adds."""

    def token_classification():
        return AutoModelForTokenClassification.from_pretrained(name_or_path, config=config, **kwargs)

    def value_head():
        return ValueHeadCritic(config, AutoModel.from_pretrained(name_or_path, config=config, **kwargs))

    return _token_classification(config, token_classification, value_head)


def holds_saved_critic_model(name_or_path: str, revision: str | None = None, trust_remote_code: bool = False) -> bool:
    """Whether `name_or_path` (a folder or Hub id, as [`resolve_critic_source`] returns it) holds a critic model the
    trainer saved (its settings file, a LoRA critic's adapter, or the config of a saved critic), rather than a model
    that [`load_critic`] would give a fresh value head. (A critic type that is not a model of its own marks its folder
    with its own file: `trl_srppo.method.critics.build.holds_saved_critic` asks those too.)"""
    markers = (CRITIC_SETTINGS, "adapter_config.json")
    if any(os.path.isfile(os.path.join(name_or_path, marker)) for marker in markers):
        return True
    if os.path.isfile(os.path.join(name_or_path, CRITIC_ADAPTER_SUBFOLDER, "adapter_config.json")):
        return True
    config = AutoConfig.from_pretrained(name_or_path, revision=revision, trust_remote_code=trust_remote_code)
    return _is_saved_critic(config) or _is_value_head_critic(config)


def _base_modules(module: nn.Module, prefix: str = ""):
    """Yield `(module, prefix)` for `module` and every module under it as they were before PEFT injected its layers:
    every tuner layer (LoRA, ...) is replaced by the layer it wraps, and every `modules_to_save` wrapper by its
    original module, so the prefixes of their parameters are the base model's keys (the adapters left out). A model
    without PEFT layers is walked as it is."""
    try:
        from peft.tuners.tuners_utils import BaseTunerLayer
        from peft.utils.other import AuxiliaryTrainingWrapper
    except ImportError:  # no PEFT installed: no PEFT layers to unwrap
        BaseTunerLayer = AuxiliaryTrainingWrapper = ()
    while True:
        if isinstance(module, BaseTunerLayer):
            module = module.get_base_layer()
        elif isinstance(module, AuxiliaryTrainingWrapper):
            module = module.original_module
        else:
            break
    yield module, prefix
    for name, child in module._modules.items():
        if child is not None:
            yield from _base_modules(child, f"{prefix}{name}.")


def _own_tensors(module: nn.Module):
    """`(name, tensor)` of the parameters and persistent buffers `module` holds itself (not its children's)."""
    for name, param in module._parameters.items():
        if param is not None:
            yield name, param
    for name, buffer in module._buffers.items():
        if buffer is not None and name not in module._non_persistent_buffers_set:
            yield name, buffer


@torch.no_grad()
def _copy_backbone(source: nn.Module, target: nn.Module) -> tuple[list[str], list[str]]:
    """Copy the weights of `source` (a policy's backbone, PEFT layers unwrapped) into `target` (the critic's), one
    module at a time. Under DeepSpeed ZeRO-3 (`zero.Init`) each module's parameters are gathered for its copy alone,
    so a process never holds more of the policy than its largest module beside the critic.
    Returns the keys of `target` left without a value and the keys of `source` that `target` does not have (or not
    in that shape)."""
    partitioned = any(hasattr(p, "ds_id") for p in source.parameters())
    if partitioned:
        import deepspeed
    targets = target.state_dict(keep_vars=True)  # the critic's own tensors, written in place
    unexpected = []
    for module, prefix in _base_modules(source):
        params = [p for p in module._parameters.values() if p is not None]
        gathered = deepspeed.zero.GatheredParameters(params) if partitioned and params else contextlib.nullcontext()
        with gathered:  # whole, read-only, for the copy; freed on leaving
            for name, tensor in _own_tensors(module):
                key = prefix + name
                if key in targets and targets[key].shape == tensor.shape:
                    targets.pop(key).copy_(tensor)
                else:  # a key, or a shape, the critic does not have
                    unexpected.append(key)
    return list(targets), unexpected


def critic_from_policy(policy: PreTrainedModel) -> PreTrainedModel:
    """A critic with the policy's architecture and backbone weights, and a zero-initialised value head.

    For a PEFT policy the critic starts from the base model's weights, without the adapter (as with a `peft_config`,
    whose fresh adapter changes nothing)."""
    peft = hasattr(policy, "get_base_model")
    if peft:
        policy = policy.get_base_model()
    config = policy.config.__class__.from_dict(policy.config.to_dict())
    config.num_labels = 1
    config.classifier_dropout = 0.0
    config.architectures = None
    critic = _token_classification(
        config,
        lambda: AutoModelForTokenClassification.from_config(config, dtype=policy.dtype),
        lambda: ValueHeadCritic(config).to(policy.dtype),
    )
    missing, unexpected = _copy_backbone(policy.base_model, critic.base_model)
    if unexpected or [m for m in missing if "rotary" not in m]:
        raise ValueError(
            f"Could not copy the policy's backbone ({type(policy).__name__}) into the critic "
            f"({type(critic).__name__}): missing {missing[:5]}, unexpected {unexpected[:5]}. Pass `critic_model` "
            "explicitly."
        )
    _zero_value_head(critic)
    return critic.to(policy.device)


@contextlib.contextmanager
def _outside_zero3_init():
    """Build the critic as a plain, whole module even when DeepSpeed ZeRO-3 would partition `from_pretrained` models.

    Under ZeRO-3 the policy is sharded by DeepSpeed; the critic is a replicated module trained with data parallelism
    (see `SRPPOTrainer`), so it must not be created inside `deepspeed.zero.Init`.
    """
    from transformers.integrations import set_hf_deepspeed_config, unset_hf_deepspeed_config

    saved = hf_deepspeed_config()
    unset_hf_deepspeed_config()
    try:
        yield
    finally:
        if saved is not None:
            set_hf_deepspeed_config(saved)


def hf_deepspeed_config():
    """The `HfDeepSpeedConfig` that transformers' `is_deepspeed_zero3_enabled` reads (what `set_hf_deepspeed_config`
    set last, while it lives), or `None`.

    transformers exports `set_hf_deepspeed_config` and `unset_hf_deepspeed_config` but nothing that returns the object
    set (`deepspeed_config()` returns its dict), so it is read from the weak reference its module keeps, as
    transformers 5.25.0 names it; `tests/test_critic_transformers.py` fails if that changes.
    """
    from transformers.integrations import deepspeed as hf_deepspeed

    reference = hf_deepspeed._hf_deepspeed_config_weak_ref
    return None if reference is None else reference()


def build_critic_model(policy, critic_model, args) -> nn.Module:
    """The critic for [`SRPPOTrainer`]: the given model, the given checkpoint, or one built from the policy.

    Args:
        policy (`str` or `PreTrainedModel`):
            The policy as passed to the trainer.
        critic_model (`str`, `nn.Module` or `None`):
            The trainer's `critic_model` argument; takes precedence over `args.critic_model_name_or_path`.
        args ([`SRPPOConfig`]):
            The training configuration (critic checkpoint, LoRA and gradient-checkpointing fields).
    """
    if critic_model is None:
        critic_model = args.critic_model_name_or_path
    if critic_model is None:
        critic_model = policy
    dtype = CRITIC_DTYPES[args.critic_dtype]
    if isinstance(critic_model, str):
        # The policy's loading options, less those that belong to the policy alone: the critic has its own dtype
        # (its optimizer's master weights) and is never quantized or placed by a device map.
        skip = ("dtype", "torch_dtype", "quantization_config", "device_map")
        init_kwargs = {k: v for k, v in (args.model_init_kwargs or {}).items() if k not in skip}
        init_kwargs.setdefault("trust_remote_code", args.trust_remote_code)  # as GRPO loads the policy
        with _outside_zero3_init():
            critic = load_critic(
                critic_model,
                {**init_kwargs, "dtype": dtype},
                policy_base=None if isinstance(policy, str) else lambda: critic_from_policy(policy).to(dtype),
            )
    elif critic_model is policy:
        with _outside_zero3_init():
            critic = critic_from_policy(policy).to(dtype)
    elif isinstance(critic_model, nn.Module):
        critic = critic_model
    else:
        raise TypeError(
            f"critic_model must be a Hub id, a local path or a model instance, got {type(critic_model).__name__}."
        )

    if args.critic_use_peft and not hasattr(critic, "peft_config"):
        from peft import LoraConfig, get_peft_model

        head_name, _ = _value_head(critic)
        lora = LoraConfig(
            task_type="TOKEN_CLS",
            r=args.critic_lora_r,
            lora_alpha=args.critic_lora_alpha,
            lora_dropout=args.critic_lora_dropout,
            target_modules=args.critic_lora_target_modules or "all-linear",
            modules_to_save=[head_name],
        )
        # The adapter's random start from `seed` alone: the draws made before it differ with the policy's engine
        # (DeepSpeed's and FSDP's set-up), and a LoRA critic should start the same under each of them.
        with torch.random.fork_rng(devices=[]):
            torch.default_generator.manual_seed(args.seed)  # the CPU's alone: `manual_seed` would reseed every GPU
            critic = get_peft_model(critic, lora)

    if args.disable_dropout:  # as GRPO does for the policy: values must not depend on dropout noise
        from trl.trainer.utils import disable_dropout_in_model

        disable_dropout_in_model(critic)

    use_checkpointing = args.critic_gradient_checkpointing
    if use_checkpointing is None:
        use_checkpointing = args.gradient_checkpointing
    if use_checkpointing:
        critic.config.use_cache = False
        kwargs = args.gradient_checkpointing_kwargs or {"use_reentrant": False}
        critic.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
        if hasattr(critic, "enable_input_require_grads"):
            critic.enable_input_require_grads()
    return critic


def prefix_values(
    critic: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, logits_to_keep: int
) -> torch.Tensor:
    """The critic's raw output for the states `s_0 .. s_{C-1}` before each of the last `logits_to_keep` tokens.

    Completion token `t` sits at position `P - 1 + t` of `input_ids` (prompt at `0 .. P-1`), and its state
    `s_{t-1}` is read at position `P - 2 + t`, the position whose logits predict token `t`. So the raw values are the
    head outputs at positions `P - 1 .. P + C - 2`, and column 0 is the last prompt token, `s_0`.

    Args:
        critic (`nn.Module`):
            Token-classification model with one label (possibly wrapped by DDP or PEFT).
        input_ids (`torch.Tensor` of shape `(B, P + C)`):
            Left-padded prompts followed by right-padded completions.
        attention_mask (`torch.Tensor` of shape `(B, P + C)`):
            Attention mask of `input_ids`.
        logits_to_keep (`int`):
            `C`, the padded completion length.

    Returns:
        `torch.Tensor` of shape `(B, C)`: raw head outputs in float32 (logits for a sigmoid critic).
    """
    # Positions count the attended tokens only, so that a state's value does not depend on how much left padding its
    # batch gave it (absolute-position models such as GPT-2 would otherwise see shifted positions).
    position_ids = (attention_mask.long().cumsum(dim=1) - 1).clamp(min=0)  # (B, P + C)
    logits = critic(
        input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False
    ).logits  # (B, P + C, 1)
    return logits[:, -logits_to_keep - 1 : -1, 0].float()  # (B, C)

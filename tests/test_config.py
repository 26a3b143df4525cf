# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""SRPPOConfig: one rollout accepted, method presets, explicit fields win, clear errors."""

import dataclasses
import re

import pytest
from conftest import cpu_config
from trl import GRPOConfig

from trl_srppo import SRPPOConfig
from trl_srppo.method.srppo_config import CHOICES, METHOD_PRESETS


@pytest.mark.parametrize(
    "batch, given",
    [
        (3, {}),
        (1, {"gradient_accumulation_steps": 3}),
        (2, {"generation_batch_size": 6}),
        (5, {"steps_per_generation": 3}),
    ],
)
def test_is_a_grpo_config_with_one_rollout_by_default(tmp_path, batch, given):
    args = cpu_config(tmp_path, per_device_train_batch_size=batch, **given)
    assert isinstance(args, GRPOConfig)
    assert args.num_generations == 1 and type(args.num_generations) is int and args.num_generations_eval is None
    steps = given.get("steps_per_generation", given.get("gradient_accumulation_steps", 1))
    assert args.generation_batch_size == given.get("generation_batch_size", batch * steps)
    with pytest.raises(ValueError, match="at least 2 generations"):
        GRPOConfig(output_dir=str(tmp_path), num_generations=1, bf16=False, use_cpu=True, report_to=[])


def test_a_generated_batch_of_one_rollout_is_refused_with_the_fix(tmp_path):
    with pytest.raises(ValueError, match="per_device_train_batch_size >= 2 or gradient_accumulation_steps >= 2"):
        cpu_config(tmp_path, per_device_train_batch_size=1)


def _reads_of(function, name: str) -> list[str]:
    """The source of each smallest expression of `function` (a Python function) that reads `self.<name>`: the
    comparison, arithmetic or boolean operation around it."""
    import ast
    import inspect
    import textwrap

    source = textwrap.dedent(inspect.getsource(function))
    reads = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Compare, ast.BinOp, ast.BoolOp)):
            children = [
                c for c in ast.iter_child_nodes(node) if not isinstance(c, (ast.cmpop, ast.operator, ast.boolop))
            ]
            if any(isinstance(c, ast.Attribute) and c.attr == name for c in children):
                reads.append(ast.unparse(node))
    return sorted(reads)


def test_grpo_config_reads_num_generations_as_the_single_rollout_checks_expect():
    # `trl_srppo.method.single_rollout` runs GRPOConfig's checks with a group size that divides the generation batch
    # in place of 1, which is right only while GRPOConfig reads `num_generations` in these three ways: the minimum of
    # a group, and the divisibility of the generation and evaluation batches. A TRL release that reads it in another
    # way fails here, not silently.
    assert _reads_of(GRPOConfig.__post_init__, "num_generations") == sorted(
        [
            "self.num_generations < 2",
            "self.generation_batch_size % self.num_generations",
            "self.num_generations_eval or self.num_generations",
        ]
    )


def test_other_grpo_checks_still_apply(tmp_path):
    with pytest.raises(ValueError, match="divisible by num_generations"):
        cpu_config(tmp_path, per_device_train_batch_size=3, num_generations=2)


@pytest.mark.parametrize("method", list(METHOD_PRESETS))
def test_method_presets_fill_unset_fields(tmp_path, method):
    args = cpu_config(tmp_path, srppo_method=method)
    for name, value in METHOD_PRESETS[method].items():
        assert getattr(args, name) == value


def test_paper_methods_are_what_the_presets_say(tmp_path):
    sr = cpu_config(tmp_path, srppo_method="sr-ppo")
    assert (sr.gae_lambda, sr.critic_head, sr.critic_loss_type) == (1.0, "sigmoid", "bce_mse") and sr.pass_at_k > 1
    assert cpu_config(tmp_path, srppo_method="sr-ppo-pass1").pass_at_k == 1
    ppo = cpu_config(tmp_path, srppo_method="ppo")
    assert (ppo.pass_at_k, ppo.critic_head, ppo.critic_loss_type) == (1, "linear", "mse")
    assert cpu_config(tmp_path, srppo_method="td").gae_lambda == 0.0


def test_explicit_fields_win_over_the_preset(tmp_path):
    args = cpu_config(tmp_path, srppo_method="sr-ppo", pass_at_k=8, gae_lambda=0.5)
    assert (args.pass_at_k, args.gae_lambda) == (8, 0.5)
    args = cpu_config(tmp_path, srppo_method="ppo", gae_lambda=0.95)
    assert args.gae_lambda == 0.95 and args.critic_head == "linear"


@pytest.mark.parametrize(
    "overrides,field",
    [
        (dict(srppo_method="grpo"), "srppo_method"),
        (dict(pass_at_k=0), "pass_at_k"),
        (dict(pass_at_k=2.5), "pass_at_k"),
        (dict(gae_lambda=1.5), "gae_lambda"),
        (dict(critic_head="tanh"), "critic_head"),
        (dict(critic_loss_type="huber"), "critic_loss_type"),
        (dict(srppo_method="ppo", critic_loss_type="bce_mse"), "critic_loss_type"),
        (dict(srppo_method="ppo", pass_at_k=4), "pass_at_k"),
        (dict(critic_learning_rate=0.0), "critic_learning_rate"),
        (dict(critic_head_learning_rate=-1e-3), "critic_head_learning_rate"),
        (dict(critic_mse_coef=-1.0), "critic_mse_coef"),
        (dict(critic_epochs=0), "critic_epochs"),
        (dict(critic_warmup_steps=-1), "critic_warmup_steps"),
        (dict(critic_cliprange_value=0.0), "critic_cliprange_value"),
        (dict(critic_lora_r=0), "critic_lora_r"),
        (dict(critic_dtype="float16"), "critic_dtype"),
        (dict(critic_parallelism="zero"), "critic_parallelism"),
        (dict(load_best_model_at_end=True, eval_strategy="steps", save_strategy="steps"), "load_best_model_at_end"),
    ],
)
def test_invalid_values_name_the_field(tmp_path, overrides, field):
    with pytest.raises(ValueError, match=field):
        cpu_config(tmp_path, **overrides)


def test_every_new_field_is_documented(tmp_path):
    from trl_srppo.runtime.config import RuntimeConfig

    grpo_fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    runtime_fields = {f.name for f in dataclasses.fields(RuntimeConfig)}
    for f in dataclasses.fields(SRPPOConfig):
        if f.name in grpo_fields and f.name != "num_generations":
            continue
        owner = RuntimeConfig if f.name in runtime_fields else SRPPOConfig  # the runtime's fields, with the runtime
        assert f.metadata.get("help"), f"{f.name} has no help text"
        assert f"{f.name} (`" in owner.__doc__, f"{f.name} is not in the {owner.__name__} docstring"


_GRPO_FIELDS = {f.name for f in dataclasses.fields(GRPOConfig)}
# The fields SR-PPO adds that name a choice: their registry's names (`CHOICES`). No field of SR-PPO's keeps argparse
# `choices` (a second check with another message).
CHOICE_FIELDS = {name: registry.names() for name, registry in CHOICES.items()}
assert not [f.name for f in dataclasses.fields(SRPPOConfig) if "choices" in f.metadata and f.name not in _GRPO_FIELDS]
# What a choice needs beside it to make a valid config.
NEEDS = {
    ("critic_head", "linear"): dict(srppo_method="ppo"),
    ("srppo_outcome", "reward_func"): dict(srppo_outcome_reward_func="accuracy"),
}


def test_choice_fields_are_the_expected_ones():
    assert set(CHOICE_FIELDS) == {
        "srppo_method",
        "advantage_baseline",
        "prompt_sampling",
        "srppo_outcome",
        "critic_type",
        "critic_head",
        "critic_loss_type",
        "critic_value_init",
        "critic_parallelism",
        "critic_zero_stage",
        "critic_dtype",
    }


def test_a_registry_checks_each_choice_field_once_with_one_message(tmp_path):
    # No field hands argparse its own `choices` any more: the registry is the one check, on the command line too.
    assert not [f.name for f in dataclasses.fields(SRPPOConfig) if f.name in CHOICES and "choices" in f.metadata]
    for name, registry in CHOICES.items():
        assert registry.setting == name
        bad = 0 if name == "critic_zero_stage" else "not-a-choice"
        with pytest.raises(ValueError) as refusal:
            cpu_config(tmp_path, **{name: bad})
        names = ", ".join(map(repr, registry.names()[:-1])) + f" or {registry.names()[-1]!r}"
        assert str(refusal.value).startswith(f"{name} must be {names}, got {bad!r}."), str(refusal.value)


@pytest.mark.parametrize("name", sorted(CHOICES))
def test_the_help_and_the_docstring_name_every_registered_choice(name):
    field = next(f for f in dataclasses.fields(SRPPOConfig) if f.name == name)
    entries = re.split(r"\n {8}(?=\w+ \(`)", SRPPOConfig.__doc__)  # one per field
    entry = " ".join(next(text for text in entries if text.startswith(f"{name} (`")).split())
    for choice in CHOICES[name]:
        shown = str(choice) if isinstance(choice, int) else f"'{choice}'"
        assert shown in field.metadata["help"], (name, choice)
        assert (str(choice) if isinstance(choice, int) else f'"{choice}"') in entry, (name, choice)


@pytest.mark.parametrize("name", sorted(CHOICE_FIELDS))
def test_the_config_accepts_exactly_the_choices_its_fields_offer(tmp_path, name):
    for choice in CHOICE_FIELDS[name]:
        assert getattr(cpu_config(tmp_path, **{name: choice, **NEEDS.get((name, choice), {})}), name) == choice
    bad = 0 if name == "critic_zero_stage" else "not-a-choice"
    with pytest.raises(ValueError, match=rf"^{name}\b.*{bad!r}"):
        cpu_config(tmp_path, **{name: bad})


def test_critic_zero_stage_is_1_2_or_3_as_its_docs_say(tmp_path):
    rule = "1, 2 or 3"
    field = next(f for f in dataclasses.fields(SRPPOConfig) if f.name == "critic_zero_stage")
    entry = SRPPOConfig.__doc__.split("critic_zero_stage (`int`")[1].split("critic_dtype (`str`")[0]
    assert rule in field.metadata["help"] and rule in " ".join(entry.split())
    for stage in (1, 2, 3):
        assert cpu_config(tmp_path, critic_zero_stage=stage).critic_zero_stage == stage
    for stage in (0, 4):
        with pytest.raises(ValueError, match=f"^critic_zero_stage must be {rule}, got {stage}\\. Stage 0 partitions"):
            cpu_config(tmp_path, critic_zero_stage=stage)


@pytest.mark.parametrize("checkpointing", [None, True, False])
def test_gradient_checkpointing_sets_checkpointing_without_a_deprecation_warning(tmp_path, checkpointing, recwarn):
    given = {} if checkpointing is None else {"gradient_checkpointing": checkpointing}
    config = SRPPOConfig(output_dir=str(tmp_path), use_cpu=True, **given)
    expected = True if checkpointing is None else checkpointing  # TRL's GRPO default: on
    assert config.gradient_checkpointing is expected
    assert getattr(config, "activation_checkpointing", expected) is expected  # its name in newer transformers
    assert not [w for w in recwarn if "checkpointing" in str(w.message)], [str(w.message) for w in recwarn]


def test_ddp_skips_the_unused_parameter_search_for_the_policy_of_a_separate_critic(tmp_path):
    assert SRPPOConfig(output_dir=str(tmp_path), use_cpu=True).ddp_find_unused_parameters is False
    # The policy's LoRA holds the critic's adapter too, unused in the policy's forward: Trainer's default.
    lora = SRPPOConfig(output_dir=str(tmp_path), use_cpu=True, critic_type="policy_lora")
    assert lora.ddp_find_unused_parameters is None
    given = SRPPOConfig(output_dir=str(tmp_path), use_cpu=True, ddp_find_unused_parameters=True)
    assert given.ddp_find_unused_parameters is True

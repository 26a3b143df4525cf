# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`Registry`: a name is registered once, looked up after its check, refused with one message, kept in order; and
the method's registries bind each choice to what runs it."""

import pytest
import torch

from trl_srppo.method import core
from trl_srppo.method.registry import Registry, either
from trl_srppo.method.srppo_config import CHOICES, CRITIC_DTYPES, METHOD_PRESETS, SRPPO_METHODS


def test_either_lists_names_as_a_message_does():
    assert either(["a"]) == "'a'"
    assert either(["a", "b"]) == "'a' or 'b'"
    assert either(["a", "b", "c"]) == "'a', 'b' or 'c'"
    assert either([1, 2, 3]) == "1, 2 or 3"


def test_register_binds_a_value_or_decorates_and_refuses_a_name_twice():
    registry = Registry("colour")
    assert registry.register("red", 1) == 1

    @registry.register("blue")
    def blue():
        return "blue"

    assert registry["red"] == 1 and registry["blue"] is blue and blue() == "blue"
    with pytest.raises(ValueError, match=r"^colour: 'red' is registered already\.$"):
        registry.register("red", 2)
    with pytest.raises(ValueError, match="registered already"):
        registry.register("blue")(lambda: None)
    assert registry["red"] == 1 and registry["blue"] is blue  # the first binding stays


def test_an_unknown_name_is_refused_with_the_setting_and_its_names():
    registry = Registry.of("critic_loss_type", ("bce_mse", "bce", "mse"))
    message = "critic_loss_type must be 'bce_mse', 'bce' or 'mse', got 'huber'."
    with pytest.raises(ValueError) as refusal:
        registry.check("huber")
    assert str(refusal.value) == message
    with pytest.raises(ValueError) as refusal:
        registry["huber"]  # a lookup checks first
    assert str(refusal.value) == message
    for bad in (None, ["bce"], 0):  # no name, an unhashable value, another type
        with pytest.raises(ValueError, match=f"^critic_loss_type must be .*, got {bad!r}\\.$".replace("[", r"\[")):
            registry.check(bad)
    registry.check("bce")  # a known name passes


def test_a_hint_ends_the_message():
    stages = Registry.of("critic_zero_stage", (1, 2, 3), hint="Use critic_parallelism='replicate'.")
    with pytest.raises(ValueError) as refusal:
        stages.check(0)
    assert str(refusal.value) == "critic_zero_stage must be 1, 2 or 3, got 0. Use critic_parallelism='replicate'."


def test_lookup_membership_and_order():
    registry = Registry.of("dtype", {"float32": torch.float32, "bfloat16": torch.bfloat16})
    assert registry["bfloat16"] is torch.bfloat16
    assert "float32" in registry and "float16" not in registry and [] not in registry
    assert list(registry) == ["float32", "bfloat16"] == list(registry.names()) and len(registry) == 2
    names = Registry.of("mode", ("c", "a", "b"))
    assert names.names() == ("c", "a", "b") and names["a"] == "a"  # registration order, names bound to themselves
    assert repr(names) == "Registry('mode': 'c', 'a', 'b')"


def test_the_method_s_registries_bind_each_choice_to_what_runs_it():
    assert core.ADVANTAGE_BASELINES["prefix"].estimate is core.srppo_advantages
    assert core.ADVANTAGE_BASELINES["prompt"].estimate is core.prompt_baseline_advantages
    assert core.CRITIC_HEADS.names() == ("sigmoid", "linear")
    assert core.CRITIC_HEADS["sigmoid"].values is torch.sigmoid and core.CRITIC_HEADS["sigmoid"].logits
    assert {name: loss.per_token for name, loss in core.CRITIC_LOSSES._entries.items()} == {
        "bce_mse": core.bce_mse_loss,
        "bce": core.bce_loss,
        "mse": core.mse_loss,
    }
    assert core.OUTCOME_MODES["reward_func"].outcome is core.reward_func_outcome
    assert core.PROMPT_SAMPLING_MODES.names() == ("none", "pass_at_k", "near_half")
    assert core.PROMPT_SAMPLING_MODES["near_half"].draw is core.draw_near_half
    assert SRPPO_METHODS.names() == tuple(METHOD_PRESETS) and SRPPO_METHODS["ppo"] is METHOD_PRESETS["ppo"]
    assert CRITIC_DTYPES["bfloat16"] is torch.bfloat16
    assert list(CHOICES)[0] == "srppo_method"  # checked first: its preset fills other choice fields


def test_the_estimators_take_one_call():
    values = torch.tensor([[0.25, 0.5, 0.75], [0.5, 0.5, 0.0]], dtype=torch.float64)  # (B, T)
    rewards = torch.tensor([1.0, 0.0], dtype=torch.float64)  # (B,)
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]], dtype=torch.float64)  # (B, T)
    for name in core.ADVANTAGE_BASELINES:
        estimate = core.ADVANTAGE_BASELINES[name](values, rewards, mask, 2, lam=1.0, prompt_scale=None)
        torch.testing.assert_close(estimate.advantages[:, 0], 2 * (1 - values[:, 0]) * (rewards - values[:, 0]))
    with pytest.raises(ValueError, match="lam must be 1.0"):
        core.ADVANTAGE_BASELINES["prompt"](values, rewards, mask, 2, lam=0.5, prompt_scale=None)


def test_every_draw_keeps_the_batch_size():
    q0 = torch.tensor([0.1, 0.5, 0.9, 0.4], dtype=torch.float64)  # (N,)
    for mode in core.PROMPT_SAMPLING_MODES:
        draw = core.sample_prompts(q0, 2, mode, pass_at_k=2, floor=0.5, generator=torch.Generator().manual_seed(0))
        assert draw["indices"].shape == (2,) and draw["ratios"].shape == (2,) and draw["probabilities"].shape == (4,)
    none = core.sample_prompts(q0, 4, "none")
    assert none["indices"].tolist() == [0, 1, 2, 3] and none["ratios"].tolist() == [1.0] * 4
    with pytest.raises(ValueError, match="^prompt_sampling must be 'none', 'pass_at_k' or 'near_half', got 'all'"):
        core.sample_prompts(q0, 2, "all")


def test_the_analyses_check_the_critic_head_against_the_trainer_s_registry():
    from trl_srppo.analysis.config import AnalysisConfig

    with pytest.raises(ValueError, match=r"^critic_head must be 'sigmoid' or 'linear', got 'tanh'\.$"):
        AnalysisConfig(model_name_or_path="m", output_dir="o", critic_head="tanh")
    assert AnalysisConfig(model_name_or_path="m", output_dir="o", critic_head="linear").critic_head == "linear"


def test_each_entry_says_what_its_choice_implies():
    from trl_srppo.method.critics.build import CRITIC_PARALLELISMS, CRITIC_TYPES
    from trl_srppo.method.srppo_config import CRITIC_VALUE_INITS

    def which(registry, attribute):
        return [name for name in registry if getattr(registry[name], attribute)]

    assert which(core.CRITIC_HEADS, "logits") == ["sigmoid"]
    assert which(core.CRITIC_LOSSES, "probabilities") == ["bce_mse", "bce"]
    assert which(core.ADVANTAGE_BASELINES, "monte_carlo") == ["prompt"]
    assert which(core.PROMPT_SAMPLING_MODES, "draws") == ["pass_at_k", "near_half"]
    assert {name: core.PROMPT_SAMPLING_MODES[name].min_pool_factor for name in core.PROMPT_SAMPLING_MODES} == {
        "none": 1,
        "pass_at_k": 1,
        "near_half": 2,
    }
    assert which(core.OUTCOME_MODES, "needs_reward_func") == ["reward_func"]
    assert which(core.OUTCOME_MODES, "reads_reward_max") == ["normalized_sum"]
    assert which(core.OUTCOME_MODES, "adds_scores") == ["weighted_sum"]
    assert all(core.OUTCOME_MODES[name].range_fix.endswith(" ") for name in core.OUTCOME_MODES)
    assert which(CRITIC_VALUE_INITS, "from_success_rate") == ["success_rate"]
    assert CRITIC_TYPES.names() == ("separate", "policy_head", "policy_lora", "running_mean")
    assert which(CRITIC_TYPES, "own_model") == ["separate"]
    assert which(CRITIC_TYPES, "reads_policy") == ["policy_head", "policy_lora"]
    assert [name for name in CRITIC_TYPES if not CRITIC_TYPES[name].has_network] == ["running_mean"]
    assert which(CRITIC_TYPES, "policy_adapter") == ["policy_lora"]
    assert CRITIC_PARALLELISMS.names() == ("auto", "accelerate", "replicate", "fsdp", "deepspeed")
    assert which(CRITIC_PARALLELISMS, "automatic") == ["auto"]
    assert which(CRITIC_PARALLELISMS, "prepared_with_policy") == ["accelerate"]
    assert which(CRITIC_PARALLELISMS, "zero_engine") == ["deepspeed"]
    assert CHOICES["critic_parallelism"] is CRITIC_PARALLELISMS and CHOICES["critic_type"] is CRITIC_TYPES


def test_every_critic_type_that_is_not_a_model_of_its_own_marks_its_saved_folder(tmp_path):
    # A saved `critic/` folder is read back by the type its marker names; a model of its own has none (its folder is a
    # `save_pretrained` one), every other type has a marker of its own.
    from trl_srppo.method.critics.build import CRITIC_TYPES, saved_critic_mode

    markers = {name: CRITIC_TYPES[name].marker for name in CRITIC_TYPES}
    assert [name for name, marker in markers.items() if marker is None] == ["separate"]
    assert len(set(markers.values())) == len(markers)
    for name, marker in markers.items():
        folder = tmp_path / name
        folder.mkdir()
        if marker is not None:
            (folder / marker).write_text("{}")
        assert saved_critic_mode(str(folder)) == name

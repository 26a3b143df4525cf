# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Fails loudly if the installed TRL drops or renames a GRPOTrainer hook that SRPPOTrainer overrides or relies on."""

import inspect

import pytest
from trl import GRPOTrainer

from trl_srppo import SRPPOTrainer

# hook -> parameters SRPPOTrainer's override passes through or reads
HOOKS = {
    "_calculate_rewards": ["inputs", "prompts", "completions", "completion_ids_list"],
    "_generate_and_score_completions": ["inputs"],
    "_compute_loss": ["model", "inputs"],
    "create_scheduler": ["num_training_steps", "optimizer"],
    "save_model": ["output_dir", "_internal_call"],
    "_save_optimizer_and_scheduler": ["output_dir"],
    "_load_optimizer_and_scheduler": ["checkpoint"],
    "create_model_card": ["model_name", "dataset_name", "tags"],
    "_push_from_checkpoint": ["checkpoint_folder"],
}


@pytest.mark.parametrize("hook", list(HOOKS))
def test_parent_still_has_the_hook_with_its_signature(hook):
    parent = getattr(GRPOTrainer, hook, None)
    assert parent is not None, f"trl.GRPOTrainer no longer has `{hook}`; SRPPOTrainer overrides it"
    params = list(inspect.signature(parent).parameters)
    for name in HOOKS[hook]:
        assert name in params, f"trl.GRPOTrainer.{hook} lost its `{name}` parameter (has {params})"


def test_srppo_overrides_exactly_these_hooks():
    overridden = {name for name, value in vars(SRPPOTrainer).items() if callable(value) and name in dir(GRPOTrainer)}
    assert overridden - {"__init__"} == set(HOOKS)


def test_grpo_generation_output_still_carries_what_srppo_reads():
    source = inspect.getsource(GRPOTrainer._generate_and_score_completions)
    for key in ('"prompt_ids"', '"prompt_mask"', '"completion_ids"', '"completion_mask"', '"advantages"'):
        assert key in source, f"GRPOTrainer's generation output no longer has {key}"
    assert "self._calculate_rewards(" in source, "GRPO no longer scores completions through _calculate_rewards"
    loss_source = inspect.getsource(GRPOTrainer._compute_loss)
    assert "advantages.dim() == 1" in loss_source, "GRPO's loss no longer accepts (B, T) advantages"

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The `policy_lora` critic's training state at the step-cost benchmark's Qwen3-1.7B shape (`QWEN3_1_7B`, the one
definition of it the project uses), against LoRA GRPO's: the figure `docs/critics.md` quotes."""

import pytest
import torch
from peft import LoraConfig, get_peft_model

from benchmarks.costs.step_cost import QWEN3_1_7B
from tests.helpers import adamw_state_bytes
from trl_srppo import SRPPOConfig


def test_training_state_at_qwen3_1_7b_is_within_15_percent_of_lora_grpo(tmp_path):
    """The state of a bf16 Qwen3-1.7B-shaped policy with a rank-16 all-linear LoRA (built on the meta device), with
    and without the critic adapter and head, counted as AdamW holds it (the count `tests/test_policy_lora_critic.py::
    test_critic_adds_its_adapter_and_head_and_no_base` checks on real runs)."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from trl_srppo.method.critics.policy_lora import build_policy_lora_critic

    config = Qwen3Config(**QWEN3_1_7B)
    with torch.device("meta"):
        model = Qwen3ForCausalLM(config).to(torch.bfloat16)
    policy = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear"))
    grpo_trained = [p for p in policy.parameters() if p.requires_grad]
    grpo_bytes = adamw_state_bytes(policy.parameters(), grpo_trained)
    args = SRPPOConfig(output_dir=str(tmp_path), report_to=[], use_cpu=True, critic_type="policy_lora")
    critic = build_policy_lora_critic(policy, None, args)
    policy_trained = [p for p in policy.parameters() if p.requires_grad]
    assert {id(p) for p in policy_trained} == {id(p) for p in grpo_trained}  # the critic adapter is frozen
    weights = list(policy.parameters()) + list(critic.score.parameters())
    srppo_bytes = adamw_state_bytes(weights, policy_trained + list(critic.parameters()))
    ratio = srppo_bytes / grpo_bytes
    assert 1.0 < ratio <= 1.15, ratio
    assert ratio == pytest.approx(1.075, abs=5e-4)  # the figure docs/critics.md quotes

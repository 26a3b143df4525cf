# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""GRPO pipelines that switch to SRPPOTrainer: PEFT policies, padding, resuming, settings and metrics GRPO accepts."""

import pytest
import torch
from helpers import toy_trainer
from peft import LoraConfig, get_peft_model
from safetensors.torch import load_file
from trl import GRPOTrainer

from trl_srppo.method.critics.model import critic_from_policy, prefix_values


def make(toy, tmp_path, model=None, **overrides):
    return toy_trainer(toy, tmp_path, model=model, **overrides)


def test_peft_model_instance_as_policy_gets_the_base_weights_in_its_critic(toy, tmp_path):
    base = toy[1]()
    base_weights = {k: v.clone() for k, v in base.model.state_dict().items()}
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    policy = get_peft_model(base, lora)  # a trained adapter: non-zero LoRA deltas
    trainer = make(toy, tmp_path, model=policy, max_steps=1)
    critic_backbone = trainer.critic.model.state_dict()
    for name, tensor in base_weights.items():
        torch.testing.assert_close(critic_backbone[name], tensor, msg=name)
    assert not any("lora" in name for name in trainer.critic.state_dict())
    critic_before = {k: v.clone() for k, v in trainer.critic.state_dict().items()}
    trainer.train()
    assert any(not torch.equal(v, critic_before[k]) for k, v in trainer.critic.state_dict().items())


def test_critic_values_do_not_depend_on_left_padding(toy):
    from transformers import GPT2Config, GPT2LMHeadModel

    tokenizer = toy[0]
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=2, n_head=4, n_positions=32, pad_token_id=0)
    critic = critic_from_policy(GPT2LMHeadModel(config)).eval()
    torch.nn.init.normal_(critic.classifier.weight)  # a head that reads the hidden state
    prompt, completion = [5, 6, 7], [8, 9, 1]
    pad = tokenizer.pad_token_id
    plain = torch.tensor([prompt + completion])  # (1, 6), no padding
    padded = torch.tensor([[pad, pad] + prompt + completion])  # (1, 8), the same row left-padded by 2
    padded_mask = torch.tensor([[0, 0] + [1] * 6])
    with torch.no_grad():
        expected = prefix_values(critic, plain, torch.ones_like(plain), 3)  # (1, 3)
        values = prefix_values(critic, padded, padded_mask, 3)  # (1, 3)
    assert expected.abs().max() > 0.1
    torch.testing.assert_close(values, expected, atol=1e-5, rtol=1e-5)


def test_resume_from_a_weights_only_checkpoint(toy, tmp_path):
    first = make(toy, tmp_path / "run", max_steps=2, save_strategy="steps", save_steps=2, save_only_model=True)
    first.train()
    checkpoint = tmp_path / "run" / "checkpoint-2"
    saved = load_file(checkpoint / "critic" / "model.safetensors")
    assert not (checkpoint / "critic" / "critic_training_state.pt").exists()

    again = make(toy, tmp_path / "run", max_steps=3, save_strategy="no")
    restored = {}
    load = again._load_optimizer_and_scheduler

    def spy(checkpoint_dir):
        load(checkpoint_dir)
        restored.update({k: v.clone() for k, v in again.critic.state_dict().items()})

    again._load_optimizer_and_scheduler = spy
    again.train(resume_from_checkpoint=str(checkpoint))
    for name, tensor in saved.items():
        torch.testing.assert_close(restored[name], tensor, msg=name)
    assert again.state.global_step == 3 and again.critic_backend.steps == 1  # a fresh critic optimizer, one step


def test_trust_remote_code_reaches_the_critic(toy, tmp_path, monkeypatch):
    from trl_srppo.method.critics import model as critic_module

    tokenizer, build_model, _ = toy
    build_model().save_pretrained(tmp_path / "policy")
    tokenizer.save_pretrained(tmp_path / "policy")
    seen = []
    original = critic_module.load_critic
    monkeypatch.setattr(
        critic_module,
        "load_critic",
        lambda path, kwargs, **rest: seen.append(kwargs) or original(path, kwargs, **rest),
    )
    make(toy, tmp_path / "out", model=str(tmp_path / "policy"), trust_remote_code=True)
    assert seen and seen[0]["trust_remote_code"] is True
    seen.clear()
    make(toy, tmp_path / "out2", model=str(tmp_path / "policy"))
    assert seen[0]["trust_remote_code"] is False


@pytest.mark.parametrize(
    "setting, message",
    [
        (dict(scale_rewards="group"), "scale_rewards='group' has no effect"),
        (dict(scale_rewards="batch"), "scale_rewards='batch' has no effect"),
        (dict(multi_objective_aggregation="normalize_then_sum"), "normalize_then_sum.*normalized_sum"),
    ],
)
def test_grpo_settings_without_effect_are_named_at_construction(toy, tmp_path, setting, message):
    with pytest.warns(UserWarning, match=message):
        make(toy, tmp_path, **setting)


def test_default_settings_warn_about_nothing(toy, tmp_path, recwarn):
    make(toy, tmp_path)
    assert not [w for w in recwarn if "has no effect" in str(w.message)]


def test_advantage_metrics_leave_out_tool_outputs(toy, tmp_path, monkeypatch):
    parent = GRPOTrainer._generate_and_score_completions

    def with_tool_output(self, inputs):
        output = parent(self, inputs)
        tool_mask = torch.ones_like(output["completion_mask"])
        tool_mask[:, 1] = 0  # the second completion token came from a tool
        output["tool_mask"] = tool_mask
        return output

    monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions", with_tool_output)
    trainer = make(toy, tmp_path, per_device_train_batch_size=16, max_completion_length=3)
    trainer.create_optimizer_and_scheduler(num_training_steps=2)
    output = trainer._generate_and_score_completions([toy[2][i] for i in range(16)])
    mask = output["completion_mask"] * output["tool_mask"]
    assert mask.sum() < output["completion_mask"].sum(), "the batch needs a tool token the loss masks"
    advantages = output["advantages"]
    expected_mean = (advantages * mask).sum() / mask.sum()
    assert trainer._metrics["train"]["advantages/mean"][-1] == pytest.approx(expected_mean.item(), abs=1e-6)
    assert trainer._metrics["train"]["advantages/min"][-1] == pytest.approx(advantages[mask.bool()].min().item())


def test_grpo_metrics_are_left_as_grpo_logs_them(toy, tmp_path):
    # GRPO's share of zero-spread groups, in evaluation with its group size: SR-PPO neither edits nor drops it (a
    # group of one rollout always has zero spread).
    trainer = make(toy, tmp_path, num_generations=2, num_generations_eval=1, per_device_eval_batch_size=8)
    trainer.model.eval()
    trainer._generate_and_score_completions([toy[2][i] for i in range(8)])
    assert trainer._metrics["eval"]["frac_reward_zero_std"] == [1.0]

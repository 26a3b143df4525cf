# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`critic_type="policy_head"`: a value head on the policy's own hidden states."""

import copy
import json

import pytest
import torch
from conftest import cpu_config
from helpers import script_env, small_digit_reward
from peft import LoraConfig
from trl import GRPOTrainer

from trl_srppo import SRPPOConfig, SRPPOTrainer
from trl_srppo.core import critic_values, srppo_advantages
from trl_srppo.policy_value_head import VALUE_HEAD_CONFIG, VALUE_HEAD_WEIGHTS, PolicyValueHead


def make_trainer(toy, output_dir, **overrides):
    tokenizer, build_model, dataset = toy
    peft_config = overrides.pop("peft_config", None)
    fields = dict(critic_type="policy_head")
    fields.update(overrides)
    return SRPPOTrainer(
        model=build_model(),
        reward_funcs=small_digit_reward,
        args=cpu_config(output_dir, **fields),
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=peft_config,
    )


def randomize_head(trainer, seed=7):
    # A head that is not all zeros, so values differ between prefixes and the shared term has a gradient.
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in trainer.critic.parameters():
            p.copy_(0.5 * torch.randn(p.shape, generator=generator))


def reference_hidden(trainer, output):
    """`(B, C, H)` last hidden states of prompt + completion from the policy's plain causal-LM forward (not the code
    under test): the hidden states the LM head reads."""
    input_ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
    attention_mask = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
    model = trainer.model
    with torch.no_grad():
        hidden = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True).hidden_states[-1]
    c = output["completion_ids"].size(1)
    return hidden[:, -c - 1 : -1]


SETTINGS = {
    "default": dict(max_steps=3),
    "num_iterations_2": dict(max_steps=4, num_iterations=2),
    "steps_per_generation_2": dict(
        max_steps=4, per_device_train_batch_size=4, steps_per_generation=2, max_completion_length=4
    ),
    "grad_accumulation_mlp_head": dict(
        max_steps=2, per_device_train_batch_size=4, gradient_accumulation_steps=2, critic_policy_head_mlp_size=8
    ),
    "lora_policy": dict(max_steps=3, peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])),
    "shared_backbone": dict(max_steps=3, critic_policy_head_coef=0.5),
}


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_values_come_from_the_head_before_it_learns_the_batch(toy, tmp_path, setting):
    overrides = dict(SETTINGS[setting])
    trainer = make_trainer(toy, tmp_path, **overrides)
    randomize_head(trainer)
    args = trainer.args
    calls = []
    generate = trainer._generate_and_score_completions

    def spy(inputs):
        head_before = copy.deepcopy(trainer.critic)  # the head before this batch
        output = generate(inputs)
        if trainer.model.training:
            hidden = reference_hidden(trainer, output)  # the policy has not moved within the call
            calls.append((head_before, hidden, output))
        return output

    trainer._generate_and_score_completions = spy
    trainer.train()

    generations = -(
        -args.max_steps * args.gradient_accumulation_steps // (args.steps_per_generation * args.num_iterations)
    )
    assert len(calls) == generations
    assert trainer._critic_step == args.max_steps  # one head step with each policy optimizer step
    for head_before, hidden, output in calls:
        with torch.no_grad():
            values = critic_values(head_before(hidden), args.critic_head)  # (B, C)
        mask = output["completion_mask"].float()
        torch.testing.assert_close(output["srppo_old_values"] * mask, values * mask, atol=1e-5, rtol=1e-5)
        rewards = torch.tensor(
            small_digit_reward(
                trainer.processing_class.batch_decode(output["completion_ids"], skip_special_tokens=True)
            )
        )
        expected = srppo_advantages(values, rewards, mask, args.pass_at_k, gamma=1.0, lam=args.gae_lambda)
        torch.testing.assert_close(output["advantages"], expected["advantages"] * mask, atol=1e-5, rtol=1e-5)
    # The head learned: the snapshot of the last batch is not the head of the first, so the test would catch values
    # taken from the head after it learned its batch.
    first, last = calls[0][0], calls[-1][0]
    assert any(not torch.equal(a, b) for a, b in zip(first.parameters(), last.parameters()))


def generated_batch(trainer, rows=8):
    trainer.create_optimizer_and_scheduler(num_training_steps=10)
    trainer.current_gradient_accumulation_steps = 1  # set by `train()`
    trainer.model.train()
    torch.manual_seed(123)
    return trainer._generate_and_score_completions([trainer.train_dataset[i] for i in range(rows)])


def test_training_forward_gives_the_head_the_hidden_states_of_the_value_pass(toy, tmp_path):
    trainer = make_trainer(toy, tmp_path)
    randomize_head(trainer)
    output = generated_batch(trainer)
    seen = []
    trainer.critic.register_forward_hook(lambda module, args, out: seen.append(out.detach()))
    trainer._compute_loss(trainer.model, output)
    assert len(seen) == 1  # the head's own forward on the training forward's hidden states, no second pass
    mask = output["completion_mask"].float()
    values = critic_values(seen[0], trainer.args.critic_head)
    torch.testing.assert_close(values * mask, output["srppo_old_values"] * mask, atol=1e-5, rtol=1e-5)


def policy_grads(trainer, output, loss_fn):
    trainer.model.zero_grad(set_to_none=True)
    trainer.critic.zero_grad(set_to_none=True)
    loss_fn(trainer.model, output).backward()
    return {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("coef", [0.0, 0.5], ids=["detached", "shared"])
def test_head_loss_moves_the_policy_only_in_the_shared_setting(toy, tmp_path, coef):
    trainer = make_trainer(toy, tmp_path, critic_policy_head_coef=coef)
    randomize_head(trainer)
    output = generated_batch(trainer)
    with_head = policy_grads(trainer, output, trainer._compute_loss)
    head_grads = [p.grad for p in trainer.critic.parameters()]
    assert all(g is not None and g.abs().sum() > 0 for g in head_grads), "the head learns in both settings"
    without_head = policy_grads(
        trainer, output, lambda model, inputs: GRPOTrainer._compute_loss(trainer, model, inputs)
    )
    assert with_head.keys() == without_head.keys() and with_head
    same = all(torch.equal(with_head[n], without_head[n]) for n in with_head)
    assert same == (coef == 0.0)


def test_save_and_resume_keep_the_head_exactly(toy, tmp_path):
    def run(output_dir, max_steps, resume=None):
        trainer = make_trainer(
            toy, output_dir, max_steps=max_steps, save_strategy="steps", save_steps=2, critic_policy_head_mlp_size=4
        )
        trainer.train(resume_from_checkpoint=resume)
        return trainer

    full = run(tmp_path / "full", 4)
    run(tmp_path / "killed", 2)
    checkpoint = tmp_path / "killed" / "checkpoint-2"
    critic_dir = checkpoint / "critic"
    assert sorted(p.name for p in critic_dir.iterdir()) == sorted(
        [VALUE_HEAD_CONFIG, VALUE_HEAD_WEIGHTS, "critic_training_state.pt"]
    )
    assert json.loads((critic_dir / VALUE_HEAD_CONFIG).read_text())["mlp_size"] == 4
    resumed = run(tmp_path / "killed", 4, resume=str(checkpoint))
    for name, tensor in full.model.state_dict().items():
        torch.testing.assert_close(resumed.model.state_dict()[name], tensor, msg=f"policy {name}")
    for name, tensor in full.critic.state_dict().items():
        torch.testing.assert_close(resumed.critic.state_dict()[name], tensor, msg=f"head {name}")
    assert resumed._critic_step == full._critic_step == 4

    # The final `critic/` folder loads back as the head, and a new run can start from it.
    full.save_model()
    loaded = PolicyValueHead.from_pretrained(str(tmp_path / "full" / "critic"))
    for name, tensor in full.critic.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor)
    again = make_trainer(toy, tmp_path / "again", critic_model_name_or_path=str(tmp_path / "full" / "critic"))
    for name, tensor in full.critic.state_dict().items():
        assert torch.equal(again.critic.state_dict()[name], tensor)


def test_the_head_is_the_only_critic_state(toy, tmp_path):
    trainer = make_trainer(toy, tmp_path)
    hidden = trainer.model.config.hidden_size
    assert sum(p.numel() for p in trainer.critic.parameters()) == hidden + 1  # a linear head, no second model


@pytest.mark.parametrize(
    "fields, match",
    [
        (dict(critic_type="policy"), "critic_type must be one of"),
        (dict(critic_type="policy_head", critic_policy_head_coef=-1.0), "critic_policy_head_coef must be >= 0"),
        (dict(critic_type="policy_head", critic_policy_head_mlp_size=-2), "critic_policy_head_mlp_size must be >= 0"),
        (dict(critic_policy_head_coef=0.5), "only apply to critic_type='policy_head'"),
        (dict(critic_type="policy_head", critic_use_peft=True), "critic_use_peft"),
        (dict(critic_type="policy_head", critic_epochs=2), "critic_epochs"),
    ],
)
def test_bad_policy_head_settings_are_clear_errors(tmp_path, fields, match):
    with pytest.raises(ValueError, match=match):
        SRPPOConfig(output_dir=str(tmp_path), report_to=[], use_cpu=True, **fields)


def test_critic_folder_without_a_head_is_a_clear_error(toy, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=VALUE_HEAD_CONFIG):
        make_trainer(toy, tmp_path / "out", critic_model_name_or_path=str(tmp_path / "empty"))


def test_two_processes_keep_the_head_identical(tmp_path):
    """`accelerate launch --num_processes 2` on CPU: the head's gradients are averaged over the processes by hand, so
    both hold the same head after training (one process also has unscorable rollouts)."""
    import subprocess
    import sys
    from pathlib import Path

    from safetensors.torch import load_file

    script = Path(__file__).parent / "scripts" / "ddp_train.py"
    accelerate = Path(sys.executable).parent / "accelerate"
    command = [str(accelerate), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1"]
    command += ["--mixed_precision", "no", "--dynamo_backend", "no", str(script), str(tmp_path), "policy_head"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=script_env())
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    assert (tmp_path / "critic_wrapper.txt").read_text() == "PolicyValueHead"
    rank0 = load_file(tmp_path / "critic_rank0.safetensors")
    rank1 = load_file(tmp_path / "critic_rank1.safetensors")
    initial = load_file(tmp_path / "critic_initial.safetensors")
    for name in rank0:
        assert torch.equal(rank0[name], rank1[name]), f"head weight {name} differs between processes"
    assert any(not torch.equal(rank0[n], initial[n]) for n in rank0), "the head did not learn"
    assert (tmp_path / "critic" / VALUE_HEAD_WEIGHTS).is_file()

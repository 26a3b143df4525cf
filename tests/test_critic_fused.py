# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The fused critic step (values for the advantages and the critic's loss from one forward) against separate passes."""

import pytest
import torch
from helpers import config_launch, script_env, small_digit_reward, toy_trainer


def make_trainer(toy, tmp_path, **overrides):
    trainer = toy_trainer(toy, tmp_path, **overrides)
    # A value head that is not all zeros, so the values differ between prefixes and rows.
    head = trainer.accelerator.unwrap_model(trainer.critic).score
    with torch.no_grad():
        head.weight.copy_(torch.randn(head.weight.shape, generator=torch.Generator().manual_seed(7)))
    return trainer


class ForwardCounter:
    def __init__(self, module):
        self.calls = 0
        module.register_forward_hook(self)

    def __call__(self, module, args, output):
        self.calls += 1


def score(trainer, dataset, rows, train=True):
    """One generated batch through `_generate_and_score_completions`, sampled from a fixed seed."""
    trainer.create_optimizer_and_scheduler(num_training_steps=10)
    trainer.model.train(train)
    counter = ForwardCounter(trainer.accelerator.unwrap_model(trainer.critic))
    torch.manual_seed(123)
    output = trainer._generate_and_score_completions([dataset[i] for i in range(rows)])
    return output, counter.calls


SETTINGS = {
    "one_micro_batch": dict(per_device_train_batch_size=8),
    "micro_batches": dict(
        per_device_train_batch_size=4, gradient_accumulation_steps=2, steps_per_generation=2, max_completion_length=4
    ),
    "linear_critic_gae_value_clipping": dict(
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        steps_per_generation=2,
        srppo_method="ppo",
        gae_lambda=0.9,
        critic_cliprange_value=0.05,
    ),
}


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_fused_critic_step_matches_separate_passes(toy, tmp_path, setting):
    overrides = SETTINGS[setting]
    rows = overrides["per_device_train_batch_size"] * overrides.get("steps_per_generation", 1)
    micro_batches = overrides.get("gradient_accumulation_steps", 1)
    fused = make_trainer(toy, tmp_path / "fused", **overrides)
    plain = make_trainer(toy, tmp_path / "plain", critic_fused_forward=False, **overrides)
    for name, tensor in plain.critic.state_dict().items():
        assert torch.equal(tensor, fused.critic.state_dict()[name]), "the two runs must start from the same critic"
    initial = {k: v.clone() for k, v in plain.critic.state_dict().items()}

    out_fused, calls_fused = score(fused, toy[2], rows)
    out_plain, calls_plain = score(plain, toy[2], rows)
    assert torch.equal(out_fused["completion_ids"], out_plain["completion_ids"])
    rewards = torch.tensor(small_digit_reward(plain.processing_class.batch_decode(out_plain["completion_ids"])))
    assert 0 < rewards.sum() < len(rewards), "the batch needs both outcomes for the comparison to discriminate"

    assert calls_fused == micro_batches and calls_plain == 2 * micro_batches  # one critic forward saved per batch
    assert out_fused["advantages"].abs().sum() > 0
    assert out_plain["advantages"][:, 0].unique().numel() > 2, "the values must differ between rows"
    torch.testing.assert_close(out_fused["advantages"], out_plain["advantages"], atol=1e-6, rtol=1e-5)
    loss_fused, loss_plain = fused._metrics["train"]["critic/loss"], plain._metrics["train"]["critic/loss"]
    assert len(loss_fused) == len(loss_plain) == 1 and loss_fused[0] > 0
    assert loss_fused[0] == pytest.approx(loss_plain[0], rel=1e-6, abs=1e-7)
    for key in ("critic/value_mean", "critic/brier", "advantages/mean", "passk/weight_mean"):
        assert fused._metrics["train"][key] == pytest.approx(plain._metrics["train"][key], rel=1e-5, abs=1e-7), key
    moved = 0
    for name, tensor in plain.critic.state_dict().items():
        torch.testing.assert_close(fused.critic.state_dict()[name], tensor, atol=1e-6, rtol=1e-5, msg=name)
        moved += not torch.equal(tensor, initial[name])
    assert moved, "the critic did not learn from the batch"
    assert fused.critic_backend.steps == plain.critic_backend.steps == 1


def test_critic_weights_move_in_the_fused_step(toy, tmp_path):
    trainer = make_trainer(toy, tmp_path)
    before = {k: v.clone() for k, v in trainer.critic.state_dict().items()}
    _, calls = score(trainer, toy[2], 8)
    assert calls == 1
    assert any(not torch.equal(v, before[k]) for k, v in trainer.critic.state_dict().items())


@pytest.mark.parametrize(
    ("overrides", "forwards"),
    [
        (dict(critic_epochs=2), 1 + 2),  # a values pass, then one forward per epoch
        (dict(steps_per_generation=2, per_device_train_batch_size=4), 2 + 2),  # two critic steps per batch
        (dict(critic_fused_forward=False), 1 + 1),
    ],
)
def test_separate_passes_when_the_critic_steps_more_than_once(toy, tmp_path, overrides, forwards):
    trainer = make_trainer(toy, tmp_path, **overrides)
    _, calls = score(trainer, toy[2], 8)
    assert calls == forwards


def test_active_dropout_falls_back_to_separate_passes(toy, tmp_path):
    trainer = make_trainer(toy, tmp_path, disable_dropout=False)
    critic = trainer.accelerator.unwrap_model(trainer.critic)
    for layer in critic.model.layers:
        layer.self_attn.attention_dropout = 0.1  # Qwen3 applies it functionally in train mode
    _, calls = score(trainer, toy[2], 8)
    assert calls == 2


def test_evaluation_scores_without_updating_the_critic(toy, tmp_path):
    trainer = make_trainer(toy, tmp_path)
    before = {k: v.clone() for k, v in trainer.critic.state_dict().items()}
    output, calls = score(trainer, toy[2], 8, train=False)
    assert calls == 1 and trainer.critic_backend.steps == 0
    assert output["advantages"].abs().sum() > 0
    for name, tensor in trainer.critic.state_dict().items():
        assert torch.equal(tensor, before[name]), name


@pytest.mark.slow
def test_fused_step_with_sharded_and_replicated_critics_in_two_processes(tmp_path):
    """Two CPU processes (`tests/scripts/fsdp_critic_train.py`), one critic step per generated batch over two
    micro-batches: the fused step gives the critic weights of separate passes, with the FSDP2-sharded critic and with
    the replicated one."""
    import json
    import subprocess
    from pathlib import Path

    from safetensors.torch import load_file

    root = Path(__file__).parent
    env = script_env()
    for fused in (True, False):
        overrides = {"max_grad_norm": 0.1, "gradient_accumulation_steps": 2, "critic_fused_forward": fused}
        command = config_launch("cpu_2proc", root / "scripts/fsdp_critic_train.py", tmp_path / str(fused),
                                json.dumps(overrides))  # fmt: skip
        result = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    for parallelism in ("fsdp", "replicate"):
        fused = load_file(tmp_path / "True" / parallelism / "critic_final.safetensors")
        separate = load_file(tmp_path / "False" / parallelism / "critic_final.safetensors")
        initial = load_file(tmp_path / "True" / parallelism / "critic_initial.safetensors")
        assert any(not torch.equal(fused[n], initial[n]) for n in fused), f"the {parallelism} critic did not learn"
        for name, tensor in separate.items():
            torch.testing.assert_close(fused[name], tensor, atol=1e-6, rtol=1e-5, msg=f"{parallelism}: {name}")

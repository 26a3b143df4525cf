# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`gradient_nsr_steps`: the policy gradient's noise-to-signal ratio during training, with and without the Pass@k
weight (`trl_srppo.method.gradient_noise`), against hand-computed values and a brute-force reference."""

import math

import pytest
import torch
from helpers import toy_trainer

from trl_srppo.method.gradient_noise import gradient_nsr, measurement_due, rollout_gradients
from trl_srppo.method.noise import NSRAccumulator


def test_measurement_due_on_the_batches_that_hold_a_multiple():
    # 4 updates per generated batch (steps 0-3, 4-7, ...), every 8th update: batches starting at 0, 8, 16.
    assert [s for s in range(0, 32, 4) if measurement_due(s, 4, 8)] == [0, 8, 16, 24]
    # every 6th: 0-3 holds 0, 4-7 holds 6, 8-11 none, 12-15 holds 12, 16-19 holds 18, 20-23 none
    assert [s for s in range(0, 24, 4) if measurement_due(s, 4, 6)] == [0, 4, 12, 16]
    assert [s for s in range(5) if measurement_due(s, 1, 2)] == [0, 2, 4]
    assert not any(measurement_due(s, 4, 0) for s in range(0, 40, 4))


def test_gradient_nsr_by_hand():
    # Replicas (1, 0), (3, 0); unweighted mean (2, 0): ||gbar||^2 = 4, sum ||g||^2 = 10, N = (10 - 2 * 4) / 1 = 2,
    # S = 4 - 2 / 2 = 3, NSR = 2 / 3. Scales (2, 0.5): replicas (2, 0), (1.5, 0): mean 1.75, sum sq 6.25,
    # N = (6.25 - 2 * 3.0625) = 0.125, S = 3.0625 - 0.0625 = 3.0, NSR = 0.125 / 3.
    grads = [[torch.tensor([1.0]), torch.tensor([0.0])], [torch.tensor([3.0]), torch.tensor([0.0])]]  # 2 parameters
    scales = {"one": torch.tensor([1.0, 1.0]), "w": torch.tensor([2.0, 0.5])}
    out = gradient_nsr(iter(grads), scales, [torch.zeros(1), torch.zeros(1)], reduce=lambda t: t)
    assert out["one"].noise == pytest.approx(2.0) and out["one"].signal == pytest.approx(3.0)
    assert out["one"].nsr == pytest.approx(2 / 3)
    assert out["w"].noise == pytest.approx(0.125) and out["w"].nsr == pytest.approx(0.125 / 3)
    assert out["one"].num_replicas == 2


def test_gradient_nsr_matches_the_accumulator_on_scaled_replicas_and_over_processes():
    generator = torch.Generator().manual_seed(0)
    grads = [torch.randn(50, generator=generator) + 0.3 for _ in range(7)]
    weights = torch.rand(7, generator=generator) * 2
    like = [torch.zeros(20), torch.zeros(5, 6)]  # the replicas as two parameters

    def split(g):
        return [g[:20], g[20:].reshape(5, 6)]

    out = gradient_nsr((split(g) for g in grads), {"w": weights, "one": torch.ones(7)}, like, reduce=lambda t: t)
    for name, scale in (("w", weights), ("one", torch.ones(7))):
        reference = NSRAccumulator()
        for g, s in zip(grads, scale):
            reference.add(g * s)
        expected = reference.result()
        assert out[name].nsr == pytest.approx(expected.nsr, rel=1e-5)
        assert out[name].noise == pytest.approx(expected.noise, rel=1e-5)
    # Two processes holding the same replicas: the sums double, as reduce(sum) makes them.
    doubled = gradient_nsr((split(g) for g in grads), {"one": torch.ones(7)}, like, reduce=lambda t: 2 * t)
    reference = NSRAccumulator()
    for g in grads + grads:
        reference.add(g)
    assert doubled["one"].nsr == pytest.approx(reference.result().nsr, rel=1e-5)
    assert doubled["one"].num_replicas == 14


def test_rollout_gradients_are_each_rows_surrogate_gradient():
    torch.manual_seed(0)
    layer = torch.nn.Linear(3, 5)
    params = list(layer.parameters())
    features = torch.randn(2, 4, 3)  # (B, C, features)
    tokens = torch.randint(0, 5, (2, 4))  # (B, C)
    advantages = torch.tensor([[0.5, 0.5, 0.0, 0.0], [-1.0, -1.0, -1.0, -1.0]])  # (B, C), row 0 has 2 tokens

    def logps_of(i):
        return torch.log_softmax(layer(features[i]), -1).gather(-1, tokens[i].unsqueeze(-1)).squeeze(-1)  # (C,)

    got = list(rollout_gradients(logps_of, advantages, [1, 0], params))
    for row, grad in zip([1, 0], got):
        layer.zero_grad()
        (advantages[row] * logps_of(row)).sum().backward()
        for g, p in zip(grad, params):
            torch.testing.assert_close(g, p.grad)


def policy_logps(model, ids, attention, width):
    """Brute force: `log pi(y_t | s_{t-1})` of the last `width` tokens from the full logits, `(B, C)`."""
    logits = model(input_ids=ids, attention_mask=attention).logits[:, -width - 1 : -1].float()  # (B, C, V)
    return torch.log_softmax(logits, -1).gather(-1, ids[:, -width:].unsqueeze(-1)).squeeze(-1)


@pytest.mark.parametrize("method", ["sr-ppo", "sr-ppo-pass1"])
def test_trainer_logs_the_nsr_on_schedule_equal_to_a_brute_force_reference(toy, tmp_path, monkeypatch, method):
    """The trainer's NSR of a batch, with and without the weight, equals NSR computed from scratch: each scorable
    rollout's gradient of `sum_t A_t log pi` from the full logits, the weighted ones times k (1 - qhat(s_0))^(k-1)."""
    import trl_srppo.method.srppo_trainer as trainer_module

    seen = []
    measure = trainer_module.policy_gradient_nsr

    def recording(trainer, output, rewards, estimate, unweighted, mask):
        policy = trainer.accelerator.unwrap_model(trainer.model)
        params = [p for p in policy.parameters() if p.requires_grad]
        ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
        attention = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
        width = output["completion_ids"].size(1)
        k = trainer.args.pass_at_k
        reference = {"weighted": NSRAccumulator(), "unweighted": NSRAccumulator()}
        for i in range(len(rewards)):
            if not math.isfinite(rewards[i].item()) or mask[i].sum() == 0:
                continue
            with torch.enable_grad():
                logps = policy_logps(policy, ids[i : i + 1], attention[i : i + 1], width)[0]
                surrogate = (unweighted.advantages[i] * mask[i] * logps).sum()
                grads = torch.autograd.grad(surrogate, params, allow_unused=True)
            g = torch.cat(
                [torch.zeros_like(p).reshape(-1) if d is None else d.reshape(-1) for d, p in zip(grads, params)]
            )
            w = estimate.weights[i].item()  # k (1 - qhat(s_0))^(k-1), the weight the run trains with
            reference["unweighted"].add(g)
            reference["weighted"].add(g * w)
        result = measure(trainer, output, rewards, estimate, unweighted, mask)
        seen.append((trainer.state.global_step, result, {n: a.result().nsr for n, a in reference.items()}, k))
        return result

    monkeypatch.setattr(trainer_module, "policy_gradient_nsr", recording)
    trainer = toy_trainer(
        toy, tmp_path, srppo_method=method, max_steps=6, steps_per_generation=2, gradient_nsr_steps=4
    )
    trainer.train()
    # Batches start at updates 0, 2, 4; due where they hold update 0 or 4.
    assert [step for step, *_ in seen] == [0, 4]
    for _, result, reference, k in seen:
        assert result["policy/gradient_nsr"] == pytest.approx(reference["weighted"], rel=1e-3)
        assert result["policy/gradient_nsr_unweighted"] == pytest.approx(reference["unweighted"], rel=1e-3)
        if k == 1:
            assert result["policy/gradient_nsr"] == pytest.approx(result["policy/gradient_nsr_unweighted"])
    logged = [entry for entry in trainer.state.log_history if "policy/gradient_nsr" in entry]
    assert [entry["step"] for entry in logged] == [1, 5]  # each with the first update of its batch
    for entry in logged:  # the noise and signal beside each ratio
        for suffix in ("", "_unweighted"):
            ratio = entry[f"policy/gradient_noise{suffix}"] / entry[f"policy/gradient_signal{suffix}"]
            assert entry[f"policy/gradient_nsr{suffix}"] == pytest.approx(ratio)


def test_gradient_nsr_steps_is_checked(tmp_path):
    from trl_srppo import SRPPOConfig

    with pytest.raises(ValueError, match="gradient_nsr_steps must be >= 0"):
        SRPPOConfig(output_dir=str(tmp_path), gradient_nsr_steps=-1, use_cpu=True, report_to=[])


@pytest.mark.parametrize(
    ("fsdp", "stage", "refused"), [(True, None, True), (False, 3, True), (False, 2, False), (False, None, False)]
)
def test_gradient_nsr_is_refused_where_the_policy_is_sharded(fsdp, stage, refused):
    from types import SimpleNamespace

    from trl_srppo.method.checks import check_gradient_nsr

    plugin = None if stage is None else SimpleNamespace(deepspeed_config={"zero_optimization": {"stage": stage}})
    trainer = SimpleNamespace(
        is_fsdp_enabled=fsdp,
        is_deepspeed_enabled=stage is not None,
        accelerator=SimpleNamespace(state=SimpleNamespace(deepspeed_plugin=plugin)),
    )
    if refused:
        with pytest.raises(ValueError, match="gradient_nsr_steps needs the whole policy"):
            check_gradient_nsr(trainer)
    else:
        check_gradient_nsr(trainer)

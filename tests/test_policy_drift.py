# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`log_kl_from_start`: the KL divergence of the policy from the starting policy, logged with every generated batch
(`trl_srppo.runtime.policy_drift`), against hand-computed values, the starting model loaded afresh and TRL's `kl`."""

import math

import pytest
import torch
from helpers import cpu_fields, small_digit_reward, toy_trainer

from trl_srppo.runtime.policy_drift import kl_from_start_metrics


def test_kl_metrics_by_hand():
    logps = torch.tensor([[-1.0, -2.0, 0.0], [-0.5, 0.0, 0.0]])  # (B, C)
    start = torch.tensor([[-1.5, -1.0, 9.0], [-0.5, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    out = kl_from_start_metrics(logps, start, mask, reduce=lambda t: t)
    # d = start - logps on the tokens: -0.5, 1.0, 0.0; exp(d) - d - 1 = 0.10653, 0.71828, 0.
    expected = (math.exp(-0.5) + 0.5 - 1 + math.exp(1.0) - 2) / 3
    assert out["policy/kl_from_start"] == pytest.approx(expected)
    # Per completion, sum_t (log pi_old - log pi_start): row 0: 0.5 - 1.0 = -0.5, row 1: 0 -> mean -0.25.
    assert out["policy/sequence_kl_from_start"] == pytest.approx(-0.25)
    assert kl_from_start_metrics(logps, start, torch.zeros_like(mask), reduce=lambda t: t) == {}


def full_logps(model, output):
    """Brute force: `log pi(y_t | s_{t-1})` of the batch's completions from the full logits, `(B, C)`."""
    ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
    attention = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
    width = output["completion_ids"].size(1)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=attention).logits[:, -width - 1 : -1].float()
    return torch.log_softmax(logits, -1).gather(-1, ids[:, -width:].unsqueeze(-1)).squeeze(-1)


def test_the_reference_is_the_starting_model_after_updates(toy, toy_model_folder, tmp_path, monkeypatch):
    """Every batch's starting-policy log-probabilities are those of the model loaded afresh from its folder, and the
    sampling policy's those of the policy as it stands; the first batch's KL is 0 and the policy then moves away."""
    from transformers import AutoModelForCausalLM

    import trl_srppo.runtime.run_output as run_output

    fresh = AutoModelForCausalLM.from_pretrained(toy_model_folder)
    checked = []
    inner = run_output.start_policy_logps

    def checking(trainer, start_policy, output):
        logps, start = inner(trainer, start_policy, output)
        mask = output["completion_mask"].bool()
        torch.testing.assert_close(start[mask], full_logps(fresh, output)[mask], atol=1e-5, rtol=1e-5)
        policy = trainer.accelerator.unwrap_model(trainer.model)
        torch.testing.assert_close(logps[mask], full_logps(policy, output)[mask], atol=1e-5, rtol=1e-5)
        checked.append(trainer.state.global_step)
        return logps, start

    monkeypatch.setattr(run_output, "start_policy_logps", checking)
    trainer = toy_trainer(toy, tmp_path, model=str(toy_model_folder), max_steps=4, log_kl_from_start=True)
    trainer.train()
    assert checked == [0, 1, 2, 3]
    kl = [entry["policy/kl_from_start"] for entry in trainer.state.log_history if "policy/kl_from_start" in entry]
    assert len(kl) == 4
    assert kl[0] == pytest.approx(0.0, abs=1e-6)  # the first batch comes from the starting policy itself
    assert kl[-1] > 1e-4


def test_with_beta_it_is_trls_kl(toy, toy_model_folder, tmp_path):
    """With `beta > 0`, GRPO's reference serves, and on-policy its logged `kl` (current policy against the reference,
    in the loss) is the same number as the batch's KL from the start (the sampling policy is the current one)."""
    from trl_srppo.runtime.config import GRPORuntimeConfig
    from trl_srppo.runtime.mixin import grpo_trainer_class

    tokenizer, _, dataset = toy
    fields = cpu_fields(tmp_path, beta=0.1, log_kl_from_start=True, max_steps=3, num_generations=4, learning_rate=3e-2)
    trainer = grpo_trainer_class()(
        model=str(toy_model_folder),
        reward_funcs=small_digit_reward,
        args=GRPORuntimeConfig(**fields),
        train_dataset=dataset,
        processing_class=tokenizer,
    )
    assert trainer._start_policy is None  # GRPO's reference model is the start
    trainer.train()
    rows = [entry for entry in trainer.state.log_history if "kl" in entry]
    assert len(rows) == 3
    for entry in rows:
        assert entry["policy/kl_from_start"] == pytest.approx(entry["kl"], rel=1e-4, abs=1e-7)
    assert rows[-1]["kl"] > 0


def test_a_peft_policy_is_its_own_start(toy, toy_model_folder, tmp_path):
    from peft import LoraConfig

    lora = LoraConfig(r=4, lora_alpha=8, target_modules="all-linear")
    trainer = toy_trainer(
        toy, tmp_path, model=str(toy_model_folder), peft_config=lora, max_steps=3, log_kl_from_start=True,
        learning_rate=3e-2,
    )  # fmt: skip
    assert trainer._start_policy is None  # no copy: the adapters off are the start
    trainer.train()
    kl = [entry["policy/kl_from_start"] for entry in trainer.state.log_history if "policy/kl_from_start" in entry]
    assert kl[0] == pytest.approx(0.0, abs=1e-6) and kl[-1] > 0


def test_a_model_without_a_name_is_refused(toy, tmp_path):
    with pytest.raises(ValueError, match="log_kl_from_start needs the starting policy"):
        toy_trainer(toy, tmp_path, log_kl_from_start=True)  # the toy model is built in memory: no folder to load

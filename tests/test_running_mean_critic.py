# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`critic_type="running_mean"`: no network, one value for every prefix, the running mean of the outcomes
(`trl_srppo.method.critics.running_mean.RunningMeanCritic`)."""

import json
import subprocess
from pathlib import Path

import pytest
import torch
from helpers import script_env, toy_grpo_trainer, toy_trainer, two_process_launch

from trl_srppo import SRPPOConfig
from trl_srppo.method.critics import load_saved_critic, prefix_values, saved_critic_mode
from trl_srppo.method.critics.running_mean import (
    RUNNING_MEAN_WEIGHTS,
    RunningMeanCritic,
    RunningMeanValue,
    running_mean_update,
)


def make_trainer(toy, output_dir, **overrides):
    return toy_trainer(toy, output_dir, **{"critic_type": "running_mean", **overrides})


class Updates:
    """Every update of the trainer's running mean: the values the advantages used, the targets, the loss mask, and
    the mean before and after."""

    def __init__(self, trainer):
        self.calls = []
        critic = trainer.critic_backend
        update = critic.update

        def spy(batch, mask, steps, global_step, returns, old_values):
            before = float(critic.model.value)
            result = update(batch, mask, steps, global_step, returns, old_values)
            after = float(critic.model.value)
            self.calls.append({"mask": mask, "returns": returns, "used": old_values, "before": before, "after": after})
            return result

        critic.update = spy


def batch_rate(call) -> float:
    rows = call["mask"][:, 0] > 0
    return float(call["returns"][rows, 0].mean())


def test_the_mean_update_by_hand():
    value, outcomes = torch.tensor(0.25), torch.tensor([1.0, 0.0, 1.0, 1.0])
    assert float(running_mean_update(value, outcomes.sum(), torch.tensor(4.0), 0.5)) == pytest.approx(0.5)
    assert float(running_mean_update(value, outcomes.sum(), torch.tensor(4.0), 0.0)) == pytest.approx(0.75)
    assert float(running_mean_update(value, torch.tensor(0.0), torch.tensor(0.0), 0.5)) == 0.25  # no scorable rollout


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "separate_passes"])
def test_values_are_the_mean_before_the_batch_and_follow_the_outcomes(toy, tmp_path, fused):
    """Every prefix of a batch is valued at the mean as it was before the batch; the first batch starts the mean at
    its own success rate (`critic_value_init="success_rate"`), and each later one moves it by
    `m <- decay m + (1 - decay) rate`."""
    decay = 0.25
    trainer = make_trainer(toy, tmp_path, max_steps=4, critic_running_mean_decay=decay, critic_fused_forward=fused)
    assert isinstance(trainer.critic_backend, RunningMeanCritic) and isinstance(trainer.critic, RunningMeanValue)
    updates = Updates(trainer)
    trainer.train()
    calls = updates.calls
    assert len(calls) == 4
    rates = [batch_rate(call) for call in calls]
    count = int((calls[0]["mask"][:, 0] > 0).sum())
    first = min(max(rates[0], 0.5 / count), 1 - 0.5 / count)  # the start's clamp, as a fresh head's
    expected = first
    for index, call in enumerate(calls):
        assert call["before"] == pytest.approx(expected, abs=1e-6), index
        used = call["used"][call["mask"].bool()]
        torch.testing.assert_close(used, torch.full_like(used, expected), atol=1e-5, rtol=0)
        expected = decay * expected + (1 - decay) * rates[index]
        assert call["after"] == pytest.approx(expected, abs=1e-6), index
    assert len(set(rates)) > 1, "the toy batches' success rates should differ, or the test shows nothing"
    logged = [log["critic/value_mean"] for log in trainer.state.log_history if "critic/value_mean" in log]
    assert logged == pytest.approx([call["before"] for call in calls], abs=1e-5)
    assert trainer.critic_optimizer is None and not list(trainer.critic.parameters())


def test_the_critic_changes_no_sample_of_the_policy(toy, tmp_path):
    """Building the running mean draws nothing from torch's random stream, so a paired run samples as GRPO's set-up
    leaves it."""
    toy_grpo_trainer(toy, tmp_path / "grpo")
    after_grpo = torch.get_rng_state()
    torch.manual_seed(1234)
    make_trainer(toy, tmp_path / "srppo")
    assert torch.equal(torch.get_rng_state(), after_grpo)


def test_save_and_resume_keep_the_mean_exactly(toy, tmp_path):
    def run(output_dir, max_steps, resume=None):
        trainer = make_trainer(toy, output_dir, max_steps=max_steps, save_strategy="steps", save_steps=2)
        trainer.train(resume_from_checkpoint=resume)
        return trainer

    full = run(tmp_path / "full", 4)
    run(tmp_path / "killed", 2)
    checkpoint = tmp_path / "killed" / "checkpoint-2"
    critic_dir = checkpoint / "critic"
    assert sorted(p.name for p in critic_dir.iterdir()) == sorted(
        ["running_mean_critic.json", RUNNING_MEAN_WEIGHTS, "srppo_critic.json"]
    )
    assert saved_critic_mode(str(critic_dir)) == "running_mean"
    resumed = run(tmp_path / "killed", 4, resume=str(checkpoint))
    assert int(resumed.critic.batches) == int(full.critic.batches) == 4
    assert torch.equal(resumed.critic.value, full.critic.value)
    for name, tensor in full.model.state_dict().items():
        assert torch.equal(resumed.model.state_dict()[name], tensor), f"policy {name}"

    # The final `critic/` folder reads back (as the analyses read a critic), and a new run can start from it.
    full.save_model()
    folder = str(tmp_path / "full" / "critic")
    assert json.loads((Path(folder) / "running_mean_critic.json").read_text())["critic_head"] == "sigmoid"
    loaded = load_saved_critic(folder, policy=lambda: None, lora_policy=lambda: None)
    ids = torch.ones(2, 5, dtype=torch.long)
    raw = prefix_values(loaded, ids, torch.ones_like(ids), 3)  # (2, 3), as the analyses read a critic
    torch.testing.assert_close(torch.sigmoid(raw), full.critic.value.expand(2, 3))
    again = make_trainer(toy, tmp_path / "again", critic_model_name_or_path=folder)
    assert torch.equal(again.critic.value, full.critic.value) and int(again.critic.batches) == 4


@pytest.mark.parametrize(
    "fields, match",
    [
        (dict(critic_running_mean_decay=1.0), r"critic_running_mean_decay must be in \[0, 1\)"),
        (dict(critic_running_mean_decay=-0.1), r"critic_running_mean_decay must be in \[0, 1\)"),
        (dict(srppo_method="td"), "nothing to bootstrap from: gae_lambda must be 1.0"),
        (dict(critic_use_peft=True), "critic_use_peft"),
        (dict(critic_parallelism="replicate"), "critic_parallelism"),
    ],
)
def test_bad_running_mean_settings_are_clear_errors(tmp_path, fields, match):
    with pytest.raises(ValueError, match=match):
        SRPPOConfig(output_dir=str(tmp_path), report_to=[], use_cpu=True, critic_type="running_mean", **fields)


def test_a_folder_without_a_mean_is_a_clear_error(toy, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="running_mean_critic.json"):
        make_trainer(toy, tmp_path / "out", critic_model_name_or_path=str(tmp_path / "empty"))


def test_two_processes_hold_the_same_mean(tmp_path):
    """`accelerate launch --num_processes 2` on CPU: each batch's outcomes are summed over the processes before the
    mean moves (one process also has unscorable rollouts), so both hold the same mean, and the saved one is it."""
    from safetensors.torch import load_file

    script = Path(__file__).parent / "scripts" / "ddp_train.py"
    command = two_process_launch(script, tmp_path, "running_mean", "one")
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=script_env())
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    assert (tmp_path / "world_size.txt").read_text() == "2"
    assert (tmp_path / "critic_wrapper.txt").read_text() == "RunningMeanValue"
    rank0 = load_file(tmp_path / "critic_rank0.safetensors")
    rank1 = load_file(tmp_path / "critic_rank1.safetensors")
    assert torch.equal(rank0["value"], rank1["value"]) and int(rank0["batches"]) == int(rank1["batches"]) == 3
    saved = load_file(tmp_path / "critic" / RUNNING_MEAN_WEIGHTS)
    assert torch.equal(saved["value"], rank0["value"])

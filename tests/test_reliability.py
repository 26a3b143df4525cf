# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Faults a long run must survive: non-finite numbers, bad or stuck reward functions, half-written checkpoints, and
resuming across epochs."""

import json
import logging
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import torch
from conftest import cpu_config
from helpers import small_digit_reward, toy_grpo_trainer, toy_trainer
from safetensors.torch import load_file

from trl_srppo.rewards import chain_reward
from trl_srppo.runtime.checkpoints import (
    CHECKPOINT_COMPLETE,
    check_resume_processes,
    checkpoint_processes,
    is_partial_write,
    last_complete_checkpoint,
    resolve_resume_checkpoint,
)
from trl_srppo.runtime.mixin import grpo_trainer_class
from trl_srppo.runtime.resume import GENERATION_BUFFER, EpochRepeatSampler
from trl_srppo.runtime.reward_deadline import RewardTimeoutError, call_with_deadline, check_reward_output
from trl_srppo.runtime.step_checks import NonFiniteError, check_finite
from trl_srppo.runtime.teardown import GLOO_DRAIN_SECONDS, end_distributed, exit_process, uses_gloo


def make_trainer(toy, output_dir, reward=chain_reward, dataset=None, **overrides):
    return toy_trainer(toy, output_dir, reward_funcs=reward, dataset=dataset, **overrides)


# ---- non-finite numbers --------------------------------------------------------------------------------------------


def test_check_finite_names_what_the_step_and_the_fix():
    check_finite("critic values", torch.tensor([0.0, 1.0]), step=3, fix="Do X.")
    with pytest.raises(NonFiniteError, match=r"critic values at global step 3: 2 of 3 .*\(1 NaN\).*Do X\."):
        check_finite("critic values", torch.tensor([math.nan, math.inf, 1.0]), step=3, fix="Do X.")


def test_nan_in_a_critic_weight_stops_before_any_step_or_checkpoint(toy, tmp_path):
    trainer = make_trainer(toy, tmp_path / "out", max_steps=3, save_strategy="steps", save_steps=1)
    policy_before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    weight = trainer.critic.model.layers[0].mlp.down_proj.weight
    with torch.no_grad():
        weight[0, 0] = math.nan
    with pytest.raises(NonFiniteError, match="critic values at global step 0.*critic_learning_rate"):
        trainer.train()
    assert trainer.state.global_step == 0
    for name, tensor in trainer.model.state_dict().items():
        assert torch.equal(tensor, policy_before[name]), f"policy {name} changed"
    for root, _, files in os.walk(tmp_path / "out"):
        for name in files:
            if name.endswith(".safetensors"):
                for key, tensor in load_file(os.path.join(root, name)).items():
                    assert torch.isfinite(tensor).all(), f"{root}/{name}:{key} holds non-finite weights"
    assert not [n for n in os.listdir(tmp_path / "out") if n.startswith("checkpoint-")]


def test_nan_critic_gradient_stops_before_the_critic_step(toy, tmp_path):
    trainer = make_trainer(toy, tmp_path / "out", max_steps=2)
    head = trainer.critic.score.weight
    before = head.detach().clone()
    head.register_hook(lambda grad: grad * math.nan)
    with pytest.raises(NonFiniteError, match="critic gradients at global step 0"):
        trainer.train()
    assert torch.equal(head.detach(), before)


def test_nan_policy_gradient_stops_before_the_policy_step(toy, tmp_path):
    trainer = make_trainer(toy, tmp_path / "out", max_steps=2)
    weight = trainer.model.lm_head.weight
    before = weight.detach().clone()
    weight.register_hook(lambda grad: grad * math.nan)
    with pytest.raises(NonFiniteError, match="policy (loss|gradients) at global step 0.*learning_rate"):
        trainer.train()
    assert torch.equal(weight.detach(), before)


def test_nan_policy_loss_is_named(toy, tmp_path, monkeypatch):
    from trl import GRPOTrainer

    trainer = make_trainer(toy, tmp_path / "out", max_steps=2)
    monkeypatch.setattr(GRPOTrainer, "_compute_loss", lambda self, model, inputs: torch.tensor(math.nan))
    with pytest.raises(NonFiniteError, match="policy loss at global step 0"):
        trainer.train()


# ---- reward functions ----------------------------------------------------------------------------------------------


def test_infinite_reward_is_an_error_naming_the_function(toy, tmp_path):
    def exploding(completions, **kwargs):
        return [math.inf] + [0.0] * (len(completions) - 1)

    trainer = make_trainer(toy, tmp_path / "out", reward=[chain_reward, exploding], max_steps=1)
    with pytest.raises(ValueError, match="'exploding' returned an infinite reward at global step 0"):
        trainer.train()


@pytest.mark.parametrize("output", ["1.0", 1.0, {"a": 1.0}])
def test_reward_output_that_is_not_a_list_is_a_clear_error(toy, tmp_path, output):
    def wrong(completions, **kwargs):
        return output

    trainer = make_trainer(toy, tmp_path / "out", reward=wrong, max_steps=1)
    with pytest.raises(TypeError, match=f"'wrong' must return a list.*it returned a {type(output).__name__}"):
        trainer.train()


def test_check_reward_output_accepts_numbers_and_none():
    check_reward_output([1, 0.5, None, True, torch.tensor(1.0)], "f")
    with pytest.raises(TypeError, match="item 1 .* str"):
        check_reward_output([1.0, "0"], "f")


def test_call_with_deadline_returns_raises_and_times_out():
    assert call_with_deadline(lambda x: x + 1, 1.0, "f", x=1) == 2
    assert call_with_deadline(lambda x: x + 1, None, "f", x=1) == 2
    with pytest.raises(KeyError):
        call_with_deadline(lambda: {}["missing"], 1.0, "f")
    start = time.monotonic()
    with pytest.raises(RewardTimeoutError, match="slow one did not return within reward_timeout=0.2 s"):
        call_with_deadline(lambda secs: time.sleep(secs), 0.2, "slow one", secs=5)
    assert time.monotonic() - start < 2


def test_the_deadline_is_not_swallowed_and_leaves_the_signal_as_it_was():
    def catches_everything(secs):  # as verifiers do around parsing
        for _ in range(int(secs / 0.05)):
            try:
                time.sleep(0.05)
            except Exception:
                pass
        return [1.0]

    before = signal.getsignal(signal.SIGUSR1)
    start = time.monotonic()
    with pytest.raises(RewardTimeoutError, match="did not return within reward_timeout=0.2 s"):
        call_with_deadline(catches_everything, 0.2, "careful one", secs=5)
    assert time.monotonic() - start < 2
    assert signal.getsignal(signal.SIGUSR1) == before  # the handler is the deadline's for the call alone

    def returns_late():  # swallows nothing, but returns after its deadline: still a timeout
        try:
            time.sleep(0.5)
        except BaseException:
            time.sleep(0.2)
        return [1.0]

    with pytest.raises(RewardTimeoutError):
        call_with_deadline(returns_late, 0.1, "late one")
    assert call_with_deadline(lambda: [1.0], 1.0, "quick one") == [1.0]
    assert signal.getsignal(signal.SIGUSR1) == before


def test_a_signal_sent_during_a_reward_call_reaches_the_handler_installed_before_it():
    # A job scheduler's SIGUSR1 (SLURM's --signal=USR1@90 before a requeue) arriving during a reward call is not the
    # deadline's: it goes to the handler the user installed, and the call returns its result.
    got = []

    def sends_itself_the_signal():
        os.kill(os.getpid(), signal.SIGUSR1)
        time.sleep(0.05)
        return [1.0]

    before = signal.signal(signal.SIGUSR1, lambda signum, frame: got.append(signum))
    try:
        assert call_with_deadline(sends_itself_the_signal, 600.0, "f") == [1.0]
        assert got == [signal.SIGUSR1]
        assert signal.getsignal(signal.SIGUSR1) is not before  # the user's handler is back
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)  # an ignored signal stays ignored
        assert call_with_deadline(sends_itself_the_signal, 600.0, "f") == [1.0]
        assert signal.getsignal(signal.SIGUSR1) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGUSR1, before)


def test_a_signal_with_its_default_action_ends_the_process_as_without_the_deadline(tmp_path):
    script = tmp_path / "default_action.py"
    script.write_text(
        "import os, signal, time\n"
        "from trl_srppo.runtime.reward_deadline import call_with_deadline\n"
        "def f():\n"
        "    os.kill(os.getpid(), signal.SIGUSR1)\n"
        "    time.sleep(0.5)\n"
        "    return [1.0]\n"
        "call_with_deadline(f, 600.0, 'f')\n"
        "print('not ended')\n"
    )
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert result.returncode == -signal.SIGUSR1, result.stderr[-2000:]
    assert "not ended" not in result.stdout and "RewardTimeoutError" not in result.stderr


def test_call_with_deadline_off_the_main_thread_abandons_the_call_at_the_deadline():
    outcome = {}

    def worker():
        try:
            call_with_deadline(lambda secs: time.sleep(secs), 0.2, "slow one", secs=5)
        except RewardTimeoutError as err:
            outcome["error"] = str(err)
        outcome["value"] = call_with_deadline(lambda x: x + 1, 1.0, "f", x=1)

    thread = threading.Thread(target=worker)
    start = time.monotonic()
    thread.start()
    thread.join(10)
    assert "slow one did not return within reward_timeout=0.2 s" in outcome["error"] and outcome["value"] == 2
    assert time.monotonic() - start < 4


def test_reward_functions_run_in_the_main_thread_so_signal_timeouts_keep_working(toy, tmp_path):
    # math-verify bounds `parse` and `verify` with signal.alarm, which only the main thread can use (TRL's
    # accuracy_reward turns its limits off elsewhere): a reward written that way runs with its limits, as under GRPO.
    from math_verify import parse, verify

    seen = []

    def math_verify_reward(completions, **kwargs):
        seen.append(threading.current_thread() is threading.main_thread())
        return [float(verify(parse("$3$"), parse(c))) for c in completions]

    trainer = make_trainer(toy, tmp_path / "out", reward=math_verify_reward, max_steps=1, reward_timeout=30)
    trainer.train()
    assert seen == [True]


class _AsyncCallableReward:
    __name__ = "async_callable"

    async def __call__(self, completions, **kwargs):
        return [1.0] * len(completions)


@pytest.mark.parametrize(
    "reward",
    [
        lambda completions, **kwargs: map(lambda c: 1.0, completions),
        lambda completions, **kwargs: (1.0 for _ in completions),
        _AsyncCallableReward(),
        lambda completions, **kwargs: np.ones(len(completions), dtype=bool),
    ],
    ids=["map", "generator", "async-callable-object", "numpy-bools"],
)
def test_reward_forms_grpo_accepts_train(toy, tmp_path, reward):
    trainer = make_trainer(toy, tmp_path / "out", reward=reward, max_steps=1)
    trainer.train()
    assert [e["reward"] for e in trainer.state.log_history if "reward" in e] == [1.0]
    # One rollout per prompt: GRPO's share of zero-spread groups is logged as GRPO computes it, 1 at every step.
    assert [e["frac_reward_zero_std"] for e in trainer.state.log_history if "reward" in e] == [1.0]


def test_dataset_columns_may_have_any_name(toy, tmp_path):
    # GRPO hands every dataset column to the reward functions, whatever its name.
    seen = {}

    def reward(completions, description, timeout, func, **kwargs):
        seen.update(description=description[0], timeout=timeout[0], func=func[0])
        return [1.0] * len(completions)

    dataset = toy[2].map(lambda row: {"description": "a chain", "timeout": 3, "func": "max"})
    make_trainer(toy, tmp_path / "out", reward=reward, dataset=dataset, max_steps=1).train()
    assert seen == {"description": "a chain", "timeout": 3, "func": "max"}


def test_stuck_reward_function_stops_the_run_naming_it_and_the_process(toy, tmp_path):
    def stuck(completions, **kwargs):
        time.sleep(10)
        return [0.0] * len(completions)

    trainer = make_trainer(toy, tmp_path / "out", reward=stuck, max_steps=1, reward_timeout=0.5)
    start = time.monotonic()
    with pytest.raises(RewardTimeoutError, match="'stuck' on process 0 \\(phase: scoring the rollouts"):
        trainer.train()
    assert time.monotonic() - start < 8


def test_stuck_async_reward_function_stops_the_run_and_a_quick_one_trains(toy, tmp_path):
    import asyncio

    async def stuck_async(completions, **kwargs):
        await asyncio.sleep(10)
        return [0.0] * len(completions)

    trainer = make_trainer(toy, tmp_path / "out", reward=stuck_async, max_steps=1, reward_timeout=0.5)
    start = time.monotonic()
    with pytest.raises(RewardTimeoutError, match="'stuck_async' on process 0 \\(phase: scoring the rollouts"):
        trainer.train()
    assert time.monotonic() - start < 8

    async def quick_async(completions, **kwargs):
        return [1.0] * len(completions)

    trainer = make_trainer(toy, tmp_path / "ok", reward=quick_async, max_steps=1, reward_timeout=5)
    trainer.train()
    assert [e["reward"] for e in trainer.state.log_history if "reward" in e] == [1.0]


# ---- checkpoints ---------------------------------------------------------------------------------------------------


def _fake_checkpoint(output_dir, step, complete):
    folder = output_dir / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    if complete:
        (folder / CHECKPOINT_COMPLETE).write_text("{}")
    return str(folder)


def test_last_complete_checkpoint_skips_incomplete_ones(tmp_path, caplog):
    assert last_complete_checkpoint(str(tmp_path / "absent")) is None
    _fake_checkpoint(tmp_path, 2, complete=True)
    ten = _fake_checkpoint(tmp_path, 10, complete=True)  # step order, not name order: 10 > 9
    _fake_checkpoint(tmp_path, 9, complete=True)
    eleven = _fake_checkpoint(tmp_path, 11, complete=False)
    (tmp_path / "checkpoint-12-tmp").mkdir()
    with caplog.at_level(logging.WARNING, logger="trl_srppo.runtime.checkpoints"):
        assert last_complete_checkpoint(str(tmp_path)) == ten
    assert eleven in caplog.text and "incomplete" in caplog.text


def test_resolve_resume_explains_when_nothing_is_complete(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="trl_srppo.runtime.checkpoints"):
        assert resolve_resume_checkpoint(str(tmp_path)) is None  # killed before its first save: start afresh
    assert "starts from the beginning" in caplog.text
    caplog.clear()
    partial = _fake_checkpoint(tmp_path, 2, complete=False)  # killed during the first save, before trainer_state.json
    (tmp_path / "checkpoint-2" / "model.safetensors").write_bytes(b"")
    with caplog.at_level(logging.WARNING, logger="trl_srppo.runtime.checkpoints"):
        assert resolve_resume_checkpoint(str(tmp_path)) is None  # a save cut short: start afresh
    assert partial in caplog.text and "cut short" in caplog.text
    unmarked = _fake_checkpoint(tmp_path, 4, complete=False)  # whole but unmarked (an older run's), or cut later
    (tmp_path / "checkpoint-4" / "trainer_state.json").write_text("{}")
    with pytest.raises(ValueError, match="No complete checkpoint.*checkpoint-4"):
        resolve_resume_checkpoint(str(tmp_path))
    assert is_partial_write(partial) and not is_partial_write(unmarked)


def test_resume_true_takes_the_newest_complete_checkpoint(toy, tmp_path, caplog):
    output_dir = tmp_path / "out"
    trainer = make_trainer(toy, output_dir, max_steps=2, save_strategy="steps", save_steps=1, save_total_limit=2)
    trainer.train()
    assert sorted(os.listdir(output_dir / "checkpoint-2")).count(CHECKPOINT_COMPLETE) == 1
    assert (output_dir / "checkpoint-1" / CHECKPOINT_COMPLETE).is_file()
    # A run killed while writing checkpoint-3: the folder exists, half its files do not.
    shutil.copytree(output_dir / "checkpoint-2", output_dir / "checkpoint-3")
    for name in ("trainer_state.json", CHECKPOINT_COMPLETE, "model.safetensors"):
        os.remove(output_dir / "checkpoint-3" / name)
    resumed = make_trainer(toy, output_dir, max_steps=3, save_strategy="steps", save_steps=1, save_total_limit=2)
    with caplog.at_level(logging.WARNING, logger="trl_srppo.runtime.checkpoints"):
        resumed.train(resume_from_checkpoint=True)
    assert "checkpoint-3" in caplog.text and "resuming from" in caplog.text and "checkpoint-2" in caplog.text
    assert resumed.state.global_step == 3
    # The step-3 checkpoint was rewritten whole, and rotation kept two complete checkpoints.
    assert (output_dir / "checkpoint-3" / CHECKPOINT_COMPLETE).is_file()
    assert (output_dir / "checkpoint-3" / "model.safetensors").is_file()
    assert sorted(n for n in os.listdir(output_dir) if n.startswith("checkpoint-")) == ["checkpoint-2", "checkpoint-3"]


def test_an_explicit_checkpoint_cut_short_is_refused_with_the_newest_complete_one(toy, tmp_path):
    output_dir = tmp_path / "out"
    make_trainer(toy, output_dir, max_steps=2, save_strategy="steps", save_steps=1).train()
    shutil.copytree(output_dir / "checkpoint-2", output_dir / "checkpoint-3")  # killed while writing checkpoint-3
    for name in ("trainer_state.json", CHECKPOINT_COMPLETE):
        os.remove(output_dir / "checkpoint-3" / name)
    resumed = make_trainer(toy, output_dir, max_steps=3, save_strategy="steps", save_steps=1)
    with pytest.raises(ValueError, match=r"checkpoint-3 was cut short while saving.*Resume from .*checkpoint-2"):
        resumed.train(resume_from_checkpoint=str(output_dir / "checkpoint-3"))


def test_save_total_limit_keeps_whole_checkpoints_and_drops_saves_cut_short(toy, tmp_path, caplog):
    output_dir = tmp_path / "out"
    limited = {"save_strategy": "steps", "save_steps": 1, "save_total_limit": 2}
    make_trainer(toy, output_dir, max_steps=2, **limited).train()
    # A save of an earlier, longer run cut short at step 5 (its resumed run would write step 5 again).
    (output_dir / "checkpoint-5").mkdir()
    (output_dir / "checkpoint-5" / "model.safetensors").write_bytes(b"")
    resumed = make_trainer(toy, output_dir, max_steps=3, **limited)
    with caplog.at_level(logging.WARNING, logger="trl_srppo.runtime.resume"):
        resumed.train(resume_from_checkpoint=True)
    assert "checkpoint-5" in caplog.text and "cut short" in caplog.text
    kept = sorted(n for n in os.listdir(output_dir) if n.startswith("checkpoint-"))
    assert kept == ["checkpoint-2", "checkpoint-3"]
    assert all((output_dir / name / CHECKPOINT_COMPLETE).is_file() for name in kept)


def test_resume_true_after_a_kill_during_the_first_save_starts_afresh_and_saves_again(toy, tmp_path, caplog):
    output_dir = tmp_path / "out"
    make_trainer(toy, output_dir, max_steps=1, save_strategy="steps", save_steps=1).train()
    # What a kill while writing the first checkpoint leaves: the folder, the policy's files, none of the rest.
    folder = output_dir / "checkpoint-1"
    for name in os.listdir(folder):
        if name not in ("config.json", "model.safetensors"):
            shutil.rmtree(folder / name) if (folder / name).is_dir() else os.remove(folder / name)
    relaunched = make_trainer(toy, output_dir, max_steps=2, save_strategy="steps", save_steps=1)
    with caplog.at_level(logging.WARNING, logger="trl_srppo.runtime.checkpoints"):
        relaunched.train(resume_from_checkpoint=True)
    assert "cut short" in caplog.text and "starts from the beginning" in caplog.text
    assert relaunched.state.global_step == 2
    for step in (1, 2):  # the cut-short save written again whole, then the next
        assert (output_dir / f"checkpoint-{step}" / CHECKPOINT_COMPLETE).is_file()
        assert (output_dir / f"checkpoint-{step}" / "critic").is_dir()


@pytest.mark.parametrize("kind", ["sr-ppo", "sr-ppo-policy-head", "grpo"])
def test_resume_in_the_middle_of_a_generated_batch_goes_on_with_that_batch_bit_identically(toy, tmp_path, kind):
    # Two optimizer steps per generated batch: checkpoints 1 and 3 fall in the middle of one.
    fields = {"max_steps": 4, "save_strategy": "steps", "save_steps": 1, "steps_per_generation": 2}

    def run(output_dir, resume=None):
        if kind == "grpo":
            trainer = toy_grpo_trainer(
                toy, output_dir, trainer_class=grpo_trainer_class(), num_generations=2, **fields
            )
        else:
            extra = {"critic_type": "policy_head"} if kind == "sr-ppo-policy-head" else {}
            trainer = toy_trainer(toy, output_dir, reward_funcs=small_digit_reward, **fields, **extra)
        trainer.train(resume_from_checkpoint=resume)
        return trainer

    full = run(tmp_path / "full")
    assert (tmp_path / "full" / "checkpoint-1" / GENERATION_BUFFER).is_dir()
    assert not (tmp_path / "full" / "checkpoint-2" / GENERATION_BUFFER).exists()  # a boundary: nothing to keep
    for step in (1, 3):
        folder = tmp_path / f"resumed-{step}" / f"checkpoint-{step}"
        shutil.copytree(tmp_path / "full" / f"checkpoint-{step}", folder)
        resumed = run(folder.parent, resume=str(folder))
        models = (
            [(full.model, resumed.model)]
            if kind == "grpo"
            else [(full.model, resumed.model), (full.critic, resumed.critic)]
        )
        for a, b in models:
            for name, value in a.state_dict().items():
                assert torch.equal(value, b.state_dict()[name]), f"resumed at {step}: {name} differs"
        if kind != "grpo":  # the critic learned from each generated batch once
            assert resumed.critic_backend.steps == full.critic_backend.steps


class _TinyCritic(torch.nn.Module):
    """A critic that is a plain torch module (no `save_pretrained`): token embeddings and a zero linear head."""

    def __init__(self, vocab_size: int):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab_size, 16)
        self.score = torch.nn.Linear(16, 1)
        torch.nn.init.zeros_(self.score.weight)
        torch.nn.init.zeros_(self.score.bias)

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, **kwargs):
        from transformers.modeling_outputs import TokenClassifierOutput

        return TokenClassifierOutput(logits=self.score(self.embed(input_ids)))  # (B, L, 1)


def test_a_plain_torch_module_critic_is_saved_and_resumed_bit_identically(toy, tmp_path):
    tokenizer = toy[0]

    def run(output_dir, resume=None):
        from trl_srppo import SRPPOTrainer

        torch.manual_seed(0)
        trainer = SRPPOTrainer(
            model=toy[1](),
            reward_funcs=small_digit_reward,
            args=cpu_config(output_dir, max_steps=2, save_strategy="steps", save_steps=1),
            train_dataset=toy[2],
            processing_class=tokenizer,
            critic_model=_TinyCritic(len(tokenizer)),
        )
        trainer.train(resume_from_checkpoint=resume)
        return trainer

    full = run(tmp_path / "full")
    saved = load_file(tmp_path / "full" / "checkpoint-1" / "critic" / "model.safetensors")
    assert saved.keys() == {"embed.weight", "score.weight", "score.bias"}
    shutil.copytree(tmp_path / "full" / "checkpoint-1", tmp_path / "resumed" / "checkpoint-1")
    resumed = run(tmp_path / "resumed", resume=str(tmp_path / "resumed" / "checkpoint-1"))
    for name, value in full.critic.state_dict().items():
        assert torch.equal(value, resumed.critic.state_dict()[name]), name


def test_a_generated_batch_is_kept_only_when_it_can_be_read_back_and_resumed_on_the_same_schedule(
    toy, tmp_path, caplog
):
    from collections import namedtuple

    from trl_srppo.runtime.resume import _plain

    assert _plain({"ids": torch.ones(2), "meta": [1, "a", None, (2.0, True)]})
    assert not _plain({"ids": np.ones(2)}) and not _plain([namedtuple("Row", "x")(1)])
    fields = {"max_steps": 2, "save_strategy": "steps", "save_steps": 1, "steps_per_generation": 2}
    make_trainer(toy, tmp_path / "full", **fields).train()
    folder = tmp_path / "resumed" / "checkpoint-1"
    shutil.copytree(tmp_path / "full" / "checkpoint-1", folder)
    resumed = make_trainer(toy, tmp_path / "resumed", **{**fields, "steps_per_generation": 4, "max_steps": 2})
    with caplog.at_level(logging.WARNING, logger="trl_srppo.runtime.resume"):
        resumed.train(resume_from_checkpoint=str(folder))
    assert "steps_per_generation, num_iterations = [2, 1], and this run has [4, 1]" in caplog.text
    assert resumed.state.global_step == 2


def _checkpoint_of(tmp_path, processes, per_device, marker=True):
    """A checkpoint folder as `processes` processes with `per_device_train_batch_size=per_device` write it (only the
    files that tell the process count and the batch)."""
    folder = tmp_path / f"checkpoint-6-{processes}-{int(marker)}" / "checkpoint-6"
    folder.mkdir(parents=True)
    names = ["rng_state.pth"] if processes == 1 else [f"rng_state_{r}.pth" for r in range(processes)]
    for name in names:
        (folder / name).write_bytes(b"")
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": 6, "train_batch_size": per_device}))
    if marker:
        (folder / CHECKPOINT_COMPLETE).write_text(json.dumps({"global_step": 6, "num_processes": processes}))
    return str(folder)


def test_resume_on_another_number_of_processes_keeps_the_batch_or_says_how(tmp_path):
    two = _checkpoint_of(tmp_path, processes=2, per_device=4)
    assert checkpoint_processes(two) == 2
    assert checkpoint_processes(_checkpoint_of(tmp_path, processes=1, per_device=8, marker=False)) == 1
    assert checkpoint_processes(_checkpoint_of(tmp_path, processes=3, per_device=8, marker=False)) == 3
    assert check_resume_processes(two, num_processes=2, per_device_train_batch_size=4) is None
    # Same 8 rows per step on 1 process: restored, but for the random generators.
    warning = check_resume_processes(two, num_processes=1, per_device_train_batch_size=8)
    assert "written by 2 process(es), on 1" in warning and "not the random number generators" in warning
    # Another batch over all processes: the Trainer would skip the wrong number of prompts.
    with pytest.raises(
        ValueError,
        match=r"2 process\(es\) with per_device_train_batch_size=4 \(8 rows.*this run has 4 "
        r"with per_device_train_batch_size=4 \(16\).*per_device_train_batch_size=2 to keep 8 rows",
    ):
        check_resume_processes(two, num_processes=4, per_device_train_batch_size=4)
    with pytest.raises(ValueError, match="a number of processes and a per_device_train_batch_size whose product is 8"):
        check_resume_processes(two, num_processes=3, per_device_train_batch_size=4)
    assert "on 3" in check_resume_processes(two, 3, 4, ignore_data_skip=True)  # the epoch's data starts again
    # A DeepSpeed ZeRO policy: its checkpoint is partitioned, DeepSpeed's universal form loads on another count.
    zero2 = {"zero_optimization": {"stage": 2}}
    with pytest.raises(ValueError, match=r"ZeRO-2.*ds_to_universal .*checkpoint-6/global_step6 .*load_universal"):
        check_resume_processes(two, 1, 8, deepspeed_config=zero2)
    assert check_resume_processes(two, 1, 8, deepspeed_config={**zero2, "checkpoint": {"load_universal": True}})
    assert check_resume_processes(two, 1, 8, deepspeed_config={"zero_optimization": {"stage": 0}})
    # The marker's batch size, not `trainer_state.json`'s (a resumed run keeps the one of the run it resumed there).
    marked = _checkpoint_of(tmp_path, processes=2, per_device=2, marker=False)
    (tmp_path / marked / CHECKPOINT_COMPLETE).write_text(
        json.dumps({"global_step": 6, "num_processes": 2, "per_device_train_batch_size": 4})
    )
    assert "on 1" in check_resume_processes(marked, num_processes=1, per_device_train_batch_size=8)
    empty = tmp_path / "unknown"
    empty.mkdir()
    assert checkpoint_processes(str(empty)) is None and check_resume_processes(str(empty), 4, 1) is None


def test_checkpoint_records_its_process_count_and_resume_warns_on_another(toy, tmp_path, caplog):
    """A one-process checkpoint, relabelled as written by two processes with 4 rows each: resuming it on one process
    with 8 rows warns that the random generators are not restored; with 4 rows it is refused."""
    output_dir = tmp_path / "out"
    make_trainer(toy, output_dir, max_steps=1, save_strategy="steps", save_steps=1).train()
    folder = output_dir / "checkpoint-1"
    marker = {"global_step": 1, "num_processes": 1, "per_device_train_batch_size": 8}
    assert json.loads((folder / CHECKPOINT_COMPLETE).read_text()) == marker
    (folder / CHECKPOINT_COMPLETE).write_text(
        json.dumps({**marker, "num_processes": 2, "per_device_train_batch_size": 4})
    )
    with pytest.raises(ValueError, match="per_device_train_batch_size=8 to keep 8 rows"):
        make_trainer(toy, output_dir, max_steps=2, per_device_train_batch_size=4).train(str(folder))
    resumed = make_trainer(toy, output_dir, max_steps=2, save_strategy="steps", save_steps=1)
    with caplog.at_level(logging.WARNING, logger="trl_srppo.runtime.resume"):
        resumed.train(resume_from_checkpoint=str(folder))
    assert "written by 2 process(es), on 1" in caplog.text
    assert resumed.state.global_step == 2


# ---- exact resume across epochs ------------------------------------------------------------------------------------


def test_epoch_sampler_matches_trl_order_and_restarts_at_any_epoch(toy):
    from trl.trainer.utils import RepeatSampler

    _, _, dataset = toy
    trl_sampler = RepeatSampler(dataset, mini_repeat_count=1, batch_size=8, seed=5)
    ours = EpochRepeatSampler(dataset, mini_repeat_count=1, batch_size=8, seed=5)
    for epoch in range(3):
        ours.set_epoch(epoch)
        assert list(ours) == list(trl_sampler), f"epoch {epoch}"
    fresh = EpochRepeatSampler(dataset, mini_repeat_count=1, batch_size=8, seed=5)
    fresh.set_epoch(2)
    ours.set_epoch(2)
    assert list(fresh) == list(ours)
    fresh.set_epoch(0)
    assert list(fresh) != list(ours)


@pytest.mark.slow
@pytest.mark.parametrize("resume_step", [2, 3], ids=["epoch_boundary", "mid_second_epoch"])
def test_resume_across_epochs_is_bit_identical(toy, tmp_path, resume_step):
    from trl_srppo.tasks.toy import make_dataset

    dataset = make_dataset(16, seed=0)  # two steps of 8 prompts per epoch

    def run(output_dir, max_steps, resume=None):
        trainer = make_trainer(
            toy, output_dir, dataset=dataset, max_steps=max_steps, save_strategy="steps", save_steps=1
        )
        trainer.train(resume_from_checkpoint=resume)
        return trainer

    full = run(tmp_path / "full", 5)
    resumed = run(tmp_path / "full", 5, resume=str(tmp_path / "full" / f"checkpoint-{resume_step}"))
    for name, tensor in full.model.state_dict().items():
        assert torch.equal(resumed.model.state_dict()[name], tensor), f"policy {name}"
    for name, tensor in full.critic.state_dict().items():
        assert torch.equal(resumed.critic.state_dict()[name], tensor), f"critic {name}"


@pytest.mark.slow
def test_grpo_trainer_of_the_cli_resumes_across_epochs_bit_identically(toy, tmp_path):
    from trl_srppo.tasks.toy import make_dataset

    dataset = make_dataset(8, seed=0)  # 8 prompts, 2 rollouts each, 4 prompts per step: 2 steps per epoch

    def run(max_steps, resume=None):
        trainer = toy_grpo_trainer(
            toy, tmp_path / "grpo", reward_funcs=chain_reward, dataset=dataset, trainer_class=grpo_trainer_class(),
            num_generations=2, max_steps=max_steps, save_strategy="steps", save_steps=1,
        )  # fmt: skip
        trainer.train(resume_from_checkpoint=resume)
        return trainer

    full = run(5)
    assert (tmp_path / "grpo" / "checkpoint-3" / CHECKPOINT_COMPLETE).is_file()
    shutil.rmtree(tmp_path / "grpo" / "checkpoint-4")
    shutil.rmtree(tmp_path / "grpo" / "checkpoint-5")
    resumed = run(5, resume=True)  # from checkpoint-3, in the second epoch
    for name, tensor in full.model.state_dict().items():
        assert torch.equal(resumed.model.state_dict()[name], tensor), f"policy {name}"


# ---- start-up checks -----------------------------------------------------------------------------------------------


def test_zero_generations_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="num_generations must be an integer >= 1"):
        cpu_config(tmp_path, num_generations=0)


def test_missing_critic_folder_is_a_clear_error(toy, tmp_path):
    with pytest.raises(FileNotFoundError, match="critic checkpoint .*nowhere.* is not a folder"):
        make_trainer(toy, tmp_path / "out", critic_model_name_or_path=str(tmp_path / "nowhere"))


def test_critic_with_only_pickle_weights_is_refused_with_how_to_convert(toy, tmp_path):
    from helpers import save_pickle_only_model

    tokenizer, build_model, _ = toy
    critic = save_pickle_only_model(tmp_path / "critic", build_model(), tokenizer)
    with pytest.raises(
        OSError,
        match=r"critic has only PyTorch pickle weights \(pytorch_model\.bin\), and trl-srppo loads weights only from "
        r"safetensors files.*environment you trust.*save_pretrained\(folder\)",
    ):
        make_trainer(toy, tmp_path / "out", critic_model_name_or_path=critic)


def test_a_policy_path_loads_from_safetensors_only(toy, tmp_path):
    from helpers import save_pickle_only_model

    tokenizer, build_model, _ = toy
    pickled = save_pickle_only_model(tmp_path / "pickled", build_model(), tokenizer)
    with pytest.raises(OSError, match=r"pickled has only PyTorch pickle weights \(pytorch_model\.bin\).*safetensors"):
        make_trainer(toy, tmp_path / "out", model=pickled)
    with pytest.raises(ValueError, match="use_safetensors=False.*only from safetensors"):
        make_trainer(toy, tmp_path / "out", model=pickled, model_init_kwargs={"use_safetensors": False})
    build_model().save_pretrained(tmp_path / "safe")
    trainer = make_trainer(toy, tmp_path / "out", model=str(tmp_path / "safe"))
    assert trainer.args.model_init_kwargs["use_safetensors"] is True


def test_a_reward_model_path_loads_from_safetensors_only(toy, tmp_path, monkeypatch):
    # GRPO loads reward models given by name; under SR-PPO they follow the policy's rule, with its error, whether the
    # policy is given by path or as a model.
    from helpers import save_pickle_only_model
    from transformers import AutoModelForSequenceClassification

    tokenizer, build_model, _ = toy
    build_model().save_pretrained(tmp_path / "policy")
    tokenizer.save_pretrained(tmp_path / "policy")
    config = build_model().config
    config.num_labels = 1
    reward_model = AutoModelForSequenceClassification.from_config(config)
    reward_model.config.pad_token_id = tokenizer.pad_token_id
    pickled = save_pickle_only_model(tmp_path / "rm_pickled", reward_model, tokenizer)
    reward_model.save_pretrained(tmp_path / "rm_safe")
    tokenizer.save_pretrained(tmp_path / "rm_safe")
    fields = dict(srppo_outcome_threshold=0.5)
    for policy in (None, str(tmp_path / "policy")):
        with pytest.raises(OSError, match=r"rm_pickled has only PyTorch pickle weights \(pytorch_model\.bin\)"):
            make_trainer(toy, tmp_path / "out", reward=[chain_reward, pickled], model=policy, **fields)
        trainer = make_trainer(
            toy, tmp_path / "out", reward=[chain_reward, str(tmp_path / "rm_safe")], model=policy, **fields
        )
        assert isinstance(trainer.reward_funcs[1], torch.nn.Module)
        assert trainer.reward_func_names[1] == "rm_safe"  # as GRPO names a reward model
    # The same for Hub ids (offline Hub caches): a repository with only pickle weights is refused by the rule.
    from helpers import offline_hub_model

    offline_hub_model(
        monkeypatch, tmp_path / "hub", "someone/rm-pickled", lambda f: shutil.copytree(pickled, f, dirs_exist_ok=True)
    )
    for policy in (None, str(tmp_path / "policy")):
        with pytest.raises(OSError, match=r"someone/rm-pickled.*only from safetensors"):
            make_trainer(toy, tmp_path / "out", reward=[chain_reward, "someone/rm-pickled"], model=policy, **fields)


def _saved_lm(folder, vocab_size, tokenizer=None):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(
        vocab_size=vocab_size, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, head_dim=8, max_position_embeddings=64,
    )  # fmt: skip
    Qwen3ForCausalLM(config).save_pretrained(folder)
    if tokenizer is not None:
        tokenizer.save_pretrained(folder)
    return str(folder)


def _other_tokenizer(size):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(["<eos>", "<pad>"] + [f"w{i}" for i in range(size - 2)])}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="<pad>", eos_token="<eos>")


def test_critic_with_a_smaller_vocabulary_is_refused(toy, tmp_path):
    critic = _saved_lm(tmp_path / "critic", vocab_size=8)  # the policy has 18 tokens
    with pytest.raises(ValueError, match=r"critic's vocabulary \(8 token embeddings\) is smaller than the policy's"):
        make_trainer(toy, tmp_path / "out", critic_model_name_or_path=critic)


def test_critic_with_another_tokenizer_is_refused(toy, tmp_path):
    critic = _saved_lm(tmp_path / "critic", vocab_size=20, tokenizer=_other_tokenizer(20))
    with pytest.raises(ValueError, match="critic's tokenizer is not the policy's: 18 of the policy's 18 tokens"):
        make_trainer(toy, tmp_path / "out", critic_model_name_or_path=critic)


def test_bigger_critic_without_a_tokenizer_warns_and_same_tokenizer_passes(toy, tmp_path, caplog):
    tokenizer = toy[0]
    bigger = _saved_lm(tmp_path / "bigger", vocab_size=20)
    with caplog.at_level(logging.WARNING, logger="trl_srppo.runtime.startup_checks"):
        make_trainer(toy, tmp_path / "out", critic_model_name_or_path=bigger)
    assert "20 token embeddings and the policy 18" in caplog.text
    caplog.clear()
    same = _saved_lm(tmp_path / "same", vocab_size=len(tokenizer), tokenizer=tokenizer)
    with caplog.at_level(logging.WARNING, logger="trl_srppo.runtime.startup_checks"):
        make_trainer(toy, tmp_path / "out", critic_model_name_or_path=same)
    assert "token embeddings" not in caplog.text


def test_truncated_jsonl_names_the_file_and_line(tmp_path):
    from trl_srppo.tasks.data import load_source

    path = tmp_path / "train.jsonl"
    path.write_text('{"problem": "1+1", "answer": "2"}\n{"problem": "2+2", "answer": "4"}\n{"problem": "3+')
    with pytest.raises(ValueError, match=r"train\.jsonl: line 3 is not valid JSON .*truncated"):
        load_source(str(path))
    path.write_text('{"problem": "1+1", "answer": "2"}\n')
    assert load_source(str(path))[0]["answer"] == "2"


def test_prompts_longer_than_the_context_are_counted_refused_for_absolute_positions(toy, tmp_path, caplog):
    # A model of learned absolute positions (GPT-2) cannot read past its table: refused, with a count. A rotary one
    # (the toy Qwen3) runs past its positions, as under GRPO, with a warning that counts them.
    from datasets import Dataset
    from transformers import GPT2Config, GPT2LMHeadModel

    tokenizer = toy[0]
    rows = [{"prompt": "1 2 3", "answer": "3"}] * 6 + [{"prompt": " ".join(["7"] * 62), "answer": "7"}] * 2
    config = GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=1, n_head=4, n_positions=64, pad_token_id=0)
    expected = r"2 of 8 prompt\(s\) are longer than 61 tokens \(the longest: 62\).*64 positions"
    with pytest.raises(ValueError, match=expected):
        make_trainer(toy, tmp_path / "out", dataset=Dataset.from_list(rows), model=GPT2LMHeadModel(config))
    make_trainer(toy, tmp_path / "out", dataset=Dataset.from_list(rows[:1] * 8), model=GPT2LMHeadModel(config))
    with caplog.at_level(logging.WARNING, logger="trl_srppo"):
        make_trainer(toy, tmp_path / "out", dataset=Dataset.from_list(rows))  # 64 positions, 3 for the completion
    assert re.search(expected + r".*rotary positions run past them", caplog.text)


MESSAGES = [{"role": "user", "content": "1 2 3"}]


@pytest.mark.parametrize(
    ("prompts", "row", "expected"),
    [
        (["1 2 3"] * 3 + [None] + ["1 2 3"] * 4, 3, "got NoneType None"),
        (list(range(8)), 0, "got int 0"),
        ([MESSAGES] * 3 + [[]] + [MESSAGES] * 4, 3, "got list []"),
    ],
    ids=["none", "int", "no-messages"],
)
def test_prompts_of_the_wrong_type_are_refused_with_their_row_and_column(toy, tmp_path, prompts, row, expected):
    from datasets import Dataset

    dataset = Dataset.from_dict({"prompt": prompts, "answer": ["3"] * 8})
    with pytest.raises(
        ValueError,
        match=rf"train_dataset row {row}: column 'prompt' must be a string or a non-empty list of chat messages .*, "
        + re.escape(expected)
        + r"\. Fix the row, or remove it",
    ):
        make_trainer(toy, tmp_path / "out", dataset=dataset)


@pytest.mark.parametrize("empty", ["", "   "], ids=["empty", "blank"])
def test_an_empty_prompt_is_refused_with_its_row(toy, tmp_path, empty):
    from datasets import Dataset

    prompts = ["1 2 3"] * 8
    prompts[5] = prompts[6] = empty  # the toy tokenizer splits on spaces: a blank prompt has no tokens either
    dataset = Dataset.from_dict({"prompt": prompts, "answer": ["3"] * 8})
    with pytest.raises(
        ValueError,
        match=r"train_dataset row 5 \(and 1 more row\(s\)\): column 'prompt' is empty \(it has no tokens\), but "
        r"SR-PPO's critic reads the prompt's value qhat\(s_0\) at its last token.*dataset\.filter",
    ):
        make_trainer(toy, tmp_path / "out", dataset=dataset)
    # Conversational prompts always have the chat template's tokens.
    make_trainer(toy, tmp_path / "out", dataset=Dataset.from_dict({"prompt": [MESSAGES] * 8, "answer": ["3"] * 8}))


def test_fewer_prompts_than_one_generated_batch_is_refused_with_the_count_it_needs(toy, tmp_path):
    # GRPO's sampler yields whole generated batches only: 15 prompts and batches of 16 would train no step and save
    # the untrained model as if it had trained. Refused when training starts; such a trainer still evaluates.
    _, _, dataset = toy
    fields = dict(per_device_train_batch_size=4, steps_per_generation=4)
    small = make_trainer(toy, tmp_path / "out", dataset=dataset.select(range(15)), **fields)
    with pytest.raises(
        ValueError,
        match=r"train_dataset has 15 prompt\(s\), fewer than one generated batch of 16 \(per_device_train_batch_size "
        r"4 x 1 process\(es\) x steps_per_generation 4 / num_generations 1\).*at least 16 rows",
    ):
        small.train()
    assert small.state.global_step == 0 and "eval_loss" in small.evaluate(eval_dataset=dataset.select(range(8)))
    trainer = make_trainer(toy, tmp_path / "out", dataset=dataset.select(range(16)), max_steps=1, **fields)
    trainer.train()
    assert trainer.state.global_step == 1
    # The GRPO trainer of `trl-srppo train` too: 3 prompts, for generated batches of 16 completions = 4 prompts x 4.
    grpo = toy_grpo_trainer(
        toy, tmp_path / "grpo", dataset=dataset.select(range(3)), trainer_class=grpo_trainer_class(),
        num_generations=4, **fields,
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"has 3 prompt\(s\), fewer than one generated batch of 4 .*generations 4"):
        grpo.train()


# ---- a clean exit: the process groups destroyed, gloo's worker threads given the GIL


def test_end_distributed_destroys_the_groups_and_waits_for_gloo_workers_only_after_gloo(monkeypatch):
    """`end_distributed` destroys the process group (through the accelerator's `end_training` when given one), and
    releases the GIL for `GLOO_DRAIN_SECONDS` only when a group ran on gloo; without a group it does nothing."""
    import torch.distributed as dist

    if dist.is_initialized():
        pytest.skip("a process group already exists in this process")
    slept = []
    monkeypatch.setattr(time, "sleep", slept.append)
    assert not uses_gloo()
    end_distributed()  # no group: nothing to destroy, no wait
    assert slept == []

    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    gathered = [torch.zeros(2)]
    dist.all_gather(gathered, torch.ones(2))  # a collective whose worker thread holds the tensors last
    assert uses_gloo()
    end_distributed()
    assert not dist.is_initialized() and slept == [GLOO_DRAIN_SECONDS]

    class Accelerator:  # the one method `end_distributed` calls: finish the trackers, destroy the group
        ended = 0

        def end_training(self):
            self.ended += 1
            dist.destroy_process_group()

    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    accelerator = Accelerator()
    end_distributed(accelerator, drain_seconds=0.25)
    assert accelerator.ended == 1 and not dist.is_initialized() and slept == [GLOO_DRAIN_SECONDS, 0.25]


EXIT_SCRIPT = """
import atexit, sys
import torch, torch.distributed as dist
from trl_srppo.runtime.teardown import end_distributed, exit_process, gloo_threads
dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
KEPT = dist.new_group([0])  # as DeepSpeed keeps its own world group (deepspeed.utils.groups._WORLD_GROUP)
dist.all_reduce(torch.ones(2), group=KEPT)
end_distributed(drain_seconds=0)
print("alive after end_distributed:", gloo_threads())  # buffered: stdout is a pipe
atexit.register(print, "atexit ran")
exit_process(3)
"""


def test_gloo_threads_outlive_their_destroyed_group_and_exit_process_ends_without_shutdown(tmp_path):
    """A gloo group still referenced after `destroy_process_group` keeps its threads (gloo has no `shutdown`); the
    process then ends through `exit_process` with its code, its `atexit` handlers run and its output flushed."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-c", EXIT_SCRIPT], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 3, result.stderr[-3000:]
    assert "'pt_gloo_runloop'" in result.stdout and result.stdout.rstrip().endswith("atexit ran"), result.stdout


def test_exit_process_without_gloo_is_sys_exit(monkeypatch):
    from trl_srppo.runtime import teardown

    # this process may have ended a gloo group in an earlier test (whose threads live on): say it has not
    monkeypatch.setattr(teardown, "_ENDED_GLOO", False)
    with pytest.raises(SystemExit) as stopped:
        exit_process(5)
    assert stopped.value.code == 5


def test_a_trainer_on_the_runtime_drains_gloo_at_the_scripts_exit(toy, tmp_path, monkeypatch):
    """Building a trainer registers, once per process, the `atexit` handler that releases the GIL to gloo's live
    worker threads for `GLOO_DRAIN_SECONDS` (none alive: no wait; after `end_distributed`'s own drain: no wait)."""
    from trl_srppo.runtime import teardown

    registered = []
    monkeypatch.setattr(teardown, "_DRAIN_REGISTERED", False)
    monkeypatch.setattr(teardown.atexit, "register", registered.append)
    make_trainer(toy, tmp_path, max_steps=1)
    make_trainer(toy, tmp_path, max_steps=1)
    assert registered.count(teardown._drain_gloo) == 1
    slept = []
    monkeypatch.setattr(time, "sleep", slept.append)
    monkeypatch.setattr(teardown, "_ENDED_GLOO", False)
    monkeypatch.setattr(teardown, "uses_gloo", lambda: False)
    monkeypatch.setattr(teardown, "gloo_threads", list)
    teardown._drain_gloo()
    assert slept == []
    monkeypatch.setattr(teardown, "gloo_threads", lambda: ["pt_gloo_runloop"])
    teardown._drain_gloo()
    assert slept == [GLOO_DRAIN_SECONDS]
    monkeypatch.setattr(teardown, "_ENDED_GLOO", True)
    teardown._drain_gloo()
    assert slept == [GLOO_DRAIN_SECONDS]


def test_a_reward_function_that_needs_a_missing_column_is_refused_at_train(toy, tmp_path):
    # GRPO hands reward functions the dataset's columns as keywords; a missing one would fail at the first batch with
    # a bare TypeError from inside the scoring.
    def needs_answer(completions, answer, **kwargs):
        return [1.0 for _ in completions]

    def needs_prompt(completions, prompt, **kwargs):  # GRPO passes `prompts`, never the `prompt` column
        return [1.0 for _ in completions]

    tokenizer, _, dataset = toy
    for func, missing in ((needs_answer, "answer"), (needs_prompt, "prompt")):
        trainer = make_trainer(toy, tmp_path, reward=func, dataset=dataset.remove_columns("answer"), max_steps=1)
        with pytest.raises(
            ValueError, match=rf"Reward function '{func.__name__}' needs the dataset column\(s\) \['{missing}'\]"
        ):
            trainer.train()
    make_trainer(toy, tmp_path, reward=needs_answer, max_steps=1).train()  # the toy data has `answer`


def test_a_reward_function_may_need_a_field_of_the_rollout_func(toy, tmp_path, monkeypatch):
    # GRPO hands the reward functions a `rollout_func`'s extra fields by name, with the dataset's columns.
    from trl_srppo import SRPPOTrainer

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    tokenizer, build_model, dataset = toy
    seen = []

    def rollout_func(prompts, trainer):
        prompt_ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        completion_ids = [[tokenizer.convert_tokens_to_ids("3"), tokenizer.eos_token_id] for _ in prompts]
        logprobs = [[-1.0] * len(ids) for ids in completion_ids]
        return {
            "prompt_ids": prompt_ids,
            "completion_ids": completion_ids,
            "logprobs": logprobs,
            "tool_calls": [2] * len(prompts),
        }

    def uses_the_rollout_field(completions, tool_calls, **kwargs):
        seen.extend(tool_calls)
        return [1.0 if calls == 2 else 0.0 for calls in tool_calls]

    trainer = SRPPOTrainer(
        model=build_model(),
        reward_funcs=uses_the_rollout_field,
        args=cpu_config(tmp_path, max_steps=1),
        train_dataset=dataset,
        processing_class=tokenizer,
        rollout_func=rollout_func,
    )
    trainer.train()
    assert seen and set(seen) == {2}


def test_resume_loads_the_optimizer_state_onto_plain_cpu_in_a_multi_process_cpu_run(tmp_path, monkeypatch):
    # A process of a multi-process CPU run has device `cpu:0`, where transformers < 5.18 maps the optimizer state and
    # torch cannot restore it: the trainer's load sees `cpu`, and the run's device is back afterwards.
    from trl_srppo.runtime.resume import plain_cpu_device

    args = cpu_config(tmp_path)
    args.__dict__["_setup_devices"] = torch.device("cpu", 0)
    with plain_cpu_device(args):
        assert args.device == torch.device("cpu") and args.device.index is None
        state = torch.zeros(2)
        torch.save(state, tmp_path / "state.pt")
        torch.load(tmp_path / "state.pt", map_location=args.device, weights_only=True)  # as transformers loads it
    assert args.device == torch.device("cpu", 0)
    with pytest.raises(RuntimeError, match="don't know how to restore data location"):
        torch.load(tmp_path / "state.pt", map_location=args.device, weights_only=True)

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Prompt sampling in the trainer (issue 33): the pool, the draw, the weights it puts in place of w_k(s_0), every
critic mode, the neutral setting against a default run, exact resume, the logged metrics, and the refusals."""

import shutil

import pytest
import torch
from conftest import cpu_config
from helpers import small_digit_reward, toy_trainer
from peft import LoraConfig

from trl_srppo.method import prompt_sampling
from trl_srppo.method.core import pass_at_k_weight
from trl_srppo.method.prompt_sampling import PROMPT_SAMPLING_STATE

SAMPLING = {"prompt_sampling": "pass_at_k", "prompt_pool_factor": 2, "prompt_sampling_floor": 0.3, "pass_at_k": 4}
METRICS = ("pool_q0_mean", "drawn_q0_mean", "ess", "pool_drawn_share", "pool_forward_seconds")


def record_draws(trainer) -> list[dict]:
    """Every draw of `trainer`: the pool's and the drawn rows' prompts, the draw, and the values `qhat(s_0)` and
    weights the trainer then used for those rollouts."""
    draws = []
    sampler, estimate = trainer._prompt_sampler, trainer._advantage_estimate
    draw = sampler.draw

    def spy_draw(trainer_, inputs):
        drawn, result = draw(trainer_, inputs)
        draws.append({"pool": [x["prompt"] for x in inputs], "drawn": [x["prompt"] for x in drawn], **result})
        return drawn, result

    def spy_estimate(values, rewards, mask, scale=None, k=None):
        out = estimate(values, rewards, mask, scale, k)
        if trainer.model.training:
            draws[-1].setdefault("values_q0", []).append(values[:, 0].detach().clone())
            draws[-1].setdefault("weights", []).append(out.weights.detach().clone())
        return out

    sampler.draw = spy_draw
    trainer._advantage_estimate = spy_estimate
    return draws


def lora():
    return LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])


@pytest.mark.parametrize("critic_type", ["separate", "policy_head", "policy_lora"])
def test_each_critic_mode_trains_on_prompts_drawn_from_the_pool(toy, tmp_path, critic_type):
    extra = {"critic_type": critic_type}
    if critic_type == "policy_lora":
        extra["peft_config"] = lora()
    trainer = toy_trainer(toy, tmp_path, max_steps=2, **SAMPLING, **extra)
    draws = record_draws(trainer)
    trainer.train()
    assert len(draws) == 2
    for draw in draws:
        assert len(draw["pool"]) == 16 and len(set(map(str, draw["pool"]))) == 16  # m x B distinct candidates
        assert len(draw["drawn"]) == 8
        assert draw["drawn"] == [draw["pool"][i] for i in draw["indices"].tolist()]
        # Each rollout's weight is its Pass@k weight times the draw's ratio 1 / (N p_i).
        values_q0, weights = torch.cat(draw["values_q0"]), torch.cat(draw["weights"])
        expected = pass_at_k_weight(values_q0.clamp(0, 1), 4) * draw["ratios"].float()
        assert torch.allclose(weights, expected)
    # The pool's values were the critic's qhat(s_0) at the last prompt token, the one read after generating (after
    # the first batch, whose fresh head is set to the success rate between the two).
    last = draws[1]
    assert torch.allclose(last["q0"][last["indices"]].float(), torch.cat(last["values_q0"]), atol=1e-5)
    assert not torch.allclose(last["q0"], last["q0"][0])  # a trained critic: the values tell prompts apart
    logged = [entry for entry in trainer.state.log_history if "prompt_sampling/ess" in entry]
    assert len(logged) == 2
    for name in METRICS:
        assert all(f"prompt_sampling/{name}" in entry for entry in logged)
    assert logged[1]["prompt_sampling/pool_q0_mean"] == pytest.approx(last["q0"].mean().item(), abs=1e-6)
    assert logged[1]["prompt_sampling/drawn_q0_mean"] == pytest.approx(
        last["q0"][last["indices"]].mean().item(), abs=1e-6
    )
    share = last["indices"].unique().numel() / 16
    assert logged[1]["prompt_sampling/pool_drawn_share"] == pytest.approx(share)
    w = torch.cat(last["weights"]).double()
    assert logged[1]["prompt_sampling/ess"] == pytest.approx((w.sum() ** 2 / (w**2).sum() / 8).item(), rel=1e-6)


def test_near_half_generates_for_the_prompts_nearest_one_half(toy, tmp_path):
    trainer = toy_trainer(toy, tmp_path, max_steps=2, prompt_sampling="near_half", prompt_pool_factor=2)
    draws = record_draws(trainer)
    trainer.train()
    last = draws[1]
    distance = (last["q0"] - 0.5).abs()
    kept = distance[last["indices"]]
    assert kept.max() <= distance[[i for i in range(16) if i not in last["indices"].tolist()]].min()
    assert torch.equal(last["ratios"], torch.ones(8, dtype=torch.float64))  # plain w_k


def test_floor_one_with_a_pool_of_one_batch_and_the_identity_draw_is_the_default_run(toy, tmp_path, monkeypatch):
    # With m = 1 and eps = 1, the only difference from a default run left is the draw itself: B of the B prompts with
    # replacement, which is not the batch (prompts repeat). Drawn as the identity, everything else (the loader, the
    # pool's critic forward, the ratios of exactly 1 on the weights) must leave the run bit for bit the default one.
    default = toy_trainer(toy, tmp_path / "default", max_steps=3, steps_per_generation=2)
    default.train()
    real = prompt_sampling.sample_prompts

    def identity_draw(q0, num_prompts, **kwargs):
        draw = real(q0, num_prompts, **kwargs)
        assert torch.equal(draw["ratios"], torch.ones(num_prompts, dtype=torch.float64))
        return {**draw, "indices": torch.arange(num_prompts)}

    monkeypatch.setattr(prompt_sampling, "sample_prompts", identity_draw)
    sampled = toy_trainer(
        toy,
        tmp_path / "sampled",
        max_steps=3,
        steps_per_generation=2,
        prompt_sampling="pass_at_k",
        prompt_pool_factor=1,
        prompt_sampling_floor=1.0,
    )
    sampled.train()
    for a, b in [(default.model, sampled.model), (default.critic, sampled.critic)]:
        for name, value in a.state_dict().items():
            assert torch.equal(value, b.state_dict()[name]), name


def test_resume_draws_the_prompts_of_the_uninterrupted_run(toy, tmp_path, caplog):
    # Off-policy (two optimizer steps per generated batch): checkpoint 1 falls in the middle of a generated batch,
    # checkpoint 2 on a boundary.
    fields = {"max_steps": 4, "save_strategy": "steps", "save_steps": 1, "steps_per_generation": 2, **SAMPLING}

    def run(output_dir, resume=None):
        trainer = toy_trainer(toy, output_dir, reward_funcs=small_digit_reward, **fields)
        draws = record_draws(trainer)
        trainer.train(resume_from_checkpoint=resume)
        return trainer, draws

    full, full_draws = run(tmp_path / "full")
    assert len(full_draws) == 2
    assert (tmp_path / "full" / "checkpoint-1" / PROMPT_SAMPLING_STATE / "process_0.pt").is_file()
    for step in (1, 2):
        folder = tmp_path / f"resumed-{step}" / f"checkpoint-{step}"
        shutil.copytree(tmp_path / "full" / f"checkpoint-{step}", folder)
        resumed, draws = run(folder.parent, resume=str(folder))
        assert len(draws) == 1  # the second generated batch
        assert draws[0]["pool"] == full_draws[1]["pool"] and draws[0]["drawn"] == full_draws[1]["drawn"]
        for a, b in [(full.model, resumed.model), (full.critic, resumed.critic)]:
            for name, value in a.state_dict().items():
                assert torch.equal(value, b.state_dict()[name]), f"resumed at {step}: {name} differs"
    # Another floor is resumed, with a warning that names it.
    folder = tmp_path / "other-floor" / "checkpoint-2"
    shutil.copytree(tmp_path / "full" / "checkpoint-2", folder)
    fields["prompt_sampling_floor"] = 0.5
    with caplog.at_level("WARNING"):
        run(folder.parent, resume=str(folder))
    assert "prompt_sampling_floor=0.3 (this run: 0.5)" in caplog.text
    fields["prompt_sampling_floor"] = SAMPLING["prompt_sampling_floor"]
    caplog.clear()
    # Without the saved draw state the resumed run draws from a fresh generator, says so, and draws other prompts.
    folder = tmp_path / "stateless" / "checkpoint-2"
    shutil.copytree(tmp_path / "full" / "checkpoint-2", folder)
    shutil.rmtree(folder / PROMPT_SAMPLING_STATE)
    with caplog.at_level("WARNING"):
        _, draws = run(folder.parent, resume=str(folder))
    assert "has no draw state" in caplog.text
    assert draws[0]["pool"] == full_draws[1]["pool"] and draws[0]["drawn"] != full_draws[1]["drawn"]


@pytest.mark.parametrize(
    "overrides,match",
    [
        (
            dict(prompt_sampling="weighted"),
            "^prompt_sampling must be 'none', 'pass_at_k' or 'near_half', got 'weighted'\\.$",
        ),
        (dict(prompt_sampling="pass_at_k", prompt_pool_factor=0), "prompt_pool_factor must be an integer >= 1"),
        (dict(prompt_sampling="pass_at_k", prompt_pool_factor=2.5), "prompt_pool_factor must be an integer >= 1"),
        (dict(prompt_sampling="pass_at_k", prompt_sampling_floor=-0.1), r"prompt_sampling_floor must be in \[0, 1\]"),
        (dict(prompt_sampling="pass_at_k", prompt_sampling_floor=1.5), r"prompt_sampling_floor must be in \[0, 1\]"),
        (dict(prompt_sampling="pass_at_k", srppo_method="ppo"), "needs critic_head='sigmoid'"),
        (dict(prompt_sampling="near_half", num_generations=2), "set num_generations=1"),
        (dict(prompt_sampling="near_half", prompt_pool_factor=1), "Set prompt_pool_factor >= 2"),
    ],
)
def test_config_refuses_what_cannot_work_and_names_the_fix(tmp_path, overrides, match):
    with pytest.raises(ValueError, match=match):
        cpu_config(tmp_path, **overrides)


def test_config_defaults_are_off(tmp_path):
    args = cpu_config(tmp_path)
    assert (args.prompt_sampling, args.prompt_pool_factor, args.prompt_sampling_floor) == ("none", 4, 0.1)
    cpu_config(tmp_path, prompt_sampling="pass_at_k", prompt_pool_factor=1, prompt_sampling_floor=0.0)  # accepted


def test_trainer_refuses_a_dataset_smaller_than_one_pool_and_an_iterable_dataset(toy, tmp_path):
    from trl_srppo.tasks.toy import make_dataset

    trainer = toy_trainer(toy, tmp_path, dataset=make_dataset(12, seed=0), **SAMPLING)
    with pytest.raises(ValueError, match="fewer than one pool of candidates of 16"):
        trainer.train()
    with pytest.raises(ValueError, match="iterable"):
        toy_trainer(toy, tmp_path, dataset=toy[2].to_iterable_dataset(), **SAMPLING)


def test_trl_srppo_train_refuses_prompt_sampling_with_grpo_and_says_why():
    from trl_srppo.train import parse_args

    argv = ["--trainer", "grpo", "--num_generations", "4", "--prompt_sampling", "pass_at_k", "--output_dir", "x"]
    with pytest.raises(ValueError, match="cannot sample prompts .prompt_sampling.*has no critic"):
        parse_args(argv)

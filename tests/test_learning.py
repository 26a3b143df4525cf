# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Learning on CPU: the critic becomes calibrated on known success rates, and SR-PPO raises a tiny model's reward on
the toy chain task."""

import random

import torch
from conftest import cpu_config
from datasets import Dataset

from trl_srppo import SRPPOTrainer
from trl_srppo.method.core import critic_values
from trl_srppo.method.critics.model import prefix_values
from trl_srppo.rewards import chain_reward
from trl_srppo.tasks.toy import TaskSpec, make_dataset

# prompt -> true probability of success, whatever the policy does
SUCCESS_RATES = {"1 max 1 =": 0.1, "3 min 3 =": 0.4, "5 max 5 =": 0.7, "7 min 7 =": 0.9}


def test_critic_learns_calibrated_success_probabilities(toy, tmp_path):
    tokenizer, build_model, _ = toy
    rng = random.Random(0)

    def bernoulli_reward(prompts, completions, **kwargs):
        return [1.0 if rng.random() < SUCCESS_RATES[p] else 0.0 for p in prompts]

    dataset = Dataset.from_list([{"prompt": p} for p in SUCCESS_RATES] * 64)
    args = cpu_config(
        tmp_path,
        per_device_train_batch_size=16,
        max_completion_length=1,
        max_steps=120,
        learning_rate=1e-8,  # the policy's behaviour is irrelevant to these success rates
        critic_learning_rate=1e-2,
        lr_scheduler_type="linear",
        logging_steps=20,
    )
    trainer = SRPPOTrainer(
        model=build_model(),
        reward_funcs=bernoulli_reward,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
    )
    trainer.train()

    prompts = list(SUCCESS_RATES)
    prompt_ids = tokenizer(prompts, return_tensors="pt")["input_ids"]  # (4, P), all the same length
    completion_ids = torch.full((4, 1), tokenizer.eos_token_id)  # (4, 1), any token: only s_0 is read
    input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
    with torch.no_grad():
        raw = prefix_values(trainer.critic, input_ids, torch.ones_like(input_ids), logits_to_keep=1)  # (4, 1)
    q0 = critic_values(raw[:, 0], "sigmoid")  # qhat(s_0), read at the last prompt token
    for prompt, q in zip(prompts, q0.tolist(), strict=True):
        assert abs(q - SUCCESS_RATES[prompt]) < 0.08, f"qhat({prompt!r}) = {q:.3f}, true {SUCCESS_RATES[prompt]}"


def test_sr_ppo_raises_the_reward_of_a_tiny_model(toy, tmp_path):
    # One-step chains ("7 max 5 =" -> "7"), scored by the chain task's verifier on the completion's one token (the
    # answer's one value). The random model names the right value about once in 18 tries; copying one of the prompt's
    # two digits is right about half the time, and the comparison itself always. Measured with these settings (mean
    # reward of steps 1-40 -> 201-300) for three seeds of the weights and the run: 0.086 -> 0.333 (seed 0, the one
    # used), 0.075 -> 0.345, 0.114 -> 0.316; with the advantages' sign flipped 0.056 -> 0.001, with a frozen policy
    # 0.059 -> 0.048.
    tokenizer, build_model, _ = toy
    dataset = make_dataset(4800, TaskSpec(min_steps=1, max_steps=1), seed=0, distinct=False)
    args = cpu_config(
        tmp_path, per_device_train_batch_size=16, max_completion_length=1, max_steps=300, logging_steps=10
    )
    trainer = SRPPOTrainer(
        model=build_model(),
        reward_funcs=chain_reward,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
    )
    trainer.train()
    rewards = [entry["reward"] for entry in trainer.state.log_history if "reward" in entry]
    first, last = sum(rewards[:4]) / 4, sum(rewards[-10:]) / 10  # steps 1-40 and 201-300 (a reward logged per 10)
    assert first < 0.2, f"the untrained model should rarely succeed, got {first:.3f}"
    print("reward curve:", [round(r, 3) for r in rewards])
    assert last > first + 0.15, f"reward did not rise: first 40 steps {first:.3f}, last 100 steps {last:.3f}"

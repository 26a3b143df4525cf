# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`critic_type="policy_head"`: a linear value head on the policy's own last hidden states
(`trl_srppo.method.critics.policy_head.PolicyHeadCritic`).

The values are checked against a reference computed here, not by the code under test: the hidden states the policy's
LM head reads in a plain causal-LM forward of the policy (captured by a pre-hook on the LM head), at positions
`P - 1 .. P + C - 2`, times a copy of the head taken before the batch."""

import json
import os

import pytest
import torch
from helpers import script_env, small_digit_reward, toy_grpo_trainer, toy_trainer, two_process_launch
from peft import LoraConfig

from trl_srppo import SRPPOConfig
from trl_srppo.method.critics import Critic
from trl_srppo.method.critics.base import CriticBatch
from trl_srppo.method.critics.policy_head import (
    VALUE_HEAD_CONFIG,
    VALUE_HEAD_WEIGHTS,
    PolicyHeadCritic,
    PolicyHeadValueModel,
    PolicyValueHead,
    policy_backbone,
)


def make_trainer(toy, output_dir, **overrides):
    return toy_trainer(toy, output_dir, **{"critic_type": "policy_head", **overrides})


def randomize_head(trainer, seed=7):
    # A head that is not all zeros (a fresh one is), so that values differ between prefixes and a misread shows.
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in trainer.critic.parameters():
            p.copy_(0.5 * torch.randn(p.shape, generator=generator))


def head_state(trainer) -> dict:
    return {k: v.detach().clone() for k, v in trainer.critic.state_dict().items()}


def generated_tokens_mask(trainer, completion_ids):
    """`(B, C)` the tokens each completion really has, up to and including its first EOS (all of them for a
    completion cut at `max_completion_length`): the critic's mask, rebuilt here from the token ids."""
    is_eos = torch.isin(completion_ids, torch.tensor(trainer.eos_token_ids))
    lengths = torch.where(is_eos.any(dim=1), is_eos.int().argmax(dim=1) + 1, completion_ids.size(1))  # (B,)
    positions = torch.arange(completion_ids.size(1))
    return (positions.unsqueeze(0) < lengths.unsqueeze(1)).long()


def reference_hidden(trainer, output):
    """`(B, C, H)` hidden states of the prefixes `s_0 .. s_{C-1}` of a generated batch, from the policy's plain
    causal-LM forward on prompt + completion (the critic's mask): the LM head's input at positions
    `P - 1 .. P + C - 2`; and the `(B, C)` critic mask."""
    input_ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
    critic_mask = generated_tokens_mask(trainer, output["completion_ids"])
    attention_mask = torch.cat([output["prompt_mask"], critic_mask], dim=1)
    captured = []
    lm_head = trainer.model.get_output_embeddings()
    handle = lm_head.register_forward_pre_hook(lambda module, args: captured.append(args[0].detach()))
    try:
        with torch.no_grad():
            trainer.model(input_ids=input_ids, attention_mask=attention_mask)
    finally:
        handle.remove()
    assert len(captured) == 1 and captured[0].shape[:2] == input_ids.shape  # every position's hidden state
    width = output["completion_ids"].size(1)
    return captured[0][:, -width - 1 : -1].float(), critic_mask


def head_values(hidden, head_weights):
    """`(B, C)` sigmoid values of a head's weights `head_weights` (a state dict) on `(B, C, H)` hidden states."""
    weight, bias = head_weights["layers.0.weight"].float(), head_weights["layers.0.bias"].float()  # (1, H), (1,)
    return torch.sigmoid(hidden @ weight[0] + bias[0])


def outcomes(trainer, output):
    completions = trainer.processing_class.batch_decode(output["completion_ids"], skip_special_tokens=True)
    return torch.tensor(small_digit_reward(completions))  # (B,)


class CriticCalls:
    """Records, for each generated batch, what the trainer's critic did: the values `(B, C)` it gave the advantages
    (from `learn()`, fused or not, or `values()` in evaluation), its optimizer steps, and the backbone forwards made
    inside its calls (whether with gradients, and with which keyword arguments); and, as the call returns (before the
    policy moves), the reference values of the batch with the head before and after it."""

    def __init__(self, trainer):
        self.trainer = trainer
        self.batches = []  # one dict per generated batch (train mode)
        self._current = None
        self._inside = False
        backend = trainer.critic_backend
        values, learn, step = backend.values, backend.learn, backend.engine.step

        def spy_values(batch, *args):
            result = self._inside_critic(values, batch, *args)
            self._record("values", result)
            return result

        def spy_learn(batch, *args, **kwargs):  # the values, the estimate and the update, fused or not
            self._record("policy_grads_before", policy_grads(trainer))
            result = self._inside_critic(learn, batch, *args, **kwargs)
            self._record("policy_grads_after", policy_grads(trainer))
            self._record("features", batch.cache.get("hidden_states"))
            self._record("values", result.values)
            return result

        def spy_step(optimizer, params, global_step):
            if self._current is not None:
                self._current["steps"] += 1
            return step(optimizer, params, global_step)

        backend.values, backend.learn, backend.engine.step = spy_values, spy_learn, spy_step
        policy_backbone(trainer.model).register_forward_hook(self._backbone_forward, with_kwargs=True)
        generate = trainer._generate_and_score_completions

        def spy_generate(inputs):
            if not trainer.model.training:
                return generate(inputs)
            head_before = head_state(trainer)
            self._current = {"steps": 0, "forwards": [], "head_before": head_before}
            output = generate(inputs)
            head_after = head_state(trainer)
            hidden, critic_mask = reference_hidden(trainer, output)  # the policy has not moved yet
            self._current.update(
                output=output,
                head_after=head_after,
                critic_mask=critic_mask,
                expected=head_values(hidden, head_before),
                values_after=head_values(hidden, head_after),
            )
            self.batches.append(self._current)
            self._current = None
            return output

        trainer._generate_and_score_completions = spy_generate

    def _record(self, key, value):
        if self._current is not None:
            self._current[key] = value

    def _inside_critic(self, call, *args, **kwargs):
        inside, self._inside = self._inside, True
        try:
            return call(*args, **kwargs)
        finally:
            self._inside = inside

    def _backbone_forward(self, module, args, kwargs, output):
        if self._inside and self._current is not None:
            self._current["forwards"].append((torch.is_grad_enabled(), dict(kwargs)))


def policy_grads(trainer) -> dict:
    return {n: None if p.grad is None else p.grad.clone() for n, p in trainer.model.named_parameters()}


LORA = dict(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])

SETTINGS = {
    # one head step per generated batch: values and update from one forward of the head (the fused step)
    "fused": dict(max_steps=3),
    "not_fused": dict(max_steps=3, critic_fused_forward=False),
    # one step over two accumulated micro-batches of 4 rows; the features in chunks of 4 rows
    "fused_micro_batches": dict(max_steps=2, per_device_train_batch_size=4, gradient_accumulation_steps=2),
    # off-policy: two policy steps, so two head steps, per generated batch
    "steps_per_generation_2": dict(
        max_steps=4, per_device_train_batch_size=4, steps_per_generation=2, max_completion_length=4
    ),
    "num_iterations_2": dict(max_steps=4, num_iterations=2),
    "critic_epochs_2": dict(max_steps=2, critic_epochs=2),
    # the policy's loss masks truncated completions, the head still reads and learns them
    "mask_truncated_completions": dict(max_steps=3, mask_truncated_completions=True, max_completion_length=2),
    "lora_policy": dict(max_steps=2, lora=True),
}


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_values_come_from_the_head_before_it_learns_the_batch(toy, tmp_path, setting):
    """Every generated batch: the values that make the advantages are the head *as it was before the batch* on the
    hidden states of the policy's own forward (the reference), on every token the critic sees; the advantages are
    `k (1 - v_0)^(k-1) (Y - v_{t-1})` of those values (`gae_lambda=1`) on the policy's tokens; the head makes
    `critic_epochs * max(1, steps_per_generation / gradient_accumulation_steps)` steps on the batch, from one
    no-grad forward of the policy per `per_device_train_batch_size` rows (called as GRPO calls it), and no policy
    parameter gets a gradient from its update."""
    overrides = dict(SETTINGS[setting])
    if overrides.pop("lora", False):
        overrides["peft_config"] = LoraConfig(**LORA)
    trainer = make_trainer(toy, tmp_path, **overrides)
    if "peft_config" in overrides:
        with torch.no_grad():  # LoRA's B starts at 0: make the adapter change the hidden states from the start
            generator = torch.Generator().manual_seed(11)
            for name, p in trainer.model.named_parameters():
                if "lora_B" in name:
                    p.copy_(0.3 * torch.randn(p.shape, generator=generator))
    randomize_head(trainer)
    calls = CriticCalls(trainer)
    trainer.train()

    args = trainer.args
    micro_steps = args.max_steps * args.gradient_accumulation_steps
    generations = -(-micro_steps // (args.steps_per_generation * args.num_iterations))
    head_steps = args.critic_epochs * max(1, args.steps_per_generation // args.gradient_accumulation_steps)
    assert len(calls.batches) == generations
    assert trainer.critic_backend.steps == generations * head_steps
    moved = False
    for call in calls.batches:
        output = call["output"]
        rows = output["completion_ids"].size(0)
        assert call["steps"] == head_steps
        # One no-grad forward of the policy per chunk of rows.
        chunks = -(-rows // args.per_device_train_batch_size)
        assert len(call["forwards"]) == chunks
        for grad_enabled, kwargs in call["forwards"]:
            assert not grad_enabled
            # As the policy's own forward calls it: the ids and mask, no position ids, no cache.
            assert kwargs["input_ids"] is not None and kwargs["attention_mask"] is not None
            assert kwargs.get("position_ids") is None and kwargs["use_cache"] is False
        assert not call["features"].requires_grad
        # The head's update gave no policy parameter a gradient.
        before, after = call["policy_grads_before"], call["policy_grads_after"]
        for name in before:
            assert (before[name] is None) == (after[name] is None), name
            assert before[name] is None or torch.equal(before[name], after[name]), name

        expected, seen = call["expected"], call["critic_mask"].bool()
        if args.mask_truncated_completions:  # the head sees tokens the policy's loss does not
            assert (seen & ~output["completion_mask"].bool()).any()
        torch.testing.assert_close(call["values"][seen], expected[seen], atol=1e-5, rtol=1e-5)
        rewards = outcomes(trainer, output)
        weights = args.pass_at_k * (1 - expected[:, 0]) ** (args.pass_at_k - 1)  # (B,)
        advantages = weights.unsqueeze(1) * (rewards.unsqueeze(1) - expected) * output["completion_mask"]
        torch.testing.assert_close(output["advantages"], advantages, atol=1e-5, rtol=1e-5)
        # The head learned from the batch, so values read after its update would not match.
        assert any(not torch.equal(call["head_before"][k], call["head_after"][k]) for k in call["head_before"])
        moved |= bool((call["values_after"][seen] - expected[seen]).abs().max() > 1e-3)
    assert moved


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "not_fused"])
def test_the_heads_loss_never_moves_the_policy(toy, tmp_path, fused):
    """One optimizer step of the policy on one generated batch is the same, to the bit, whatever the head learns from
    that batch (a critic learning rate of 1e-6 or 1, a squared-error weight of 0 or 10): the head learns on detached
    hidden states, so its loss gives the policy no gradient, and the advantages read the head before its update."""
    runs = {}
    for name, fields in {
        "slow": dict(critic_learning_rate=1e-6, critic_mse_coef=0.0),
        "fast": dict(critic_learning_rate=1.0, critic_mse_coef=10.0),
    }.items():
        trainer = make_trainer(toy, tmp_path / name, max_steps=1, critic_fused_forward=fused, **fields)
        randomize_head(trainer)
        initial = (head_state(trainer), {k: v.clone() for k, v in trainer.model.state_dict().items()})
        trainer.train()
        runs[name] = (trainer, initial)
    (slow, (initial_head, initial_policy)), (fast, _) = runs["slow"], runs["fast"]
    for name, tensor in slow.model.state_dict().items():
        assert torch.equal(fast.model.state_dict()[name], tensor), f"policy {name}"
    assert any(not torch.equal(slow.model.state_dict()[k], v) for k, v in initial_policy.items()), "no policy step"
    # The two heads learned differently, so a head loss that reached the policy would have moved it differently.
    delta_slow = sum((slow.critic.state_dict()[k] - v).abs().sum() for k, v in initial_head.items())
    delta_fast = sum((fast.critic.state_dict()[k] - v).abs().sum() for k, v in initial_head.items())
    assert delta_fast > 100 * delta_slow > 0


class BackboneForwards:
    """Counts the forwards of the policy's backbone outside generation (GRPO's `_generate`), and the generated
    batches."""

    def __init__(self, trainer):
        self.backbone = 0
        self.generations = 0
        self._generating = False
        policy_backbone(trainer.model).register_forward_hook(self._count)
        generate, generate_and_score = trainer._generate, trainer._generate_and_score_completions

        def counted_generate(*args, **kwargs):
            self._generating = True
            try:
                return generate(*args, **kwargs)
            finally:
                self._generating = False

        def counted_generate_and_score(inputs):
            self.generations += trainer.model.training
            return generate_and_score(inputs)

        trainer._generate = counted_generate
        trainer._generate_and_score_completions = counted_generate_and_score

    def _count(self, module, args, output):
        self.backbone += not self._generating


FORWARD_SETTINGS = {  # (GRPO's fields, SR-PPO's own)
    "on_policy": (dict(), {}),
    "not_fused": (dict(), dict(critic_fused_forward=False)),
    "on_policy_micro_batches": (dict(per_device_train_batch_size=4, gradient_accumulation_steps=2), {}),
    "steps_per_generation_2": (dict(per_device_train_batch_size=4, steps_per_generation=2), {}),
    "num_iterations_2": (dict(num_iterations=2, max_steps=4), {}),
}


@pytest.mark.parametrize("setting", list(FORWARD_SETTINGS))
def test_policy_head_adds_one_backbone_forward_per_generated_batch(toy, tmp_path, setting):
    """The cost of the design: beside the forwards GRPO makes anyway (the training forwards, and the old
    log-probabilities' forward off-policy), `critic_type="policy_head"` adds exactly one no-grad forward of the
    policy's backbone over every generated batch (in chunks of `per_device_train_batch_size` rows), for the hidden
    states its values and its update read; no backward through the backbone. An SR-PPO run with a separate critic
    makes GRPO's forwards of the policy (its critic is a model of its own)."""
    grpo_fields, srppo_fields = FORWARD_SETTINGS[setting]
    fields = {"num_generations": 2, **grpo_fields}
    grpo_trainer = toy_grpo_trainer(toy, tmp_path / "grpo", **fields)
    grpo = BackboneForwards(grpo_trainer)
    grpo_trainer.train()
    head_trainer = make_trainer(toy, tmp_path / "head", **fields, **srppo_fields)
    head = BackboneForwards(head_trainer)
    head_trainer.train()
    args = head_trainer.args
    rows = args.per_device_train_batch_size * args.steps_per_generation
    chunks = -(-rows // args.per_device_train_batch_size)
    assert head.generations == grpo.generations > 0
    assert grpo.backbone > 0
    assert head.backbone - grpo.backbone == head.generations * chunks
    if setting == "on_policy":  # SR-PPO without a critic on the policy makes GRPO's forwards
        separate_trainer = toy_trainer(toy, tmp_path / "separate", **fields)
        separate = BackboneForwards(separate_trainer)
        separate_trainer.train()
        assert separate.backbone == grpo.backbone


SPLIT_SETTINGS = {
    "fused": dict(),
    "not_fused": dict(critic_fused_forward=False),
    "num_iterations_2": dict(num_iterations=2, max_steps=2),
}


@pytest.mark.parametrize("setting", list(SPLIT_SETTINGS))
def test_the_head_learns_the_token_mean_of_its_step_however_the_batch_is_split(toy, tmp_path, setting):
    """One head step on one generated batch of 8 rows, whole or as 2 accumulated micro-batches of 4 (and its features
    computed in chunks of 4 rows): completions of different lengths put different numbers of tokens in the
    micro-batches, so a mean of the micro-batches' means would weigh their tokens differently; the head must learn
    the token mean over the batch either way."""
    # AdamW's first step is lr x g / (|g| + eps): with the usual eps it is lr x sign(g) for most weights, which hides a
    # gradient's scale and amplifies float noise where |g| ~ eps; eps = 1 makes each step about lr x g (policy, head).
    fields = {"max_steps": 1, "max_completion_length": 6, "adam_epsilon": 1.0, **SPLIT_SETTINGS[setting]}
    runs = {}
    splits = {
        "whole": dict(per_device_train_batch_size=8),
        "split": dict(per_device_train_batch_size=4, gradient_accumulation_steps=2),
    }
    for name, split in splits.items():
        trainer = make_trainer(toy, tmp_path / name, **fields, **split)
        randomize_head(trainer)
        initial = head_state(trainer)  # the same in both runs
        lengths = []
        generate = trainer._generate_and_score_completions

        def spy(inputs, generate=generate, lengths=lengths):
            output = generate(inputs)
            lengths.extend(output["completion_mask"].sum(1).tolist())
            return output

        trainer._generate_and_score_completions = spy
        trainer.train()
        runs[name] = (trainer, lengths)
    (whole, lengths), (split, split_lengths) = runs["whole"], runs["split"]
    assert lengths == split_lengths and len(set(lengths)) > 1  # the same batch, of completions of several lengths
    assert whole.critic_backend.steps == split.critic_backend.steps == 1
    for name, tensor in whole.critic.state_dict().items():
        assert not torch.equal(tensor, initial[name]), f"head {name} did not learn"
        torch.testing.assert_close(split.critic.state_dict()[name], tensor, atol=1e-6, rtol=1e-5, msg=f"head {name}")
    for name, tensor in whole.model.state_dict().items():
        torch.testing.assert_close(split.model.state_dict()[name], tensor, atol=1e-6, rtol=1e-5, msg=f"policy {name}")
    whole_loss = [log["critic/loss"] for log in whole.state.log_history if "critic/loss" in log]
    split_loss = [log["critic/loss"] for log in split.state.log_history if "critic/loss" in log]
    assert len(whole_loss) >= 1 and split_loss == pytest.approx(whole_loss, rel=1e-5)


def test_a_fresh_head_starts_at_the_first_batchs_success_rate(toy, tmp_path):
    """`critic_value_init="success_rate"` (the default): before the first batch's values are read, the fresh head's
    bias is set to the logit of that batch's success rate, so every value of the first batch is that rate."""
    trainer = make_trainer(toy, tmp_path, max_steps=1)
    calls = CriticCalls(trainer)
    trainer.train()
    (call,) = calls.batches
    rewards = outcomes(trainer, call["output"])
    rows = len(rewards)
    rate = rewards.mean().clamp(1 / (2 * rows), 1 - 1 / (2 * rows))
    assert 0 < rewards.mean() < 1 and rewards.mean() != 0.5  # a rate that a fresh head (0.5) does not give
    assert not call["head_before"]["layers.0.weight"].any() and not call["head_before"]["layers.0.bias"].any()
    seen = call["critic_mask"].bool()
    torch.testing.assert_close(call["values"][seen], torch.full_like(call["values"][seen], rate.item()))
    assert call["head_after"]["layers.0.weight"].any()  # then it learned


def test_save_and_resume_keep_the_head_exactly(toy, tmp_path):
    def run(output_dir, max_steps, resume=None):
        trainer = make_trainer(toy, output_dir, max_steps=max_steps, save_strategy="steps", save_steps=2)
        trainer.train(resume_from_checkpoint=resume)
        return trainer

    full = run(tmp_path / "full", 4)
    run(tmp_path / "killed", 2)
    checkpoint = tmp_path / "killed" / "checkpoint-2"
    critic_dir = checkpoint / "critic"
    assert sorted(p.name for p in critic_dir.iterdir()) == sorted(
        [VALUE_HEAD_CONFIG, VALUE_HEAD_WEIGHTS, "critic_training_state.pt", "srppo_critic.json"]
    )
    hidden_size = full.model.config.hidden_size
    assert json.loads((critic_dir / VALUE_HEAD_CONFIG).read_text()) == {
        "critic_type": "policy_head",
        "hidden_size": hidden_size,
    }
    resumed = run(tmp_path / "killed", 4, resume=str(checkpoint))
    for name, tensor in full.model.state_dict().items():
        assert torch.equal(resumed.model.state_dict()[name], tensor), f"policy {name}"
    for name, tensor in full.critic.state_dict().items():
        assert torch.equal(resumed.critic.state_dict()[name], tensor), f"head {name}"
    for name, tensor in full.critic_optimizer.state_dict()["state"][0].items():
        assert torch.equal(resumed.critic_optimizer.state_dict()["state"][0][name], tensor), f"optimizer {name}"
    assert resumed.critic_backend.steps == full.critic_backend.steps == 4
    assert resumed.critic_lr_scheduler.state_dict() == full.critic_lr_scheduler.state_dict()

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
    trainer.create_optimizer_and_scheduler(num_training_steps=4)
    backend = trainer.critic_backend
    assert isinstance(backend, PolicyHeadCritic) and isinstance(backend, Critic)
    assert trainer.critic is backend.model and isinstance(trainer.critic, PolicyValueHead)
    hidden = trainer.model.config.hidden_size
    assert sum(p.numel() for p in trainer.critic.parameters()) == hidden + 1  # a linear head, no second model
    assert len(trainer.critic.layers) == 1 and isinstance(trainer.critic.layers[0], torch.nn.Linear)
    # Its own optimizer holds the head's parameters, and only them; the policy's optimizer holds none of them.
    head_params = {id(p) for p in trainer.critic.parameters()}
    critic_params = [p for group in trainer.critic_optimizer.param_groups for p in group["params"]]
    assert {id(p) for p in critic_params} == head_params and len(critic_params) == 2
    policy_params = {id(p) for group in trainer.optimizer.param_groups for p in group["params"]}
    assert not head_params & policy_params
    assert not any(module is trainer.critic for module in trainer.model.modules())
    assert trainer.critic_lr_scheduler is backend.lr_scheduler and backend.steps == 0


@pytest.mark.parametrize(
    "fields, match",
    [
        (
            dict(critic_type="policy"),
            "critic_type must be 'separate', 'policy_head', 'policy_lora' or 'running_mean', got 'policy'",
        ),
        (dict(critic_type="policy_head", critic_use_peft=True), "critic_use_peft"),
        (dict(critic_type="policy_head", critic_parallelism="replicate"), "critic_parallelism"),
    ],
)
def test_bad_policy_head_settings_are_clear_errors(tmp_path, fields, match):
    with pytest.raises(ValueError, match=match):
        SRPPOConfig(output_dir=str(tmp_path), report_to=[], use_cpu=True, **fields)


def test_a_policy_without_a_backbone_is_a_clear_error():
    with pytest.raises(ValueError, match="critic_type='policy_head' reads the hidden states.*critic_type='separate'"):
        policy_backbone(torch.nn.Linear(2, 2))


def test_critic_folder_without_a_head_is_a_clear_error(toy, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=VALUE_HEAD_CONFIG):
        make_trainer(toy, tmp_path / "out", critic_model_name_or_path=str(tmp_path / "empty"))


@pytest.mark.parametrize("critic_steps", ["two", "one"], ids=["two_head_steps_per_batch", "one_fused_head_step"])
def test_two_processes_keep_the_head_identical(tmp_path, critic_steps):
    """`accelerate launch --num_processes 2` on CPU: the head is not wrapped by DDP, its gradients are averaged over
    the processes by hand, so both hold the same head after training (one process also has unscorable rollouts).
    Two head steps per generated batch (off-policy, `steps_per_generation=2`), or one fused step over two
    accumulated micro-batches (on-policy)."""
    import subprocess
    from pathlib import Path

    from safetensors.torch import load_file

    script = Path(__file__).parent / "scripts" / "ddp_train.py"
    command = two_process_launch(script, tmp_path, "policy_head", critic_steps)
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=script_env())
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    assert (tmp_path / "world_size.txt").read_text() == "2"
    assert (tmp_path / "critic_wrapper.txt").read_text() == "PolicyValueHead"
    rank0 = load_file(tmp_path / "critic_rank0.safetensors")
    rank1 = load_file(tmp_path / "critic_rank1.safetensors")
    initial = load_file(tmp_path / "critic_initial.safetensors")
    for name in rank0:
        assert torch.equal(rank0[name], rank1[name]), f"head weight {name} differs between processes"
    assert any(not torch.equal(rank0[n], initial[n]) for n in rank0), "the head did not learn"
    saved = load_file(tmp_path / "critic" / VALUE_HEAD_WEIGHTS)
    for name in rank0:
        assert torch.equal(saved[name], rank0[name])


def test_evaluation_scores_without_updating_the_head(toy, tmp_path):
    """`evaluate()`: the head gives every eval batch its values (on the policy's hidden states, one no-grad backbone
    forward per batch beside GRPO's eval loss forward) and the critic metrics, and learns nothing."""
    trainer = make_trainer(toy, tmp_path, per_device_eval_batch_size=8)
    randomize_head(trainer)
    initial = head_state(trainer)
    backend = trainer.critic_backend
    values, updates, batches = backend.values, [], []

    def spy_values(batch, *args):
        result = values(batch, *args)
        batches.append((batch, result))
        return result

    backend.values = spy_values
    backend.update = backend.learn = lambda *args, **kwargs: updates.append(args)
    forwards = BackboneForwards(trainer)
    torch.manual_seed(5)
    metrics = trainer.evaluate(eval_dataset=toy[2].select(range(16)))
    assert updates == [] and backend.steps == 0
    for name, tensor in initial.items():
        assert torch.equal(trainer.critic.state_dict()[name], tensor), name
    assert len(batches) == 2 and forwards.backbone == 2 * 2  # two eval batches: GRPO's loss forward, the head's
    for key in ("eval_loss", "eval_critic/brier", "eval_critic/value_mean", "eval_advantages/mean"):
        assert key in metrics, key
    for batch, found in batches:  # the values of the head on the policy's hidden states
        width = batch.logits_to_keep
        output = {
            "prompt_ids": batch.input_ids[:, :-width],
            "prompt_mask": batch.attention_mask[:, :-width],
            "completion_ids": batch.input_ids[:, -width:],
        }
        hidden, critic_mask = reference_hidden(trainer, output)
        expected, seen = head_values(hidden, initial), critic_mask.bool()
        torch.testing.assert_close(found[seen], expected[seen], atol=1e-5, rtol=1e-5)
    # The logged value mean: each batch's mean over the prefixes the head sees, averaged over the batches.
    means = [found[b.attention_mask[:, -b.logits_to_keep :].bool()].mean() for b, found in batches]
    assert metrics["eval_critic/value_mean"] == pytest.approx(torch.stack(means).mean().item(), abs=1e-5)


def test_the_analyses_read_a_saved_head_on_its_policy_as_the_trainer_does(toy, tmp_path, caplog):
    # `trl-srppo analyze` pointed at a policy-head run (its folder, as training takes it): the head is read on the
    # saved policy's backbone, and gives the values the trainer gives the same rollouts.
    from trl_srppo.analysis import AnalysisConfig, load_analysis_critic
    from trl_srppo.method.critics.model import prefix_values

    run = str(tmp_path / "run")
    trainer = make_trainer(toy, run, max_steps=1)
    randomize_head(trainer)
    calls = CriticCalls(trainer)
    trainer.train()  # a trained head, and a generated batch
    trainer.save_model()
    output = calls.batches[0]["output"]
    width = output["completion_ids"].size(1)
    input_ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
    critic_mask = generated_tokens_mask(trainer, output["completion_ids"])
    attention_mask = torch.cat([output["prompt_mask"], critic_mask], dim=1)
    batch = CriticBatch(input_ids, attention_mask, width, batch_size=8)
    config = AnalysisConfig(model_name_or_path=run, critic_model_name_or_path=run, output_dir=str(tmp_path / "a"))
    mask = critic_mask.bool()
    expected = trainer.critic_backend.values(batch, 0)  # (B, C), as the trainer reads them
    reference = head_values(reference_hidden(trainer, output)[0], head_state(trainer))
    torch.testing.assert_close(expected[mask], reference[mask], atol=1e-5, rtol=1e-5)
    expected = torch.logit(expected)  # the raw values, which the analyses' critic gives
    assert expected[mask].std() > 0.1  # the values differ between prefixes, so a misaligned read would show
    with torch.no_grad():
        for policy in (None, trainer.model):  # loaded from the run's folder, or the analysis's own policy
            critic = load_analysis_critic(config, "nsr", policy)
            assert isinstance(critic, PolicyHeadValueModel)
            raw = prefix_values(critic, input_ids, attention_mask, width)  # (B, C)
            torch.testing.assert_close(raw[mask], expected[mask], atol=1e-5, rtol=1e-5)
    assert "was trained on the policy saved beside it" not in caplog.text
    # Read on another policy than the run's: the values are of features the head never saw, and a warning says so.
    other = tmp_path / "other"
    trainer.model.save_pretrained(other)
    trainer.processing_class.save_pretrained(other)
    with caplog.at_level("WARNING", logger="trl_srppo.analysis.rollouts"):
        load_analysis_critic(
            AnalysisConfig(
                model_name_or_path=str(other), critic_model_name_or_path=run, output_dir=str(tmp_path / "a")
            ),
            "nsr",
        )
    assert (
        f"was trained on the policy saved beside it, {os.path.realpath(run)}, but the analysed policy is {other}"
        in caplog.text
    )


def test_a_separate_critic_refuses_a_policy_head_folder(toy, tmp_path):
    first = make_trainer(toy, tmp_path / "first", max_steps=1)
    first.train()
    first.save_model()
    for source in (tmp_path / "first", tmp_path / "first" / "critic"):  # the run's folder or its critic/
        with pytest.raises(ValueError, match="critic_type='policy_head'.*critic_model_name_or_path unset"):
            make_trainer(toy, tmp_path / "second", critic_type="separate", critic_model_name_or_path=str(source))

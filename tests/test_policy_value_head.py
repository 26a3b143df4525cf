# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`critic_type="policy_head"`: a value head on the policy's own hidden states."""

import copy
import json
import os

import pytest
import torch
from helpers import script_env, small_digit_reward, toy_grpo_trainer, toy_trainer, two_process_launch
from peft import LoraConfig
from trl import GRPOTrainer

from trl_srppo import SRPPOConfig
from trl_srppo.core import critic_values, srppo_advantages
from trl_srppo.policy_value_head import VALUE_HEAD_CONFIG, VALUE_HEAD_WEIGHTS, PolicyValueHead


def make_trainer(toy, output_dir, **overrides):
    return toy_trainer(toy, output_dir, **{"critic_type": "policy_head", **overrides})


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
        [VALUE_HEAD_CONFIG, VALUE_HEAD_WEIGHTS, "critic_training_state.pt", "srppo_critic.json"]
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


@pytest.mark.parametrize("critic_steps", ["two", "one"], ids=["values_at_generation", "values_in_training_forward"])
def test_two_processes_keep_the_head_identical(tmp_path, critic_steps):
    """`accelerate launch --num_processes 2` on CPU: the head's gradients are averaged over the processes by hand, so
    both hold the same head after training (one process also has unscorable rollouts). Two optimizer steps per
    generated batch (the values from GRPO's old log-probabilities' forward), or one over two micro-batches (on-policy:
    the values from the training forwards, the batch's metrics gathered across processes once both have passed)."""
    import subprocess
    from pathlib import Path

    from safetensors.torch import load_file

    script = Path(__file__).parent / "scripts" / "ddp_train.py"
    command = two_process_launch(script, tmp_path, "policy_head", critic_steps)
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


# ---- the head's values from a forward the policy makes anyway, against the plain path (a no-grad forward of its own)

PATHS = {
    # on-policy (one optimizer step per generated batch): the values come from the training forward
    "on_policy": dict(max_steps=2),
    "on_policy_micro_batches": dict(
        max_steps=2, per_device_train_batch_size=4, gradient_accumulation_steps=2, steps_per_generation=2
    ),
    "on_policy_num_iterations_2": dict(
        max_steps=2, gradient_accumulation_steps=2, steps_per_generation=1, num_iterations=2
    ),
    "on_policy_shared_backbone_mlp": dict(max_steps=2, critic_policy_head_coef=0.5, critic_policy_head_mlp_size=8),
    # GRPO computes the old log-probabilities at generation: the values come from that forward
    "steps_per_generation_2": dict(max_steps=4, per_device_train_batch_size=4, steps_per_generation=2),
    "num_iterations_2": dict(max_steps=4, num_iterations=2),
    # a LoRA policy with a KL term: the reference log-probabilities are a forward of the same backbone, adapter off
    "steps_per_generation_2_lora_kl": dict(
        max_steps=2,
        per_device_train_batch_size=4,
        steps_per_generation=2,
        beta=0.1,
        peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]),
    ),
}


def randomize_lora(trainer, seed=11):
    # LoRA's B starts at zero, so the adapter changes nothing until it learns; make it matter from the first forward,
    # so that hidden states with the adapter off (the reference) differ from the policy's.
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in trainer.model.named_parameters():
            if "lora_B" in name:
                p.copy_(0.3 * torch.randn(p.shape, generator=generator))


class BackboneForwards:
    """Counts the forwards of the policy's backbone outside generation (GRPO's `_generate`), and the forwards of the
    value head."""

    def __init__(self, trainer):
        from trl_srppo.policy_value_head import policy_backbone

        self.backbone = 0
        self.head = 0
        self._generating = False
        policy_backbone(trainer.model).register_forward_hook(self._count_backbone)
        if isinstance(getattr(trainer, "critic", None), PolicyValueHead):
            trainer.critic.register_forward_hook(self._count_head)
        generate = trainer._generate

        def counted_generate(*args, **kwargs):
            self._generating = True
            try:
                return generate(*args, **kwargs)
            finally:
                self._generating = False

        trainer._generate = counted_generate

    def _count_backbone(self, module, args, output):
        self.backbone += not self._generating

    def _count_head(self, module, args, output):
        self.head += 1


def run_recorded(toy, output_dir, lora=False, **overrides):
    """Train, recording the generated batches (as the trainer completes them), the advantages GRPO's loss read on
    each micro-batch, and the forwards of the backbone and the head."""
    trainer = make_trainer(toy, output_dir, **overrides)
    randomize_head(trainer)
    if lora:
        randomize_lora(trainer)
    trainer.initial_head = copy.deepcopy(trainer.critic.state_dict())
    forwards = BackboneForwards(trainer)
    batches, losses = [], []
    generate, compute_loss = trainer._generate_and_score_completions, trainer.compute_loss

    def spy_generate(inputs):
        output = generate(inputs)
        batches.append(output)
        return output

    def spy_loss(model, inputs, **kwargs):
        loss = compute_loss(model, inputs, **kwargs)
        losses.append((loss.detach(), inputs["advantages"].clone()))  # read by GRPO's loss by now
        return loss

    trainer._generate_and_score_completions = spy_generate
    trainer.compute_loss = spy_loss
    trainer.train()
    return trainer, batches, losses, forwards


@pytest.mark.parametrize("setting", list(PATHS))
def test_values_from_grpos_forward_match_the_plain_path(toy, tmp_path, setting):
    overrides = dict(PATHS[setting])
    lora = "peft_config" in overrides
    fused, batches, losses, forwards = run_recorded(toy, tmp_path / "fused", lora=lora, **copy.deepcopy(overrides))
    plain, plain_batches, plain_losses, plain_forwards = run_recorded(
        toy, tmp_path / "plain", lora=lora, critic_fused_forward=False, **copy.deepcopy(overrides)
    )
    args = fused.args
    assert len(batches) == len(plain_batches) >= 1
    for out, ref in zip(batches, plain_batches):
        assert torch.equal(out["completion_ids"], ref["completion_ids"]), "both runs must sample the same batch"
        for key in ("srppo_old_values", "advantages", "srppo_value_targets", "srppo_value_mask"):
            torch.testing.assert_close(out[key], ref[key], atol=1e-5, rtol=1e-5, msg=key)
    rewards = torch.cat(
        [torch.tensor(small_digit_reward(fused.processing_class.batch_decode(b["completion_ids"]))) for b in batches]
    )
    assert 0 < rewards.sum() < len(rewards), "the batches need both outcomes for the comparison to discriminate"

    # GRPO's loss read the same advantages and gave the same loss on every micro-batch (the same shuffle).
    assert len(losses) == len(plain_losses) == args.max_steps * args.gradient_accumulation_steps
    for (loss, advantages), (plain_loss, plain_advantages) in zip(losses, plain_losses):
        torch.testing.assert_close(advantages, plain_advantages, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(loss, plain_loss, atol=1e-5, rtol=1e-5)

    # The head's loss, and the head and the policy after the steps.
    head_loss = [log["critic/loss"] for log in fused.state.log_history if "critic/loss" in log]
    plain_head_loss = [log["critic/loss"] for log in plain.state.log_history if "critic/loss" in log]
    assert len(head_loss) == args.max_steps
    torch.testing.assert_close(torch.tensor(head_loss), torch.tensor(plain_head_loss), atol=1e-6, rtol=1e-5)
    metrics = [k for k in fused.state.log_history[0] if k.startswith(("critic/", "advantages/", "passk/"))]
    assert "critic/brier" in metrics and "advantages/mean" in metrics
    logs = [(log, plain_log) for log, plain_log in zip(fused.state.log_history, plain.state.log_history)]
    assert [("critic/brier" in a, "critic/brier" in b) for a, b in logs].count((True, True)) >= 1
    assert all(("critic/brier" in a) == ("critic/brier" in b) for a, b in logs)
    for log, plain_log in logs:
        for key in metrics if "critic/brier" in log else []:
            assert log[key] == pytest.approx(plain_log[key], rel=1e-4, abs=1e-6), key
    for name, tensor in plain.critic.state_dict().items():
        torch.testing.assert_close(fused.critic.state_dict()[name], tensor, atol=1e-6, rtol=1e-5, msg=name)
        assert not torch.equal(tensor, plain.initial_head[name]), f"the head did not learn ({name})"
    for name, tensor in plain.model.state_dict().items():
        torch.testing.assert_close(fused.model.state_dict()[name], tensor, atol=1e-6, rtol=1e-5, msg=name)

    # The plain path makes one no-grad forward of the backbone per generated batch, in chunks of a micro-batch's rows.
    rows = batches[0]["completion_ids"].size(0)
    chunks = -(-rows // args.per_device_train_batch_size)
    assert plain_forwards.backbone - forwards.backbone == len(batches) * chunks
    # On-policy, the head runs once per micro-batch (twice with the shared-backbone term), on the training forward.
    micro_steps = args.max_steps * args.gradient_accumulation_steps
    on_policy = args.gradient_accumulation_steps % (args.steps_per_generation * args.num_iterations) == 0
    assert on_policy == setting.startswith("on_policy")
    if on_policy:
        assert "old_per_token_logps" not in batches[0]
        assert forwards.head == micro_steps * (1 + (args.critic_policy_head_coef > 0))
    else:
        assert "old_per_token_logps" in batches[0]


def grpo_forward_count(toy, output_dir, policy, **fields):
    """Forwards of the policy's backbone outside generation in a GRPOTrainer (`policy="grpo"`) or a policy-head
    SRPPOTrainer run of the same settings."""
    fields = {"num_generations": 2, **fields}
    if policy == "grpo":
        trainer = toy_grpo_trainer(toy, output_dir, **fields)
    else:
        trainer = toy_trainer(toy, output_dir, critic_type="policy_head", **fields)
    forwards = BackboneForwards(trainer)
    trainer.train()
    return forwards.backbone


@pytest.mark.parametrize(
    "fields",
    [
        dict(),
        dict(per_device_train_batch_size=4, gradient_accumulation_steps=2, steps_per_generation=2),
        dict(per_device_train_batch_size=4, steps_per_generation=2),
        dict(num_iterations=2, max_steps=4),
    ],
    ids=["on_policy", "on_policy_micro_batches", "steps_per_generation_2", "num_iterations_2"],
)
def test_policy_head_makes_as_many_backbone_forwards_as_grpo(toy, tmp_path, fields):
    grpo = grpo_forward_count(toy, tmp_path / "grpo", "grpo", **fields)
    head = grpo_forward_count(toy, tmp_path / "head", "policy_head", **fields)
    assert head == grpo > 0


def test_on_policy_values_are_made_once_per_micro_batch(toy, tmp_path):
    """With `num_iterations=2` inside one optimizer step, the second pass over a micro-batch reuses the values, the
    advantages and the head's targets of the first."""
    trainer = make_trainer(
        toy, tmp_path, max_steps=2, gradient_accumulation_steps=2, steps_per_generation=1, num_iterations=2
    )
    randomize_head(trainer)
    made, read = [], []
    make = trainer._policy_head_values_from_forward
    compute_loss = trainer.compute_loss

    def spy_make(inputs, raw):
        made.append(id(inputs))
        make(inputs, raw)

    def spy_loss(model, inputs, **kwargs):
        first_pass = "advantages" not in inputs
        loss = compute_loss(model, inputs, **kwargs)
        read.append((id(inputs), inputs["advantages"], first_pass))
        return loss

    trainer._policy_head_values_from_forward = spy_make
    trainer.compute_loss = spy_loss
    trainer.train()
    assert len(read) == 4 and len(made) == 2  # two generated batches, each passed over twice
    assert read[0][0] == read[1][0] and read[2][0] == read[3][0]  # GRPO's buffered micro-batch, twice
    assert made == [read[0][0], read[2][0]]
    assert [r[2] for r in read] == [True, False, True, False]
    assert read[1][1] is read[0][1]  # the second pass read the tensor the first pass made


@pytest.mark.parametrize("critic_type", ["separate", "policy_lora"])
def test_other_critics_never_read_the_policy_forward(toy, tmp_path, monkeypatch, critic_type):
    """Other critic types: no hook on the policy's backbone, and training gives the same weights, to the bit, as with
    GRPO's own `_get_per_token_logps_and_entropies`."""
    import types

    from trl_srppo import policy_value_head

    calls = []
    capture = policy_value_head.capture_hidden_states

    def spy_capture(backbone):
        calls.append(backbone)
        return capture(backbone)

    monkeypatch.setattr(policy_value_head, "capture_hidden_states", spy_capture)
    fields = dict(critic_type=critic_type, max_steps=2, per_device_train_batch_size=4, steps_per_generation=2)
    if critic_type == "policy_lora":
        fields["peft_config"] = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
    runs = []
    for through_grpo in (False, True):
        trainer = make_trainer(toy, tmp_path / str(through_grpo), **copy.deepcopy(fields))
        if through_grpo:
            trainer._get_per_token_logps_and_entropies = types.MethodType(
                GRPOTrainer._get_per_token_logps_and_entropies, trainer
            )
        trainer.train()
        assert trainer._policy_head_listener is None and trainer._policy_head_batch is None
        runs.append(trainer)
    assert calls == []
    for a, b in ((runs[0].model, runs[1].model), (runs[0].critic, runs[1].critic)):
        for name, tensor in a.state_dict().items():
            assert torch.equal(tensor, b.state_dict()[name]), name


def test_evaluation_reads_the_values_from_the_eval_forward(toy, tmp_path):
    """`evaluate()`: GRPO's eval loss forward gives the head its values (no pass of their own), with the eval loss and
    critic metrics of the plain path."""
    results = {}
    for fused in (True, False):
        trainer = make_trainer(toy, tmp_path / str(fused), critic_fused_forward=fused, per_device_eval_batch_size=8)
        randomize_head(trainer)
        forwards = BackboneForwards(trainer)
        torch.manual_seed(5)
        metrics = trainer.evaluate(eval_dataset=toy[2].select(range(16)))
        results[fused] = (metrics, forwards.backbone)
    (fused, fused_forwards), (plain, plain_forwards) = results[True], results[False]
    assert fused_forwards == 2 and plain_forwards == 4  # two eval batches: GRPO's loss forward, plus the plain pass
    for key in ("eval_loss", "eval_critic/brier", "eval_critic/value_mean", "eval_advantages/mean"):
        assert fused[key] == pytest.approx(plain[key], rel=1e-4, abs=1e-6), key


def test_the_analyses_read_a_saved_head_on_its_policy_as_the_trainer_does(toy, tmp_path, caplog):
    # `trl-srppo analyze` pointed at a policy-head run (its folder, as training takes it): the head is read on the
    # saved policy's backbone, and gives the values the trainer gives the same rollouts.
    from trl_srppo.analysis import AnalysisConfig, load_analysis_critic
    from trl_srppo.critic import prefix_values

    run = str(tmp_path / "run")
    trainer = make_trainer(toy, run, max_steps=2)
    randomize_head(trainer)  # a head that differs between prefixes (a fresh one is all zero)
    trainer.save_model()
    config = AnalysisConfig(model_name_or_path=run, critic_model_name_or_path=run, output_dir=str(tmp_path / "a"))
    output = generated_batch(trainer)
    input_ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
    attention_mask = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
    width = output["completion_ids"].size(1)
    with torch.no_grad():
        expected = trainer._policy_head_values_pass(output, batch_size=8)  # (B, C), the trainer's plain path
        for policy in (None, trainer.model):  # loaded from the run's folder, or the analysis's own policy
            critic = load_analysis_critic(config, "nsr", policy)
            raw = prefix_values(critic, input_ids, attention_mask, width)  # (B, C)
            mask = output["completion_mask"].bool()
            torch.testing.assert_close(raw[mask], expected[mask], atol=1e-5, rtol=1e-5)
    assert expected[mask].std() > 0.1  # the values differ between prefixes, so a misaligned read would show
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


@pytest.mark.parametrize("setting", ["on_policy", "off_policy", "shared_backbone"])
def test_the_head_learns_the_token_mean_of_its_step_however_the_batch_is_split(toy, tmp_path, setting):
    # One optimizer step on one generated batch of 8 rows, whole or as 2 accumulated micro-batches of 4: completions
    # of different lengths put different numbers of tokens in the micro-batches, so a mean of the micro-batches'
    # means would weigh their tokens differently; the head (and the policy, through the shared term) must not move
    # differently. `steps_per_generation=1` with `num_iterations=2` is off-policy: GRPO's old log-probabilities'
    # forward gives the values.
    fields = dict(max_steps=1, max_completion_length=6, critic_policy_head_mlp_size=4)
    fields.update(
        {"off_policy": dict(num_iterations=2, max_steps=2), "shared_backbone": dict(critic_policy_head_coef=0.5)}.get(
            setting, {}
        )
    )
    runs = {}
    for name, split in {"whole": dict(per_device_train_batch_size=8), "split": dict(
        per_device_train_batch_size=4, gradient_accumulation_steps=2
    )}.items():  # fmt: skip
        trainer = make_trainer(toy, tmp_path / name, **fields, **split)
        randomize_head(trainer)
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
    for name, tensor in whole.critic.state_dict().items():
        torch.testing.assert_close(split.critic.state_dict()[name], tensor, atol=1e-6, rtol=1e-5, msg=f"head {name}")
    for name, tensor in whole.model.state_dict().items():
        torch.testing.assert_close(split.model.state_dict()[name], tensor, atol=1e-6, rtol=1e-5, msg=f"policy {name}")
    whole_loss = [log["critic/loss"] for log in whole.state.log_history if "critic/loss" in log]
    split_loss = [log["critic/loss"] for log in split.state.log_history if "critic/loss" in log]
    assert split_loss == pytest.approx(whole_loss, rel=1e-5)


def test_a_separate_critic_refuses_a_policy_head_folder(toy, tmp_path):
    first = make_trainer(toy, tmp_path / "first", max_steps=1)
    first.train()
    first.save_model()
    for source in (tmp_path / "first", tmp_path / "first" / "critic"):  # the run's folder or its critic/
        with pytest.raises(ValueError, match="critic_type='policy_head'.*critic_model_name_or_path unset"):
            make_trainer(toy, tmp_path / "second", critic_type="separate", critic_model_name_or_path=str(source))

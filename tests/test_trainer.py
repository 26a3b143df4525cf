# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""SRPPOTrainer on the toy chain task: ordering of critic and advantages, edge cases, features, saving and resuming."""

import copy
import json
import os
import re

import pytest
import torch
from conftest import cpu_config
from helpers import checkpoint_push_uploads, small_digit_reward, toy_trainer
from peft import LoraConfig
from safetensors.torch import load_file

from trl_srppo import SRPPOTrainer
from trl_srppo.method.core import critic_values, initial_value, pass_at_k_weight
from trl_srppo.method.critics.model import prefix_values, start_value_head_at
from trl_srppo.method.srppo_trainer import ADVANTAGE_COLUMN
from trl_srppo.rewards import chain_reward


def make_trainer(toy, tmp_path, reward=chain_reward, model_from_path=False, **overrides):
    tokenizer, build_model, _ = toy
    model = None
    if model_from_path:  # TRL builds the KL reference model from the policy's checkpoint
        build_model().save_pretrained(tmp_path / "policy")
        tokenizer.save_pretrained(tmp_path / "policy")
        model = str(tmp_path / "policy")
    return toy_trainer(toy, tmp_path / "out", reward_funcs=reward, model=model, **overrides)


def score_one_batch(trainer, dataset):
    trainer.create_optimizer_and_scheduler(num_training_steps=10)
    trainer.model.train()
    batch = [dataset[i] for i in range(trainer.args.per_device_train_batch_size)]
    return batch, trainer._generate_and_score_completions(batch)


def expected_advantages(critic, output, rewards, head, k):
    """Monte Carlo SR-PPO advantages recomputed from scratch with the given critic."""
    input_ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
    attention_mask = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
    with torch.no_grad():
        values = critic_values(
            prefix_values(critic, input_ids, attention_mask, output["completion_ids"].size(1)), head
        )
    weights = pass_at_k_weight(values[:, 0], k)
    return (rewards.unsqueeze(1) - values) * weights.unsqueeze(1) * output["completion_mask"]


def outcome(trainer, batch, output):
    """The rewards of a scored batch, recomputed with the trainer's one reward function."""
    completions = trainer.processing_class.batch_decode(output["completion_ids"], skip_special_tokens=True)
    return torch.tensor(trainer.reward_funcs[0](completions=completions, answer=[row["answer"] for row in batch]))


def test_advantages_use_critic_values_from_before_its_update(toy, tmp_path):
    trainer = make_trainer(toy, tmp_path, reward=small_digit_reward, per_device_train_batch_size=16)
    critic_before = copy.deepcopy(trainer.critic)
    batch, output = score_one_batch(trainer, toy[2])
    rewards = outcome(trainer, batch, output)
    assert 0 < rewards.sum() < len(rewards), "the batch needs both outcomes for this test to discriminate"
    assert start_value_head_at(critic_before, initial_value(rewards, "sigmoid"))  # the fresh head's start

    before = expected_advantages(critic_before, output, rewards, "sigmoid", trainer.args.pass_at_k)
    after = expected_advantages(trainer.critic, output, rewards, "sigmoid", trainer.args.pass_at_k)
    assert not torch.allclose(before, after, atol=1e-4), "the critic did not learn from the batch"
    assert output["advantages"].shape == output["completion_ids"].shape
    torch.testing.assert_close(output["advantages"], before, atol=1e-5, rtol=1e-5)


def test_num_generations_above_one_keeps_per_rollout_critic_advantages(toy, tmp_path):
    trainer = make_trainer(toy, tmp_path, num_generations=4, per_device_train_batch_size=16)
    critic_before = copy.deepcopy(trainer.critic)
    batch, output = score_one_batch(trainer, toy[2])
    rewards = outcome(trainer, batch, output)
    assert start_value_head_at(critic_before, initial_value(rewards, "sigmoid"))  # the fresh head's start
    before = expected_advantages(critic_before, output, rewards, "sigmoid", trainer.args.pass_at_k)
    torch.testing.assert_close(output["advantages"], before, atol=1e-5, rtol=1e-5)


def test_unscorable_completions_get_no_advantage(toy, tmp_path):
    def odd_answers_only(completions, answer, **kwargs):
        return [None if int(a[-1]) % 2 == 0 else r for a, r in zip(answer, chain_reward(completions, answer))]

    trainer = make_trainer(toy, tmp_path, reward=odd_answers_only, per_device_train_batch_size=16)
    batch, output = score_one_batch(trainer, toy[2])
    even = torch.tensor([int(row["answer"][-1]) % 2 == 0 for row in batch])
    assert even.any() and (~even).any()
    assert torch.all(output["advantages"][even] == 0)
    assert torch.all(output["advantages"][~even].abs().sum(1) > 0)


def test_all_unscorable_batch_leaves_critic_untouched(toy, tmp_path):
    trainer = make_trainer(toy, tmp_path, reward=lambda completions, **kw: [None] * len(completions))
    critic_before = copy.deepcopy(trainer.critic.state_dict())
    _, output = score_one_batch(trainer, toy[2])
    assert torch.all(output["advantages"] == 0)
    for name, tensor in trainer.critic.state_dict().items():
        assert torch.equal(tensor, critic_before[name]), name


def test_truncated_completions_are_masked(toy, tmp_path):
    trainer = make_trainer(
        toy, tmp_path, mask_truncated_completions=True, max_completion_length=1, per_device_train_batch_size=16
    )
    _, output = score_one_batch(trainer, toy[2])
    last = output["completion_ids"][:, -1]
    tokenizer = trainer.processing_class
    truncated = (last != tokenizer.eos_token_id) & (last != tokenizer.pad_token_id)  # TRL's definition
    assert truncated.any()
    assert torch.all(output["advantages"][truncated] == 0)


def test_critic_mask_of_truncated_completions_stops_at_their_real_length(toy, tmp_path):
    # A completion cut short without EOS by something other than the length limit (stop strings, a rollout_func, a
    # context limit): GRPO zeroes its policy mask; the critic learns from its real tokens and no padding.
    trainer = make_trainer(toy, tmp_path, mask_truncated_completions=True, max_completion_length=3)
    generate = trainer._generate
    digit = trainer.processing_class.convert_tokens_to_ids("7")

    def cut_short(prompts):
        prompt_ids, completion_ids, *rest = generate(prompts)
        completion_ids = [list(ids) for ids in completion_ids]
        completion_ids[0] = [digit]  # one token, no EOS: truncated, shorter than max_completion_length
        completion_ids[1] = [digit, digit]
        completion_ids[2] = [digit, digit, digit]
        completion_ids[3] = [digit, trainer.processing_class.eos_token_id]  # finished
        return (prompt_ids, completion_ids, *rest)

    trainer._generate = cut_short
    critic, seen = trainer.critic_backend, {}

    learn = critic.learn

    def spy(batch, mask, *args, **kwargs):  # the critic's turn on the batch, recording its batch and loss mask
        seen["attention_mask"], seen["mask"] = batch.attention_mask[:, -batch.logits_to_keep :], mask
        return learn(batch, mask, *args, **kwargs)

    critic.learn = spy
    _, output = score_one_batch(trainer, toy[2])
    expected = torch.tensor([[1, 0, 0], [1, 1, 0], [1, 1, 1], [1, 1, 0]])
    assert torch.equal(seen["mask"][:4].long(), expected)
    assert torch.equal(seen["attention_mask"][:4].long(), expected)
    assert torch.all(output["advantages"][:3] == 0) and output["advantages"][3, :2].abs().sum() > 0


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "separate_passes"])
def test_critic_grad_norm_is_logged_before_clipping(toy, tmp_path, fused):
    # `critic/grad_norm`: the global norm of the critic's gradients as the step applies them (averaged over
    # processes), before `max_grad_norm` clips them; small here, so that the clipping acts.
    trainer = make_trainer(toy, tmp_path, max_grad_norm=1e-4, critic_fused_forward=fused)
    critic, norms = trainer.critic_backend, {}
    average_gradients = critic.engine.average_gradients

    def before_clipping(params):  # the engine step's last call before it measures and clips the gradients
        average_gradients(params)
        norms["before"] = torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None]).item()

    def at_the_step(optimizer, args, kwargs):
        grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        norms["clipped"] = torch.nn.utils.get_total_norm(grads).item()

    critic.engine.average_gradients = before_clipping
    trainer.create_optimizer_and_scheduler(num_training_steps=10)
    critic.optimizer.register_step_pre_hook(at_the_step)
    trainer.model.train()
    trainer._generate_and_score_completions([toy[2][i] for i in range(trainer.args.per_device_train_batch_size)])
    assert critic.steps == 1
    (logged,) = trainer._metrics["train"]["critic/grad_norm"]
    assert logged == norms["before"] > 1e-3  # exactly the norm the step measured
    assert norms["clipped"] == pytest.approx(1e-4, rel=1e-3)  # and then clipped to max_grad_norm


def test_completions_table_shows_sr_ppo_advantages(toy, tmp_path):
    trainer = make_trainer(toy, tmp_path, per_device_train_batch_size=16)
    _, output = score_one_batch(trainer, toy[2])
    logged = list(trainer._logs["extra"][ADVANTAGE_COLUMN])
    assert logged == output["advantages"][:, 0].tolist() and any(a != 0 for a in logged)
    # GRPO's own column is left as GRPO computed it: a group of one rollout has advantage 0.
    assert list(trainer._logs["advantages"]) == [0.0] * 16


def test_critic_dtype_is_its_own(toy, tmp_path):
    tokenizer, build_model, dataset = toy
    build_model().save_pretrained(tmp_path / "policy")
    tokenizer.save_pretrained(tmp_path / "policy")
    args = cpu_config(tmp_path / "out", model_init_kwargs={"dtype": "bfloat16"}, critic_dtype="float32")
    trainer = SRPPOTrainer(model=str(tmp_path / "policy"), reward_funcs=chain_reward, args=args, train_dataset=dataset)
    assert trainer.model.dtype == torch.bfloat16
    assert all(p.dtype == torch.float32 for p in trainer.critic.parameters())


def test_critic_is_built_outside_zero3_partitioning(toy, tmp_path, monkeypatch):
    from transformers.integrations import deepspeed as hf_deepspeed

    from trl_srppo.method.critics.model import build_critic_model

    class FakeZero3:
        def is_zero3(self):
            return True

    fake = FakeZero3()
    monkeypatch.setattr(hf_deepspeed, "_hf_deepspeed_config_weak_ref", lambda: fake)
    assert hf_deepspeed.is_deepspeed_zero3_enabled()
    tokenizer, build_model, _ = toy
    build_model().save_pretrained(tmp_path / "policy")
    critic = build_critic_model(
        str(tmp_path / "policy"), None, cpu_config(tmp_path / "out")
    )  # DeepSpeed is not installed
    assert all(p.numel() > 0 for p in critic.parameters())
    assert hf_deepspeed.is_deepspeed_zero3_enabled(), "the ZeRO-3 setting must be restored afterwards"


def test_a_critic_built_from_a_causal_lm_folder_leaves_transformers_load_report_as_it_is(toy, tmp_path, caplog):
    # No public transformers API silences its load report, so it is logged as transformers writes it: the causal LM's
    # unused lm_head and the critic's new value head on every such run, and a backbone weight the folder lacks.
    from safetensors.torch import save_file

    from trl_srppo.method.critics.model import build_critic_model

    def reports():
        return [r.getMessage() for r in caplog.records if "LOAD REPORT" in r.getMessage()]

    _, build_model, _ = toy
    build_model().save_pretrained(tmp_path / "policy")
    with caplog.at_level("INFO"):
        build_critic_model(str(tmp_path / "policy"), None, cpu_config(tmp_path / "out"))
    assert len(reports()) == 1 and "lm_head" in reports()[0] and "score" in reports()[0]
    assert "up_proj" not in reports()[0]
    assert any("backbone with a new value head" in r.getMessage() for r in caplog.records)
    weights = load_file(tmp_path / "policy" / "model.safetensors")
    dropped = next(k for k in weights if "layers.0.mlp.up_proj" in k)
    save_file({k: v for k, v in weights.items() if k != dropped}, tmp_path / "policy" / "model.safetensors")
    caplog.clear()
    with caplog.at_level("INFO"):
        build_critic_model(str(tmp_path / "policy"), None, cpu_config(tmp_path / "out"))
    assert len(reports()) == 1 and "up_proj" in reports()[0]


def test_reward_outside_unit_interval_is_a_clear_error(toy, tmp_path):
    trainer = make_trainer(toy, tmp_path, reward=lambda completions, **kw: [2.0] * len(completions))
    with pytest.raises(ValueError, match=r"outside \[0, 1\].*srppo_method='ppo'"):
        score_one_batch(trainer, toy[2])


def test_linear_critic_accepts_unbounded_rewards(toy, tmp_path):
    trainer = make_trainer(
        toy, tmp_path, srppo_method="ppo", reward=lambda completions, **kw: [2.0] * len(completions)
    )
    _, output = score_one_batch(trainer, toy[2])
    assert torch.isfinite(output["advantages"]).all()


FEATURES = {
    "steps_per_generation": dict(steps_per_generation=2, gradient_accumulation_steps=1, max_steps=2),
    "num_iterations": dict(num_iterations=2, max_steps=2),
    "gradient_accumulation": dict(gradient_accumulation_steps=2, per_device_train_batch_size=4, max_steps=2),
    "kl_to_reference": dict(beta=0.1, model_from_path=True),
    "lora_policy": dict(peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])),
    "lora_critic": dict(critic_use_peft=True, critic_lora_r=4),
    "ppo_baseline": dict(srppo_method="ppo", gae_lambda=0.95),
    "td_ablation": dict(srppo_method="td"),
    "value_clipping": dict(critic_cliprange_value=0.2),
    "critic_epochs": dict(critic_epochs=2),
    "gradient_checkpointing": dict(gradient_checkpointing=True),
}


@pytest.mark.parametrize("feature", list(FEATURES))
def test_training_runs_with_feature_and_logs_metrics(toy, tmp_path, feature):
    overrides = dict(FEATURES[feature])
    trainer = make_trainer(toy, tmp_path, reward=small_digit_reward, **overrides)
    critic_before = {k: v.clone() for k, v in trainer.critic.state_dict().items()}
    trainer.train()
    logs = {k for entry in trainer.state.log_history for k in entry}
    error = "critic/brier" if trainer.args.critic_head == "sigmoid" else "critic/squared_error"  # linear: no Brier
    for key in (
        "critic/loss",
        "critic/value_mean",
        error,
        "critic/explained_variance",
        "passk/weight_mean",
        "passk/weight_min",
        "passk/weight_max",
        "advantages/mean",
        "advantages/std",
    ):
        assert key in logs, f"{key} missing from the logs with {feature}"
    changed = [k for k, v in trainer.critic.state_dict().items() if not torch.equal(v, critic_before[k])]
    assert changed, f"the critic did not learn with {feature}"
    if feature == "kl_to_reference":
        assert any("kl" in entry for entry in trainer.state.log_history)


def test_critic_warmup_freezes_the_policy(toy, tmp_path):
    # weight decay would move the policy if the optimizer stepped on zero gradients
    trainer = make_trainer(toy, tmp_path, critic_warmup_steps=2, max_steps=2, weight_decay=0.1)
    policy_before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    critic_before = {k: v.clone() for k, v in trainer.critic.state_dict().items()}
    trainer.train()
    for name, tensor in trainer.model.state_dict().items():
        assert torch.equal(tensor, policy_before[name]), name
    assert not trainer.optimizer.state, "the policy's optimizer took a step during the critic-only warm-up"
    assert any(not torch.equal(v, critic_before[k]) for k, v in trainer.critic.state_dict().items())


def test_policy_learns_after_the_critic_warmup(toy, tmp_path):
    trainer = make_trainer(toy, tmp_path, reward=small_digit_reward, critic_warmup_steps=1, max_steps=2)
    policy_before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    trainer.train()
    assert any(not torch.equal(v, policy_before[k]) for k, v in trainer.model.state_dict().items())


def test_save_model_writes_critic_and_model_card_names_sr_ppo(toy, tmp_path):
    trainer = make_trainer(toy, tmp_path)
    trainer.train()
    trainer.save_model()
    critic_dir = tmp_path / "out" / "critic"
    assert (critic_dir / "model.safetensors").is_file() and (critic_dir / "config.json").is_file()
    saved = load_file(critic_dir / "model.safetensors")
    for name, tensor in trainer.critic.state_dict().items():
        torch.testing.assert_close(saved[name], tensor)
    config = json.loads((critic_dir / "config.json").read_text())
    assert config["architectures"] == ["Qwen3ForTokenClassification"] and len(config["id2label"]) == 1
    trainer.create_model_card()
    card = (tmp_path / "out" / "README.md").read_text()
    assert "SR-PPO" in card and "2606.25451" in card
    assert "- critic: `separate`, `sigmoid` head, `bce_mse` loss, learning rate " in card  # the run's critic


def test_saved_critic_loads_back_as_critic_model(toy, tmp_path):
    trainer = make_trainer(toy, tmp_path)
    trainer.train()
    trainer.save_model()
    tokenizer, build_model, dataset = toy
    again = SRPPOTrainer(
        model=build_model(),
        reward_funcs=chain_reward,
        args=cpu_config(tmp_path / "again"),
        train_dataset=dataset,
        processing_class=tokenizer,
        critic_model=str(tmp_path / "out" / "critic"),
    )
    for name, tensor in trainer.critic.state_dict().items():
        torch.testing.assert_close(again.critic.state_dict()[name], tensor)


@pytest.mark.parametrize("critic_type", ["separate", "policy_head"])
def test_a_run_folder_a_checkpoint_or_a_hub_repo_subfolder_gives_the_run_critic(
    toy, tmp_path, monkeypatch, critic_type
):
    # What users point critic_model_name_or_path at: the run (`output_dir`), one of its checkpoints, or the critic a
    # push uploaded, `org/name/critic` on the Hub (here a Hub cache holding the run's files, offline).
    import shutil

    from helpers import offline_hub_model

    trainer = make_trainer(toy, tmp_path, critic_type=critic_type, save_strategy="steps", save_steps=2)
    trainer.train()
    trainer.save_model()
    run = tmp_path / "out"
    offline_hub_model(
        monkeypatch, tmp_path / "hub", "someone/toy-sr-ppo", lambda f: shutil.copytree(run, f, dirs_exist_ok=True)
    )
    tokenizer, build_model, dataset = toy
    expected = {k: v.clone() for k, v in trainer.critic.state_dict().items()}

    def again(source, **fields):
        return SRPPOTrainer(
            model=build_model(),
            reward_funcs=chain_reward,
            args=cpu_config(tmp_path / "again", critic_model_name_or_path=source, **fields),
            train_dataset=dataset,
            processing_class=tokenizer,
        )

    for source in (
        str(run),
        str(run / "checkpoint-2"),
        "someone/toy-sr-ppo/critic",
        "someone/toy-sr-ppo/checkpoint-2",
    ):
        critic = again(source, critic_type=critic_type).critic
        for name, tensor in expected.items():
            torch.testing.assert_close(critic.state_dict()[name], tensor, msg=f"{source}: {name}")
    # `model_init_kwargs["revision"]` (which the critic's other loads take, as TRL's reward models do) selects the
    # snapshot of `org/name/critic`: here a tag `v1` whose critic has every weight 1 larger.
    from safetensors.torch import load_file, save_file

    critic_v1 = tmp_path / "hub" / "models--someone--toy-sr-ppo" / "snapshots" / ("1" * 40) / "critic"
    shutil.copytree(run / "critic", critic_v1)
    for weights in critic_v1.glob("*.safetensors"):
        save_file({k: v + 1 for k, v in load_file(weights).items()}, weights, metadata={"format": "pt"})
    (tmp_path / "hub" / "models--someone--toy-sr-ppo" / "refs" / "v1").write_text("1" * 40)
    at_v1 = again("someone/toy-sr-ppo/critic", critic_type=critic_type, model_init_kwargs={"revision": "v1"}).critic
    for name, tensor in expected.items():
        torch.testing.assert_close(at_v1.state_dict()[name], tensor + 1, msg=f"v1: {name}")
    # A mistyped path under a local folder is a missing folder, not a Hub id.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="not a folder"):
        again("out/checkpoint-9/critic")
    with pytest.raises(FileNotFoundError, match="no folder 'critics'.*'someone/toy-sr-ppo/critic'"):
        again("someone/toy-sr-ppo/critics")


def test_a_saved_lora_critic_of_an_in_memory_policy_loads_back_on_that_policy(toy, tmp_path):
    # A policy built from a config records no name, so neither does the critic's adapter: its base is rebuilt from
    # the policy the new trainer is given, as the first run built it. Its adapter weights load only from safetensors.
    tokenizer, build_model, dataset = toy
    lora = {"critic_use_peft": True, "critic_lora_r": 4}
    trainer = make_trainer(toy, tmp_path, **lora)
    trainer.train()
    trainer.save_model()
    saved = tmp_path / "out" / "critic"

    def again():
        return SRPPOTrainer(
            model=build_model(),
            reward_funcs=chain_reward,
            args=cpu_config(tmp_path / "again", critic_model_name_or_path=str(saved), **lora),
            train_dataset=dataset,
            processing_class=tokenizer,
        )

    loaded = again()
    for name, tensor in trainer.critic.state_dict().items():
        torch.testing.assert_close(loaded.critic.state_dict()[name], tensor, msg=name)
    adapter = saved / "adapter" / "adapter_model.safetensors"
    torch.save(load_file(adapter), saved / "adapter" / "adapter_model.bin")  # as an older PEFT wrote it
    adapter.unlink()
    with pytest.raises(OSError, match="only PyTorch pickle weights \\(adapter_model.bin\\).*safetensors"):
        again()


def test_push_to_hub_uploads_the_critic_with_the_policy(toy, tmp_path, monkeypatch):
    import transformers.trainer

    uploaded = {}

    class FakeApi:
        def upload_folder(self, folder_path, **kwargs):
            uploaded["files"] = sorted(
                os.path.relpath(os.path.join(root, f), folder_path) for root, _, fs in os.walk(folder_path) for f in fs
            )
            uploaded["repo_id"] = kwargs["repo_id"]

    monkeypatch.setattr(transformers.trainer, "hf_api", lambda: FakeApi())
    trainer = make_trainer(toy, tmp_path)
    trainer.train()
    trainer.hub_model_id = "someone/toy-sr-ppo"
    trainer.push_to_hub()
    assert uploaded["repo_id"] == "someone/toy-sr-ppo"
    assert "critic/model.safetensors" in uploaded["files"] and "model.safetensors" in uploaded["files"]
    assert "SR-PPO" in (tmp_path / "out" / "README.md").read_text()


def test_checkpoint_pushes_upload_the_critic(toy, tmp_path, monkeypatch):
    model_push, checkpoint_push = checkpoint_push_uploads(monkeypatch, make_trainer, toy, tmp_path)
    assert "critic/model.safetensors" in model_push and "critic/config.json" in model_push
    assert "critic/critic_training_state.pt" not in model_push
    assert "critic/critic_training_state.pt" in checkpoint_push


def test_lora_policy_with_lora_critic_resumes_exactly_and_keeps_one_policy_adapter(toy, tmp_path):
    # The Trainer loads every direct subfolder of a checkpoint that holds adapter weights into a PEFT policy; the LoRA
    # critic's adapter must not become a second policy adapter on resume.
    tokenizer, build_model, dataset = toy

    def run(output_dir, max_steps, resume=None):
        args = cpu_config(
            output_dir, max_steps=max_steps, save_strategy="steps", save_steps=2, critic_use_peft=True, critic_lora_r=4
        )
        trainer = SRPPOTrainer(
            model=build_model(),
            reward_funcs=small_digit_reward,
            args=args,
            train_dataset=dataset,
            processing_class=tokenizer,
            peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]),
        )
        trainer.train(resume_from_checkpoint=resume)
        return trainer

    full = run(tmp_path / "full", 4)
    run(tmp_path / "killed", 2)
    checkpoint = tmp_path / "killed" / "checkpoint-2"
    assert (checkpoint / "critic" / "adapter" / "adapter_model.safetensors").is_file()
    resumed = run(tmp_path / "killed", 4, resume=str(checkpoint))
    assert list(resumed.model.peft_config) == ["default"]
    for name, tensor in full.model.state_dict().items():
        torch.testing.assert_close(resumed.model.state_dict()[name], tensor, msg=f"policy {name}")
    for name, tensor in full.critic.state_dict().items():
        torch.testing.assert_close(resumed.critic.state_dict()[name], tensor, msg=f"critic {name}")


def test_resume_without_critic_folder_is_a_clear_error(toy, tmp_path):
    trainer = make_trainer(toy, tmp_path, max_steps=2, save_strategy="steps", save_steps=2)
    trainer.train()
    checkpoint = tmp_path / "out" / "checkpoint-2"
    for f in (checkpoint / "critic").iterdir():
        f.unlink()
    (checkpoint / "critic").rmdir()
    again = make_trainer(toy, tmp_path, max_steps=4, save_strategy="steps", save_steps=2)
    with pytest.raises(FileNotFoundError, match="critic"):
        again.train(resume_from_checkpoint=str(checkpoint))


@pytest.mark.parametrize("critic_use_peft", [False, True], ids=["full", "lora"])
def test_architecture_without_token_classification_gets_a_value_head_critic(toy, tmp_path, critic_use_peft):
    from transformers import AutoModelForTokenClassification, CodeGenConfig, CodeGenForCausalLM

    from trl_srppo.method.critics.model import ValueHeadCritic

    tokenizer, _, dataset = toy
    config = CodeGenConfig(
        vocab_size=len(tokenizer), n_embd=32, n_layer=1, n_head=4, rotary_dim=4, n_positions=64, pad_token_id=0
    )
    with pytest.raises(ValueError, match="Unrecognized configuration class"):  # what makes this test meaningful
        AutoModelForTokenClassification.from_config(config)
    policy = CodeGenForCausalLM(config)
    policy.save_pretrained(tmp_path / "policy")
    tokenizer.save_pretrained(tmp_path / "policy")

    def trainer_for(output_dir, **kwargs):
        return SRPPOTrainer(
            model=str(tmp_path / "policy"),
            reward_funcs=small_digit_reward,
            args=cpu_config(output_dir, max_steps=1, critic_use_peft=critic_use_peft, critic_lora_r=4),
            train_dataset=dataset,
            processing_class=tokenizer,
            **kwargs,
        )

    trainer = trainer_for(tmp_path / "out")
    critic = trainer.accelerator.unwrap_model(trainer.critic)
    base = critic.get_base_model() if critic_use_peft else critic
    assert isinstance(base, ValueHeadCritic)
    if not critic_use_peft:  # the policy's backbone weights
        torch.testing.assert_close(base.model.h[0].mlp.fc_in.weight, policy.transformer.h[0].mlp.fc_in.weight)
    before = {k: v.clone() for k, v in trainer.critic.state_dict().items()}
    trainer.train()
    after = trainer.critic.state_dict()
    assert any(not torch.equal(v, before[k]) for k, v in after.items()), "the critic did not learn"
    trainer.save_model()
    critic_dir = tmp_path / "out" / "critic"
    weights_dir = critic_dir / "adapter" if critic_use_peft else critic_dir
    config_file = "adapter_config.json" if critic_use_peft else "config.json"
    assert (weights_dir / config_file).is_file() and any(f.suffix == ".safetensors" for f in weights_dir.iterdir())
    if not critic_use_peft:
        assert json.loads((critic_dir / "config.json").read_text())["architectures"] == ["ValueHeadCritic"]
    again = trainer_for(tmp_path / "again", critic_model=str(critic_dir))
    for name, tensor in after.items():
        torch.testing.assert_close(again.critic.state_dict()[name], tensor, msg=name)


def test_positional_arguments_follow_grpo_trainer(toy, tmp_path):
    tokenizer, build_model, dataset = toy
    trainer = SRPPOTrainer(build_model(), chain_reward, cpu_config(tmp_path), dataset, None, tokenizer)
    assert trainer.train_dataset is dataset and trainer.processing_class is tokenizer


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_other_architectures_get_a_critic_and_train(toy, tmp_path, family):
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    tokenizer, _, dataset = toy
    common = dict(vocab_size=len(tokenizer), pad_token_id=0, eos_token_id=1, bos_token_id=None)
    if family == "llama":
        config = LlamaConfig(
            hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, **common
        )
        model = LlamaForCausalLM(config)
    else:  # GPT-2's value head is called `classifier`, not `score`
        model = GPT2LMHeadModel(GPT2Config(n_embd=32, n_layer=2, n_head=4, **common))
    trainer = SRPPOTrainer(
        model=model,
        reward_funcs=small_digit_reward,
        args=cpu_config(tmp_path),
        train_dataset=dataset,
        processing_class=tokenizer,
    )
    before = {k: v.clone() for k, v in trainer.critic.state_dict().items()}
    trainer.train()
    assert any(not torch.equal(v, before[k]) for k, v in trainer.critic.state_dict().items())


@pytest.mark.parametrize("critic_type", ["separate", "policy_head"])
def test_the_critic_learning_rate_logged_is_the_one_its_step_used(toy, tmp_path, critic_type):
    # The critic follows the policy's schedule at the same rate (CRITIC_LR_RATIO 1): each step logs the rate that
    # step used, as `learning_rate` does for the policy (through a warm-up, the first is 0).
    schedule = dict(max_steps=4, warmup_steps=2, lr_scheduler_type="linear", logging_steps=1)
    trainer = make_trainer(toy, tmp_path, critic_type=critic_type, **schedule)
    trainer.train()
    logs = [log for log in trainer.state.log_history if "critic/learning_rate" in log]
    assert [log["step"] for log in logs] == [1, 2, 3, 4]
    assert logs[0]["critic/learning_rate"] == 0.0
    for log in logs:
        assert log["critic/learning_rate"] == pytest.approx(log["learning_rate"]), log["step"]


def test_a_resume_with_other_critic_settings_is_refused_before_loading(toy, tmp_path):
    # Relaunching with the recipe alone (a flag of the first launch forgotten) would meet a deep state-dict error, or
    # load the checkpoint's critic as another one.
    fields = dict(max_steps=2, save_strategy="steps", save_steps=2)
    make_trainer(toy, tmp_path, **fields).train()
    checkpoint = str(tmp_path / "out" / "checkpoint-2")
    settings = json.loads((tmp_path / "out" / "checkpoint-2" / "critic" / "srppo_critic.json").read_text())
    assert settings == {
        "srppo_method": "sr-ppo",
        "critic_type": "separate",
        "critic_head": "sigmoid",
        "critic_use_peft": False,
        "policy_peft": False,
    }
    for other, listed in (
        ({"critic_type": "policy_head"}, "critic_type='separate' (this run: 'policy_head')"),
        ({"critic_use_peft": True}, "critic_use_peft=False (this run: True)"),
        ({"srppo_method": "ppo"}, "srppo_method='sr-ppo' (this run: 'ppo')"),
    ):
        again = make_trainer(toy, tmp_path, **{**fields, "max_steps": 4, **other})
        with pytest.raises(ValueError, match=re.escape(listed)):
            again.train(resume_from_checkpoint=checkpoint)
    make_trainer(toy, tmp_path, **{**fields, "max_steps": 3}).train(resume_from_checkpoint=True)  # the same: resumes


def test_answers_the_math_verifier_cannot_read_are_logged_and_warned_once(toy, tmp_path):
    # The toy model writes digits and operators, never \boxed{}: every math reward is 0 for want of a readable answer.
    from trl_srppo.rewards import math_reward

    dataset = toy[2].map(lambda row: {"answer": row["answer"].split()[-1]})  # integer gold: no math-verify worker
    trainer = toy_trainer(toy, tmp_path / "out", reward_funcs=math_reward, dataset=dataset, max_steps=2)
    with pytest.warns(UserWarning, match="Reward function 'math' found no answer") as caught:
        trainer.train()
    named = [w for w in caught if "Reward function 'math' found no answer" in str(w.message)]
    assert len(named) == 1  # once per run, not once per step
    message = str(named[0].message)
    assert "\\boxed{...}" in message and "reward 0" in message and "rewards/math/unreadable" in message
    shares = [entry["rewards/math/unreadable"] for entry in trainer.state.log_history if "rewards/math/mean" in entry]
    assert shares == [1.0, 1.0]


def test_unreadable_share_counts_the_completions_a_reader_finds_nothing_in(toy, tmp_path):
    seen = []

    def first_word_low_digit(completions, **kwargs):
        seen.extend(completions)
        return [0.0] * len(completions)

    first_word_low_digit.extract_answer = lambda text, **columns: (
        text.split()[0] if text.split() and text.split()[0] in "0123" else None
    )
    trainer = make_trainer(
        toy,
        tmp_path,
        reward=[first_word_low_digit, small_digit_reward],
        srppo_outcome="reward_func",
        srppo_outcome_reward_func="small_digit_reward",
    )
    score_one_batch(trainer, toy[2])
    expected = sum(first_word_low_digit.extract_answer(c) is None for c in seen) / len(seen)
    assert 0 < expected < 1, "the batch needs both kinds of completion for this test to discriminate"
    assert trainer._metrics["train"]["rewards/first_word_low_digit/unreadable"] == [pytest.approx(expected)]
    assert "rewards/small_digit_reward/unreadable" not in trainer._metrics["train"]  # no reader, no share


def test_a_lora_critic_starts_from_the_seed_whatever_was_drawn_before(toy, tmp_path):
    # Under DeepSpeed or FSDP the engine's set-up draws random numbers before the critic is built; the critic's LoRA
    # start must not depend on them (tests/test_sharded_policy.py compares such runs with a DDP run).
    from trl_srppo.method.critics.model import build_critic_model

    _, build_model, _ = toy
    policy = build_model()
    args = cpu_config(tmp_path, critic_use_peft=True, critic_lora_r=4, seed=3)
    adapters = []
    for draws in (0, 1000):
        torch.manual_seed(0)
        torch.rand(draws)  # what a set-up may have drawn
        critic = build_critic_model(policy, None, args)
        adapters.append({n: p.detach().clone() for n, p in critic.named_parameters() if "lora_A" in n})
    assert adapters[0] and adapters[0].keys() == adapters[1].keys()
    assert all(torch.equal(adapters[0][n], adapters[1][n]) for n in adapters[0])
    other = build_critic_model(policy, None, cpu_config(tmp_path, critic_use_peft=True, critic_lora_r=4, seed=4))
    assert any(not torch.equal(p, adapters[0][n]) for n, p in other.named_parameters() if "lora_A" in n)

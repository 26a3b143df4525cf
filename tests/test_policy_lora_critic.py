# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`critic_type="policy_lora"`: a second LoRA adapter and a value head on a LoRA policy's base model."""

import json
import re

import pytest
import torch
from conftest import cpu_config
from helpers import (
    adamw_state_bytes,
    checkpoint_push_uploads,
    nbytes,
    script_env,
    small_digit_reward,
    toy_grpo_trainer,
    toy_trainer,
)
from peft import LoraConfig, PeftModel, get_peft_model
from safetensors.torch import load_file

from trl_srppo import SRPPOConfig, SRPPOTrainer
from trl_srppo.method.core import critic_values, srppo_advantages
from trl_srppo.method.critics import CriticBatch
from trl_srppo.method.critics.policy_lora import (
    ADAPTER_SUBFOLDER,
    CRITIC_ADAPTER,
    CRITIC_CONFIG,
    VALUE_HEAD_WEIGHTS,
    PolicyLoraValueModel,
)


def lora():
    return LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])


def make_trainer(toy, output_dir, **overrides):
    return toy_trainer(toy, output_dir, **{"critic_type": "policy_lora", "peft_config": lora(), **overrides})


def randomize_critic(trainer, seed=7):
    # A critic adapter and head that are not zero, so values differ between prefixes and both get gradients.
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in trainer.critic.parameters():
            p.copy_(0.3 * torch.randn(p.shape, generator=generator))


def named(params):
    return {n: p.detach().clone() for n, p in params}


def split_params(trainer):
    """`{name: tensor}` of the policy adapter, the critic adapter and the base weights, cloned."""
    policy, critic, base = {}, {}, {}
    for n, p in trainer.model.named_parameters():
        target = critic if f".{CRITIC_ADAPTER}." in n else policy if "lora_" in n else base
        target[n] = p.detach().clone()
    return policy, critic, base


def reference_values(trainer, output, critic_state):
    """`(B, C)` values of the critic with the weights `critic_state`, through PEFT's own adapter switch and the plain
    causal-LM forward's last hidden states (not the code under test)."""
    critic = trainer.critic
    current = named(critic.named_parameters())
    params = dict(critic.named_parameters())
    input_ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
    attention_mask = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
    position_ids = (attention_mask.long().cumsum(dim=1) - 1).clamp(min=0)
    model = trainer.model
    with torch.no_grad():
        for n, p in params.items():
            p.copy_(critic_state[n])
        model.set_adapter(CRITIC_ADAPTER)
        hidden = model(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, output_hidden_states=True
        ).hidden_states[-1]
        model.set_adapter("default")
        c = output["completion_ids"].size(1)
        raw = hidden[:, -c - 1 : -1] @ critic_state["score.weight"][0] + critic_state["score.bias"][0]  # (B, C)
        for n, p in params.items():
            p.copy_(current[n])
    return critic_values(raw, trainer.args.critic_head)


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "plain"])
def test_values_come_from_the_critic_before_it_learns_the_batch(toy, tmp_path, fused):
    trainer = make_trainer(toy, tmp_path, max_steps=3, critic_fused_forward=fused)
    randomize_critic(trainer)
    args = trainer.args
    calls = []
    generate = trainer._generate_and_score_completions

    def spy(inputs):
        before = named(trainer.critic.named_parameters())  # the critic before this batch
        output = generate(inputs)
        if trainer.model.training:
            calls.append((before, output))
        return output

    trainer._generate_and_score_completions = spy
    trainer.train()

    assert len(calls) == args.max_steps
    for before, output in calls:
        values = reference_values(trainer, output, before)  # the policy has moved since, not its base or critic
        mask = output["completion_mask"].float()
        rewards = torch.tensor(
            small_digit_reward(
                trainer.processing_class.batch_decode(output["completion_ids"], skip_special_tokens=True)
            )
        )
        # The policy adapter moved after the batch, but the critic's values never go through it.
        expected = srppo_advantages(values, rewards, mask, args.pass_at_k, gamma=1.0, lam=args.gae_lambda)
        torch.testing.assert_close(output["advantages"], expected.advantages * mask, atol=1e-5, rtol=1e-5)
    first, last = calls[0][0], calls[-1][0]
    assert any(not torch.equal(first[n], last[n]) for n in first), "the critic learned"


def test_critic_update_moves_only_the_critic(toy, tmp_path):
    trainer = make_trainer(toy, tmp_path)
    randomize_critic(trainer)
    trainer.create_optimizer_and_scheduler(num_training_steps=10)
    trainer.current_gradient_accumulation_steps = 1
    trainer.model.train()
    # The policy's optimizer holds its own adapter, never the critic's; the critic's holds the critic adapter and head.
    policy_ids = {id(p) for g in trainer.optimizer.param_groups for p in g["params"]}
    critic_ids = {id(p) for g in trainer.critic_optimizer.param_groups for p in g["params"]}
    policy, critic, base = split_params(trainer)
    params = dict(trainer.model.named_parameters())
    assert policy_ids == {id(params[n]) for n in policy}
    assert critic_ids == {id(params[n]) for n in critic} | {id(p) for p in trainer.critic.score.parameters()}
    head = named(trainer.critic.score.named_parameters())

    torch.manual_seed(123)
    trainer._generate_and_score_completions([trainer.train_dataset[i] for i in range(8)])  # one critic step

    policy_after, critic_after, base_after = split_params(trainer)
    assert all(torch.equal(policy[n], policy_after[n]) for n in policy), "the critic's step moved the policy"
    assert all(torch.equal(base[n], base_after[n]) for n in base), "the critic's step moved the base weights"
    assert all(params[n].grad is None for n in policy), "the critic's loss left gradients on the policy"
    assert all(not torch.equal(critic[n], critic_after[n]) for n in critic), "every critic LoRA matrix learns"
    assert any(not torch.equal(head[n], p) for n, p in trainer.critic.score.named_parameters())
    # Back to the policy: its adapter active and trainable, the critic's frozen.
    assert trainer.model.active_adapters == ["default"]
    assert all(params[n].requires_grad for n in policy) and not any(params[n].requires_grad for n in critic)


def test_training_moves_both_adapters_and_never_the_base(toy, tmp_path):
    trainer = make_trainer(toy, tmp_path, max_steps=3)
    policy, critic, base = split_params(trainer)
    trainer.train()
    policy_after, critic_after, base_after = split_params(trainer)
    assert any(not torch.equal(policy[n], policy_after[n]) for n in policy), "the policy adapter learned"
    assert any(not torch.equal(critic[n], critic_after[n]) for n in critic), "the critic adapter learned"
    assert all(torch.equal(base[n], base_after[n]) for n in base)
    assert trainer.critic_backend.steps == 3


def state_bytes(weights, optimizers):
    """Persistent training state in bytes, counted from the tensors: every distinct weight (the base counted once), a
    gradient per weight an optimizer updates, and the optimizers' state tensors."""
    weights = {id(p): p for p in weights}.values()
    trained = {id(p): p for opt in optimizers for g in opt.param_groups for p in g["params"]}.values()
    moments = [v for opt in optimizers for s in opt.state.values() for v in s.values() if torch.is_tensor(v)]
    return nbytes(weights) + nbytes(trained) + nbytes(moments)


def test_critic_adds_its_adapter_and_head_and_no_base(toy, tmp_path):
    tokenizer, build_model, dataset = toy
    grpo = toy_grpo_trainer(toy, tmp_path / "g", num_generations=8, max_steps=1, peft_config=lora())
    grpo.train()
    grpo_bytes = state_bytes(grpo.model.parameters(), [grpo.optimizer.optimizer])
    grpo_trained = [p for g in grpo.optimizer.param_groups for p in g["params"]]
    assert grpo_bytes == adamw_state_bytes(grpo.model.parameters(), grpo_trained)

    trainer = make_trainer(toy, tmp_path / "s", max_steps=1)
    trainer.train()
    weights = list(trainer.model.parameters()) + list(trainer.critic.score.parameters())
    srppo_bytes = state_bytes(weights, [trainer.optimizer.optimizer, trainer.critic_optimizer])
    critic = [p for _, p in trainer.critic.adapter_named_parameters()] + list(trainer.critic.score.parameters())
    # Exactly GRPO's state plus the critic adapter's and the head's weights, gradients and AdamW state: no base copy.
    assert srppo_bytes == grpo_bytes + 4 * nbytes(critic) + 4 * len(critic)
    assert sum(p.numel() for p in trainer.critic.score.parameters()) == trainer.model.config.hidden_size + 1

    # A LoRA critic on its own copy of the base (the separate critic) holds a second base: the count can tell.
    separate = make_trainer(toy, tmp_path / "p", max_steps=1, critic_type="separate", critic_use_peft=True)
    separate.train()
    weights = list(separate.model.parameters()) + list(separate.critic.parameters())
    separate_bytes = state_bytes(weights, [separate.optimizer.optimizer, separate.critic_optimizer])
    base = nbytes(p for p in grpo.model.parameters() if not p.requires_grad)
    assert separate_bytes > grpo_bytes + base


def test_a_checkpoint_holds_the_critic_adapter_apart_from_the_policys(toy, tmp_path):
    # Exact resume is the critic contract's (`tests/test_critic_contract.py`); here, the files.
    trainer = make_trainer(toy, tmp_path, max_steps=2, save_strategy="steps", save_steps=2)
    trainer.train()
    checkpoint = tmp_path / "checkpoint-2"
    critic_dir = checkpoint / "critic"
    assert sorted(p.name for p in critic_dir.iterdir()) == sorted(
        [ADAPTER_SUBFOLDER, CRITIC_CONFIG, VALUE_HEAD_WEIGHTS, "critic_training_state.pt", "srppo_critic.json"]
    )
    assert json.loads((critic_dir / CRITIC_CONFIG).read_text())["critic_type"] == "policy_lora"
    # The policy's own adapter files hold the policy adapter alone.
    assert not (checkpoint / CRITIC_ADAPTER).exists()
    assert not any(CRITIC_ADAPTER in k for k in load_file(checkpoint / "adapter_model.safetensors"))
    assert trainer.model.active_adapters == ["default"]


def test_saved_folders_load_with_peft(toy, tmp_path):
    tokenizer, build_model, _ = toy
    trainer = make_trainer(toy, tmp_path, max_steps=2)
    trainer.train()
    trainer.save_model()
    ids = torch.tensor([[5, 6, 7, 8, 9]])

    # The policy folder: the policy adapter alone, as a LoRA GRPO run saves it.
    policy = PeftModel.from_pretrained(build_model(), str(tmp_path))
    assert list(policy.peft_config) == ["default"]
    with torch.no_grad():
        torch.testing.assert_close(policy(ids).logits, trainer.model(ids).logits)

    # The critic's adapter loads on the base model too; the trainer starts again from the `critic/` folder.
    critic_base = PeftModel.from_pretrained(build_model(), str(tmp_path / "critic" / ADAPTER_SUBFOLDER))
    trained = {n.replace(f".{CRITIC_ADAPTER}.", "."): p for n, p in trainer.critic.adapter_named_parameters()}
    loaded = {n.replace(".default.", "."): p for n, p in critic_base.named_parameters() if "lora_" in n}
    assert trained.keys() == loaded.keys() and all(torch.equal(trained[n], loaded[n]) for n in trained)
    toy_grpo_trainer(toy, tmp_path / "grpo", peft_config=lora())
    after_grpo = torch.get_rng_state()
    again = make_trainer(toy, tmp_path / "again", critic_model_name_or_path=str(tmp_path / "critic"))
    assert torch.equal(torch.get_rng_state(), after_grpo)  # loading the critic drew nothing from the policy's stream
    for (n, p), (m, q) in zip(trainer.critic.named_parameters(), again.critic.named_parameters()):
        assert n == m and torch.equal(p, q)


@pytest.mark.parametrize("change", ["drop", "rename", "reshape"])
def test_a_critic_folder_that_does_not_fit_the_policy_is_a_clear_error(toy, tmp_path, change):
    from safetensors.torch import save_file

    trainer = make_trainer(toy, tmp_path, max_steps=1)
    trainer.train()
    trainer.save_model()
    adapter_file = tmp_path / "critic" / ADAPTER_SUBFOLDER / "adapter_model.safetensors"
    adapter = load_file(adapter_file)
    name = sorted(adapter)[0]
    if change == "drop":
        del adapter[name]
    elif change == "rename":
        adapter[name.replace("layers.0", "layers.9")] = adapter.pop(name)
    else:
        adapter[name] = torch.zeros(adapter[name].shape[0] + 1, adapter[name].shape[1])
    save_file(adapter, adapter_file)
    expected = {"drop": f"missing ['{name}']", "rename": "unexpected ['", "reshape": f"other shapes ['{name}']"}
    with pytest.raises(ValueError, match=re.escape(expected[change]) + ".*same base model and critic LoRA settings"):
        make_trainer(toy, tmp_path / "again", critic_model_name_or_path=str(tmp_path / "critic"))


def test_critic_adapter_takes_the_policy_config_unless_set(toy, tmp_path):
    trainer = make_trainer(toy, tmp_path)
    config = trainer.model.peft_config[CRITIC_ADAPTER]
    assert (config.r, config.lora_alpha, set(config.target_modules)) == (4, 8, {"q_proj", "v_proj"})
    trainer = make_trainer(toy, tmp_path, critic_lora_r=2, critic_lora_target_modules=["k_proj"])
    config = trainer.model.peft_config[CRITIC_ADAPTER]
    assert (config.r, config.lora_alpha, set(config.target_modules)) == (2, 8, {"k_proj"})
    assert isinstance(trainer.critic, PolicyLoraValueModel)


def test_policy_without_lora_is_a_clear_error(toy, tmp_path):
    with pytest.raises(ValueError, match=r"peft_config=LoraConfig.*on the command line, --use_peft true"):
        make_trainer(toy, tmp_path, peft_config=None)


def test_a_peft_model_policy_works(toy, tmp_path):
    tokenizer, build_model, dataset = toy
    policy = get_peft_model(build_model(), lora())
    trainer = SRPPOTrainer(
        model=policy,
        reward_funcs=small_digit_reward,
        args=cpu_config(tmp_path, critic_type="policy_lora", max_steps=2, beta=0.04),
        train_dataset=dataset,
        processing_class=tokenizer,
    )
    # GRPO adds a frozen "ref" copy of the policy adapter for the KL term: three adapters on one base.
    assert set(trainer.model.peft_config) == {"default", "ref", CRITIC_ADAPTER}
    policy, critic, base = split_params(trainer)
    trainer.train()
    assert trainer.critic_backend.steps == 2
    policy_after, critic_after, base_after = split_params(trainer)
    moved = {n for n in policy if not torch.equal(policy[n], policy_after[n])}
    assert moved and all(".default." in n for n in moved)  # the reference adapter stays as it was
    assert any(not torch.equal(critic[n], critic_after[n]) for n in critic)
    assert all(torch.equal(base[n], base_after[n]) for n in base)
    assert trainer.model.active_adapters == ["default"]


@pytest.mark.parametrize(
    "fields, match",
    [
        (dict(critic_use_peft=True), "critic_use_peft"),
        (dict(critic_lora_dropout=0.1), "critic_lora_dropout"),
        (dict(critic_parallelism="replicate"), "critic_parallelism"),
    ],
)
def test_bad_policy_lora_settings_are_clear_errors(tmp_path, fields, match):
    with pytest.raises(ValueError, match=match):
        SRPPOConfig(output_dir=str(tmp_path), report_to=[], use_cpu=True, critic_type="policy_lora", **fields)


def test_two_processes_keep_the_critic_identical(tmp_path):
    """`accelerate launch --num_processes 2` on CPU: the critic adapter, frozen when DDP wraps the policy, has its
    gradients averaged by hand, so both processes hold the same adapter and head after training."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).parent / "scripts" / "ddp_train.py"
    accelerate = Path(sys.executable).parent / "accelerate"
    command = [str(accelerate), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1"]
    command += ["--mixed_precision", "no", "--dynamo_backend", "no", str(script), str(tmp_path), "policy_lora"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=script_env())
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    assert (tmp_path / "critic_wrapper.txt").read_text() == "PolicyLoraValueModel"
    rank0 = load_file(tmp_path / "critic_rank0.safetensors")
    rank1 = load_file(tmp_path / "critic_rank1.safetensors")
    initial = load_file(tmp_path / "critic_initial.safetensors")
    assert any(CRITIC_ADAPTER in name for name in rank0)
    for name in rank0:
        assert torch.equal(rank0[name], rank1[name]), f"critic weight {name} differs between processes"
    assert all(not torch.equal(rank0[n], initial[n]) for n in rank0 if "lora_" in n), "the critic adapter learned"
    assert (tmp_path / "critic" / VALUE_HEAD_WEIGHTS).is_file()


def test_gradient_checkpointing_recomputes_with_the_critic_adapter(toy, tmp_path):
    """With gradient checkpointing the critic's backward recomputes its forward: the critic adapter must still be the
    active one then, so both runs end with the same critic (and policy)."""
    runs = []
    for checkpointing in (False, True):
        trainer = make_trainer(toy, tmp_path / str(checkpointing), max_steps=2, gradient_checkpointing=checkpointing)
        randomize_critic(trainer)
        trainer.train()
        runs.append(named(trainer.model.named_parameters()) | named(trainer.critic.score.named_parameters()))
    plain, checkpointed = runs
    assert plain.keys() == checkpointed.keys()
    for name in plain:
        torch.testing.assert_close(checkpointed[name], plain[name], msg=name)


def test_checkpoint_pushes_upload_the_critic_adapter_and_head(toy, tmp_path, monkeypatch):
    model_push, _ = checkpoint_push_uploads(monkeypatch, make_trainer, toy, tmp_path)
    adapter = ("adapter/adapter_model.safetensors", "adapter/adapter_config.json")
    for name in (*adapter, VALUE_HEAD_WEIGHTS, CRITIC_CONFIG):
        assert f"critic/{name}" in model_push, name
    assert "critic/critic_training_state.pt" not in model_push
    assert "adapter_model.safetensors" in model_push and not any(f.startswith(CRITIC_ADAPTER) for f in model_push)


def test_evaluation_reads_the_critic_without_training_it(toy, tmp_path):
    tokenizer, build_model, dataset = toy
    trainer = SRPPOTrainer(
        model=build_model(),
        reward_funcs=small_digit_reward,
        args=cpu_config(tmp_path, critic_type="policy_lora", per_device_eval_batch_size=8),
        train_dataset=dataset,
        eval_dataset=dataset.select(range(8)),
        processing_class=tokenizer,
        peft_config=lora(),
    )
    randomize_critic(trainer)
    before = named(trainer.model.named_parameters()) | named(trainer.critic.score.named_parameters())
    metrics = trainer.evaluate()
    assert "eval_critic/value_mean" in metrics and metrics["eval_critic/value_mean"] != 0.5  # the critic's values
    after = named(trainer.model.named_parameters()) | named(trainer.critic.score.named_parameters())
    assert all(torch.equal(before[n], after[n]) for n in before)
    assert trainer.model.active_adapters == ["default"]


@pytest.mark.parametrize("critic_use_peft", [False, True])
def test_a_separate_critic_refuses_a_policy_lora_critic_folder(toy, tmp_path, critic_use_peft):
    # The folder's adapter alone would load onto a fresh value head that never trains: a run whose critic stays put.
    first = make_trainer(toy, tmp_path / "first", max_steps=1)
    first.train()
    first.save_model()
    for source in (tmp_path / "first", tmp_path / "first" / "critic"):  # the run's folder or its critic/
        with pytest.raises(ValueError, match="critic_type='policy_lora'.*critic_model_name_or_path unset"):
            make_trainer(
                toy,
                tmp_path / "second",
                critic_type="separate",
                critic_use_peft=critic_use_peft,
                critic_model_name_or_path=str(source),
            )


def test_the_analyses_read_a_saved_critic_on_its_lora_policy_as_the_trainer_does(toy, tmp_path, caplog):
    # `trl-srppo analyze` pointed at a policy_lora run (its folder, as training takes it): the critic adapter and head
    # sit on that run's LoRA policy, unmerged, and give the values the trainer gives the same prefixes.
    from trl_srppo.analysis import AnalysisConfig, load_analysis_critic
    from trl_srppo.method.critics.model import prefix_values

    base = tmp_path / "base"  # the policy's base model from a folder, as a user's from the Hub
    toy[1]().save_pretrained(base)
    toy[0].save_pretrained(base)
    run = str(tmp_path / "run")
    trainer = make_trainer(toy, run, max_steps=1, model=str(base))
    trainer.train()
    randomize_critic(trainer)  # an adapter and head whose values differ between prefixes
    trainer.save_model()
    ids = torch.tensor(
        [
            toy[0](text, add_special_tokens=False)["input_ids"]
            for text in ("7 max 5 min 3 = 7 3", "2 min 9 max 4 = 2 4")
        ]
    )
    mask = torch.ones_like(ids)
    with torch.no_grad():
        expected = torch.logit(trainer.critic_backend.values(CriticBatch(ids, mask, 3, 8), 0))  # (B, 3), raw
        config = AnalysisConfig(model_name_or_path=run, critic_model_name_or_path=run, output_dir=str(tmp_path / "a"))
        critic = load_analysis_critic(config, "nsr")
        torch.testing.assert_close(prefix_values(critic, ids, mask, 3), expected, atol=1e-4, rtol=1e-4)
    assert expected.std() > 0.1  # values differ between prefixes, so a misread adapter or head would show
    assert "was trained on the policy saved beside it" not in caplog.text
    # The analysed policy must be a LoRA policy for the adapter to sit on.
    trainer.model.merge_and_unload().save_pretrained(tmp_path / "merged")
    trainer.processing_class.save_pretrained(tmp_path / "merged")
    merged = AnalysisConfig(
        model_name_or_path=str(tmp_path / "merged"), critic_model_name_or_path=run, output_dir=str(tmp_path / "a")
    )
    with pytest.raises(ValueError, match="has no LoRA adapter; point it at that run's folder"):
        load_analysis_critic(merged, "nsr")


def test_values_are_read_without_the_policys_dropout_and_leave_its_mode(toy, tmp_path):
    # The critic adapter runs on the policy's backbone: in eval mode (the values for the advantages) it must read
    # them as a separate critic does, without dropout, although the policy trains with dropout on.

    trainer = make_trainer(toy, tmp_path, disable_dropout=False)
    randomize_critic(trainer)
    assert not trainer.critic_backend.dropout_active()
    layers = trainer.model.base_model.model.model.layers
    for layer in layers:
        layer.self_attn.attention_dropout = 0.5  # Qwen3 applies it functionally in train mode
    assert trainer.critic_backend.dropout_active()  # so the fused critic step is not taken
    tokenizer = toy[0]
    ids = torch.tensor([tokenizer("7 max 5 min 3 = 7 3", add_special_tokens=False)["input_ids"]] * 4)
    mask = torch.ones_like(ids)
    trainer.model.train()
    first, second = (
        trainer.critic_backend.values(CriticBatch(ids, mask, 3, 8), 0) for _ in range(2)
    )  # eval-mode reads
    torch.testing.assert_close(first, second, rtol=0, atol=0)
    assert all(module.training for module in trainer.model.modules()), "the policy's mode was not put back"
    for layer in layers:
        layer.self_attn.attention_dropout = 0.0
    torch.testing.assert_close(
        first, trainer.critic_backend.values(CriticBatch(ids, mask, 3, 8), 0)
    )  # the values without dropout
    for layer in layers:
        layer.self_attn.attention_dropout = 0.5
    critic = trainer.accelerator.unwrap_model(trainer.critic)
    critic.train()  # the critic's update: dropout acts, so the reads above were not equal by chance
    with torch.no_grad():
        a, b = (critic(input_ids=ids, attention_mask=mask).logits for _ in range(2))
    assert not torch.equal(a, b)

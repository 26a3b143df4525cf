# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Policy-gradient replicas on the toy model, and every `trl-srppo analyze` command end to end."""

import json
import math
import os
import sys

import pytest
import torch

from trl_srppo.analysis import (
    critic_rollout_values,
    cross_bin_effects,
    generate_rollouts,
    measure_nsr,
    rollout_advantages,
    score_rollouts,
    surrogate_gradients,
)
from trl_srppo.analysis.cli import main
from trl_srppo.analysis.report import decode_special_floats

# A reward of the toy chains whose difficulty depends on the prompt: the first word must be a digit no larger than the
# chain's last digit (easy for "... 9 =", hard for "... 0 ="). On the 6 prompts below the random toy model passes 6,
# 4, 4, 2, 5 and 0 of 8 rollouts, so the rollouts fill every bin.
REWARD_MODULE = """
def no_larger_digit_reward(prompts, completions, **kwargs):
    return [
        1.0 if c.split() and c.split()[0].isdigit() and int(c.split()[0]) <= int(p.split()[-2]) else 0.0
        for p, c in zip(prompts, completions)
    ]
"""
REWARD = "analysis_test_reward.no_larger_digit_reward"


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """The toy model is far too small for intra-op threads; they only add overhead on a shared CPU."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """A toy policy with its tokenizer, a critic with a non-constant head, a prompt file and the test reward."""
    from trl_srppo.method.critics.model import critic_from_policy
    from trl_srppo.tasks.toy import build_model, build_tokenizer, make_dataset

    root = tmp_path_factory.mktemp("analysis")
    tokenizer = build_tokenizer()
    policy = build_model(tokenizer, seed=0)
    policy.save_pretrained(root / "policy")
    tokenizer.save_pretrained(root / "policy")
    critic = critic_from_policy(policy)
    torch.manual_seed(1)
    with torch.no_grad():
        critic.score.weight.normal_(std=0.5)  # values differ between prompts, so the Pass@k weight matters
    critic.save_pretrained(root / "critic")
    with open(root / "data.jsonl", "w") as f:
        for row in make_dataset(6, seed=1):
            f.write(json.dumps(row) + "\n")
    (root / "analysis_test_reward.py").write_text(REWARD_MODULE)
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(root))
        yield root
    sys.modules.pop("analysis_test_reward", None)


@pytest.fixture(scope="module")
def rollouts(checkpoints):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trl_srppo.method.critics.model import load_critic
    from trl_srppo.rewards import get_reward_func

    tokenizer = AutoTokenizer.from_pretrained(checkpoints / "policy")
    model = AutoModelForCausalLM.from_pretrained(checkpoints / "policy")
    data = [json.loads(line) for line in (checkpoints / "data.jsonl").read_text().splitlines()]
    out = generate_rollouts(
        model,
        tokenizer,
        [r["prompt"] for r in data],
        8,
        1.0,
        3,
        seed=0,
        columns={"answer": [r["answer"] for r in data]},
    )
    score_rollouts(out, get_reward_func(REWARD))
    critic_rollout_values(load_critic(str(checkpoints / "critic")), out)
    return model, out


def test_rollout_layout(rollouts):
    _, out = rollouts
    assert out.prompt_ids.shape[0] == out.completion_ids.shape[0] == 48
    assert out.prompt_index.tolist() == [p for p in range(6) for _ in range(8)]
    assert out.values.shape == out.completion_ids.shape
    assert ((out.rewards == 0) | (out.rewards == 1)).all()
    lengths = out.completion_mask.sum(dim=1)
    assert (out.completion_mask[:, : int(lengths.min())] == 1).all()  # right padding
    assert set(out.prompt_bins()) == {"easy", "medium", "hard"}  # the seeded rollouts fill every bin


def test_rollout_prompts_are_rendered_like_evaluation(checkpoints):
    """The prompts are those `trl-srppo eval` and the training callback give the model: system prompt, chat template
    and its variables, for plain strings and for the conversations that training builds."""
    from transformers import AutoTokenizer

    from trl_srppo.analysis import load_policy
    from trl_srppo.analysis.config import RolloutAnalysisConfig
    from trl_srppo.evaluation.prompts import render_prompt

    config = RolloutAnalysisConfig(model_name_or_path=str(checkpoints / "policy"), output_dir=str(checkpoints))
    model, tokenizer = load_policy(config)
    prompts = ["1 2 3", [{"role": "user", "content": "4 5 6"}]]
    out = generate_rollouts(model, tokenizer, prompts, 2, 1.0, 2, system_prompt="Add them.")
    reference = AutoTokenizer.from_pretrained(checkpoints / "policy")
    for p, prompt in enumerate(prompts):
        text = render_prompt(reference, prompt, "Add them.")
        assert "Add them." in text and text != render_prompt(reference, prompt)
        expected = reference(text, add_special_tokens=False)["input_ids"]
        for row in (2 * p, 2 * p + 1):
            assert out.prompt_ids[row][out.prompt_mask[row].bool()].tolist() == expected
    plain = generate_rollouts(model, tokenizer, prompts[:1], 1, 1.0, 2, use_chat_template=False)
    assert plain.prompt_ids[0][plain.prompt_mask[0].bool()].tolist() == reference("1 2 3")["input_ids"]


@pytest.mark.filterwarnings("ignore:.*is_gradient_checkpointing.*:FutureWarning")  # raised inside peft
def test_load_policy_reads_a_training_folder_with_a_lora_adapter(checkpoints, tmp_path):
    """The analyses load what `trl-srppo eval` loads: here a training output folder whose latest checkpoint is a LoRA
    adapter (merged on load)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from trl_srppo.analysis import BinsConfig, load_policy

    base = AutoModelForCausalLM.from_pretrained(checkpoints / "policy")
    peft_model = get_peft_model(base, LoraConfig(r=2, target_modules=["q_proj"], init_lora_weights=False))
    peft_model.save_pretrained(tmp_path / "run" / "checkpoint-4")
    config = BinsConfig(model_name_or_path=str(tmp_path / "run"), output_dir=str(tmp_path / "out"))
    model, tokenizer = load_policy(config)
    ids = torch.tensor([[5, 6, 7]])
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, peft_model.eval()(ids).logits, atol=1e-5)
        plain = AutoModelForCausalLM.from_pretrained(checkpoints / "policy")
        assert not torch.allclose(model(ids).logits, plain(ids).logits, atol=1e-5)
    assert tokenizer.pad_token is not None
    # The gradient analyses (nsr, cross-bin, safe-region) differentiate every weight of the merged policy.
    from trl_srppo.analysis.policy import trainable_parameters

    assert len(trainable_parameters(model)) == len(list(model.parameters()))


def test_surrogate_gradient_is_linear_in_rows_and_scaled_by_the_prompt_weight(rollouts):
    model, out = rollouts
    weighted = rollout_advantages(out, 4)
    unweighted = rollout_advantages(out, 1).advantages
    sets = [weighted.advantages, unweighted]
    (g0w, g0u), (g1w, _), (pair_w, _) = (
        surrogate_gradients(model, out, [0], sets),
        surrogate_gradients(model, out, [9], sets),
        surrogate_gradients(model, out, [0, 9], sets, batch_size=1),
    )
    assert torch.allclose(pair_w, (g0w + g1w) / 2, atol=1e-6)
    q0 = out.values[0, 0]
    assert torch.allclose(weighted.weights[0], 4 * (1 - q0) ** 3)
    assert torch.allclose(g0w, weighted.weights[0] * g0u, atol=1e-6)


def test_completion_logprobs_use_the_sampling_temperature(rollouts):
    from trl_srppo.analysis import completion_logprobs

    model, out = rollouts
    ids, mask, width = out.input_ids[:2], out.attention_mask[:2], out.completion_ids.shape[1]
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask).logits[:, -width - 1 : -1] / 2.0
        expected = torch.log_softmax(logits, -1).gather(-1, ids[:, -width:, None])[..., 0]
        assert torch.allclose(completion_logprobs(model, ids, mask, width, temperature=2.0), expected, atol=1e-6)


def test_measure_nsr_matches_stored_replicas(rollouts):
    model, out = rollouts
    results = measure_nsr(model, out, pass_at_k=4)
    n = out.num_rollouts
    # per prompt, the Pass@k weight is one constant factor: the NSR does not change
    for row in results["per_prompt"]:
        if math.isfinite(row["unweighted"]["nsr"]):
            assert row["weighted"]["nsr"] == pytest.approx(row["unweighted"]["nsr"], rel=1e-4)
    # batch replica r: the gradient of the batch of rollout r of every prompt, recomputed here and stored
    sets = [rollout_advantages(out, 4).advantages]
    replicas = torch.stack(
        [surrogate_gradients(model, out, [p * n + r for p in range(out.num_prompts)], sets)[0] for r in range(n)]
    ).double()
    mean = replicas.mean(dim=0)
    noise = float(((replicas - mean) ** 2).sum()) / (n - 1)
    signal = float(mean @ mean) - noise / n
    assert results["batch"]["weighted"]["noise"] == pytest.approx(noise, rel=1e-4)
    assert results["batch"]["weighted"]["signal"] == pytest.approx(signal, rel=1e-4, abs=1e-9)
    assert sum(results["per_bin"][b]["weighted"]["prompts"]["num_prompts"] for b in ("easy", "medium", "hard")) == 6
    # across prompts the weight differs (the critic's qhat(s_0) does), so the batch NSR changes
    assert results["batch"]["weighted"]["nsr"] != pytest.approx(results["batch"]["unweighted"]["nsr"], rel=1e-3)


def test_cross_bin_restores_the_weights(rollouts):
    model, out = rollouts
    before = [p.detach().clone() for p in model.parameters()]
    results = cross_bin_effects(model, out, pass_at_k=4, learning_rate=1e-2)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    for name in ("weighted", "unweighted"):
        for i, b in enumerate(results["bins"]):
            if results["bin_sizes"][b]:
                assert results[name]["cosine"][i][i] == pytest.approx(1.0)
            else:
                assert all(math.isnan(v) for v in results[name]["logprob_change"][i])


def _common(root, out):
    return [
        "--model_name_or_path", str(root / "policy"), "--critic_model_name_or_path", str(root / "critic"),
        "--dataset_name", str(root / "data.jsonl"), "--reward_funcs", REWARD, "--num_generations", "8",
        "--max_completion_length", "3", "--output_dir", str(out),
    ]  # fmt: skip


def _read(out, analysis, figure):
    """The layout of `trl-srppo eval`: run_config.json, summary.json, results.md and the figure."""
    for name in ("run_config.json", "summary.json", "results.md", f"{figure}.png"):
        assert os.path.getsize(out / name) > 0, name
    assert (out / f"{figure}.png").read_bytes()[:4] == b"\x89PNG"
    assert "| --- |" in (out / "results.md").read_text()
    assert json.loads((out / "run_config.json").read_text())["analysis"] == analysis
    return decode_special_floats(json.loads((out / "summary.json").read_text()))


def test_cli_bins(checkpoints, tmp_path):
    assert main(["bins", *_common(checkpoints, tmp_path)]) == 0
    results = _read(tmp_path, "bins", "bins")
    assert sum(results["bin_counts"].values()) == 6 and results["num_unbinned"] == 0  # every rollout is scorable
    assert all(row["num_scorable"] == 8 for row in results["per_prompt"])
    for name in ("weighted", "unweighted"):
        assert sum(results["update_weight_share"][name]["prompt_weight"].values()) == pytest.approx(1.0)
    for row in results["per_prompt"]:
        assert 0 <= row["num_correct"] <= 8


def test_cli_yaml_config_flag_overrides_and_unknown_keys(checkpoints, tmp_path, capsys):
    """Options are parsed like `train` and `eval`: a YAML file, flags that win over it, unknown keys refused by name,
    and a missing setting named with its field."""
    recipe = tmp_path / "bins.yaml"
    recipe.write_text(
        f"model_name_or_path: {checkpoints / 'policy'}\ncritic_model_name_or_path: {checkpoints / 'critic'}\n"
        f"dataset_name: {checkpoints / 'data.jsonl'}\nreward_funcs: [{REWARD}]\nnum_generations: 2\n"
        "max_completion_length: 3\nmax_prompts: 2\n"
    )
    out = tmp_path / "out"
    assert main(["bins", "--config", str(recipe), "--num_generations", "4", "--output_dir", str(out)]) == 0
    stored = json.loads((out / "run_config.json").read_text())["config"]
    assert stored["num_generations"] == 4 and stored["max_prompts"] == 2  # the flag won, the file filled the rest
    assert _read(out, "bins", "bins")["num_rollouts"] == 4
    capsys.readouterr()
    recipe.write_text(recipe.read_text() + "num_rollouts: 4\n")
    with pytest.raises(SystemExit):
        main(["bins", "--config", str(recipe), "--output_dir", str(out)])
    assert "Unknown arguments from config file: ['--num_rollouts', '4']" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["bins", *_common(checkpoints, tmp_path), "--policy", "x"])
    assert "--policy" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["nsr", "--model_name_or_path", str(checkpoints / "policy"), "--output_dir", str(out)])
    assert "critic_model_name_or_path" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["nsr", "--output_dir", str(out)])
    assert "model_name_or_path required" in capsys.readouterr().err
    assert main(["nsr-typo"]) == 2


def test_cli_nsr_with_sketch(checkpoints, tmp_path):
    assert main(["nsr", *_common(checkpoints, tmp_path), "--sketch_dim", "256"]) == 0
    results = _read(tmp_path, "nsr", "nsr")
    assert len(results["per_prompt"]) == 6
    assert results["sketch_dim"] == 256
    assert set(results["batch"]) == {"weighted", "unweighted"}


def test_cli_cross_bin(checkpoints, tmp_path):
    assert main(["cross-bin", *_common(checkpoints, tmp_path), "--learning_rate", "0.01"]) == 0
    results = _read(tmp_path, "cross-bin", "cross_bin")
    assert len(results["weighted"]["logprob_change"]) == 3
    assert all(len(row) == 3 for row in results["unweighted"]["cosine"])


def test_cli_critic_export_then_quality(checkpoints, tmp_path):
    assert main(["critic-export", *_common(checkpoints, tmp_path)]) == 0
    exported = _read(tmp_path, "critic-export", "critic_export")
    assert exported["num_solutions"] == 48
    path = tmp_path / "critic_labelling.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert {r["prompt_id"] for r in records} == set(range(6))
    assert all(r["chat_template_applied"] is True for r in records)  # the toy tokenizer has a chat template
    for i, record in enumerate(records):  # stand-in judge: alternate labels; leave one prompt one-class
        for sentence in record["sentences"]:
            sentence["sentence_correct"] = record["prompt_id"] == 0 or i % 2 == 0
            sentence["state_correct"] = bool(record["reward"])
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    out = tmp_path / "quality"
    argv = ["critic-quality", "--model_name_or_path", str(checkpoints / "policy")]
    argv += ["--critic_model_name_or_path", str(checkpoints / "critic")]
    assert main([*argv, "--labelled", str(path), "--output_dir", str(out)]) == 0
    results = _read(out, "critic-quality", "critic_quality")
    within = results["sentence_correct"]["within_prompt"]
    assert within["num_excluded"] >= 1  # prompt 0 is all positive
    assert within["num_kept"] + within["num_excluded"] == 6
    assert 0 <= results["sentence_correct"]["pooled_auc"] <= 1
    assert sum(results["by_bin"]["token_value"][b]["num_prompts"] for b in ("easy", "medium", "hard")) == 6


def test_cli_safe_region_per_bin_and_checkpoint(checkpoints, tmp_path):
    argv = [*_common(checkpoints, tmp_path), "--learning_rate", "1e-2", "--rank", "4"]
    assert main(["safe-region", *argv]) == 0
    results = _read(tmp_path, "safe-region", "safe_region")
    assert 0.7 - 1e-9 <= results["safe_region_share"] <= 1.0  # at least the 70% outside the principal mask
    for update in results["updates"].values():
        assert update["num_changed"] == 0 or 0 <= update["fraction"] <= 1

    from transformers import AutoModelForCausalLM

    trained = AutoModelForCausalLM.from_pretrained(checkpoints / "policy")
    with torch.no_grad():
        trained.model.layers[0].mlp.up_proj.weight[0, 0] += 1.0
    trained.save_pretrained(tmp_path / "trained")
    out = tmp_path / "ckpt"
    argv = ["safe-region", "--model_name_or_path", str(checkpoints / "policy")]
    argv += ["--updated_model_name_or_path", str(tmp_path / "trained")]
    assert main([*argv, "--output_dir", str(out)]) == 0
    results = _read(out, "safe-region", "safe_region")
    assert results["updates"]["checkpoint"]["num_changed"] == 1


def test_the_critic_of_a_run_folder_is_its_critic_subfolder(checkpoints, tmp_path):
    # As training takes `critic_model_name_or_path`: a run's folder (or checkpoint) means its `critic/`, not a fresh
    # value head on the run's policy (which would give every state 0.5).
    import shutil

    from trl_srppo.analysis import AnalysisConfig, load_analysis_critic
    from trl_srppo.method.critics.model import load_critic

    run = tmp_path / "run"
    shutil.copytree(checkpoints / "policy", run)
    shutil.copytree(checkpoints / "critic", run / "critic")
    config = AnalysisConfig(model_name_or_path=str(run), critic_model_name_or_path=str(run), output_dir=str(tmp_path))
    critic = load_analysis_critic(config, "nsr")
    expected = load_critic(str(checkpoints / "critic"))
    assert expected.score.weight.abs().sum() > 0
    for name, tensor in expected.state_dict().items():
        torch.testing.assert_close(critic.state_dict()[name], tensor, msg=name)


def test_task_reads_the_training_file_as_training_does(tmp_path, capsys):
    # `--task chain` on the file `trl-srppo train --task chain` trains on (fields `chain`, `answer`): the prompts are
    # the task's, as chat messages, and its verifier is the default reward, so the rollouts are those of the same
    # prompts written out by hand with `--reward_funcs chain`.
    from trl_srppo.method.critics.model import critic_from_policy
    from trl_srppo.tasks.toy import save_toy

    model_dir, data_file = save_toy(str(tmp_path / "toy"), num_prompts=8)
    from transformers import AutoModelForCausalLM

    critic_from_policy(AutoModelForCausalLM.from_pretrained(model_dir)).save_pretrained(tmp_path / "critic")
    rows = [json.loads(line) for line in open(data_file)]
    by_hand = tmp_path / "prompts.jsonl"
    by_hand.write_text(
        "".join(
            json.dumps({"prompt": [{"role": "user", "content": r["chain"]}], "answer": r["answer"]}) + "\n"
            for r in rows
        )
    )
    common = ["--model_name_or_path", model_dir, "--critic_model_name_or_path", str(tmp_path / "critic")]
    common += ["--num_generations", "4", "--max_completion_length", "4", "--max_prompts", "5"]
    assert (
        main(["bins", *common, "--dataset_name", data_file, "--task", "chain", "--output_dir", str(tmp_path / "a")])
        == 0
    )
    argv = ["--dataset_name", str(by_hand), "--reward_funcs", "chain", "--output_dir", str(tmp_path / "b")]
    assert main(["bins", *common, *argv]) == 0
    with_task, written = _read(tmp_path / "a", "bins", "bins"), _read(tmp_path / "b", "bins", "bins")
    assert len(with_task["per_prompt"]) == 5
    assert with_task["per_prompt"] == written["per_prompt"]
    assert json.loads((tmp_path / "a" / "run_config.json").read_text())["config"]["reward_funcs"] == ["chain"]
    # Without a task, a file in a task's fields has no prompts, and a column map needs the task.
    with pytest.raises(ValueError, match="has no 'prompt' column"):
        main(["bins", *common, "--dataset_name", data_file, "--reward_funcs", "chain", "--output_dir", str(tmp_path)])
    capsys.readouterr()
    with pytest.raises(SystemExit):
        argv = ["--dataset_name", data_file, "--dataset_column_map", '{"chain": "x"}', "--output_dir", str(tmp_path)]
        main(["bins", *common, *argv])
    assert "dataset_column_map maps a task's fields to dataset columns: set task too" in capsys.readouterr().err
    # With the task, the map names the columns of a file whose fields have other names.
    renamed = tmp_path / "renamed.jsonl"
    renamed.write_text("".join(json.dumps({"steps": r["chain"], "answer": r["answer"]}) + "\n" for r in rows))
    argv = ["--dataset_name", str(renamed), "--task", "chain", "--dataset_column_map", '{"chain": "steps"}']
    assert main(["bins", *common, *argv, "--output_dir", str(tmp_path / "c")]) == 0
    assert _read(tmp_path / "c", "bins", "bins")["per_prompt"] == with_task["per_prompt"]


def test_a_folder_without_a_saved_critic_is_refused(checkpoints, tmp_path):
    # A GRPO run's folder, or a plain model, would get a fresh value head: the same value for every prefix, and
    # analyses that measured nothing.
    import shutil

    from trl_srppo.analysis import AnalysisConfig, load_analysis_critic

    shutil.copytree(checkpoints / "policy", tmp_path / "grpo_run")  # a run folder without `critic/`
    for source in (checkpoints / "policy", tmp_path / "grpo_run"):
        config = AnalysisConfig(
            model_name_or_path=str(checkpoints / "policy"), critic_model_name_or_path=str(source), output_dir="o"
        )
        with pytest.raises(ValueError, match="holds no critic saved by SRPPOTrainer"):
            load_analysis_critic(config, "nsr")


def test_the_critic_head_defaults_to_the_one_its_run_trained(toy, tmp_path):
    # A PPO run's critic is linear: read as a sigmoid, its values and every advantage would be wrong.
    from helpers import toy_trainer

    from trl_srppo.analysis import AnalysisConfig, load_analysis_critic

    run = tmp_path / "ppo"
    trainer = toy_trainer(toy, run, srppo_method="ppo", max_steps=1)
    trainer.train()
    trainer.save_model()
    assert json.loads((run / "critic" / "srppo_critic.json").read_text())["critic_head"] == "linear"
    for given, expected in ((None, "linear"), ("sigmoid", "sigmoid")):  # an explicit head wins
        config = AnalysisConfig(
            model_name_or_path=str(run), critic_model_name_or_path=str(run), output_dir="o", critic_head=given
        )
        load_analysis_critic(config, "nsr")
        assert config.critic_head == expected


def test_a_stopped_runs_folder_reads_its_newest_complete_checkpoints_critic(checkpoints, tmp_path):
    # A run killed before its final save (and while saving its last checkpoint): the analyses take the policy and
    # the critic of the same checkpoint, the newest complete one.
    import shutil

    from trl_srppo.method.critics.model import resolve_critic_source
    from trl_srppo.runtime.checkpoints import mark_checkpoint_complete

    run = tmp_path / "run"
    for step in (2, 4):
        shutil.copytree(checkpoints / "policy", run / f"checkpoint-{step}")
        shutil.copytree(checkpoints / "critic", run / f"checkpoint-{step}" / "critic")
    mark_checkpoint_complete(str(run / "checkpoint-2"), 2)  # checkpoint-4 was cut short
    assert resolve_critic_source(str(run)) == str(run / "checkpoint-2" / "critic")

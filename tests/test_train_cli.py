# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`trl-srppo train`: every recipe parses, unknown keys fail, and the CPU recipe trains as a user runs it."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from trl import GRPOConfig

from trl_srppo import SRPPOConfig
from trl_srppo.train import parse_args

ROOT = Path(__file__).resolve().parents[1]
RECIPES = sorted(p for p in (ROOT / "recipes").rglob("*.yaml") if "accelerate" not in p.parts)
ACCELERATE_CONFIGS = sorted((ROOT / "recipes" / "accelerate").glob("*.yaml"))
BIN = Path(sys.executable).parent
CPU = ["--bf16", "false", "--use_cpu", "true"]  # GPU recipes parsed on this CPU machine


def run(command, tmp_path, timeout=600):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return result


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_recipe_builds_its_config(recipe):
    script_args, training_args, model_args = parse_args(["--config", str(recipe), *CPU])
    expected = GRPOConfig if script_args.trainer == "grpo" else SRPPOConfig
    assert type(training_args) is expected
    assert model_args.model_name_or_path
    with open(recipe) as f:
        keys = yaml.safe_load(f)
    for key in ("learning_rate", "max_steps", "per_device_train_batch_size"):
        assert getattr(training_args, key) == keys[key], key


def test_paper_recipes_follow_the_paper_setup():
    folder = ROOT / "recipes" / "qwen3-1.7b" / "deepscaler"
    names = {p.stem for p in folder.glob("*.yaml")}
    assert {"srppo_onpolicy", "srppo_offpolicy", "ppo", "grpo", "td_ablation", "srppo_pass1"} <= names
    configs = {name: parse_args(["--config", str(folder / f"{name}.yaml"), *CPU]) for name in names}
    for args, model in ((args, model) for _, args, model in configs.values()):
        assert model.model_name_or_path == "Qwen/Qwen3-1.7B"
        assert args.chat_template_kwargs == {"enable_thinking": True}
        assert args.use_vllm and args.vllm_mode == "colocate" and args.gradient_checkpointing
        assert args.push_to_hub and args.hub_model_id and args.hub_strategy == "checkpoint"
        assert args.max_completion_length == 9182
    assert configs["grpo"][1].num_generations == 4
    assert (
        configs["srppo_onpolicy"][1].steps_per_generation == configs["srppo_onpolicy"][1].gradient_accumulation_steps
    )
    off = configs["srppo_offpolicy"][1]
    assert off.steps_per_generation == 4 * off.gradient_accumulation_steps  # four updates per generated batch
    assert configs["td_ablation"][1].gae_lambda == 0.0 and configs["srppo_pass1"][1].pass_at_k == 1
    assert (configs["ppo"][1].critic_head, configs["ppo"][1].critic_loss_type) == ("linear", "mse")


@pytest.mark.parametrize("config", ACCELERATE_CONFIGS, ids=lambda p: p.name)
def test_every_accelerate_config_loads(config):
    from accelerate.commands.config.config_args import load_config_from_file

    loaded = load_config_from_file(str(config))
    assert loaded.num_processes >= 1


def test_unknown_recipe_key_is_an_error_that_names_it(tmp_path):
    recipe = tmp_path / "typo.yaml"
    recipe.write_text("task: toy\nmodel_name_or_path: toy\nuse_cpu: true\nbf16: false\nleraning_rate: 0.1\n")
    with pytest.raises(ValueError, match="leraning_rate"):
        parse_args(["--config", str(recipe)])


def test_command_line_overrides_the_recipe_and_rejects_unknown_flags():
    recipe = str(ROOT / "recipes" / "cpu" / "srppo_toy.yaml")
    _, args, _ = parse_args(["--config", recipe, "--learning_rate", "0.5", "--pass_at_k", "2"])
    assert args.learning_rate == 0.5 and args.pass_at_k == 2
    with pytest.raises(ValueError, match="--no_such_flag"):
        parse_args(["--config", recipe, "--no_such_flag", "1"])


def test_help_lists_commands_and_fields():
    top = run([str(BIN / "trl-srppo"), "--help"], ROOT).stdout
    assert all(command in top for command in ("train", "eval", "analyze"))
    train_help = run([str(BIN / "trl-srppo"), "train", "--help"], ROOT).stdout
    for flag in ("--config", "--task", "--pass_at_k", "--critic_learning_rate", "--model_name_or_path"):
        assert flag in train_help, flag


def test_cpu_recipe_trains_from_the_command_line_and_resumes(tmp_path):
    out = tmp_path / "run"
    recipe = str(ROOT / "recipes" / "cpu" / "srppo_toy.yaml")
    base = [str(BIN / "trl-srppo"), "train", "--config", recipe, "--output_dir", str(out), "--save_steps", "2"]
    run([*base, "--max_steps", "2"], tmp_path)
    assert (out / "checkpoint-2" / "critic" / "critic_training_state.pt").is_file()
    card = (out / "README.md").read_text()
    assert "SR-PPO" in card and "2606.25451" in card  # the method and the paper
    assert "trl-srppo train --config " in card and "srppo_toy.yaml" in card and "task: toy" in card  # the recipe
    assert (out / "recipe.yaml").is_file()

    # A second launch with more steps picks up from the last checkpoint instead of starting again: a fresh start
    # would write checkpoint-2 anew.
    first = (out / "checkpoint-2" / "model.safetensors").stat().st_mtime_ns
    run([*base, "--max_steps", "4", "--resume_from_checkpoint", "true"], tmp_path)
    assert (out / "checkpoint-4" / "critic" / "critic_training_state.pt").is_file()
    assert (out / "checkpoint-2" / "model.safetensors").stat().st_mtime_ns == first


def test_same_command_trains_the_grpo_baseline(tmp_path):
    recipe = tmp_path / "grpo_toy.yaml"
    recipe.write_text(
        "trainer: grpo\ntask: toy\nmodel_name_or_path: toy\nmax_train_samples: 64\nnum_generations: 2\n"
        "per_device_train_batch_size: 8\nmax_completion_length: 2\nmax_steps: 2\nuse_cpu: true\nbf16: false\n"
        "gradient_checkpointing: false\nreport_to: none\nsave_strategy: 'no'\n"
        f"output_dir: {tmp_path / 'grpo'}\n"
    )
    run([str(BIN / "trl-srppo"), "train", "--config", str(recipe)], tmp_path)
    assert (tmp_path / "grpo" / "model.safetensors").is_file()
    assert not (tmp_path / "grpo" / "critic").exists()


def test_accelerate_launch_two_processes_on_the_cpu_recipe(tmp_path):
    command = [
        str(BIN / "accelerate"),
        "launch",
        "--config_file",
        str(ROOT / "recipes" / "accelerate" / "cpu_2proc.yaml"),
        "-m",
        "trl_srppo.train",
        "--config",
        str(ROOT / "recipes" / "cpu" / "srppo_toy.yaml"),
        "--output_dir",
        str(tmp_path / "ddp"),
        "--max_steps",
        "3",
        "--save_strategy",
        "no",
    ]
    result = run(command, tmp_path)
    assert "[rank1]" in result.stderr or "rank1" in result.stdout + result.stderr or (tmp_path / "ddp").is_dir()
    assert (tmp_path / "ddp" / "critic" / "model.safetensors").is_file()

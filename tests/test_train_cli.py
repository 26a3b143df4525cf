# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`trl-srppo train`: every recipe parses and trains on the real loading path (a model folder and a local data file,
as a Hub id and dataset would load), unknown keys fail, and the CPU recipe trains and resumes as a user runs it."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from helpers import config_launch
from safetensors.torch import load_file
from test_evaluation_helpers import FIXTURES, save_tiny_model
from trl import GRPOConfig

from trl_srppo import SRPPOConfig
from trl_srppo.runtime.config import GRPORuntimeConfig
from trl_srppo.tasks.toy import save_toy
from trl_srppo.train import main, parse_args

ROOT = Path(__file__).resolve().parents[1]
RECIPES = sorted(p for p in (ROOT / "recipes").rglob("*.yaml") if "accelerate" not in p.parts)
ACCELERATE_CONFIGS = sorted((ROOT / "recipes" / "accelerate").glob("*.yaml"))
BIN = Path(sys.executable).parent
CPU = ["--bf16", "false", "--use_cpu", "true"]  # GPU recipes parsed on this CPU machine
# What a CPU needs on top of a recipe: no vLLM, no bf16, short completions, two steps, nothing pushed.
CPU_TRAIN = [
    *CPU,
    *("--use_vllm", "false", "--dtype", "float32", "--max_steps", "2", "--max_completion_length", "12"),
    *("--push_to_hub", "false", "--gradient_checkpointing", "false", "--max_train_samples", "64"),
]  # 64 rows: one generated batch of the largest recipe (4 prompts x 16 steps per generation)
# A local data file for each registered task that has recipes (tests/fixtures, or the chain task's toy file).
TASK_DATA = {
    "math": "math_train.jsonl",
    "countdown": "countdown_test.jsonl",
    "knights_knaves": "knights_knaves_test.jsonl",
    "arithmetic": "arithmetic_train.jsonl",
}


@pytest.fixture(scope="module")
def toy_files(tmp_path_factory):
    """The toy family's model folder and chain data file, written as the CPU recipe's instructions say."""
    return save_toy(str(tmp_path_factory.mktemp("toy")), num_prompts=64)


@pytest.fixture(scope="module")
def chat_model_dir(tmp_path_factory):
    """A tiny Qwen3 with a byte-level tokenizer and a chat template, saved to a folder: a stand-in for a Hub model."""
    return str(save_tiny_model(tmp_path_factory.mktemp("chat-model")))


def model_and_data(task, toy_files, chat_model_dir):
    if task == "chain":
        return toy_files
    assert task in TASK_DATA, f"no local data file for task {task!r}: add one to TASK_DATA"
    return chat_model_dir, str(FIXTURES / TASK_DATA[task])


def run(command, cwd, timeout=600):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return result


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_recipe_builds_its_config(recipe, recwarn):
    script_args, training_args, model_args = parse_args(["--config", str(recipe), *CPU])
    deprecated = [str(w.message) for w in recwarn if "checkpointing` is deprecated" in str(w.message)]
    assert not deprecated, deprecated  # the recipes' own keys, GRPO's included, give no deprecation warning
    expected = GRPORuntimeConfig if script_args.trainer == "grpo" else SRPPOConfig
    assert type(training_args) is expected and isinstance(training_args, GRPOConfig)
    assert model_args.model_name_or_path
    with open(recipe) as f:
        keys = yaml.safe_load(f)
    for key in ("learning_rate", "max_steps", "per_device_train_batch_size"):
        assert getattr(training_args, key) == keys[key], key


def test_paper_recipes_follow_the_paper_setup():
    folder = ROOT / "recipes" / "qwen3-1.7b" / "deepscaler"
    names = {p.stem for p in folder.glob("*.yaml")}
    assert {"srppo_onpolicy", "srppo_offpolicy", "ppo", "ppo_offpolicy", "grpo", "td_ablation", "srppo_pass1"} <= names
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
    # The paper's critic, written out whatever the package's default: a model of its own beside the policy.
    assert all(configs[name][1].critic_type == "separate" for name in names - {"grpo"})
    # Off-policy PPO: the PPO recipe on the off-policy SR-PPO recipe's schedule (the paper's off-policy comparison).
    ppo, ppo_off = (yaml.safe_load((folder / f"{name}.yaml").read_text()) for name in ("ppo", "ppo_offpolicy"))
    assert {k for k in ppo if ppo[k] != ppo_off[k]} == {"steps_per_generation", "output_dir", "hub_model_id"}
    ppo_off = configs["ppo_offpolicy"][1]
    assert (ppo_off.steps_per_generation, ppo_off.gradient_accumulation_steps) == (
        off.steps_per_generation,
        off.gradient_accumulation_steps,
    )


@pytest.mark.parametrize("config", ACCELERATE_CONFIGS, ids=lambda p: p.name)
def test_every_accelerate_config_loads(config):
    from accelerate.commands.config.config_args import load_config_from_file

    loaded = load_config_from_file(str(config))
    assert loaded.num_processes >= 1


def test_unknown_recipe_key_is_an_error_that_names_it(tmp_path):
    recipe = tmp_path / "typo.yaml"
    recipe.write_text("task: chain\nmodel_name_or_path: m\ndataset_name: d.jsonl\nuse_cpu: true\nleraning_rate: 0.1\n")
    with pytest.raises(ValueError, match="leraning_rate"):
        parse_args(["--config", str(recipe)])


@pytest.mark.parametrize(("trainer", "value", "least"), [("grpo", "0", 2), ("grpo", "1", 2), ("srppo", "0", 1)])
def test_too_few_rollouts_is_an_error_that_names_the_field(tmp_path, trainer, value, least):
    recipe = str(ROOT / "recipes" / "cpu" / "srppo_toy.yaml")
    with pytest.raises(ValueError, match=f"num_generations must be >= {least} for trainer: {trainer}"):
        parse_args(["--config", recipe, "--trainer", trainer, "--num_generations", value])
    (tmp_path / "r.yaml").write_text(open(recipe).read().replace("num_generations: 1", f"num_generations: {value}"))
    with pytest.raises(ValueError, match="num_generations must be"):
        parse_args(["--config", str(tmp_path / "r.yaml"), "--trainer", trainer])


def test_an_srppo_recipe_switched_to_grpo_names_the_settings_to_drop(tmp_path):
    recipe = str(ROOT / "recipes" / "cpu" / "srppo_toy.yaml")
    argv = ["--config", recipe, "--trainer", "grpo", "--num_generations", "4"]
    with pytest.raises(ValueError, match="sets critic_learning_rate, pass_at_k, srppo_method. Remove them") as error:
        parse_args(argv)
    assert "Unknown arguments" not in str(error.value)
    # Without them in the recipe, a setting of SR-PPO's on the command line is named the same way.
    lines = [
        line
        for line in open(recipe)
        if line.split(":")[0] not in ("srppo_method", "pass_at_k", "critic_learning_rate")
    ]
    (tmp_path / "r.yaml").write_text("".join(lines))
    with pytest.raises(ValueError, match="sets critic_type. Remove"):
        parse_args(
            [
                "--config",
                str(tmp_path / "r.yaml"),
                "--trainer",
                "grpo",
                "--num_generations",
                "4",
                "--critic_type=separate",
            ]
        )
    script_args, training_args, _ = parse_args(
        ["--config", str(tmp_path / "r.yaml"), "--trainer", "grpo", "--num_generations", "4", "--reward_timeout", "30"]
    )
    assert script_args.trainer == "grpo" and type(training_args) is GRPORuntimeConfig
    assert training_args.reward_timeout == 30  # the runtime's settings are GRPO's too"


def test_command_line_overrides_the_recipe_and_rejects_unknown_flags():
    recipe = str(ROOT / "recipes" / "cpu" / "srppo_toy.yaml")
    _, args, _ = parse_args(["--config", recipe, "--learning_rate", "0.5", "--pass_at_k", "2"])
    assert args.learning_rate == 0.5 and args.pass_at_k == 2
    with pytest.raises(ValueError, match="--no_such_flag"):
        parse_args(["--config", recipe, "--no_such_flag", "1"])


@pytest.mark.parametrize(
    "flag,value,message",
    [
        ("--critic_loss_type", "foo", "critic_loss_type must be 'bce_mse', 'bce' or 'mse', got 'foo'."),
        ("--srppo_method", "grpo", "srppo_method must be 'sr-ppo', 'sr-ppo-pass1', 'ppo' or 'td', got 'grpo'."),
        ("--critic_zero_stage", "0", "critic_zero_stage must be 1, 2 or 3, got 0. Stage 0 partitions nothing"),
    ],
)
def test_a_bad_choice_on_the_command_line_is_the_registry_s_message(flag, value, message):
    recipe = str(ROOT / "recipes" / "cpu" / "srppo_toy.yaml")
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        parse_args(["--config", recipe, flag, value])


def test_help_lists_commands_and_fields():
    top = run([str(BIN / "trl-srppo"), "--help"], ROOT).stdout
    assert all(command in top for command in ("train", "eval", "analyze"))
    train_help = run([str(BIN / "trl-srppo"), "train", "--help"], ROOT).stdout
    for flag in ("--config", "--task", "--pass_at_k", "--critic_learning_rate", "--model_name_or_path"):
        assert flag in train_help, flag


@pytest.mark.slow
@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_recipe_trains_on_a_model_folder_and_a_local_file(recipe, tmp_path, toy_files, chat_model_dir):
    with open(recipe) as f:
        keys = yaml.safe_load(f)
    task = keys.get("task", "math")
    model_dir, data_file = model_and_data(task, toy_files, chat_model_dir)
    out = tmp_path / "run"
    overrides = ["--model_name_or_path", model_dir, "--dataset_name", data_file, "--output_dir", str(out)]
    assert (
        main(["--config", str(recipe), *CPU_TRAIN, *overrides, "--save_strategy", "steps", "--save_steps", "2"]) == 0
    )

    state = json.loads((out / "checkpoint-2" / "trainer_state.json").read_text())
    assert state["global_step"] == 2
    trained = load_file(out / "model.safetensors")
    initial = load_file(Path(model_dir) / "model.safetensors")
    assert trained.keys() == initial.keys()
    script_args, args, _ = parse_args(["--config", str(recipe), *CPU])
    assert (out / "critic").exists() == (script_args.trainer == "srppo")
    if script_args.trainer == "srppo" and args.critic_head == "sigmoid":
        # The untrained model fails every prompt, so only the sigmoid critic's advantages (0 - 0.5) are non-zero: a
        # linear critic starts at the outcome 0, and so does GRPO's group baseline.
        assert any(not torch.equal(trained[k], initial[k]) for k in trained), "the policy did not move"
        assert (out / "critic" / "model.safetensors").is_file()


def test_trust_remote_code_is_off_by_default_and_reaches_policy_and_critic(tmp_path, chat_model_dir, monkeypatch):
    from trl_srppo.method.critics import model as critic
    from trl_srppo.train import build_model

    recipe = str(ROOT / "recipes" / "qwen3-1.7b" / "deepscaler" / "srppo_onpolicy.yaml")
    base = ["--config", recipe, *CPU, "--model_name_or_path", chat_model_dir, "--output_dir", str(tmp_path)]
    original = critic.load_critic
    for flags, expected in (([], False), (["--trust_remote_code", "true"], True)):
        _, training_args, model_args = parse_args([*base, *flags])
        policy = build_model(model_args, training_args)
        # GRPOTrainer loads the policy with `model_init_kwargs`.
        assert training_args.model_init_kwargs["trust_remote_code"] is expected
        seen = []

        def recording_load(name, kwargs, seen=seen, **rest):
            seen.append(kwargs)
            return original(name, kwargs, **rest)

        monkeypatch.setattr(critic, "load_critic", recording_load)
        critic.build_critic_model(policy, None, training_args)  # as SRPPOTrainer builds its critic
        assert seen and seen[0]["trust_remote_code"] is expected


def test_a_relative_model_folder_is_loaded_by_its_absolute_path(tmp_path, chat_model_dir, monkeypatch):
    # A LoRA adapter records the path its base model was loaded from; a relative one would make the run's folder
    # unreadable (`trl-srppo eval`) from anywhere but where the training ran.
    import shutil

    from trl_srppo.evaluation.models import resolve_model
    from trl_srppo.train import build_model

    shutil.copytree(chat_model_dir, tmp_path / "models" / "base")
    monkeypatch.chdir(tmp_path)
    recipe = str(ROOT / "recipes" / "qwen3-1.7b" / "deepscaler" / "srppo_onpolicy.yaml")
    _, training_args, model_args = parse_args(
        ["--config", recipe, *CPU, "--model_name_or_path", "models/base", "--output_dir", "out"]
    )
    assert build_model(model_args, training_args) == str(tmp_path / "models" / "base")
    # An adapter written elsewhere with a relative base path: an error that says what to do, not a Hub lookup.
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "./gone/base"}))
    with pytest.raises(FileNotFoundError, match="names its base model by the relative path './gone/base'"):
        resolve_model(str(tmp_path / "run"))


def test_a_missing_model_folder_is_an_error_that_names_it(tmp_path, toy_files):
    recipe = str(ROOT / "recipes" / "cpu" / "srppo_toy.yaml")
    argv = ["--config", recipe, "--dataset_name", toy_files[1], "--output_dir", str(tmp_path)]
    with pytest.raises(FileNotFoundError, match="no/such/folder.*python -m trl_srppo.tasks.toy"):
        main([*argv, "--model_name_or_path", "./no/such/folder"])


TOY_RECIPE = str(ROOT / "recipes" / "cpu" / "srppo_toy.yaml")


@pytest.mark.parametrize(
    "argv",
    [
        ["--config", TOY_RECIPE, "--trainer"],
        ["--config", TOY_RECIPE, "--trainer", "--max_steps", "2"],
        ["--max_steps", "2", "--config"],
        ["--config="],
    ],
    ids=["trainer-last", "trainer-then-flag", "config-last", "config-equals-empty"],
)
def test_a_flag_without_its_value_is_an_error_that_names_it(argv):
    flag = "--trainer" if "--trainer" in argv else "--config"
    with pytest.raises(ValueError, match=f"{flag} is given without a value; write `{flag} <"):
        parse_args(argv)


def test_config_with_an_equals_sign_reads_the_recipe():
    def fields(argv):
        script_args, training_args, model_args = parse_args(argv)
        return script_args, training_args.max_steps, training_args.critic_learning_rate, model_args.model_name_or_path

    equals = fields([f"--config={TOY_RECIPE}", "--max_steps", "3"])
    assert equals == fields(["--config", TOY_RECIPE, "--max_steps", "3"])
    assert equals[0].task == "chain" and equals[1] == 3


@pytest.mark.parametrize("value", ["0", "-5"])
def test_max_train_samples_below_one_is_an_error_that_names_it(value):
    with pytest.raises(ValueError, match=f"max_train_samples must be >= 1 .*got {value}; leave it unset"):
        parse_args(["--config", TOY_RECIPE, "--max_train_samples", value])


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("chain=question", "got 'chain=question', which is not JSON (Expecting value)"),
        ('["question"]', "must map task fields to dataset column names, got ['question']"),
        ('{"chain": 3}', "must map task fields to dataset column names, got {'chain': 3}"),
    ],
)
def test_a_column_map_that_is_not_a_json_object_shows_the_expected_form(value, problem):
    expected = re.escape('Write it as --dataset_column_map \'{"problem": "question"}\'')
    with pytest.raises(ValueError, match=f"^dataset_column_map .*{re.escape(problem)}.*{expected}"):
        parse_args(["--config", TOY_RECIPE, "--dataset_column_map", value])


def test_policy_weights_load_only_from_safetensors(tmp_path, toy_files, monkeypatch):
    from helpers import offline_hub_model, save_pickle_only_model

    from trl_srppo.tasks.toy import build_model, build_tokenizer

    tokenizer = build_tokenizer()
    local = save_pickle_only_model(tmp_path / "pickled", build_model(tokenizer), tokenizer)
    offline_hub_model(
        monkeypatch,
        tmp_path / "hub",
        "someone/toy-pickled",
        lambda folder: save_pickle_only_model(folder, build_model(tokenizer), tokenizer),
    )
    grpo_recipe = tmp_path / "grpo_toy.yaml"
    grpo_recipe.write_text(
        "trainer: grpo\ntask: chain\nnum_generations: 2\nper_device_train_batch_size: 8\nmax_completion_length: 3\n"
        "use_cpu: true\nbf16: false\ngradient_checkpointing: false\nreport_to: none\n"
    )
    argv = ["--dataset_name", toy_files[1], "--output_dir", str(tmp_path / "out"), "--max_steps", "1"]
    argv += ["--save_strategy", "no"]
    fix = r"loads weights only from safetensors files.*environment you trust.*save_pretrained\(folder\)"
    for recipe in (TOY_RECIPE, str(grpo_recipe)):
        # A local folder is refused before the trainer is built.
        with pytest.raises(OSError, match=rf"pickled has only PyTorch pickle weights \(pytorch_model\.bin\).*{fix}"):
            main(["--config", recipe, *argv, "--model_name_or_path", local])
        # A Hub model: SR-PPO's critic, loaded first, and GRPO's policy give the same error (not transformers' advice
        # to drop use_safetensors).
        with pytest.raises(OSError, match=rf"someone/toy-pickled has no safetensors weights.*{fix}"):
            main(["--config", recipe, *argv, "--model_name_or_path", "someone/toy-pickled"])
    unsafe = ["--model_name_or_path", toy_files[0], "--model_init_kwargs", '{"use_safetensors": false}']
    with pytest.raises(ValueError, match=r"sets use_safetensors=False, but trl-srppo loads weights only from safe"):
        main(["--config", TOY_RECIPE, *argv, *unsafe])


@pytest.mark.parametrize("resume", ["False", "none"])
def test_a_hub_model_trains_and_resume_false_starts_afresh(tmp_path, toy_files, monkeypatch, resume):
    from helpers import offline_hub_model

    from trl_srppo.tasks.toy import build_model, build_tokenizer

    tokenizer = build_tokenizer()

    def save(folder):  # a Hub model with safetensors weights, as transformers writes them
        build_model(tokenizer).save_pretrained(folder)
        tokenizer.save_pretrained(folder)

    offline_hub_model(monkeypatch, tmp_path / "hub", "someone/toy", save)
    out = tmp_path / "run"
    argv = [f"--config={TOY_RECIPE}", "--model_name_or_path", "someone/toy", "--dataset_name", toy_files[1]]
    argv += ["--output_dir", str(out), "--max_steps", "1", "--save_strategy", "no", "--resume_from_checkpoint", resume]
    assert main(argv) == 0  # not "Can't find a valid checkpoint at False"
    assert (out / "model.safetensors").is_file() and (out / "critic" / "model.safetensors").is_file()
    assert "srppo_toy.yaml" in (out / "recipe.yaml").read_text().splitlines()[0]


def test_cpu_recipe_trains_from_the_command_line_and_resumes(tmp_path):
    # Exactly as the recipe's header says: write the toy files, then train with the recipe's own relative paths.
    run([sys.executable, "-m", "trl_srppo.tasks.toy", "outputs/toy", "--num_prompts", "64"], tmp_path)
    out = tmp_path / "run"
    recipe = str(ROOT / "recipes" / "cpu" / "srppo_toy.yaml")
    base = [str(BIN / "trl-srppo"), "train", "--config", recipe, "--output_dir", str(out), "--save_steps", "2"]
    run([*base, "--max_steps", "2"], tmp_path)
    assert (out / "checkpoint-2" / "critic" / "critic_training_state.pt").is_file()
    card = (out / "README.md").read_text()
    assert "SR-PPO" in card and "2606.25451" in card  # the method and the paper
    assert "trl-srppo train --config " in card and "srppo_toy.yaml" in card and "task: chain" in card  # the recipe
    assert (out / "recipe.yaml").is_file()

    # A second launch with more steps picks up from the last checkpoint instead of starting again: a fresh start
    # would write checkpoint-2 anew.
    first = (out / "checkpoint-2" / "model.safetensors").stat().st_mtime_ns
    run([*base, "--max_steps", "4", "--resume_from_checkpoint", "true"], tmp_path)
    assert (out / "checkpoint-4" / "critic" / "critic_training_state.pt").is_file()
    assert (out / "checkpoint-2" / "model.safetensors").stat().st_mtime_ns == first


def test_recipe_file_and_model_card_give_the_settings_the_run_used(tmp_path, toy_files):
    from trl_srppo.train import settings_used

    model_dir, data_file = toy_files
    argv = ["--config", TOY_RECIPE, "--model_name_or_path", model_dir, "--dataset_name", data_file]
    argv += ["--learning_rate=0.25", "--output_dir", str(tmp_path / "run"), "--save_strategy", "no"]
    text = settings_used(argv, parse_args(argv), os.path.abspath(model_dir))
    assert text.splitlines()[0].startswith(f"# trl-srppo train --config {TOY_RECIPE} --model_name_or_path")
    used = yaml.safe_load(text)
    recipe = yaml.safe_load(Path(TOY_RECIPE).read_text())
    assert used["model_name_or_path"] == os.path.abspath(model_dir) != recipe["model_name_or_path"]
    assert used["dataset_name"] == data_file and used["learning_rate"] == 0.25  # overrides, one given as --key=value
    assert used["task"] == recipe["task"] and used["max_completion_length"] == recipe["max_completion_length"]
    assert list(used)[: len(recipe)] == list(recipe)  # the recipe's keys in its order, then the command line's
    assert used["save_strategy"] == "no"  # an enum, written as its value


def test_only_the_main_process_logs_info_and_python_warnings(tmp_path):
    script = (
        "import logging, sys, types, warnings\n"
        "from trl_srppo.train import setup_logging\n"
        "main = sys.argv[1] == 'main'\n"
        "args = types.SimpleNamespace(should_log=main, log_level='passive', get_process_log_level=lambda: 30)\n"
        "setup_logging(args)\n"
        "logging.getLogger('trl_srppo.train').info('an info line')\n"
        "warnings.warn('a warning every process gives')\n"
        "logging.getLogger('trl_srppo.train').warning('a warning of this process')\n"
    )
    outputs = {}
    for rank in ("main", "replica"):
        result = run([sys.executable, "-c", script, rank], tmp_path)
        outputs[rank] = result.stdout + result.stderr
    assert "an info line" in outputs["main"] and "a warning every process gives" in outputs["main"]
    assert "an info line" not in outputs["replica"] and "a warning every process gives" not in outputs["replica"]
    assert "a warning of this process" in outputs["replica"]


def test_same_command_trains_the_grpo_baseline(tmp_path, toy_files):
    model_dir, data_file = toy_files
    recipe = tmp_path / "grpo_toy.yaml"
    recipe.write_text(
        f"trainer: grpo\ntask: chain\nmodel_name_or_path: {model_dir}\ndataset_name: {data_file}\n"
        "num_generations: 2\nper_device_train_batch_size: 8\nmax_completion_length: 3\nmax_steps: 2\n"
        "use_cpu: true\nbf16: false\ngradient_checkpointing: false\nreport_to: none\nsave_strategy: 'no'\n"
        f"output_dir: {tmp_path / 'grpo'}\n"
    )
    run([str(BIN / "trl-srppo"), "train", "--config", str(recipe)], tmp_path)
    assert (tmp_path / "grpo" / "model.safetensors").is_file()
    assert not (tmp_path / "grpo" / "critic").exists()


def test_accelerate_launch_two_processes_on_the_cpu_recipe(tmp_path, toy_files):
    model_dir, data_file = toy_files
    command = [
        str(BIN / "accelerate"),
        "launch",
        "--config_file",
        str(ROOT / "recipes" / "accelerate" / "cpu_2proc.yaml"),
        "-m",
        "trl_srppo.train",
        "--config",
        str(ROOT / "recipes" / "cpu" / "srppo_toy.yaml"),
        *("--model_name_or_path", model_dir, "--dataset_name", data_file),
        "--output_dir",
        str(tmp_path / "ddp"),
        "--max_steps",
        "3",
        "--save_strategy",
        "no",
    ]
    result = run(command, tmp_path)
    assert (tmp_path / "ddp" / "critic" / "model.safetensors").is_file()
    # One message per run where every process would give the same: INFO lines from the main process only, no DDP
    # advice about unused parameters, no deprecation warning for the recipe's own keys.
    output = result.stdout + result.stderr
    assert len(re.findall(r"Training rows: \d+ usable", output)) == 1, output[-3000:]
    assert "find_unused_parameters=True" not in output and "`gradient_checkpointing` is deprecated" not in output
    assert output.count("FutureWarning") <= 1, output[-3000:]  # TRL's own, if any: from the main process alone


@pytest.mark.parametrize(
    "environ, engine, expected",
    [
        (
            {"ACCELERATE_USE_FSDP": "true"},
            "MULTI_CPU",
            "asks for FSDP (ACCELERATE_USE_FSDP=true), but this run trains under MULTI_CPU",
        ),
        ({"ACCELERATE_USE_FSDP": "True"}, "NO", "asks for FSDP"),
        (
            {"ACCELERATE_USE_DEEPSPEED": "true"},
            "NO",
            "asks for DeepSpeed (ACCELERATE_USE_DEEPSPEED=true), but this run trains under NO",
        ),
        ({"ACCELERATE_USE_FSDP": "true"}, "FSDP", None),
        ({"ACCELERATE_USE_DEEPSPEED": "true"}, "DEEPSPEED", None),
        ({"ACCELERATE_USE_FSDP": "false"}, "MULTI_CPU", None),
        ({}, "MULTI_GPU", None),
    ],
)
def test_engine_mismatch_names_the_engine_asked_for_and_the_one_given(environ, engine, expected):
    from accelerate.utils import DistributedType

    from trl_srppo.runtime.startup_checks import engine_mismatch

    message = engine_mismatch(environ, DistributedType[engine])
    if expected is None:
        assert message is None
    else:
        assert expected in message and "the policy is not sharded" in message and "\n" not in message


def test_fsdp_config_on_a_cpu_says_at_start_that_it_trains_under_ddp(tmp_path, toy_files):
    """`recipes/accelerate/fsdp2.yaml` on 2 CPU processes: Accelerate trains the policy under DDP (it turns FSDP on
    only from a GPU-like state); the run says so in one line, once."""
    model_dir, data_file = toy_files
    command = config_launch(
        "fsdp2", "-m", "trl_srppo.train", "--config", ROOT / "recipes" / "cpu" / "srppo_toy.yaml",
        *("--model_name_or_path", model_dir, "--dataset_name", data_file, "--output_dir", tmp_path / "run"),
        *("--max_steps", "1", "--save_strategy", "no"),
    )  # fmt: skip
    result = run(command, tmp_path)
    output = result.stdout + result.stderr
    assert output.count("The Accelerate config asks for FSDP") == 1, output[-3000:]
    assert "but this run trains under MULTI_CPU: the policy is not sharded" in output


def test_the_smollm2_recipe_follows_the_schedule_its_study_chose():
    # reports/real_study/README.md: 16 updates of 16 prompts x 1 rollout at 3e-5 (8 prompts left 2 of 9 seeds stalled).
    _, args, _ = parse_args(["--config", str(ROOT / "recipes" / "cpu" / "srppo_smollm2_arithmetic.yaml")])
    assert (args.per_device_train_batch_size, args.num_generations, args.max_steps) == (16, 1, 16)
    assert args.generation_batch_size == 16 and args.learning_rate == 3e-5

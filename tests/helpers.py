# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Helpers shared by the tests and by the scripts they launch in other processes (`tests/scripts/`): plain functions,
no pytest. The launching tests give their subprocesses [`script_env`], whose `PYTHONPATH` holds this folder, so a
script imports this module without editing `sys.path`."""

import json
import os
import socket
import sys

import torch

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))

# The repository's own small problem sets (`tests/fixtures/README.md`): the files and fields of the public sets, a few
# rows each, written for the tests. `make test` reads only these.
FIXTURES_DIR = os.path.join(TESTS_DIR, "fixtures")
# The public problem sets (MATH-500, AIME, Countdown, Knights & Knaves as JSON Lines) for the tests marked
# `public_data` (`make test-data`): the folder this variable names, else `../shared/data` beside the repository.
DATA_DIR_ENV = "TRL_SRPPO_DATA_DIR"
# `make test-data` sets it to 1: a missing folder is then a failure, not a skip.
REQUIRE_DATA_ENV = "TRL_SRPPO_REQUIRE_DATA"


def public_data_dir() -> str:
    """The folder of the public problem sets (see `DATA_DIR_ENV`), whether it exists or not."""
    default = os.path.join(os.path.dirname(os.path.dirname(TESTS_DIR)), "shared", "data")
    return os.environ.get(DATA_DIR_ENV) or default


def missing_public_data() -> str | None:
    """Why the public problem sets cannot be read (a sentence that says how to run their tests), or None."""
    folder = public_data_dir()
    if os.path.isfile(os.path.join(folder, "math500.jsonl")):
        return None
    return (
        f"the public problem sets are not in {folder} (no math500.jsonl): set {DATA_DIR_ENV} to the folder of "
        "math500.jsonl, aime24.jsonl, countdown_test.jsonl, ... and run `make test-data`"
    )


def cpu_fields(output_dir, **overrides) -> dict:
    """The `GRPOConfig` fields of a CPU run of the toy chain task (`trl_srppo.tasks.toy`), shared by the GRPO and
    SR-PPO configs of the tests; `overrides` replace any field. Its `max_completion_length` of 3 holds the longest
    answer of the toy chains (two values) and `<eos>`."""
    fields = dict(
        output_dir=str(output_dir),
        report_to=[],
        bf16=False,
        use_cpu=True,
        per_device_train_batch_size=8,
        max_completion_length=3,
        max_steps=2,
        learning_rate=3e-3,
        lr_scheduler_type="constant",
        logging_steps=1,
        save_strategy="no",
        gradient_checkpointing=False,
        disable_tqdm=True,
        seed=0,
    )
    fields.update(overrides)
    return fields


def cpu_config(output_dir, **overrides):
    """An SRPPOConfig for a CPU run of the toy chain task: `cpu_fields`, the critic learning at the policy's 3e-3;
    `overrides` replace any field."""
    from trl_srppo import SRPPOConfig

    return SRPPOConfig(**cpu_fields(output_dir, **{"critic_learning_rate": 3e-3, **overrides}))


def toy_trainer(toy, output_dir, reward_funcs=None, model=None, dataset=None, peft_config=None, **overrides):
    """An `SRPPOTrainer` on the toy task (`toy`: the fixture's tokenizer, model factory and dataset) with
    `cpu_config(output_dir, **overrides)`: a fresh toy model unless `model` is given, the toy dataset unless `dataset`,
    `small_digit_reward` unless `reward_funcs`."""
    from trl_srppo import SRPPOTrainer

    tokenizer, build_model, toy_dataset = toy
    return SRPPOTrainer(
        model=build_model() if model is None else model,
        reward_funcs=small_digit_reward if reward_funcs is None else reward_funcs,
        args=cpu_config(output_dir, **overrides),
        train_dataset=toy_dataset if dataset is None else dataset,
        processing_class=tokenizer,
        peft_config=peft_config,
    )


def toy_grpo_trainer(
    toy, output_dir, reward_funcs=None, dataset=None, peft_config=None, trainer_class=None, **overrides
):
    """TRL's `GRPOTrainer` (or `trainer_class`) on the toy task with `GRPOConfig(**cpu_fields(output_dir,
    **overrides))`, the GRPO run the tests set beside an SR-PPO one: a fresh toy model, the toy dataset unless
    `dataset`, `small_digit_reward` unless `reward_funcs`. A trainer on trl-srppo's runtime gets the runtime's config,
    `GRPORuntimeConfig`, with the same fields."""
    from trl import GRPOConfig, GRPOTrainer

    from trl_srppo.runtime.config import GRPORuntimeConfig
    from trl_srppo.runtime.mixin import RuntimeMixin

    tokenizer, build_model, toy_dataset = toy
    trainer_class = trainer_class or GRPOTrainer
    config_class = GRPORuntimeConfig if issubclass(trainer_class, RuntimeMixin) else GRPOConfig
    return trainer_class(
        model=build_model(),
        reward_funcs=small_digit_reward if reward_funcs is None else reward_funcs,
        args=config_class(**cpu_fields(output_dir, **overrides)),
        train_dataset=toy_dataset if dataset is None else dataset,
        processing_class=tokenizer,
        peft_config=peft_config,
    )


def small_digit_reward(completions, **kwargs) -> list[float]:
    """Succeeds about 40% of the time for a random tiny toy model (first word a digit 0-6, 7 of its 18 words), so
    every batch has both outcomes, where the chain task's own verifier almost never succeeds before training."""
    return [1.0 if c.split() and c.split()[0] in "0123456" else 0.0 for c in completions]


def record_hub_uploads(monkeypatch) -> list:
    """Replace the Trainer's Hub API with a fake that records each `upload_folder` call as `(path_in_repo, files)`;
    returns the list it fills (nothing leaves the machine)."""
    import transformers.trainer

    uploads = []

    class FakeApi:
        def create_repo(self, repo_id, **kwargs):
            return type("RepoUrl", (), {"repo_id": repo_id})()

        def upload_folder(self, folder_path, path_in_repo=None, **kwargs):
            files = sorted(
                os.path.relpath(os.path.join(root, f), folder_path) for root, _, fs in os.walk(folder_path) for f in fs
            )
            uploads.append((path_in_repo, files))

            class Done:
                def done(self):
                    return True

            return Done()

    monkeypatch.setattr(transformers.trainer, "hf_api", lambda: FakeApi())
    return uploads


def checkpoint_push_uploads(monkeypatch, make_trainer, *args) -> tuple[list[str], list[str]]:
    """Train `make_trainer(*args, ...)` two steps, saving and pushing a checkpoint at step 2
    (`hub_strategy="checkpoint"`, Hub faked by `record_hub_uploads`); returns the files of the final model push and of
    the last checkpoint's push."""
    uploads = record_hub_uploads(monkeypatch)
    trainer = make_trainer(
        *args,
        max_steps=2,
        save_strategy="steps",
        save_steps=2,
        push_to_hub=True,
        hub_model_id="someone/toy-sr-ppo",
        hub_strategy="checkpoint",
    )
    trainer.train()
    trainer.push_in_progress = None
    model_push = [files for path, files in uploads if path is None][0]
    checkpoint_push = [files for path, files in uploads if path == "last-checkpoint"][0]
    return model_push, checkpoint_push


def script_env(**extra: str) -> dict[str, str]:
    """The environment of a launched test script: this one, one thread per process, no Hub access, this folder first
    on `PYTHONPATH` (the package's sources stay where they were, e.g. `src` from `PYTHONPATH=src`)."""
    path = os.pathsep.join(p for p in (TESTS_DIR, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": path, **extra}


def critic_full_weights(trainer) -> dict:
    """The critic's whole weights on process 0, whatever its `critic_parallelism` (every process must call this:
    a sharded or DeepSpeed critic gathers them)."""
    state_dict = trainer.critic_backend.engine.gather_state_dict()  # None where every process holds it whole
    if state_dict is None:  # its parameters (a policy LoRA critic's adapter is not in its `state_dict`)
        state_dict = dict(trainer.critic_backend.unwrapped().named_parameters())
    return {k: v.detach().clone().contiguous() for k, v in state_dict.items()}


def critic_full_optimizer_state(trainer) -> dict:
    """AdamW's state of every critic parameter, whole and keyed by name, on process 0 (`{name: {"exp_avg",
    "exp_avg_sq", "step"}}`), whatever its `critic_parallelism` (every process must call this)."""
    from trl_srppo.method.critics.deepspeed_engine import DeepSpeedCritic
    from trl_srppo.method.critics.fsdp2 import FSDPCritic
    from trl_srppo.method.critics.optimizer_state import keyed_by_name, parameter_names

    critic = trainer.critic
    if isinstance(trainer.critic_backend, DeepSpeedCritic):
        from deepspeed.utils import safe_get_full_optimizer_state  # gathers the partitions: a collective

        optimizer = trainer.critic_optimizer
        step = next(state["step"] for state in optimizer.state.values() if "step" in state)
        return {
            name: {
                "exp_avg": safe_get_full_optimizer_state(param, "exp_avg").cpu(),
                "exp_avg_sq": safe_get_full_optimizer_state(param, "exp_avg_sq").cpu(),
                "step": torch.as_tensor(step, dtype=torch.float32),
            }
            for name, param in critic.module.named_parameters()
        }
    state = trainer.critic_backend.engine.optimizer_state_dict(trainer.critic_optimizer, None)
    if not isinstance(trainer.critic_backend, FSDPCritic):  # keyed by index
        state = keyed_by_name(state, parameter_names(critic, trainer.critic_optimizer))
    return {
        name: {key: torch.as_tensor(value).detach().cpu().clone() for key, value in entry.items()}
        for name, entry in state.get("state", {}).items()
    }


def record_states(trainer, output_dir) -> None:
    """Have `trainer` write, from process 0, what its first checkpoint holds (`saved_state.pt`, when it saves it) and,
    in a resumed run, what it restored (`loaded_state.pt`, when training begins): the critic's whole weights and
    AdamW state, its step count and learning rate, and the policy's weights and optimizer state."""
    from transformers import TrainerCallback

    def write(name):
        policy = trainer.accelerator.unwrap_model(trainer.model)
        record = {
            "critic": critic_full_weights(trainer),
            "critic_optimizer": critic_full_optimizer_state(trainer),
            "critic_step": trainer.critic_backend.steps,
            "critic_lr": trainer.critic_lr_scheduler.get_last_lr(),
            "policy": {k: v.detach().cpu().clone() for k, v in policy.state_dict().items()},
            "policy_optimizer": trainer.optimizer.state_dict(),
        }
        if trainer.accelerator.is_main_process:
            torch.save(record, os.path.join(output_dir, name))

    class Recorder(TrainerCallback):
        saved = False

        def on_train_begin(self, args, state, control, **kwargs):
            if state.global_step > 0:
                write("loaded_state.pt")

        def on_save(self, args, state, control, **kwargs):
            if not self.saved:
                self.saved = True
                write("saved_state.pt")

    trainer.add_callback(Recorder())


def prompt_recording_reward(output_dir):
    """The toy chain task's verifier, which also appends the prompts it scores, with the global step, to
    `prompts_rank{r}.jsonl` in `output_dir` (one file per process)."""
    import json

    from trl_srppo.rewards import chain_reward

    def chain_reward_recorded(prompts, completions, trainer_state, **kwargs):
        rank = os.environ.get("RANK", "0")
        with open(os.path.join(output_dir, f"prompts_rank{rank}.jsonl"), "a", encoding="utf-8") as f:
            f.write(json.dumps({"global_step": trainer_state.global_step, "prompts": list(prompts)}) + "\n")
        return chain_reward(prompts=prompts, completions=completions, **kwargs)

    return chain_reward_recorded


def run_critic_mode(
    output_dir, critic_parallelism, overrides, resume=None, count_bytes=None, max_steps=4, record=False
):
    """One toy SR-PPO run for the multi-process critic-mode scripts (`tests/scripts/*_critic_train.py`): a checkpoint
    every 2 steps, `critic_initial.safetensors` and `critic_final.safetensors` written by process 0, and, when
    `count_bytes(trainer)` returns a dict, `bytes_rank{r}.json` with what this process holds; then `save_model()`.
    `overrides` replace any config field (4 rows per process by default); `record=True` adds [`record_states`] and
    [`prompt_recording_reward`]."""
    import json

    from safetensors.torch import save_file

    from trl_srppo import SRPPOTrainer
    from trl_srppo.rewards import chain_reward
    from trl_srppo.tasks.toy import build_model, build_tokenizer, make_dataset

    os.makedirs(output_dir, exist_ok=True)
    tokenizer = build_tokenizer()
    fields = dict(
        per_device_train_batch_size=4,
        max_steps=max_steps,
        steps_per_generation=2,
        critic_parallelism=critic_parallelism,
        save_strategy="steps",
        save_steps=2,
    )
    fields.update(overrides)
    args = cpu_config(output_dir, **fields)
    trainer = SRPPOTrainer(
        model=build_model(tokenizer),
        reward_funcs=prompt_recording_reward(output_dir) if record else chain_reward,
        args=args,
        train_dataset=make_dataset(64, seed=0),
        processing_class=tokenizer,
    )
    if record:
        record_states(trainer, output_dir)
    rank = trainer.accelerator.process_index
    initial = critic_full_weights(trainer)
    trainer.train(resume_from_checkpoint=resume)
    final = critic_full_weights(trainer)
    counts = count_bytes(trainer) if count_bytes is not None else None
    if counts is not None:
        with open(os.path.join(output_dir, f"bytes_rank{rank}.json"), "w") as f:
            json.dump(counts, f)
    if rank == 0:
        save_file(final, os.path.join(output_dir, "critic_final.safetensors"))
        save_file(initial, os.path.join(output_dir, "critic_initial.safetensors"))
    trainer.save_model()
    trainer.accelerator.wait_for_everyone()


def free_port() -> int:
    """A TCP port free on this machine now, for a launcher's rendezvous (another run may hold the default one)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def two_process_launch(script, *args) -> list[str]:
    """`accelerate launch` of `script` with `args` in two CPU processes (the multi-process launcher, gloo without
    GPUs), no mixed precision, on a free port."""
    accelerate = os.path.join(os.path.dirname(sys.executable), "accelerate")
    command = [accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1"]
    command += ["--main_process_port", str(free_port()), "--mixed_precision", "no", "--dynamo_backend", "no"]
    return command + [str(script), *(str(a) for a in args)]


def config_launch(config: str, script, *args, port: int | None = None, flags: tuple = ()) -> list[str]:
    """`accelerate launch --config_file recipes/accelerate/<config>.yaml` of `script` with `args` (`script` may be
    `-m` with a module as the first argument), the repository's config as it is on 2 CPU processes with no mixed
    precision, on `port` (a free one by default); `flags` are more launcher options (e.g. `--machine_rank 1`)."""
    accelerate = os.path.join(os.path.dirname(sys.executable), "accelerate")
    config_file = os.path.join(os.path.dirname(TESTS_DIR), "recipes", "accelerate", f"{config}.yaml")
    command = [accelerate, "launch", "--config_file", config_file, "--num_processes", "2", "--mixed_precision", "no"]
    command += ["--main_process_port", str(port or free_port()), *flags]
    return command + [str(script), *(str(a) for a in args)]


def relabel_for_fsdp() -> dict:
    """Make Accelerate take the FSDP path on a CPU (test harness only: Accelerate switches to FSDP only from a
    multi-accelerator state, which a CPU run is not); returns the trainer's `accelerator_config`."""
    from accelerate import PartialState
    from accelerate.utils import DistributedType

    state = PartialState(cpu=True)
    state._shared_state["distributed_type"] = DistributedType.MULTI_GPU
    return {"use_configured_state": True}


def read_rows(path) -> list[dict]:
    """The rows of a JSON Lines file, strictly: a missing file or a bad line is an error (a test's data file)."""
    assert os.path.isfile(path), f"test data {path} is missing"
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def save_pickle_only_model(folder, model, tokenizer=None) -> str:
    """`model` saved to `folder` with its weights only in `pytorch_model.bin` (a pickle file, as older Hub checkpoints
    have them), its config and, when given, its tokenizer as `save_pretrained` writes them; returns the folder."""
    os.makedirs(folder, exist_ok=True)
    model.config.architectures = [type(model).__name__]  # as `save_pretrained` records it
    model.config.save_pretrained(folder)
    if tokenizer is not None:
        tokenizer.save_pretrained(folder)
    torch.save(model.state_dict(), os.path.join(folder, "pytorch_model.bin"))
    return str(folder)


def offline_hub_model(monkeypatch, cache_dir, repo_id: str, save) -> str:
    """Make the Hub id `repo_id` resolve, offline, to a snapshot in the Hub cache `cache_dir` whose files
    `save(folder)` writes (the cache's layout: `models--org--name/refs/main` and `snapshots/<commit>/`), as a model
    downloaded earlier does; returns the snapshot folder."""
    import huggingface_hub.constants

    repo = os.path.join(str(cache_dir), "models--" + repo_id.replace("/", "--"))
    commit = "0" * 40
    snapshot = os.path.join(repo, "snapshots", commit)
    os.makedirs(snapshot)
    os.makedirs(os.path.join(repo, "refs"), exist_ok=True)
    with open(os.path.join(repo, "refs", "main"), "w") as f:
        f.write(commit)
    save(snapshot)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache_dir))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    return snapshot


def run_weights(output_dir) -> dict:
    """The policy's and the critic's weights a run saved in `output_dir` (`policy.<name>`, `critic.<name>`)."""
    from safetensors.torch import load_file

    return {
        **{f"policy.{k}": v for k, v in load_file(os.path.join(output_dir, "model.safetensors")).items()},
        **{f"critic.{k}": v for k, v in load_file(os.path.join(output_dir, "critic", "model.safetensors")).items()},
    }


def nbytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors)


def adamw_state_bytes(weights, trained):
    """Persistent training state in bytes for AdamW before it runs, counted from the tensors: every distinct weight,
    a gradient, two moments and a step counter per trained weight."""
    weights = {id(p): p for p in weights}.values()
    trained = {id(p): p for p in trained}.values()
    return nbytes(weights) + 3 * nbytes(trained) + 4 * len(trained)

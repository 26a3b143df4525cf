# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Helpers shared by the tests and by the scripts they launch in other processes (`tests/scripts/`): plain functions,
no pytest. The launching tests give their subprocesses [`script_env`], whose `PYTHONPATH` holds this folder, so a
script imports this module without editing `sys.path`."""

import os

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


def cpu_config(output_dir, **overrides):
    """An SRPPOConfig for a CPU run of the toy task; `overrides` replace any field."""
    from trl_srppo import SRPPOConfig

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
        critic_learning_rate=3e-3,
        logging_steps=1,
        save_strategy="no",
        gradient_checkpointing=False,
        disable_tqdm=True,
        seed=0,
    )
    fields.update(overrides)
    return SRPPOConfig(**fields)


def small_digit_reward(completions, **kwargs) -> list[float]:
    """Succeeds about 40% of the time for a random tiny toy model (first word a digit 0-4), so every batch has both
    outcomes."""
    return [1.0 if c.split() and c.split()[0] in "01234" else 0.0 for c in completions]


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


def script_env(**extra: str) -> dict[str, str]:
    """The environment of a launched test script: this one, one thread per process, no Hub access, this folder first
    on `PYTHONPATH` (the package's sources stay where they were, e.g. `src` from `PYTHONPATH=src`)."""
    path = os.pathsep.join(p for p in (TESTS_DIR, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": path, **extra}


def critic_full_weights(trainer) -> dict:
    """The critic's whole weights on process 0, whatever its `critic_parallelism` (every process must call this:
    a sharded or DeepSpeed critic gathers them)."""
    from trl_srppo import critic_deepspeed, critic_sharding

    if critic_deepspeed.is_engine(trainer.critic):
        state_dict = critic_deepspeed.gather_state_dict(trainer.critic)
    else:
        state_dict = critic_sharding.gather_state_dict(trainer.critic)  # None unless FSDP-sharded
    if state_dict is None:
        state_dict = trainer.accelerator.unwrap_model(trainer.critic).state_dict()
    return {k: v.detach().clone().contiguous() for k, v in state_dict.items()}


def run_critic_mode(output_dir, critic_parallelism, overrides, resume=None, count_bytes=None, max_steps=4):
    """One toy SR-PPO run for the multi-process critic-mode scripts (`tests/scripts/*_critic_train.py`): a checkpoint
    every 2 steps, `critic_initial.safetensors` and `critic_final.safetensors` written by process 0, and, when
    `count_bytes(trainer)` returns a dict, `bytes_rank{r}.json` with what this process holds; then `save_model()`."""
    import json

    from safetensors.torch import save_file

    from trl_srppo import SRPPOTrainer
    from trl_srppo.toy import build_model, build_tokenizer, last_digit_reward, make_dataset

    tokenizer = build_tokenizer()
    args = cpu_config(
        output_dir,
        per_device_train_batch_size=4,
        max_steps=max_steps,
        steps_per_generation=2,
        critic_parallelism=critic_parallelism,
        save_strategy="steps",
        save_steps=2,
        **overrides,
    )
    trainer = SRPPOTrainer(
        model=build_model(tokenizer),
        reward_funcs=last_digit_reward,
        args=args,
        train_dataset=make_dataset(64, seed=0),
        processing_class=tokenizer,
    )
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

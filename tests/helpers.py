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


def script_env(**extra: str) -> dict[str, str]:
    """The environment of a launched test script: this one, one thread per process, no Hub access, this folder first
    on `PYTHONPATH` (the package's sources stay where they were, e.g. `src` from `PYTHONPATH=src`)."""
    path = os.pathsep.join(p for p in (TESTS_DIR, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": path, **extra}

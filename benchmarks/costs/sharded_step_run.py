# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""One process of one launch of `benchmarks.costs.sharded_step`: run under `accelerate launch` (the launch's engine,
ZeRO-3 there, owns the policy), it builds one variant's trainer with `step_cost.build_trainer` from the saved model
folder, its phases timed by `step_cost.PhaseTimer`, trains a warm-up step and the timed steps in one `train()`, and
writes `rank<RANK>.json` in OUTPUT_DIR: the seconds of every timed step per phase, or the message of the trainer's
refusal at start (a critic that cannot sit beside the engine).

    python -m benchmarks.costs.sharded_step_run OUTPUT_DIR MODEL_DIR VARIANT SETTINGS_JSON

SETTINGS_JSON: the model's size (`step_cost.SIZES`), `completions` per process and `steps` (timed, after the warm-up).
"""

import json
import os
import sys
import warnings

from . import step_cost


def run(output_dir: str, model_dir: str, name: str, settings: dict) -> dict:
    """This process's outcome: `{"rank", "variant", "steps": [...]}` or `{"rank", "variant", "refused": message}`."""
    spec = step_cost.variants(settings["completions"])[name]
    outcome = {"rank": int(os.environ.get("RANK", "0")), "variant": name}
    timer = step_cost.PhaseTimer()
    try:
        trainer = step_cost.build_trainer(name, spec, settings["size"], output_dir, timer, model=model_dir)
    except (ValueError, NotImplementedError) as err:  # a combination refused at start
        outcome["refused"] = f"{type(err).__name__}: {err}"
        return outcome
    step_cost.train_steps(trainer, 1 + settings["steps"])
    outcome["steps"] = timer.steps[1:]  # the first step is the warm-up
    outcome["engine"] = trainer.accelerator.distributed_type.name
    backend = getattr(trainer, "critic_backend", None)
    outcome["critic_class"] = type(backend).__name__ if backend is not None else None
    from trl_srppo.runtime.teardown import end_distributed

    end_distributed(trainer.accelerator)
    return outcome


def main(output_dir: str, model_dir: str, name: str, settings_json: str) -> None:
    import torch

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    outcome = run(output_dir, model_dir, name, json.loads(settings_json))
    with open(os.path.join(output_dir, f"rank{outcome['rank']}.json"), "w", encoding="utf-8") as f:
        json.dump(outcome, f)


if __name__ == "__main__":
    main(*sys.argv[1:])
    from trl_srppo.runtime.teardown import exit_process

    exit_process(0)  # no abort at exit while gloo's threads outlive their groups (as `trl-srppo train` ends)

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Toy fingerprints: what a refactoring must leave unchanged, bit for bit.

Each configuration trains a fresh toy model (`trl_srppo.tasks.toy`, seed 0) for a few steps on one CPU thread, and
its fingerprint is the run's per-step logs (without timings and memory), a hash of the final policy's weights and of
the critic's parameters and buffers, and the completions table's SR-PPO advantages and values after every step. Run
it before a change and after, and compare:

    python -m scripts.toy_fingerprints before.json
    # ... the change ...
    python -m scripts.toy_fingerprints after.json --compare before.json  # exits 1 and lists what differs

`--only NAME ...` runs some configurations alone (e.g. a new one, against an older checkout's run of it).
"""

import argparse
import hashlib
import json
import sys
import tempfile
import warnings

import torch

# Settings over the toy's CPU defaults (`cpu_fields`); "grpo" is TRL's GRPOTrainer with 4 rollouts per prompt.
CONFIGS: dict[str, dict | str] = {
    "default": {},
    "ppo": {"srppo_method": "ppo"},
    "td": {"srppo_method": "td"},
    "prompt_baseline": {"advantage_baseline": "prompt"},
    "unfused_epochs2": {"critic_fused_forward": False, "critic_epochs": 2},
    "policy_head": {"critic_type": "policy_head"},
    "lora_critic": {"critic_use_peft": True},
    "policy_lora": {"critic_type": "policy_lora", "peft": True},
    "sampling_pass_at_k": {"prompt_sampling": "pass_at_k", "prompt_pool_factor": 2},
    "sampling_near_half": {"prompt_sampling": "near_half", "prompt_pool_factor": 2},
    "threshold": {"srppo_outcome_threshold": 0.5},
    "warmup_zero": {"critic_warmup_steps": 1, "critic_value_init": "zero"},
    "warm_start": {"critic_warm_start_prompts": 8, "critic_warm_start_samples": 2, "critic_warm_start_epochs": 2},
    "running_mean": {"critic_type": "running_mean", "srppo_method": "sr-ppo-pass1"},
    "steps_per_generation": {"steps_per_generation": 2, "max_steps": 4},
    "normalize": {"pass_at_k_normalize": True},
    "grpo": "grpo",
}
# Log entries that differ between identical runs.
UNSTABLE = ("runtime", "per_second", "step_time", "seconds", "memory/")


def cpu_fields(output_dir: str, **overrides) -> dict:
    """The toy's CPU run: batches of 8, completions of 3 tokens, 3 steps at a constant 3e-3, no saving; the settings of
    `tests/helpers.py::cpu_fields`, written out here so that the script runs the same runs against any checkout (an
    older one's test helpers may differ), with nothing of it but its package."""
    fields = dict(
        output_dir=output_dir,
        report_to=[],
        bf16=False,
        use_cpu=True,
        per_device_train_batch_size=8,
        max_completion_length=3,
        max_steps=3,
        learning_rate=3e-3,
        lr_scheduler_type="constant",
        logging_steps=1,
        save_strategy="no",
        gradient_checkpointing=False,
        disable_tqdm=True,
        seed=0,
    )
    return {**fields, **overrides}


def small_digit_reward(completions, **kwargs) -> list[float]:
    """1 when a completion's first word is a digit 0-6: both outcomes in every batch of an untrained toy model."""
    return [1.0 if c.split() and c.split()[0] in "0123456" else 0.0 for c in completions]


def digest(tensors: dict[str, torch.Tensor]) -> str:
    """A hash of named tensors' values (as float32), in name order."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        h.update(name.encode())
        h.update(tensors[name].detach().float().contiguous().cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def trainer_for(name: str, output_dir: str):
    from peft import LoraConfig
    from trl import GRPOConfig, GRPOTrainer

    from trl_srppo import SRPPOConfig, SRPPOTrainer
    from trl_srppo.tasks.toy import build_model, build_tokenizer, make_dataset

    tokenizer = build_tokenizer()
    common = dict(
        model=build_model(tokenizer, seed=0),
        reward_funcs=small_digit_reward,
        train_dataset=make_dataset(64, seed=0),
        processing_class=tokenizer,
    )
    settings = CONFIGS[name]
    if settings == "grpo":
        return GRPOTrainer(args=GRPOConfig(**cpu_fields(output_dir, num_generations=4)), **common)
    settings = dict(settings)
    peft = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]) if settings.pop("peft", False) else None
    args = SRPPOConfig(**cpu_fields(output_dir, critic_learning_rate=3e-3, **settings))
    return SRPPOTrainer(args=args, peft_config=peft, **common)


def fingerprint(name: str) -> dict:
    """Train configuration `name` and return its fingerprint."""
    from transformers import TrainerCallback

    tables = {"advantages": [], "values": []}

    class TableRecorder(TrainerCallback):  # the completions table's SR-PPO columns after every step
        def on_step_end(self, args, state, control, **kwargs):
            extra = trainer._logs["extra"]
            tables["advantages"].append(list(extra.get("srppo_advantage", [])))
            tables["values"].append(list(extra.get("srppo_value", [])))

    with tempfile.TemporaryDirectory() as output_dir:
        trainer = trainer_for(name, output_dir)
        trainer.add_callback(TableRecorder())
        trainer.train()
    logs = [
        {k: v for k, v in entry.items() if not any(word in k for word in UNSTABLE)}
        for entry in trainer.state.log_history
    ]
    found = {"logs": logs, "policy": digest(trainer.accelerator.unwrap_model(trainer.model).state_dict())}
    critic = getattr(trainer, "critic_backend", None)
    if critic is not None:
        found["critic"] = digest({**critic.unwrapped().state_dict(), **dict(critic.unwrapped().named_parameters())})
        found.update(tables)
    return found


def differences(before: dict, after: dict) -> tuple[list[str], list[str]]:
    """What differs between two fingerprint files, configuration by configuration (those in both), and the log keys
    only `after` has (a metric added: listed, not a difference, when every value `before` logged is unchanged)."""
    found, added = [], set()
    for name in before.keys() & after.keys():
        old, new = before[name], after[name]
        for key in sorted((old.keys() | new.keys()) - {"logs"}):
            if old.get(key) != new.get(key):
                found.append(f"{name}: {key}")
        if len(old["logs"]) != len(new["logs"]):
            found.append(f"{name}: logs ({len(old['logs'])} entries, now {len(new['logs'])})")
            continue
        for step, (was, now) in enumerate(zip(old["logs"], new["logs"])):
            found += [f"{name}: logs[{step}] {key}" for key in sorted(was) if now.get(key) != was[key]]
            added |= {f"{name}: {key}" for key in now.keys() - was.keys()}
    return sorted(found), sorted(added)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output", help="the JSON file to write the fingerprints to")
    parser.add_argument("--compare", help="a fingerprint file to compare with: exit 1 if anything differs")
    parser.add_argument("--only", nargs="+", choices=list(CONFIGS), help="run these configurations alone")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    found = {}
    for name in args.only or CONFIGS:
        found[name] = fingerprint(name)
        print(f"{name}: policy {found[name]['policy']}, critic {found[name].get('critic', '-')}", flush=True)
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump(found, f, indent=1, sort_keys=True)
    if args.compare is None:
        return 0
    with open(args.compare, encoding="utf-8") as f:
        before = json.load(f)
    diffs, added = differences(before, found)
    print(f"{len(before.keys() & found.keys())} configurations compared, {len(diffs)} differences")
    for line in diffs:
        print(f"  differs: {line}")
    for line in added:
        print(f"  logged anew: {line}")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`make bench-step`: where the time of one training step goes, GRPO and SR-PPO side by side in one process.

Every variant is a trainer built once from the same random-init model (a Qwen3 shape from a config) and the same
prompts; the variants then train in rounds, each round a few steps of every variant in a rotating order, so that
machine noise hits all of them alike. The first round is a warm-up and is not counted. Each step is split into
phases by timers wrapped around trainer methods (the instrumentation lives here, not in the package):

- the prompt pool (`prompt_sampling`'s draw: tokenising the pool's `m B` prompts, the critic's no-grad forward on
  them, the draw; 0 without prompt sampling), generation (`_generate`), rewards (`_calculate_rewards`),
- critic values (the critic's `values`, the no-grad pass; 0 when the fused critic step takes the values from the
  update's forward), critic update (the critic's `update`: forward, backward and optimizer step of the critic),
- policy log-probs (`_get_per_token_logps_and_entropies`: the loss's forward with grad, plus any no-grad pass),
- the rest of the step: the policy's backward and optimizer step, and TRL's bookkeeping.

Variants: GRPO with 4 rollouts per prompt at equal completions per step (`grpo`) and at the paper's matching (half
the single-rollout prompts x 4 rollouts, twice the completions: `grpo-paper`), SR-PPO with one rollout per prompt
(`sr-ppo`, the default fused critic step), SR-PPO with separate critic passes (`sr-ppo-separate`,
`critic_fused_forward=False`) and SR-PPO with a LoRA critic (`sr-ppo-lora-critic`, `critic_use_peft=True`, rank
16), SR-PPO drawing its prompts from a pool of m = 2 and m = 4 batches by the critic's Pass@k weight
(`sr-ppo-pool-m2`, `sr-ppo-pool-m4`: `prompt_sampling="pass_at_k"`, whose pool forward is set beside generation in
the report), and SR-PPO with a value head on the policy's own hidden states (`sr-ppo-policy-head`,
`critic_type="policy_head"`: its critic update holds the one no-grad forward of the policy per generated batch that
gives the head its features, and the head's own forward, backward and step). The floor at equal completions is
GRPO's step plus one critic forward and backward (the fused SR-PPO's critic update time). At the paper's matching,
no SR-PPO step can cost less than GRPO's own step at half the completions: the ratio `grpo / grpo-paper` is that bound.

Memory, per variant, in a process of its own that builds that variant alone and trains two steps: the persistent
training state (weights, gradients and optimizer state of policy and critic) counted in bytes from the tensors, the
process's peak resident set size and, on a GPU, the peak GPU memory allocated (`torch.cuda.max_memory_allocated`).

The CPU mode (the default) runs a small model in float32 on one thread: its absolute seconds depend on the machine
and its load, so the report compares ratios measured side by side. The GPU mode (`--gpu`, `make bench-step-gpu`)
runs the same variants, phases and interleaving at Qwen3-1.7B's published shape (`QWEN3_1_7B`, random-init weights
built from the config, no download) on one CUDA device, where the absolute seconds mean something too:

- bf16 weights for the policy and the critic (`bf16=True`, `critic_dtype="bfloat16"`), AdamW in the same dtype;
- gradient checkpointing for the policy and the critic, as the Qwen3-1.7B recipes train;
- 128-token prompts, 512 completion tokens (every completion the same length), 8 completions per step (16 for
  `grpo-paper`), 3 counted rounds of 2 steps per variant;
- every variant's trainer is held on the GPU at once, for the interleaving: with 1.72B parameters, 2 bytes of
  weights and 4 of AdamW state per trained parameter, the eight hold about 87 GiB between steps, and one step's
  gradients and activations come on top (sized for an H200; on a GPU of less memory, run a subset with `--variants` or
  shorten the sequences with `--prompt-tokens` / `--completion-tokens`);
- each phase is timed between `torch.cuda.synchronize()` calls, and the memory probes run in spawned processes (a
  forked one cannot use CUDA).

It writes `reports/performance_gpu.md` and `reports/performance_gpu.json`, never the CPU mode's report.
`--gpu --quick --device cpu` runs the GPU mode's code (bf16, gradient checkpointing, its report) with the tiny model
on a CPU, a check of that code where no GPU is at hand; its figures say nothing about a GPU.

    python -m benchmarks.costs.step_cost  # the default sizes: 4 layers, hidden 256, 32 + 64 tokens, 8 per step
    python -m benchmarks.costs.step_cost --quick # a tiny model and a few steps (the smoke test)
    python -m benchmarks.costs.step_cost --gpu  # Qwen3-1.7B's shape, bf16, on a CUDA GPU
"""

import argparse
import datetime
import functools
import json
import multiprocessing
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
import warnings

from ..common.runs import REPO_ROOT, git_commit

PHASES = {  # trainer method (or its critic's, `critic_backend.<method>`) -> phase
    "_prompt_sampler.draw": "prompt pool",  # prompt_sampling: tokenising and valuing the pool, and the draw
    "_generate": "generation",
    "_calculate_rewards": "rewards",
    "critic_backend.values": "critic values",
    "critic_backend.update": "critic update",
    "critic_backend._update_fused": "critic update",  # the fused step: the values' forward and the update
    "_get_per_token_logps_and_entropies": "policy log-probs",
}
PHASE_NAMES = list(dict.fromkeys(PHASES.values())) + ["rest (policy backward, optimizer, TRL)"]  # in order, once each
REST = PHASE_NAMES[-1]

# Qwen3-1.7B's published shape (the `config.json` of `Qwen/Qwen3-1.7B`), as `Qwen3Config` keyword arguments: the
# model of the GPU mode, and the shape the tests count memory at real scale with. 1.72B parameters (tied embeddings).
QWEN3_1_7B = dict(
    vocab_size=151936,
    hidden_size=2048,
    intermediate_size=6144,
    num_hidden_layers=28,
    num_attention_heads=16,
    num_key_value_heads=8,
    head_dim=128,
    max_position_embeddings=40960,
    tie_word_embeddings=True,
)

SIZES = {
    "default": dict(
        vocab_size=4096, hidden_size=256, intermediate_size=768, num_layers=4, prompt_tokens=32, completion_tokens=64
    ),
    "quick": dict(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_layers=2, prompt_tokens=8, completion_tokens=8
    ),
    "gpu": dict(
        vocab_size=QWEN3_1_7B["vocab_size"],
        hidden_size=QWEN3_1_7B["hidden_size"],
        intermediate_size=QWEN3_1_7B["intermediate_size"],
        num_layers=QWEN3_1_7B["num_hidden_layers"],
        num_attention_heads=QWEN3_1_7B["num_attention_heads"],
        num_key_value_heads=QWEN3_1_7B["num_key_value_heads"],
        head_dim=QWEN3_1_7B["head_dim"],
        max_position_embeddings=QWEN3_1_7B["max_position_embeddings"],
        prompt_tokens=128,
        completion_tokens=512,
    ),
}

# How the trainers run: the CPU mode, and the GPU mode (`--gpu`; `device="cpu"` with `--device cpu`).
CPU_RUNTIME = dict(gpu=False, device="cpu", dtype="float32", gradient_checkpointing=False)
GPU_RUNTIME = dict(gpu=True, device="cuda", dtype="bfloat16", gradient_checkpointing=True)


POOL_FACTORS = (2, 4)  # the prompt pools of the prompt-sampling variants, in generated batches


def variants(completions: int) -> dict[str, dict]:
    """Each variant's trainer, prompts and rollouts per step. `completions` must be a multiple of 4."""
    return {
        "grpo": dict(trainer="grpo", prompts=completions // 4, rollouts=4),
        "grpo-paper": dict(trainer="grpo", prompts=completions // 2, rollouts=4),
        "sr-ppo": dict(trainer="srppo", prompts=completions, rollouts=1),
        "sr-ppo-separate": dict(trainer="srppo", prompts=completions, rollouts=1, critic_fused_forward=False),
        "sr-ppo-lora-critic": dict(trainer="srppo", prompts=completions, rollouts=1, critic_use_peft=True),
        "sr-ppo-policy-head": dict(trainer="srppo", prompts=completions, rollouts=1, critic_type="policy_head"),
        # Prompt sampling (`prompt_sampling="pass_at_k"`): the critic values m x the batch's prompts before generating.
        **{
            f"sr-ppo-pool-m{m}": dict(
                trainer="srppo", prompts=completions, rollouts=1, prompt_sampling="pass_at_k", prompt_pool_factor=m
            )
            for m in POOL_FACTORS
        },
        # LoRA policies (`lora_settings`): the policy LoRA critic against LoRA GRPO.
        "grpo-lora": dict(trainer="grpo", prompts=completions // 4, rollouts=4, lora=True),
        "sr-ppo-policy-lora": dict(
            trainer="srppo", prompts=completions, rollouts=1, critic_type="policy_lora", lora=True
        ),
    }


def lora_settings(size: dict) -> dict:
    """The policy adapter of the LoRA variants: all linear layers, at the rank that is to this model's width what rank
    16 is to Qwen3-1.7B's (hidden 2048), so that the adapters weigh what they would there against the base."""
    rank = max(1, size["hidden_size"] // 128)
    return dict(r=rank, lora_alpha=2 * rank, target_modules="all-linear")


# ---- the setup ------------------------------------------------------------------------------------------------------


def build_tokenizer(vocab_size: int):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, **{f"t{i}": i for i in range(2, vocab_size)}}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="<pad>", eos_token="<eos>")


def build_model(size: dict, seed: int = 0, dtype: str = "float32", device: str = "cpu"):
    """A random-init Qwen3 causal LM of the given size (the same weights for every variant), in `dtype` on `device`.

    The attention shape is the size's own where it gives one (`num_attention_heads`, `num_key_value_heads`,
    `head_dim`), else heads of width 64 (at least 2) and half as many key-value heads."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    heads = size.get("num_attention_heads", max(2, size["hidden_size"] // 64))
    config = Qwen3Config(
        vocab_size=size["vocab_size"],
        hidden_size=size["hidden_size"],
        intermediate_size=size["intermediate_size"],
        num_hidden_layers=size["num_layers"],
        num_attention_heads=heads,
        num_key_value_heads=size.get("num_key_value_heads", max(1, heads // 2)),
        head_dim=size.get("head_dim", size["hidden_size"] // heads),
        max_position_embeddings=size.get(
            "max_position_embeddings", 4 * (size["prompt_tokens"] + size["completion_tokens"])
        ),
        tie_word_embeddings=True,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    with torch.device(device):  # initialised where it trains: a 1.7B model in seconds on a GPU
        model = Qwen3ForCausalLM(config).to(getattr(torch, dtype))
    model.generation_config.pad_token_id, model.generation_config.eos_token_id = 0, 1
    return model


def make_dataset(size: dict, rows: int = 256, seed: int = 0):
    import random

    from datasets import Dataset

    rng = random.Random(seed)
    words = [f"t{i}" for i in range(2, size["vocab_size"])]
    return Dataset.from_list([{"prompt": " ".join(rng.choices(words, k=size["prompt_tokens"]))} for _ in range(rows)])


def parity_reward(completions, completion_ids, **kwargs):
    """1.0 when the first completion token has an even id: about half the rollouts succeed, at no cost."""
    return [float(len(ids) > 0 and ids[0] % 2 == 0) for ids in completion_ids]


class PhaseTimer:
    """Per-step seconds in each phase: timers around trainer methods, and step boundaries from a callback.

    `synchronize` (`torch.cuda.synchronize` on a GPU) is called at every boundary, so that a phase's time holds the
    device work it queued and none of the work queued before it."""

    def __init__(self, synchronize=None):
        self.synchronize = synchronize or (lambda: None)
        self.steps = []  # one dict phase -> seconds per finished step, with "step"
        self.current = None
        self._start = None
        self._depth = 0  # only the outermost timed call counts (no phase is nested in another here)

    def wrap(self, trainer) -> None:
        for path, phase in PHASES.items():
            *owners, method = path.split(".")
            target = trainer
            for owner in owners:
                target = getattr(target, owner, None)
            if target is not None and hasattr(target, method):
                setattr(target, method, self._timed(getattr(target, method), phase))

    def _timed(self, function, phase):
        @functools.wraps(function)
        def timed(*args, **kwargs):
            if self.current is None or self._depth:
                return function(*args, **kwargs)
            self._depth += 1
            self.synchronize()
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.synchronize()
                self.current[phase] += time.perf_counter() - start
                self._depth -= 1

        return timed

    def callback(self):
        from transformers import TrainerCallback

        timer = self

        class StepBoundaries(TrainerCallback):
            def on_step_begin(self, args, state, control, **kwargs):
                timer.current = dict.fromkeys(PHASES.values(), 0.0)
                timer.synchronize()
                timer._start = time.perf_counter()

            def on_step_end(self, args, state, control, **kwargs):
                timer.synchronize()
                step = time.perf_counter() - timer._start
                timer.current[REST] = step - sum(timer.current.values())
                timer.current["step"] = step
                timer.steps.append(timer.current)
                timer.current = None

        return StepBoundaries()


def synchronizer(runtime: dict):
    """`torch.cuda.synchronize` when the runtime's device is a GPU, else nothing."""
    if runtime["device"] == "cpu":
        return None
    import torch

    return torch.cuda.synchronize


def build_trainer(
    name: str,
    spec: dict,
    size: dict,
    output_dir: str,
    timer: PhaseTimer | None = None,
    runtime: dict = CPU_RUNTIME,
    model=None,
):
    """The trainer of the variant `name` (`spec`, one of `variants`), its phases timed by `timer` when given.

    Args:
        model (`str` or `PreTrainedModel`, *optional*):
            The policy: a model, or the folder of one saved with `save_pretrained` (so that a sharding engine such as
            ZeRO-3 partitions it as it loads). Defaults to a fresh `build_model(size)`.
    """
    from peft import LoraConfig
    from transformers.trainer_callback import PrinterCallback

    completions = spec["prompts"] * spec["rollouts"]
    common = dict(
        output_dir=os.path.join(output_dir, name),
        report_to=[],
        bf16=runtime["dtype"] == "bfloat16",
        use_cpu=runtime["device"] == "cpu",
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        gradient_checkpointing=runtime["gradient_checkpointing"],
        per_device_train_batch_size=completions,
        num_generations=spec["rollouts"],
        max_completion_length=size["completion_tokens"],
        generation_kwargs={"min_new_tokens": size["completion_tokens"]},  # every completion the same length
        max_steps=1,
        learning_rate=1e-5,
        lr_scheduler_type="constant",
        temperature=1.0,
        seed=0,
        dataloader_num_workers=0,
    )
    if spec["trainer"] == "grpo":
        from trl import GRPOConfig, GRPOTrainer

        args, trainer_class = GRPOConfig(**common), GRPOTrainer
    else:
        from trl_srppo import SRPPOConfig, SRPPOTrainer

        options = {k: v for k, v in spec.items() if k not in ("trainer", "prompts", "rollouts", "lora")}
        options.setdefault("critic_dtype", runtime["dtype"])
        args, trainer_class = SRPPOConfig(**common, critic_learning_rate=1e-5, **options), SRPPOTrainer
    trainer = trainer_class(
        model=model if model is not None else build_model(size, dtype=runtime["dtype"], device=runtime["device"]),
        reward_funcs=parity_reward,
        args=args,
        train_dataset=make_dataset(size),
        processing_class=build_tokenizer(size["vocab_size"]),
        callbacks=[timer.callback()] if timer is not None else None,
        peft_config=LoraConfig(**lora_settings(size)) if spec.get("lora") else None,
    )
    trainer.remove_callback(PrinterCallback)
    if timer is not None:
        timer.wrap(trainer)
    return trainer


def train_steps(trainer, steps: int) -> None:
    trainer.args.max_steps = steps
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()


# ---- memory ---------------------------------------------------------------------------------------------------------


def tensor_bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def training_state_bytes(trainer) -> dict[str, int]:
    """Weights, gradients and optimizer state of the policy (and reference model) and the critic, in bytes.

    Gradients are counted as one tensor per trainable parameter or parameter an optimizer updates, the memory they
    take during every step (the trainer frees them between steps). A tensor two models share (the policy LoRA
    critic's adapter lives in the policy's model) counts once, under the policy."""
    import torch

    def optimizer_bytes(optimizer) -> int:
        if optimizer is None:
            return 0
        optimizer = getattr(optimizer, "optimizer", optimizer)  # Accelerate's wrapper
        return tensor_bytes(v for state in optimizer.state.values() for v in state.values() if torch.is_tensor(v))

    models = {"policy": trainer.model}
    if getattr(trainer, "ref_model", None) is not None:
        models["reference"] = trainer.ref_model
    if getattr(trainer, "critic", None) is not None:
        models["critic"] = trainer.critic
    trained = set()
    for optimizer in (trainer.optimizer, getattr(trainer, "critic_optimizer", None)):
        optimizer = getattr(optimizer, "optimizer", optimizer)
        trained |= {id(p) for group in getattr(optimizer, "param_groups", []) for p in group["params"]}
    state, seen = {}, set()
    for name, model in models.items():
        params = [p for p in model.parameters() if id(p) not in seen]
        seen |= {id(p) for p in params}
        state[f"{name} weights"] = tensor_bytes(params) + tensor_bytes(model.buffers())
        state[f"{name} gradients"] = tensor_bytes(p for p in params if p.requires_grad or id(p) in trained)
    state["policy optimizer"] = optimizer_bytes(trainer.optimizer)
    if "critic" in models:
        state["critic optimizer"] = optimizer_bytes(trainer.critic_optimizer)
    state["total"] = sum(state.values())
    return state


def _memory_probe(name, spec, size, output_dir, runtime, queue):
    import torch

    torch.set_num_threads(1)
    trainer = build_trainer(name, spec, size, output_dir, runtime=runtime)
    train_steps(trainer, 2)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    # On a GPU, the most this process ever had allocated there (the model's build and both steps); on a CPU, None:
    # the peak RSS is the memory figure there.
    peak_device = torch.cuda.max_memory_allocated() if runtime["device"] != "cpu" else None
    queue.put(
        {
            "state_bytes": training_state_bytes(trainer),
            "peak_rss_bytes": peak_kib * 1024,
            "peak_gpu_bytes": peak_device,
        }
    )


def measure_memory(all_variants: dict, size: dict, output_dir: str, runtime: dict = CPU_RUNTIME) -> dict:
    """One process per variant, started before any trainer of the benchmark's size exists in this process.

    On a CPU the processes are forked, after a throwaway trainer of the quick size is built here, so that the
    libraries' lazy imports and set-up are done once rather than in every child; each child's peak RSS then counts
    the libraries and its own variant. On a GPU they are spawned (CUDA does not survive a fork), each a fresh
    interpreter whose peak GPU memory is its variant's alone."""
    import gc

    if runtime["device"] == "cpu":
        build_trainer("warm-up", variants(4)["grpo"], SIZES["quick"], output_dir)
        gc.collect()
    context = multiprocessing.get_context("fork" if runtime["device"] == "cpu" else "spawn")
    results = {}
    for name, spec in all_variants.items():
        queue = context.Queue()
        process = context.Process(target=_memory_probe, args=(name, spec, size, output_dir, runtime, queue))
        process.start()
        try:
            results[name] = queue.get(timeout=1800)
        finally:
            process.join()
        if process.exitcode != 0:
            raise RuntimeError(f"the memory probe of {name} exited with code {process.exitcode}")
    return results


# ---- timing ---------------------------------------------------------------------------------------------------------


def measure_time(
    all_variants: dict, size: dict, output_dir: str, rounds: int, steps_per_round: int, runtime: dict = CPU_RUNTIME
) -> dict:
    """Round-robin over the variants, `steps_per_round` steps each, the order rotating every round."""
    timers = {name: PhaseTimer(synchronizer(runtime)) for name in all_variants}
    trainers = {
        name: build_trainer(name, spec, size, output_dir, timers[name], runtime) for name, spec in all_variants.items()
    }
    names = list(all_variants)
    per_round = {name: [] for name in names}
    for r in range(rounds + 1):  # round 0 is the warm-up
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            before = len(timers[name].steps)
            train_steps(trainers[name], steps_per_round)
            if r > 0:
                per_round[name].append(timers[name].steps[before:])
            print(f"round {r} {name}: {statistics.median(s['step'] for s in timers[name].steps[before:]):.3f} s/step")
    return per_round


def summarize(per_round: dict) -> dict:
    """Median seconds per phase over every counted step, and each round's median per phase (for paired ratios)."""
    summary = {}
    for name, rounds in per_round.items():
        steps = [s for r in rounds for s in r]
        # `get`: the JSON of a run from before a phase existed (`--from-json`) has none of it.
        summary[name] = {key: statistics.median(s.get(key, 0.0) for s in steps) for key in ["step"] + PHASE_NAMES}
        summary[name]["steps"] = len(steps)
        summary[name]["rounds"] = [
            {key: statistics.median(s[key] for s in r) for key in ["step", "critic values", "critic update"]}
            for r in rounds
        ]
    return summary


# The comparisons of the report, numerator / denominator at the same step, in order; "floor" is GRPO's step plus the
# fused SR-PPO's critic update, and "critic time" a variant's critic values plus critic update.
RATIOS = [
    ("sr-ppo / grpo (equal completions)", "sr-ppo", "grpo"),
    ("sr-ppo / floor (grpo + one critic forward and backward)", "sr-ppo", "floor"),
    ("sr-ppo-separate / floor", "sr-ppo-separate", "floor"),
    ("sr-ppo / sr-ppo-separate", "sr-ppo", "sr-ppo-separate"),
    (
        "sr-ppo / sr-ppo-separate, critic time only (values + update)",
        "critic time:sr-ppo",
        "critic time:sr-ppo-separate",
    ),
    ("sr-ppo / grpo-paper (per update, paper's matching)", "sr-ppo", "grpo-paper"),
    ("sr-ppo-lora-critic / grpo (equal completions)", "sr-ppo-lora-critic", "grpo"),
    ("sr-ppo-policy-head / grpo (equal completions)", "sr-ppo-policy-head", "grpo"),
    ("sr-ppo-policy-head / grpo-paper (per update, paper's matching)", "sr-ppo-policy-head", "grpo-paper"),
    (
        "grpo / grpo-paper (the lowest per-update ratio at the paper's matching: GRPO at half the completions)",
        "grpo",
        "grpo-paper",
    ),
    ("sr-ppo-policy-lora / grpo-lora (LoRA policies, equal completions)", "sr-ppo-policy-lora", "grpo-lora"),
]


def ratios(summary: dict) -> dict:
    """The comparisons the report makes, paired round by round: within a round the variants ran one after the other,
    so a ratio of their round medians cancels most of the machine's slower and faster spells. Reported: the median
    of the per-round ratios, their range, and the ratio of the overall medians. A comparison whose variants were not
    run (`--variants`) is left out, the floor when `grpo` or `sr-ppo` is missing."""
    out = {}

    def per_round(term):  # (seconds in each round, overall median seconds), or None when a variant is missing
        if term == "floor":
            if not {"grpo", "sr-ppo"} <= summary.keys():
                return None
            grpo, critic = per_round("grpo")[0], [r["critic update"] for r in summary["sr-ppo"]["rounds"]]
            overall = summary["grpo"]["step"] + summary["sr-ppo"]["critic update"]
            return [g + c for g, c in zip(grpo, critic, strict=True)], overall
        if term.startswith("critic time:"):
            name = term.split(":", 1)[1]
            if name not in summary:
                return None
            rounds = [r["critic values"] + r["critic update"] for r in summary[name]["rounds"]]
            return rounds, summary[name]["critic values"] + summary[name]["critic update"]
        if term not in summary:
            return None
        return [r["step"] for r in summary[term]["rounds"]], summary[term]["step"]

    floor = per_round("floor")
    if floor is not None:
        out["floor_seconds"] = statistics.median(floor[0])
    for key, numerator, denominator in RATIOS:
        top, bottom = per_round(numerator), per_round(denominator)
        if top is None or bottom is None:
            continue
        rounds = [n / d for n, d in zip(top[0], bottom[0], strict=True)]
        out[key] = {"median": statistics.median(rounds), "rounds": rounds, "of_overall_medians": top[1] / bottom[1]}
    return out


# ---- the report -----------------------------------------------------------------------------------------------------


def machine(runtime: dict = CPU_RUNTIME) -> dict:
    import torch
    import transformers
    import trl

    info = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "trl": trl.__version__,
    }
    if runtime["device"] != "cpu":
        properties = torch.cuda.get_device_properties(0)
        info.update(gpu=properties.name, gpu_memory_bytes=properties.total_memory, cuda=torch.version.cuda)
    return info


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f}"


def runtime_of(setup: dict) -> dict:
    """The runtime a run's setup records (a run of the CPU mode from before the GPU mode records none)."""
    return {key: setup.get(key, value) for key, value in CPU_RUNTIME.items()}


def report_name(setup: dict) -> str:
    """The report's file name without extension: the GPU mode never overwrites the CPU mode's report."""
    return "performance_gpu" if runtime_of(setup)["gpu"] else "performance"


def pool_table(result: dict) -> list[str]:
    """The report's lines on prompt sampling: per variant that draws its prompts from a pool, the pool's size, the
    pool forward's seconds per step beside generation's (medians), and their ratio; none without such a variant."""
    summary = result["seconds"]
    pooled = [n for n in summary if result["variants"][n].get("prompt_sampling", "none") != "none"]
    if not pooled:
        return []
    lines = [
        "",
        "## The prompt pool of prompt sampling",
        "",
        '`prompt_sampling="pass_at_k"`: before generating, the critic values the prompts of a pool of m generated '
        "batches (a no-grad forward on the prompt tokens alone, `per_device_train_batch_size` rows at a time) and "
        "the batch's prompts are drawn from it. The pool's time is tokenising, that forward and the draw.",
        "",
        "| variant | m | prompts valued per step | pool (s) | generation (s) | pool / generation |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name in pooled:
        spec, seconds = result["variants"][name], summary[name]
        m = spec["prompt_pool_factor"]
        ratio = seconds["prompt pool"] / seconds["generation"] if seconds["generation"] > 0 else float("nan")
        lines.append(
            f"| {name} | {m} | {m * spec['prompts']} | {seconds['prompt pool']:.4f} | {seconds['generation']:.4f} | "
            f"{ratio:.3f} |"
        )
    return lines


def phase_tables(summary: dict, names: list[str], title: str = "") -> list[str]:
    """The report's tables of each phase's median seconds per step and of its share of the step, a column a variant
    of `names` (`summary`: `summarize`'s); `title` is added to both headings."""
    lines = ["", f"## Seconds per step (median){title}", "", "| phase | " + " | ".join(names) + " |"]
    lines.append("| --- |" + " --- |" * len(names))
    for key in PHASE_NAMES + ["step"]:
        label = "**whole step**" if key == "step" else key
        lines.append(f"| {label} | " + " | ".join(f"{summary[n][key]:.4f}" for n in names) + " |")

    lines += ["", f"## Share of the step{title}", "", "| phase | " + " | ".join(names) + " |"]
    lines.append("| --- |" + " --- |" * len(names))
    for key in PHASE_NAMES:
        shares = [f"{100 * summary[n][key] / summary[n]['step']:.1f}%" for n in names]
        lines.append(f"| {key} | " + " | ".join(shares) + " |")
    return lines


def ratio_table(ratio: dict) -> list[str]:
    """The report's table of `ratios`' comparisons: the median of the per-round ratios, their range, and the ratio of
    the overall medians."""
    lines = [
        "",
        "| ratio | median over rounds | range over rounds | ratio of overall medians |",
        "| --- | --- | --- | --- |",
    ]
    for key, value in ratio.items():
        if key == "floor_seconds":
            continue
        spread = f"{min(value['rounds']):.3f} - {max(value['rounds']):.3f}"
        lines.append(f"| {key} | {value['median']:.3f} | {spread} | {value['of_overall_medians']:.3f} |")
    return lines


def write_report(result: dict, output_dir: str) -> str:
    summary, ratio, memory, setup = result["seconds"], result["ratios"], result["memory"], result["setup"]
    runtime = runtime_of(setup)
    gpu_mode, on_gpu = runtime["gpu"], runtime["device"] != "cpu"
    names = list(summary)
    info = result["machine"]
    command = "make bench-step-gpu" if gpu_mode else "make bench-step"
    lines = [
        "# Cost of a training step: GRPO and SR-PPO side by side" + (" on a GPU" if gpu_mode else ""),
        "",
        f"Written by `python -m benchmarks.costs.step_cost{' --gpu' if gpu_mode else ''}`; "
        f"regenerate with `{command}`. "
        "Every figure below was measured in the run described here.",
        "",
    ]
    if gpu_mode and not on_gpu:
        lines += [
            "**GPU mode on a CPU** (`--device cpu`): the GPU mode's code (bf16, gradient checkpointing, this report) "
            "run on a CPU as a check of that code. Its seconds say nothing about a GPU, and there is no GPU memory to "
            "report; run `make bench-step-gpu` on a machine with a GPU for those.",
            "",
        ]
    if setup["quick"]:
        lines += [
            "**Quick mode** (`--quick`): a tiny model and one counted round, a smoke test of the benchmark. These "
            "figures say nothing about the cost at the "
            + ("GPU mode's size" if gpu_mode else "default sizes")
            + f"; run `{command}` on an idle machine for those.",
            "",
        ]
    hardware = f"{info['cpu_count']} CPUs, {info['torch_threads']} torch thread"
    if "gpu" in info:
        hardware = f"{info['gpu']} ({info['gpu_memory_bytes'] / 2**30:.1f} GiB, CUDA {info['cuda']}), " + hardware
    if setup.get("num_attention_heads"):
        shape = f"{setup['num_attention_heads']} attention heads, {setup['num_key_value_heads']} key-value heads, "
    else:
        shape = ""
    if gpu_mode and not setup["quick"] and setup["vocab_size"] == QWEN3_1_7B["vocab_size"]:
        shape = "Qwen3-1.7B's shape: " + shape
    lines += [
        f"- Command: `{result['command']}`",
        f"- Date: {result['date']}; code: {result['commit']}"
        + (
            f"; this report was rewritten from the run's JSON (`--from-json`) by code {result['report_rewritten_by']}"
            if "report_rewritten_by" in result
            else ""
        ),
        f"- Machine: {info['platform']}, {hardware}; load average (1, 5, 15 min) at start "
        f"{info['load_average_at_start']}"
        + (f", at end {info['load_average_at_end']}" if "load_average_at_end" in info else "")
        + f"; torch {info['torch']}, transformers {info['transformers']}, trl {info['trl']}",
        f"- Model: random-init Qwen3 model from a config ({shape}{setup['num_layers']} layers, hidden "
        f"{setup['hidden_size']}, intermediate {setup['intermediate_size']}, vocabulary {setup['vocab_size']}), "
        f"on the {runtime['device'].upper()} in {runtime['dtype']}"
        + (
            " (`bf16=True`; the critics' weights too: `critic_dtype='bfloat16'`; AdamW in the weights' dtype)"
            if runtime["dtype"] == "bfloat16"
            else ""
        )
        + (", gradient checkpointing on for the policy and the critic" if runtime["gradient_checkpointing"] else "")
        + "; the critic is a copy of the policy's backbone with a value head (sr-ppo-policy-head: a linear "
        "head on the policy's hidden states; sr-ppo-policy-lora: a second LoRA adapter and a linear head on the LoRA "
        "policy's base model).",
        f"- Sequences: {setup['prompt_tokens']}-token prompts, {setup['completion_tokens']} completion tokens "
        "(every completion the same length); one optimizer step per generated batch.",
        f"- Timing: {setup['rounds']} rounds after a warm-up round, {setup['steps_per_round']} steps of every variant "
        "per round, the order rotating; medians over all counted steps"
        + ("; each phase timed between `torch.cuda.synchronize()` calls." if on_gpu else "."),
        "",
        "| variant | trainer | prompts x rollouts | completions per step |",
        "| --- | --- | --- | --- |",
    ]
    for name in names:
        spec = result["variants"][name]
        trainer = "GRPOTrainer" if spec["trainer"] == "grpo" else "SRPPOTrainer"
        if spec.get("critic_fused_forward") is False:
            trainer += " (`critic_fused_forward=False`)"
        if spec.get("critic_use_peft"):
            trainer += " (`critic_use_peft=True`)"
        if spec.get("critic_type"):
            trainer += f" (`critic_type={spec['critic_type']!r}`)"
        if spec.get("prompt_sampling"):
            trainer += f" (`prompt_sampling={spec['prompt_sampling']!r}`, m = {spec['prompt_pool_factor']})"
        if spec.get("lora"):
            lora = lora_settings(setup)
            trainer += f" (LoRA policy: r={lora['r']}, alpha {lora['lora_alpha']}, {lora['target_modules']})"
        lines.append(f"| {name} | {trainer} | {spec['prompts']} x {spec['rollouts']} | {spec['completions']} |")

    lines += phase_tables(summary, names)
    lines += pool_table(result)
    lines += ["", "## Ratios", ""]
    if "floor_seconds" in ratio:
        lines += [
            "The floor at equal completions is GRPO's step plus one critic forward and backward (the fused SR-PPO's "
            f"critic update, optimizer step included): {ratio['floor_seconds']:.4f} s (median over rounds)."
        ]
    else:
        lines += ["No floor: it needs both `grpo` and `sr-ppo`, and this run left one out (`--variants`)."]
    lines[-1] += (
        " Each ratio is taken within a round, where the variants ran one after the other, and the median over the "
        "rounds is reported with their range; the last column is the ratio of the overall medians of the first table."
    )
    lines += ratio_table(ratio)

    gpu_column = " peak GPU memory allocated (MiB) |" if gpu_mode else ""
    lines += [
        "",
        "## Memory",
        "",
        "Each variant built alone in a process of its own that trains 2 steps. Training state: weights, gradients "
        "(one per trainable parameter) and optimizer state, counted from the tensors. Peak RSS: the whole process "
        "(Python, libraries, activations, data), so it includes what the libraries take before any model exists."
        + (
            " Peak GPU memory allocated: `torch.cuda.max_memory_allocated()` at the end of the process, so the most "
            "its tensors took at once on the GPU, from the model's build to the end of the second step (the "
            "allocator's cache, reserved but not allocated, is not in it)."
            if gpu_mode
            else ""
        ),
        "",
        "| variant | policy weights + grads + optimizer (MiB) | critic weights + grads + optimizer (MiB) | "
        "training state (MiB) | vs grpo (LoRA rows: vs grpo-lora) | peak RSS (MiB) |" + gpu_column,
        "| --- | --- | --- | --- | --- | --- |" + (" --- |" if gpu_mode else ""),
    ]
    for name in names:
        baseline = "grpo-lora" if result["variants"][name].get("lora") and "grpo-lora" in memory else "grpo"
        state = memory[name]["state_bytes"]
        versus = f"{state['total'] / memory[baseline]['state_bytes']['total']:.2f}x" if baseline in memory else "-"
        policy = sum(v for k, v in state.items() if k.startswith(("policy", "reference")))
        critic = sum(v for k, v in state.items() if k.startswith("critic"))
        row = (
            f"| {name} | {_mib(policy)} | {_mib(critic)} | {_mib(state['total'])} | {versus} | "
            f"{_mib(memory[name]['peak_rss_bytes'])} |"
        )
        if gpu_mode:
            peak = memory[name].get("peak_gpu_bytes")
            row += f" {_mib(peak)} |" if peak is not None else " - (CPU run) |"
        lines.append(row)
    lines.append("")
    if on_gpu:
        lines.append(
            "On a GPU the absolute seconds mean something, unlike on a shared CPU: every phase was timed between "
            "synchronizations of the device. The ratios, measured side by side, remain the comparison of the variants."
        )
    elif gpu_mode:
        lines.append("These seconds were measured on a CPU in the GPU mode's settings: they say nothing about a GPU.")
    else:
        lines.append(
            "Timing on a shared CPU is noisy: compare the ratios (measured side by side), not the absolute seconds."
        )
    lines.append("")
    os.makedirs(output_dir, exist_ok=True)
    path = os.path.join(output_dir, report_name(setup) + ".md")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    with open(os.path.join(output_dir, report_name(setup) + ".json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
    return path


def rewrite_report(path: str, output_dir: str) -> int:
    """The report of an earlier run, from the per-step times and memory figures its JSON holds."""
    with open(path, encoding="utf-8") as f:
        result = json.load(f)
    steps_per_round = result["setup"]["steps_per_round"]
    per_round = {
        name: [steps[i : i + steps_per_round] for i in range(0, len(steps), steps_per_round)]
        for name, steps in result["steps"].items()
    }
    result["seconds"] = summarize(per_round)
    result["ratios"] = ratios(result["seconds"])
    result["report_rewritten_by"] = git_commit("src", "benchmarks")
    print(f"wrote {write_report(result, output_dir)}")
    return 0


# ---- entry point ----------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a tiny model, 1 round of 1 step (the smoke test)")
    parser.add_argument(
        "--gpu",
        action="store_true",
        help="Qwen3-1.7B's shape in bf16 on a CUDA GPU, gradient checkpointing on; writes performance_gpu.md/.json",
    )
    parser.add_argument(
        "--device",
        choices=["cuda", "cpu"],
        default="cuda",
        help="with --gpu --quick: 'cpu' runs the GPU mode's code on the CPU (a check where no GPU is at hand)",
    )
    parser.add_argument("--completions", type=int, default=8, help="completions per step at equal completions")
    parser.add_argument(
        "--variants", help="comma-separated variants to run (default: all); a ratio needs both of its variants"
    )
    parser.add_argument("--prompt-tokens", type=int, help="prompt length (default 32, 128 with --gpu, 8 quick)")
    parser.add_argument(
        "--completion-tokens", type=int, help="completion length (default 64, 512 with --gpu, 8 quick)"
    )
    parser.add_argument("--rounds", type=int, help="counted rounds (default 6, 3 with --gpu, 1 with --quick)")
    parser.add_argument(
        "--steps-per-round", type=int, help="steps of each variant per round (default 3, 2 with --gpu, 1 quick)"
    )
    parser.add_argument("--output-dir", default=os.path.join(REPO_ROOT, "reports"))
    parser.add_argument(
        "--from-json", metavar="PATH", help="measure nothing: rewrite the report from the JSON of an earlier run"
    )
    args = parser.parse_args(argv if argv is not None else sys.argv[1:])
    if args.from_json:
        return rewrite_report(args.from_json, args.output_dir)
    if args.completions < 4 or args.completions % 4:
        parser.error("--completions must be a positive multiple of 4 (GRPO's groups of 4 rollouts).")
    for flag in ("prompt_tokens", "completion_tokens", "rounds", "steps_per_round"):
        if getattr(args, flag) is not None and getattr(args, flag) < 1:
            parser.error(f"--{flag.replace('_', '-')} must be at least 1, got {getattr(args, flag)}.")
    all_variants = variants(args.completions)
    if args.variants:
        chosen = [name.strip() for name in args.variants.split(",") if name.strip()]
        unknown = [name for name in chosen if name not in all_variants]
        if unknown or not chosen:
            parser.error(f"--variants: unknown {unknown or args.variants!r}; choose among {', '.join(all_variants)}.")
        all_variants = {name: all_variants[name] for name in all_variants if name in chosen}

    import torch

    if args.gpu:
        runtime = dict(GPU_RUNTIME, device=args.device)
        if args.device == "cpu" and not args.quick:
            parser.error(
                "--device cpu runs the GPU mode's code on a CPU as a check: add --quick (the tiny model); "
                "Qwen3-1.7B's size is for a GPU."
            )
        if args.device == "cuda" and not torch.cuda.is_available():
            build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
            parser.error(
                f"--gpu needs a CUDA GPU, and torch {torch.__version__} ({build}) sees none "
                "(torch.cuda.is_available() is False). Run it on a machine with a GPU and a CUDA build of torch; "
                "here, run the CPU benchmark (without --gpu), or check the GPU mode's code on the CPU with "
                "--gpu --quick --device cpu."
            )
        # Every variant's trainer stays on the GPU at once: growable segments keep the cache from fragmenting.
        os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    elif args.device != "cuda":
        parser.error("--device applies to the GPU mode only: add --gpu (with --quick) to run its code on the CPU.")
    else:
        runtime = dict(CPU_RUNTIME)
    rounds = args.rounds or (1 if args.quick else 3 if args.gpu else 6)
    steps_per_round = args.steps_per_round or (1 if args.quick else 2 if args.gpu else 3)

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    warnings.filterwarnings("ignore")
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        size = dict(SIZES["quick" if args.quick else "gpu" if args.gpu else "default"])
        if args.prompt_tokens:
            size["prompt_tokens"] = args.prompt_tokens
        if args.completion_tokens:
            size["completion_tokens"] = args.completion_tokens
        for spec in all_variants.values():
            spec["completions"] = spec["prompts"] * spec["rollouts"]
        command = "python -m benchmarks.costs.step_cost " + " ".join(argv if argv is not None else sys.argv[1:])
        info = machine(runtime)
        specs = {n: {k: v for k, v in s.items() if k != "completions"} for n, s in all_variants.items()}
        with tempfile.TemporaryDirectory() as scratch:  # the trainers' output folders (nothing is saved)
            memory = measure_memory(specs, size, scratch, runtime)
            per_round = measure_time(specs, size, scratch, rounds, steps_per_round, runtime)
        info["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
        summary = summarize(per_round)
        result = {
            "command": command.strip(),
            "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "commit": git_commit("src", "benchmarks"),
            "machine": info,
            "setup": {**size, **runtime, "quick": args.quick, "rounds": rounds, "steps_per_round": steps_per_round},
            "variants": all_variants,
            "seconds": summary,
            "ratios": ratios(summary),
            "memory": memory,
            "steps": {name: [s for r in rounds_ for s in r] for name, rounds_ in per_round.items()},
        }
        path = write_report(result, args.output_dir)
    finally:
        torch.set_num_threads(previous_threads)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

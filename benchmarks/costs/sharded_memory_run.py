# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""One process of `benchmarks.costs.sharded_memory`, started by `accelerate launch` (DeepSpeed ZeRO-3, 2 processes):
one training step of GRPO or SR-PPO on the model folder it is given, then `rank<r>.json` in the output folder with
this process's memory.

    python sharded_memory_run.py OUTPUT_DIR MODEL_DIR CASE PROMPT_TOKENS COMPLETION_TOKENS

CASE: `grpo` (TRL's GRPOTrainer, 2 rollouts per prompt), `separate` (SR-PPO's default critic, its own DeepSpeed
engine), `policy_head` (a value head on the policy's hidden states), `lora_critic` (`critic_use_peft=True`) or
`policy_lora` (the policy LoRA critic beside a LoRA policy). A case refused at start writes its refusal instead.

Memory is read from `/proc/self/status`: `VmHWM` (the resident set's high-water mark) and `VmRSS`. Right before the
step, `5` written to `/proc/self/clear_refs` resets the high-water mark to the resident set of that moment, so the
step's peak does not hold the model's loading; the peak before the reset is kept as the set-up's. The persistent
training state is counted from the tensors after the step (`state_bytes`).
"""

import json
import os
import sys
import warnings

import torch

from trl_srppo.runtime.memory import proc_status_bytes

LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj"]


def reset_peak() -> None:
    """Reset this process's `VmHWM` to its current resident set."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def memory_callback(record: dict):
    """A callback that records the set-up's peak and resets it at the step's start, and reads the step's peak at its
    end, into `record`."""
    from transformers import TrainerCallback

    class StepMemory(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            before = proc_status_bytes("VmHWM", "VmRSS")
            record["setup_peak_bytes"], record["step_start_rss_bytes"] = before["VmHWM"], before["VmRSS"]
            reset_peak()

        def on_step_end(self, args, state, control, **kwargs):
            after = proc_status_bytes("VmHWM", "VmRSS")
            record["step_peak_bytes"], record["step_end_rss_bytes"] = after["VmHWM"], after["VmRSS"]

    return StepMemory()


def case_options(case: str, bf16: bool) -> tuple[dict, object]:
    """(SRPPOConfig fields, peft_config) of an SR-PPO case."""
    from peft import LoraConfig

    options = {"critic_dtype": "bfloat16" if bf16 else "float32"}
    if case == "separate":
        return options, None
    if case == "policy_head":
        return {**options, "critic_type": "policy_head"}, None
    if case == "lora_critic":
        return {**options, "critic_use_peft": True, "critic_lora_target_modules": LORA_TARGETS}, None
    if case == "policy_lora":
        lora = LoraConfig(r=16, lora_alpha=32, target_modules=LORA_TARGETS)
        return {**options, "critic_type": "policy_lora"}, lora
    raise ValueError(f"unknown case {case!r}")


def build_trainer(output_dir: str, model_dir: str, case: str, prompt_tokens: int, completion_tokens: int, record):
    """The case's trainer on `model_dir`: one completion per process, every completion `completion_tokens` long."""
    from datasets import Dataset
    from transformers import AutoTokenizer

    bf16 = os.environ.get("ACCELERATE_MIXED_PRECISION", "no") == "bf16"
    common = dict(
        output_dir=output_dir,
        report_to=[],
        bf16=bf16,
        use_cpu=True,
        per_device_train_batch_size=1,
        max_completion_length=completion_tokens,
        generation_kwargs={"min_new_tokens": completion_tokens},  # every completion full length
        max_steps=1,
        learning_rate=1e-6,
        lr_scheduler_type="constant",
        gradient_checkpointing=True,  # as the recipes train
        logging_steps=1,
        save_strategy="no",
        disable_tqdm=True,
        seed=0,
    )
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    words = [f"t{i}" for i in range(2, 2 + prompt_tokens)]
    dataset = Dataset.from_list([{"prompt": " ".join(words[i:] + words[:i])} for i in range(16)])
    if case == "grpo":
        from trl import GRPOConfig, GRPOTrainer

        args, trainer_class, peft_config = GRPOConfig(**common, num_generations=2), GRPOTrainer, None
    else:
        from trl_srppo import SRPPOConfig, SRPPOTrainer

        options, peft_config = case_options(case, bf16)
        args, trainer_class = SRPPOConfig(**common, critic_learning_rate=1e-6, **options), SRPPOTrainer
    return trainer_class(
        model=model_dir,
        reward_funcs=lambda completion_ids, **kwargs: [float(ids[0] % 2 == 0) for ids in completion_ids],
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=[memory_callback(record)],
    )


# ---- the training state, counted from the tensors -------------------------------------------------------------------


def nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def held_elements(parameters) -> dict[str, int]:
    """Elements of `parameters` this process holds (a ZeRO-3 parameter's partition) against the whole."""
    local = whole = 0
    for p in parameters:
        partitioned = hasattr(p, "ds_tensor")
        local += p.ds_tensor.numel() if partitioned else p.numel()
        whole += p.ds_numel if partitioned else p.numel()
    return {"local": local, "whole": whole}


def optimizer_state_bytes(optimizer) -> int:
    """Bytes of the tensors in a torch optimizer's state (AdamW's two moments)."""
    return nbytes(v for state in optimizer.state.values() for v in state.values() if torch.is_tensor(v))


def zero3_state(engine) -> dict[str, int]:
    """This process's part of a ZeRO-3 engine's training state, in bytes: the weights' partitions (and the whole
    weights of the small parameters ZeRO-3 keeps gathered), the gradients' partitions, the float32 master partitions
    and the optimizer's moments. With `offload_optimizer` the last three are the CPU's copies."""
    optimizer = engine.optimizer
    params = list(engine.module.parameters())
    persistent = [p for p in params if getattr(p, "ds_persist", False)]
    masters = list(optimizer.fp32_partitioned_groups_flat)
    gradients = getattr(optimizer, "grad_partitions_flat_buffer", None)
    gradient_bytes = gradients.numel() * gradients.element_size() if gradients is not None else 0
    gradient_bytes += nbytes(m.grad for m in masters if m.grad is not None)
    return {
        "weights": nbytes(p.ds_tensor for p in params) + nbytes(persistent),
        "gradients": gradient_bytes,
        "master": nbytes(masters),
        "optimizer": optimizer_state_bytes(optimizer.optimizer),
        **{f"elements_{k}": v for k, v in held_elements(params).items()},
        "trained_elements": sum(p.ds_numel for p in params if p.requires_grad),
    }


def plain_state(model, optimizer) -> dict[str, int]:
    """A model held whole on this process (a LoRA critic, a value head): its weights, the gradients of what it
    trains, and its optimizer's state, in bytes."""
    optimizer = getattr(optimizer, "optimizer", optimizer)  # Accelerate's wrapper
    trained = {id(p) for group in optimizer.param_groups for p in group["params"]} if optimizer is not None else set()
    params = list(model.parameters())
    return {
        "weights": nbytes(params),
        "gradients": nbytes(p for p in params if id(p) in trained),
        "master": 0,
        "optimizer": optimizer_state_bytes(optimizer) if optimizer is not None else 0,
        **{f"elements_{k}": v for k, v in held_elements(params).items()},
        "trained_elements": sum(p.numel() for p in params if id(p) in trained),
    }


def training_state(trainer) -> dict[str, dict]:
    """The policy's and (SR-PPO) the critic's training state on this process."""
    state = {"policy": zero3_state(trainer.model_wrapped)}
    backend = getattr(trainer, "critic_backend", None)
    if backend is not None:
        engine = backend.model
        if hasattr(engine, "zero_optimization_stage"):
            state["critic"] = zero3_state(engine)
        else:
            own = [p for p in backend.unwrapped().parameters()]
            policy_ids = {id(p) for p in trainer.model.parameters()}
            critic = plain_state(backend.unwrapped(), trainer.critic_optimizer)
            if any(id(p) in policy_ids for p in own):  # a critic that lives in the policy counts only its own part
                critic["weights"] = nbytes(p for p in own if id(p) not in policy_ids)
            state["critic"] = critic
        state["critic"]["class"] = type(backend).__name__
    return state


def main(output_dir: str, model_dir: str, case: str, prompt_tokens: str, completion_tokens: str) -> None:
    rank = int(os.environ.get("RANK", "0"))
    record = {"case": case, "rank": rank}
    try:
        trainer = build_trainer(output_dir, model_dir, case, int(prompt_tokens), int(completion_tokens), record)
    except (ValueError, NotImplementedError) as err:  # a combination refused at start
        record["refused"] = f"{type(err).__name__}: {err}"
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trainer.train()
        record["process_peak_bytes"] = max(record["setup_peak_bytes"], proc_status_bytes("VmHWM")["VmHWM"])
        record["state_bytes"] = training_state(trainer)
        record["completion_tokens"] = [
            e.get("completions/mean_length") for e in trainer.state.log_history if "completions/mean_length" in e
        ]
        record["engine"] = trainer.accelerator.distributed_type.name
        record["zero_stage"] = trainer.model_wrapped.zero_optimization_stage()
    with open(os.path.join(output_dir, f"rank{rank}.json"), "w") as f:
        json.dump(record, f, indent=1)


if __name__ == "__main__":
    torch.set_num_threads(1)
    main(*sys.argv[1:])
    from trl_srppo.runtime.teardown import exit_process

    exit_process(0)  # no abort at exit while gloo's threads outlive their groups

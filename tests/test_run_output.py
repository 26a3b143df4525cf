# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""What a run shows its user (`trl_srppo.runtime.run_output`): progress during generation, completion logs once per
generated batch, the model card of a local model, and no warning for a tied weight on resume."""

import logging
import os

import pandas as pd
import pytest
import torch
from helpers import toy_grpo_trainer, toy_trainer
from transformers import Qwen3Config, Qwen3ForCausalLM

from trl_srppo.runtime.mixin import grpo_trainer_class
from trl_srppo.runtime.run_output import GenerationProgress, generation_progress, name_local_models, tied_missing_keys


def completion_files(out):
    folder = out / "completions"
    return sorted(os.listdir(folder)) if folder.is_dir() else []


def test_generation_progress_moves_at_each_decoding_step_with_the_rate(toy, monkeypatch):
    tokenizer, build_model, _ = toy
    model = build_model()
    prompt = tokenizer(["1 max 2 ="] * 3, return_tensors="pt")
    shown = []
    monkeypatch.setattr(GenerationProgress, "rate_text", lambda self: shown.append(self.bar.n) or "1.0 tok/s")
    with generation_progress(model, rows=3, max_new_tokens=5) as progress:
        model.generate(**prompt, max_new_tokens=5, min_new_tokens=5, do_sample=False, pad_token_id=0)
    # One prefill and four decoding forwards: the bar moved five times, its rate shown after each.
    assert progress.steps == 5 and shown == [1, 2, 3, 4, 5]
    # The hook is gone after the block.
    model.generate(**prompt, max_new_tokens=2, do_sample=False, pad_token_id=0)
    assert progress.steps == 5


def test_generation_progress_rate_counts_every_row():
    progress = GenerationProgress(rows=4, max_new_tokens=10, disable=True)
    progress.start -= 2.0  # two seconds ago
    for _ in range(5):
        progress.step()
    rate = float(progress.rate_text().split()[0])
    assert rate == pytest.approx(4 * 5 / 2.0, rel=0.05)  # 20 tokens over the 4 rows in about 2 s
    progress.close()


def test_training_shows_generation_progress_on_the_main_process(toy, tmp_path, monkeypatch):
    steps = []
    original = GenerationProgress.step
    monkeypatch.setattr(GenerationProgress, "step", lambda self, *a: steps.append(self.rows) or original(self, *a))
    trainer = toy_trainer(toy, tmp_path / "out", max_steps=1, max_completion_length=3)
    trainer.train()
    # 8 completions, at most 3 tokens each: the bar moved at each decoding step of the one generate call.
    assert 1 <= len(steps) <= 3 and set(steps) == {8}


@pytest.mark.parametrize("trainer_kind", ["srppo", "grpo"])
def test_completions_are_logged_once_per_generated_batch(toy, tmp_path, monkeypatch, trainer_kind):
    import trl.trainer.grpo_trainer as grpo_module

    printed = []
    monkeypatch.setattr(grpo_module, "print_prompt_completions_sample", lambda *a, **k: printed.append(a[4]))
    out = tmp_path / "out"
    settings = dict(max_steps=4, steps_per_generation=2, log_completions=True, logging_steps=1)
    if trainer_kind == "srppo":
        trainer = toy_trainer(toy, out, **settings)
    else:
        trainer = toy_grpo_trainer(toy, out, trainer_class=grpo_trainer_class(), num_generations=2, **settings)
    trainer.train()
    # Two generated batches (steps 1-2 and 3-4): each printed and saved once, at the first step that logs it.
    assert printed == [1, 3]
    assert completion_files(out) == ["completions_00001.parquet", "completions_00003.parquet"]
    for name in completion_files(out):
        assert len(pd.read_parquet(out / "completions" / name)) == 16  # 8 rows a step, 2 steps a batch


def test_a_resume_in_the_middle_of_a_batch_keeps_its_completion_log(toy, tmp_path):
    out = tmp_path / "out"
    settings = dict(steps_per_generation=2, log_completions=True, logging_steps=1, save_strategy="steps")
    toy_trainer(toy, out, max_steps=1, save_steps=1, **settings).train()
    saved = out / "completions" / "completions_00001.parquet"
    rows, written = len(pd.read_parquet(saved)), saved.stat().st_mtime_ns
    assert rows == 16
    # Step 2 reuses the batch generated for step 1, restored from checkpoint-1: nothing new to log.
    toy_trainer(toy, out, max_steps=2, save_steps=1, **settings).train(resume_from_checkpoint=True)
    assert completion_files(out) == ["completions_00001.parquet"]
    assert saved.stat().st_mtime_ns == written and len(pd.read_parquet(saved)) == rows


def test_the_model_card_names_a_local_policy_folder_and_the_output_folder(toy, tmp_path):
    tokenizer, build_model, _ = toy
    policy = tmp_path / "my-policy"
    build_model().save_pretrained(policy)
    tokenizer.save_pretrained(policy)
    out = tmp_path / "my-run"
    trainer = toy_trainer(toy, out, model=str(policy))
    trainer.create_model_card()
    card = (out / "README.md").read_text()
    assert "None" not in card.split("## Training procedure")[0]
    assert "# Model Card for my-run" in card
    assert f"the model in the local folder `{policy}`" in card
    assert f'model="{out}"' in card


def test_name_local_models_links_a_hub_model_and_names_the_pushed_repository():
    card = 'version of [None](https://huggingface.co/None).\ngenerator = pipeline("text-generation", model="None")'
    named = name_local_models(card, "Qwen/Qwen3-1.7B", "me/my-run")
    assert "[Qwen/Qwen3-1.7B](https://huggingface.co/Qwen/Qwen3-1.7B)" in named and 'model="me/my-run"' in named


def tied_model(tie: bool, vocab_size: int = 32):
    config = Qwen3Config(
        vocab_size=vocab_size, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, head_dim=8, tie_word_embeddings=tie,
    )  # fmt: skip
    return Qwen3ForCausalLM(config)


def test_a_tied_lm_head_is_not_reported_missing_and_an_untied_one_is():
    tied, untied = tied_model(True), tied_model(False)
    assert tied_missing_keys(tied, ["lm_head.weight"]) == ["lm_head.weight"]
    assert tied_missing_keys(untied, ["lm_head.weight"]) == []
    # Both missing: nothing loaded that they share storage with.
    both = ["lm_head.weight", "model.embed_tokens.weight"]
    assert tied_missing_keys(tied, both) == []


def test_resume_of_a_tied_model_loads_without_a_missing_keys_warning(toy, tmp_path, caplog):
    tokenizer = toy[0]
    policy = tmp_path / "tied-policy"
    tied_model(True, vocab_size=len(tokenizer)).save_pretrained(policy)
    tokenizer.save_pretrained(policy)
    out = tmp_path / "out"
    settings = dict(save_strategy="steps", save_steps=1, critic_type="policy_head")  # one model: a short test
    toy_trainer(toy, out, model=str(policy), max_steps=1, **settings).train()
    trainer = toy_trainer(toy, out, model=str(policy), max_steps=2, **settings)
    assert trainer.model.lm_head.weight is trainer.model.model.embed_tokens.weight
    with caplog.at_level(logging.WARNING, logger="transformers.trainer"):
        trainer.train(resume_from_checkpoint=True)
    assert not [r for r in caplog.records if "missing keys" in r.getMessage()]
    with torch.no_grad():  # still tied after the load
        assert trainer.model.lm_head.weight.data_ptr() == trainer.model.model.embed_tokens.weight.data_ptr()


def test_the_grpo_baseline_logs_unreadable_answers_too(toy, tmp_path):
    from trl_srppo.rewards import math_reward

    dataset = toy[2].map(lambda row: {"answer": row["answer"].split()[-1]})  # integer gold: no math-verify worker
    trainer = toy_grpo_trainer(
        toy, tmp_path / "out", reward_funcs=math_reward, dataset=dataset, trainer_class=grpo_trainer_class(),
        num_generations=2, max_steps=1,
    )  # fmt: skip
    with pytest.warns(UserWarning, match="Reward function 'math' found no answer"):
        trainer.train()
    assert [e["rewards/math/unreadable"] for e in trainer.state.log_history if "rewards/math/mean" in e] == [1.0]


def test_resident_memory_is_read_from_procs_status_in_mib(monkeypatch):
    from trl_srppo.runtime import memory
    from trl_srppo.runtime.memory import memory_metrics, proc_status_bytes

    status = "Name:\tpython\nVmPeak:\t 9999 kB\nVmHWM:\t  3072 kB\nVmRSS:\t  1536 kB\nThreads:\t4\n"
    assert proc_status_bytes("VmHWM", "VmRSS", status=status) == {"VmHWM": 3072 * 1024, "VmRSS": 1536 * 1024}
    assert proc_status_bytes("VmHWM", "VmRSS", status="Name:\tpython\n") == {}
    original = memory.proc_status_bytes
    monkeypatch.setattr(memory, "proc_status_bytes", lambda *fields: original(*fields, status=status))
    metrics = memory_metrics()
    assert (metrics["memory/peak_rss_mib"], metrics["memory/rss_mib"]) == (3.0, 1.5)


@pytest.mark.parametrize("trainer_kind", ["sr-ppo", "grpo"])
def test_every_training_step_logs_the_process_memory(toy, tmp_path, trainer_kind):
    # Read from this process's /proc/self/status at each log: the peak never below the resident memory, and the logs
    # of evaluation and the run's summary without them.
    if trainer_kind == "grpo":
        trainer = toy_grpo_trainer(toy, tmp_path, trainer_class=grpo_trainer_class(), num_generations=4, max_steps=2)
    else:
        trainer = toy_trainer(toy, tmp_path, max_steps=2)
    trainer.train()
    steps = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert len(steps) == 2
    for entry in steps:
        assert 0 < entry["memory/rss_mib"] <= entry["memory/peak_rss_mib"]
    assert steps[0]["memory/peak_rss_mib"] <= steps[1]["memory/peak_rss_mib"]
    assert not any("memory/rss_mib" in entry for entry in trainer.state.log_history if "loss" not in entry)

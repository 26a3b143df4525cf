# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Pass@k evaluation: benchmark registry, verifiers on real answers, runner (resume, exact scores), engines, CLI."""

import dataclasses
import json
from fractions import Fraction
from math import comb
from pathlib import Path

import pytest
from helpers import read_rows
from test_evaluation_helpers import (
    FIXTURES,
    GPQA_ROWS,
    ScriptedEngine,
    gold_completion,
    make_model,
    make_tokenizer,
    save_tiny_model,
    write_gpqa_file,
    wrong_completion,
)

from trl_srppo.evaluation import benchmarks as bench_module
from trl_srppo.evaluation.benchmarks import Benchmark, Problem, get_benchmark, list_benchmarks, register_benchmark
from trl_srppo.evaluation.config import EvalConfig, default_ks
from trl_srppo.evaluation.engines import Completion, TransformersEngine, build_engine, select_engine
from trl_srppo.evaluation.generation import group_by_missing, sample_records
from trl_srppo.evaluation.models import load_model, resolve_model
from trl_srppo.evaluation.runner import evaluate, missing_samples
from trl_srppo.evaluation.sampling import SamplingConfig
from trl_srppo.evaluation.scoring import score_completions
from trl_srppo.evaluation.storage import prompt_sha
from trl_srppo.evaluation.verification import samples_in_order
from trl_srppo.tasks.registry import get_task

REQUIRED = {
    "aime24",
    "aime25",
    "aime26",
    "hmmt25_feb",
    "hmmt26_feb",
    "math500",
    "countdown",
    "countdown3",
    "countdown4",
    "knights_knaves",
    "gpqa_diamond",
}


@pytest.fixture(scope="module")
def data_dir():
    return FIXTURES


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("tiny-model"))


# ---------------------------------------------------------------------------------------------------------- registry


def test_registry_has_the_benchmarks_and_refuses_duplicates():
    assert REQUIRED <= set(list_benchmarks())
    with pytest.raises(ValueError, match="already registered.*aime24"):
        register_benchmark(get_benchmark("aime24"))
    with pytest.raises(KeyError, match="Registered benchmarks: .*math500"):
        get_benchmark("aime1999")
    assert get_benchmark("gpqa_diamond").verifier == "multiple_choice"
    assert get_benchmark("knights_knaves").verifier == "knights_knaves"
    assert all(
        "\\boxed{}" in get_benchmark(name).prompt_template.format(problem="x") for name in ("aime24", "math500")
    )


def test_adding_a_benchmark_is_one_entry(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text('{"question": "1+1?", "answer": 2}\n{"question": "2+2?", "answer": 4}\n', encoding="utf-8")
    task = dataclasses.replace(get_task("math"), prompt_template="Q: {problem}")
    entry = Benchmark(name="tiny_math_test", task=task, hub_path="me/tiny")
    try:
        register_benchmark(entry)
        problems = get_benchmark("tiny_math_test").load(source=path)
        assert [p.prompt for p in problems] == ["Q: 1+1?", "Q: 2+2?"]
        assert [p.id for p in problems] == ["0", "1"]
        assert problems[1].columns == {"answer": "4"}  # the math task keeps answers as strings
    finally:
        bench_module.BENCHMARKS.pop("tiny_math_test", None)


def test_hub_loading_calls_load_dataset_with_the_registered_names(monkeypatch):
    import datasets

    calls = []

    def fake_load_dataset(path, name=None, split=None, **kwargs):
        calls.append((path, name, split))
        return [{"problem_idx": 7, "problem": "Compute 1+1.", "answer": 2}]

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    problems = get_benchmark("aime26").load()
    assert calls == [("MathArena/aime_2026", None, "train")]
    assert problems[0].id == "7" and problems[0].columns == {"answer": "2"}  # integer answers become strings
    monkeypatch.setattr(
        datasets,
        "load_dataset",
        lambda path, name=None, split=None: calls.append((path, name, split)) or [dict(GPQA_ROWS[0])],
    )
    get_benchmark("gpqa_diamond").load()
    assert calls[-1] == ("Idavidrein/gpqa", "gpqa_diamond", "train")


def _check_local_files(folder: Path) -> dict[str, int]:
    """Load every local benchmark file of `folder` and check each problem's fields; returns the problem counts."""
    aime = get_benchmark("aime24").load(data_dir=folder)
    assert (
        aime[0].columns == {"answer": read_rows(folder / "aime24.jsonl")[0]["answer"]}
        and "\\boxed{}" in aime[0].prompt
    )
    assert len({p.id for p in aime}) == len(aime)
    three = get_benchmark("countdown3").load(data_dir=folder, max_problems=50)
    four = get_benchmark("countdown4").load(data_dir=folder, max_problems=50)
    assert {len(p.columns["nums"]) for p in three} == {3} and {len(p.columns["nums"]) for p in four} == {4}
    assert str(three[0].columns["target"]) in three[0].prompt
    kk = get_benchmark("knights_knaves").load(data_dir=folder, max_problems=3)
    assert set(kk[0].columns) == {"solution", "names"} and kk[0].columns["names"][0] in kk[0].prompt
    assert all(isinstance(x, bool) for x in kk[0].columns["solution"])
    math500 = get_benchmark("math500").load(data_dir=folder)
    return {"aime24": len(aime), "countdown3": len(three), "countdown4": len(four), "math500": len(math500)}


@pytest.mark.public_data
def test_public_files_load_with_their_fields(public_data):
    assert _check_local_files(public_data) == {"aime24": 30, "countdown3": 50, "countdown4": 50, "math500": 500}
    assert get_benchmark("aime24").load(data_dir=public_data)[0].columns == {"answer": "204"}


def test_local_files_load_with_their_fields(data_dir, tmp_path):
    counts = _check_local_files(data_dir)
    assert counts == {
        "aime24": 5,
        "countdown3": 12,
        "countdown4": 12,
        "math500": len(read_rows(data_dir / "math500.jsonl")),
    }

    # GPQA: options shuffled with a fixed seed; the answer letter points at the correct option.
    gpqa_file = write_gpqa_file(tmp_path)
    first = get_benchmark("gpqa_diamond").load(source=gpqa_file)
    again = get_benchmark("gpqa_diamond").load(data_dir=tmp_path)
    assert [p.prompt for p in first] == [p.prompt for p in again]
    for problem, row in zip(first, GPQA_ROWS):
        letter = problem.columns["answer"]
        assert f"{letter}) {row['Correct Answer']}\n" in problem.prompt + "\n"
        for option in ("Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3"):
            assert f") {row[option]}" in problem.prompt
    with pytest.raises(FileNotFoundError):
        get_benchmark("aime24").load(source=tmp_path / "missing.jsonl")


# --------------------------------------------------------------------------------------------------------- verifiers


@pytest.mark.parametrize(
    "name", ["aime24", "aime25", "hmmt25_feb", "math500", "countdown3", "countdown4", "knights_knaves"]
)
def test_verifiers_pass_gold_and_fail_wrong_answers(name, problem_sets):
    benchmark = get_benchmark(name)
    problems = benchmark.load(data_dir=problem_sets, max_problems=3)
    gold = [gold_completion(benchmark.verifier, p.columns) for p in problems]
    wrong = [wrong_completion(benchmark.verifier, p.columns) for p in problems]
    prompts = [p.prompt for p in problems] * 2
    columns = [p.columns for p in problems] * 2
    rewards = score_completions(benchmark, prompts, gold + wrong, columns)
    assert rewards[:3] == [1.0, 1.0, 1.0], (gold, rewards)
    assert all(r is not None and r < 1.0 for r in rewards[3:]), (wrong, rewards)


def test_multiple_choice_verifier_on_gpqa_rows(tmp_path):
    benchmark = get_benchmark("gpqa_diamond")
    problems = benchmark.load(source=write_gpqa_file(tmp_path))
    completions = [gold_completion("multiple_choice", p.columns) for p in problems]
    completions += [wrong_completion("multiple_choice", p.columns) for p in problems]
    rewards = score_completions(
        benchmark, [p.prompt for p in problems] * 2, completions, [p.columns for p in problems] * 2
    )
    assert rewards[:2] == [1.0, 1.0] and all(r < 1.0 for r in rewards[2:])


# ------------------------------------------------------------------------------------------------- runner (scripted)


def _exact_mean_pass_at_k(n, counts, k):
    return float(sum(1 - Fraction(comb(n - c, k), comb(n, k)) for c in counts) / len(counts))


def test_runner_exact_pass_at_k_with_scripted_engine_and_resume(tmp_path, data_dir):
    tokenizer = make_tokenizer()
    benchmark = get_benchmark("aime24")
    problems = benchmark.load(data_dir=data_dir, max_problems=3)
    correct = {problems[0].id: 0, problems[1].id: 1, problems[2].id: 3}
    engine = ScriptedEngine(tokenizer, benchmark, problems, correct)
    config = EvalConfig(
        model_name_or_path="scripted", benchmarks=["aime24"], output_dir=str(tmp_path / "run"), num_generations=4,
        ks=[1, 2, 4], data_dir=str(data_dir), max_problems=3, progress=False,
    )  # fmt: skip
    summary = evaluate(config, engine=engine)
    assert engine.calls == 1
    result = summary["benchmarks"]["aime24"]
    for k in (1, 2, 4):
        assert result["pass_at_k"][str(k)] == pytest.approx(_exact_mean_pass_at_k(4, [0, 1, 3], k), abs=1e-12)
    assert result["pass_at_k"]["1"] == pytest.approx(4 / 12)
    assert result["pass_at_k"]["4"] == pytest.approx(2 / 3)
    assert [p["correct"] for p in result["problems"]] == [0, 1, 3]
    assert result["mean_reward"] == pytest.approx(4 / 12)

    run = tmp_path / "run"
    for name in ("summary.json", "results.md", "pass_at_k.png", "run_config.json", "problems/aime24.jsonl"):
        assert (run / name).is_file(), name
    lines = (run / "samples" / "aime24.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert len(records) == 12 and all(r["correct"] in (True, False) and "completion" in r for r in records)
    assert sum(r["correct"] for r in records) == 4
    assert "pass@4" in (run / "results.md").read_text()

    # Same folder again: everything is reused, nothing is generated (not even the engine is built).
    def no_engine(_config):
        raise AssertionError("the engine must not be built when all samples are stored")

    again = evaluate(config, engine_factory=no_engine)
    assert engine.calls == 1
    assert again["benchmarks"]["aime24"]["pass_at_k"] == result["pass_at_k"]

    # A larger n only generates the missing samples (2 more per problem, all wrong: samples_drawn >= correct).
    bigger = EvalConfig(**{**config.__dict__, "num_generations": 6, "ks": [1, 6]})
    summary6 = evaluate(bigger, engine=engine)
    assert engine.calls == 2 and all(v == 6 for v in engine.samples_drawn.values())
    assert summary6["benchmarks"]["aime24"]["pass_at_k"]["1"] == pytest.approx(4 / 18)
    indices = sorted(json.loads(line)["sample_index"] for line in (run / "samples" / "aime24.jsonl").open())
    assert indices == sorted(list(range(6)) * 3)

    # Changing a generation setting is refused, unless overwrite deletes the stored samples.
    hotter = EvalConfig(**{**config.__dict__, "temperature": 1.0})
    with pytest.raises(ValueError, match="sampling"):
        evaluate(hotter, engine=engine)
    fresh = ScriptedEngine(tokenizer, benchmark, problems, correct)
    evaluate(EvalConfig(**{**hotter.__dict__, "overwrite": True}), engine=fresh)
    assert fresh.calls == 1


def test_runner_rescores_and_recovers_a_partial_file(tmp_path, data_dir):
    tokenizer = make_tokenizer()
    benchmark = get_benchmark("countdown")
    problems = benchmark.load(data_dir=data_dir, max_problems=2)
    engine = ScriptedEngine(tokenizer, benchmark, problems, {problems[0].id: 2, problems[1].id: 0})
    config = EvalConfig(
        model_name_or_path="scripted", benchmarks=["countdown"], output_dir=str(tmp_path), num_generations=2,
        data_dir=str(data_dir), max_problems=2, progress=False, plot=False,
    )  # fmt: skip
    evaluate(config, engine=engine)
    path = tmp_path / "samples" / "countdown.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    # Tamper with a verdict, drop the last sample and leave a partial line, as if killed while writing.
    records[0]["correct"], records[0]["reward"] = False, 0.0
    text = "".join(json.dumps(r) + "\n" for r in records[:-1]) + '{"benchmark": "countd'
    path.write_text(text)
    summary = evaluate(EvalConfig(**{**config.__dict__, "rescore": True}), engine=engine)
    assert engine.calls == 2  # only the lost sample was generated again
    assert summary["benchmarks"]["countdown"]["pass_at_k"]["1"] == pytest.approx(0.5)
    assert not (tmp_path / "pass_at_k.png").exists()
    assert all(json.loads(line) for line in path.read_text().splitlines())


def test_eval_config_validation():
    assert default_ks(16) == [1, 2, 4, 8, 16] and default_ks(12) == [1, 2, 4, 8, 12]
    with pytest.raises(ValueError, match=r"k must be in \[1, n=4\]"):
        EvalConfig(model_name_or_path="m", benchmarks=["aime24"], output_dir="x", num_generations=4, ks=[8])
    with pytest.raises(KeyError, match="Registered benchmarks"):
        EvalConfig(model_name_or_path="m", benchmarks=["nope"], output_dir="x")


@pytest.mark.parametrize("chunk_size", [0, -3])
def test_eval_config_refuses_a_chunk_size_below_one(chunk_size):
    with pytest.raises(ValueError, match=f"chunk_size .* at least 1, got {chunk_size}"):
        EvalConfig(model_name_or_path="m", benchmarks=["aime24"], output_dir="x", chunk_size=chunk_size)


def test_runner_steps_count_group_number_and_order_samples():
    problems = [Problem("a", "pa", {}), Problem("b", "pb", {}), Problem("c", "pc", {}), Problem("d", "pd", {})]
    stored = {"a": [{"problem_id": "a", "sample_index": i} for i in range(4)], "c": [{"problem_id": "c"}]}
    missing = missing_samples({"bench": problems}, {"bench": stored}, num_generations=3)
    assert missing == {"bench": {"a": 0, "b": 3, "c": 2, "d": 3}}  # more than n stored: none missing
    groups = group_by_missing(problems, ["ta", "tb", "tc", "td"], missing["bench"])
    assert list(groups) == [3, 2]
    assert groups[3] == [(problems[1], "tb"), (problems[3], "td")] and groups[2] == [(problems[2], "tc")]

    records = sample_records(
        "bench", "c", "tc", [Completion("x", 2, "stop"), Completion("y", 5, "length")], first_index=1
    )
    assert [r["sample_index"] for r in records] == [1, 2] and [r["completion"] for r in records] == ["x", "y"]
    assert records[1] == {
        "benchmark": "bench", "problem_id": "c", "sample_index": 2, "prompt_sha": prompt_sha("tc"), "completion": "y",
        "num_tokens": 5, "finish_reason": "length", "reward": None, "correct": None,
    }  # fmt: skip

    unordered = {
        "z": [{"problem_id": "z", "sample_index": 0}],
        "b": [{"problem_id": "b", "sample_index": 1}, {"problem_id": "b", "sample_index": 0}],
        "a": [{"problem_id": "a", "sample_index": 0}],
    }
    ordered = samples_in_order(problems, unordered)
    assert [(r["problem_id"], r["sample_index"]) for r in ordered] == [("a", 0), ("b", 0), ("b", 1), ("z", 0)]


# ----------------------------------------------------------------------------------------------- engines and models


def test_transformers_engine_batching_greedy_and_random_state():
    import torch

    tokenizer = make_tokenizer()
    model = make_model(tokenizer)
    engine = TransformersEngine(model, tokenizer, batch_size=3)
    prompts = [tokenizer("a b c")["input_ids"], tokenizer("knight")["input_ids"]]
    assert engine._plan(2, 5) == [[(0, 3)], [(0, 2)], [(1, 3)], [(1, 2)]]
    assert engine._plan(3, 1) == [[(0, 1), (1, 1), (2, 1)]]
    sampling = SamplingConfig(temperature=1.0, top_p=1.0, max_new_tokens=5)
    torch.manual_seed(123)
    expected_next = torch.rand(1)
    torch.manual_seed(123)
    out = engine.generate(prompts, 5, sampling, seed=7)
    assert torch.rand(1) == expected_next  # the caller's random state is untouched
    assert [len(o) for o in out] == [5, 5]
    assert all(c.finish_reason in ("stop", "length") and 1 <= c.num_tokens <= 5 for o in out for c in o)
    assert all(c.num_tokens == 5 for o in out for c in o if c.finish_reason == "length")
    assert all(len(c.token_ids) == c.num_tokens for o in out for c in o)  # the EOS included
    assert all(tokenizer.decode(c.token_ids, skip_special_tokens=True) == c.text for o in out for c in o)
    assert engine.generate(prompts, 5, sampling, seed=7) == out  # seeded: reproducible
    greedy = engine.generate(prompts, 3, SamplingConfig(temperature=0.0, max_new_tokens=4))
    assert all(len(set(o)) == 1 and len(o) == 3 for o in greedy)
    assert select_engine("auto") == "transformers"  # no vLLM / CUDA here
    with pytest.raises(ValueError):
        select_engine("tgi")


def test_transformers_engine_ignores_the_models_own_sampling_defaults():
    # A model whose generation_config.json sets a repetition penalty: generate() would apply it to every sample.
    from trl_srppo.evaluation.prompts import tokenize_prompts
    from trl_srppo.tasks.toy import build_model, build_tokenizer

    tokenizer = build_tokenizer()
    model = build_model(tokenizer, seed=0)
    prompts = tokenize_prompts(tokenizer, ["1 2 3 =", "4 5 ="], True)
    sampling = SamplingConfig(temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=6, seed=0)

    def samples():
        out = TransformersEngine(model, tokenizer, batch_size=64).generate(prompts, 8, sampling, seed=0)
        return [[c.token_ids for c in completions] for completions in out]

    plain = samples()
    assert sum(len(set(ids)) < len(ids) for completions in plain for ids in completions) > 0  # repeats happen
    model.generation_config.repetition_penalty = 50.0
    model.generation_config.no_repeat_ngram_size = 1
    model.generation_config.typical_p = 0.2
    assert samples() == plain  # the same draws as without the model's defaults
    greedy = SamplingConfig(temperature=0.0, max_new_tokens=6)
    penalised = TransformersEngine(model, tokenizer).generate(prompts, 1, greedy)
    model.generation_config.repetition_penalty = model.generation_config.no_repeat_ngram_size = None
    model.generation_config.typical_p = None
    assert TransformersEngine(model, tokenizer).generate(prompts, 1, greedy) == penalised

    # A field that has no neutral value to override it with is named in a warning, once per engine.
    model.generation_config.suppress_tokens = [5]
    engine = TransformersEngine(model, tokenizer)
    with pytest.warns(UserWarning, match=r"sets \{'suppress_tokens': \[5\]\}"):
        engine.generate(prompts, 1, greedy)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        engine.generate(prompts, 1, greedy)


@pytest.mark.filterwarnings("ignore:.*is_gradient_checkpointing.*:FutureWarning")  # raised inside peft
def test_resolve_model_folders_and_lora_adapter(tmp_path, tiny_model_dir):
    import torch
    from peft import LoraConfig, get_peft_model

    assert resolve_model("Qwen/Qwen3-0.6B").adapter_path is None
    with pytest.raises(FileNotFoundError):
        resolve_model(str(tmp_path / "does" / "not" / "exist"))
    source = resolve_model(str(tiny_model_dir))
    assert source.model_path == str(tiny_model_dir) and source.adapter_path is None

    # A training output folder holding only checkpoints, the latest being a LoRA adapter.
    run = tmp_path / "run"
    base = load_model(source, dtype="float32", device="cpu")
    peft_model = get_peft_model(base, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    peft_model.save_pretrained(run / "checkpoint-10")
    peft_model.save_pretrained(run / "checkpoint-2")
    adapter = resolve_model(str(run))
    assert adapter.adapter_path == str(run / "checkpoint-10")
    assert adapter.model_path == str(tiny_model_dir)  # base model from adapter_config.json
    assert adapter.tokenizer_path == str(tiny_model_dir)  # the adapter folder has no tokenizer
    merged = load_model(adapter, dtype="float32", device="cpu")
    ids = torch.tensor([[5, 6, 7]])
    with torch.no_grad():
        assert torch.allclose(merged(ids).logits, peft_model.eval()(ids).logits, atol=1e-5)
        assert not torch.allclose(merged(ids).logits, load_model(source, dtype="float32")(ids).logits, atol=1e-5)


def test_a_run_folder_resolves_to_its_newest_complete_checkpoint(tmp_path, tiny_model_dir, capsys):
    # A run killed while saving leaves a newer checkpoint without its completeness marker: eval and the analyses take
    # the newest complete one, as `resume_from_checkpoint=True` does. Checkpoints of a run that marks none (a plain
    # TRL run) resolve to the newest.
    import shutil

    from trl_srppo.runtime.checkpoints import mark_checkpoint_complete

    run = tmp_path / "run"
    for step in (2, 4, 6):
        shutil.copytree(tiny_model_dir, run / f"checkpoint-{step}")
    assert resolve_model(str(run)).model_path == str(run / "checkpoint-6")  # none marked
    for step in (2, 4):
        mark_checkpoint_complete(str(run / f"checkpoint-{step}"), step)
    assert resolve_model(str(run)).model_path == str(run / "checkpoint-4")
    assert "skipping checkpoint-6, cut short while saving" in capsys.readouterr().out


@pytest.mark.filterwarnings("ignore:.*is_gradient_checkpointing.*:FutureWarning")  # raised inside peft
def test_load_model_reads_only_safetensors_weights(tmp_path, tiny_model_dir, monkeypatch):
    import shutil

    from helpers import offline_hub_model, save_pickle_only_model
    from peft import LoraConfig, get_peft_model

    tokenizer = make_tokenizer()
    fix = r"loads weights only from safetensors files.*environment you trust.*save_pretrained\(folder\)"
    pickled = save_pickle_only_model(tmp_path / "pickled", make_model(tokenizer), tokenizer)
    with pytest.raises(OSError, match=rf"pickled has only PyTorch pickle weights \(pytorch_model\.bin\).*{fix}"):
        load_model(resolve_model(pickled), dtype="float32", device="cpu")

    # A LoRA adapter saved as adapter_model.bin, which peft would otherwise read with torch.load.
    base = load_model(resolve_model(str(tiny_model_dir)), dtype="float32", device="cpu")
    adapter = get_peft_model(base, LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
    adapter.save_pretrained(tmp_path / "adapter", safe_serialization=False)
    with pytest.raises(OSError, match=rf"adapter has only PyTorch pickle weights \(adapter_model\.bin\).*{fix}"):
        load_model(resolve_model(str(tmp_path / "adapter")), dtype="float32", device="cpu")

    # A Hub model without safetensors weights: the rule, not transformers' advice to drop use_safetensors.
    hub = tmp_path / "hub"
    offline_hub_model(monkeypatch, hub, "someone/tiny-pickled", lambda f: save_pickle_only_model(f, base, tokenizer))
    with pytest.raises(OSError, match=rf"someone/tiny-pickled has no safetensors weights.*{fix}.*revision that has"):
        load_model(resolve_model("someone/tiny-pickled"), dtype="float32", device="cpu")
    offline_hub_model(monkeypatch, hub, "someone/tiny", lambda f: save_tiny_model(Path(f)))
    assert load_model(resolve_model("someone/tiny"), dtype="float32", device="cpu").training is False

    # A folder without any weights keeps transformers' own message (there is nothing to convert).
    (tmp_path / "no-weights").mkdir()
    shutil.copy(tiny_model_dir / "config.json", tmp_path / "no-weights")
    with pytest.raises(OSError, match="no file named model.safetensors found in directory"):
        load_model(resolve_model(str(tmp_path / "no-weights")), dtype="float32", device="cpu")


# ----------------------------------------------------------------------------------------------- tiny model end to end


def test_tiny_model_end_to_end_all_benchmark_types_and_reuse(tmp_path, data_dir, tiny_model_dir):
    write_gpqa_file(tmp_path)  # GPQA has no fixture file: a 2-row file with the Hub's fields
    builds, calls = [], []

    def counting_factory(config):
        engine = build_engine(config)
        builds.append(engine)
        original = engine.generate

        def generate(*args, **kwargs):
            calls.append(1)
            return original(*args, **kwargs)

        engine.generate = generate
        return engine

    out = tmp_path / "out"
    config = EvalConfig(
        model_name_or_path=str(tiny_model_dir),
        benchmarks=["aime24", "countdown", "knights_knaves", "gpqa_diamond"],
        output_dir=str(out), num_generations=4, ks=[1, 2, 4], max_completion_length=8, temperature=1.0, top_p=1.0,
        data_dir=str(data_dir), data_files={"gpqa_diamond": str(tmp_path / "gpqa_diamond.jsonl")},
        max_problems=2, dtype="float32", chat_template_kwargs={"enable_thinking": False}, progress=False,
    )  # fmt: skip
    summary = evaluate(config, engine_factory=counting_factory)
    assert len(builds) == 1 and builds[0].name == "transformers" and len(calls) == 4
    assert summary["engine"] == "transformers" and summary["label"] == tiny_model_dir.name
    for name in config.benchmarks:
        result = summary["benchmarks"][name]
        assert result["num_problems"] == 2 and set(result["pass_at_k"]) == {"1", "2", "4"}
        assert all(0.0 <= v <= 1.0 for v in result["pass_at_k"].values())
        lines = (out / "samples" / f"{name}.jsonl").read_text().splitlines()
        assert len(lines) == 8 and all(isinstance(json.loads(line)["correct"], bool) for line in lines)
    prompt = json.loads((out / "problems" / "aime24.jsonl").read_text().splitlines()[0])["prompt"]
    assert prompt.startswith("<|im_start|>user\n") and prompt.endswith("<think>\n\n</think>\n\n")
    assert (out / "pass_at_k.png").stat().st_size > 1000
    assert json.loads((out / "summary.json").read_text())["benchmarks"].keys() == set(config.benchmarks)
    assert "knights_knaves" in (out / "results.md").read_text()

    again = evaluate(config, engine_factory=counting_factory)
    assert len(builds) == 1 and len(calls) == 4  # nothing generated the second time
    assert again["benchmarks"]["aime24"]["pass_at_k"] == summary["benchmarks"]["aime24"]["pass_at_k"]


# ------------------------------------------------------------------------------------------------------------- CLI


def test_cli_help_lists_every_option(capsys):
    from trl_srppo.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["eval", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for option in (
        "--model_name_or_path", "--benchmarks", "--num_generations", "--ks", "--temperature", "--top_p", "--top_k",
        "--max_completion_length", "--seed", "--enable_thinking", "--chat_template_kwargs", "--no_use_chat_template",
        "--engine", "--output_dir", "--data_dir", "--data_files", "--trust_remote_code", "--compare",
        "--list_benchmarks", "--config",
    ):  # fmt: skip
        assert option in text, option
    assert main(["eval", "--list_benchmarks"]) == 0
    assert "gpqa_diamond" in capsys.readouterr().out


def test_cli_runs_and_compares(tmp_path, data_dir, tiny_model_dir, capsys):
    from trl_srppo.evaluation.cli import main

    # The settings shared by both runs in a YAML file, as for `trl-srppo train --config`; flags add and override.
    recipe = tmp_path / "eval.yaml"
    recipe.write_text(
        f"benchmarks: [countdown3]\ndata_dir: {data_dir}\nmax_problems: 2\nnum_generations: 2\n"
        "max_completion_length: 4\nengine: transformers\ndtype: float32\nprogress: false\nseed: 7\n"
    )
    runs = []
    for seed in (0, 1):
        out = tmp_path / f"seed{seed}"
        args = [
            "--config", str(recipe), "--model_name_or_path", str(tiny_model_dir), "--seed", str(seed),
            "--output_dir", str(out), "--enable_thinking", "false",
        ]  # fmt: skip
        assert main(args) == 0
        assert (out / "summary.json").is_file()
        stored = json.loads((out / "run_config.json").read_text())
        assert stored["generation"]["chat_template_kwargs"] == {"enable_thinking": False}
        assert stored["generation"]["sampling"]["seed"] == seed and stored["n"] == 2
        runs.append(str(out))
    compare = tmp_path / "compare"
    assert main(["--compare", *runs, str(tmp_path / "seed0" / "summary.json"), "--output_dir", str(compare)]) == 0
    assert "± " in (compare / "comparison.md").read_text()  # 3 runs share a label: mean ± std
    assert (compare / "pass_at_k_comparison.png").is_file()
    assert main(["--compare", *runs, "--labels", "a", "b", "--output_dir", str(compare)]) == 0
    table = (compare / "comparison.md").read_text()
    assert "| a | countdown3" in table and "| b | countdown3" in table
    with pytest.raises(SystemExit):
        main(["--benchmarks", "aime24"])  # no model / output dir
    assert "model_name_or_path, output_dir required" in capsys.readouterr().err
    # Unknown keys are refused by name, from the YAML file and from the command line.
    recipe.write_text("benchmarks: [countdown3]\nn: 4\n")
    with pytest.raises(SystemExit):
        main(["--config", str(recipe), "--list_benchmarks"])
    assert "Unknown arguments from config file: ['--n', '4']" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--n", "4", "--list_benchmarks"])
    assert "--n" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------ a user's own problem file

SUMS = [
    {"problem": "What is 17 + 25?", "answer": "42"},
    {"problem": "What is 9 times 8?", "answer": "72"},
    {"problem": "What is 100 minus 1?", "answer": "99"},
]


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_own_file_is_scored_by_its_tasks_verifier_under_its_label(tmp_path):
    source = _write_jsonl(tmp_path / "my_sums.jsonl", SUMS)
    config = EvalConfig(
        model_name_or_path="scripted", dataset_name=str(source), task="arithmetic", output_dir=str(tmp_path / "run"),
        num_generations=2, ks=[1, 2], progress=False, plot=False,
    )  # fmt: skip
    assert config.benchmarks == ["my_sums"] and config.data_files == {"my_sums": str(source)}
    benchmark = get_benchmark("my_sums")
    assert benchmark.task is get_task("arithmetic") and benchmark.verifier == "number"
    problems = benchmark.load(source=source)
    assert [p.columns for p in problems] == [{"answer": row["answer"]} for row in SUMS]
    engine = ScriptedEngine(
        make_tokenizer(), benchmark, problems, {problems[0].id: 2, problems[1].id: 1, problems[2].id: 0}
    )
    result = evaluate(config, engine=engine)["benchmarks"]["my_sums"]
    assert result["label"] == "my_sums (file: my_sums.jsonl)"
    assert [p["correct"] for p in result["problems"]] == [2, 1, 0]  # gold "the answer is 42" scored 1, -123456789 not
    assert result["pass_at_k"]["1"] == pytest.approx(3 / 6) and result["pass_at_k"]["2"] == pytest.approx(2 / 3)


def test_cli_evaluates_an_own_file_beside_a_benchmark(tmp_path, data_dir, tiny_model_dir, capsys):
    from trl_srppo.evaluation.cli import main

    source = _write_jsonl(tmp_path / "kk.jsonl", read_rows(data_dir / "knights_knaves_test.jsonl")[:2])
    out = tmp_path / "run"
    args = [
        "--model_name_or_path", str(tiny_model_dir), "--benchmarks", "countdown3", "--data_dir", str(data_dir),
        "--dataset_name", str(source), "--task", "knights_knaves", "--dataset_label", "my_puzzles",
        "--max_problems", "2", "--num_generations", "2", "--max_completion_length", "4", "--engine", "transformers",
        "--dtype", "float32", "--no_progress", "--no_plot", "--output_dir", str(out),
    ]  # fmt: skip
    assert main(args) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["benchmarks"]) == ["countdown3", "my_puzzles"]
    mine = summary["benchmarks"]["my_puzzles"]
    assert mine["label"] == "my_puzzles (file: kk.jsonl)" and mine["num_problems"] == 2
    stored = [json.loads(line) for line in (out / "problems" / "my_puzzles.jsonl").read_text().splitlines()]
    assert [row["columns"]["names"] for row in stored] == [row["names"] for row in read_rows(source)]
    assert "my_puzzles (file: kk.jsonl)" in (out / "results.md").read_text()
    assert len((out / "samples" / "my_puzzles.jsonl").read_text().splitlines()) == 4

    for bad, message in [
        (["--dataset_name", str(source)], "needs --task, the task of its rows"),
        (["--dataset_name", str(source), "--task", "sums"], "Unknown task 'sums'"),
        (["--task", "math"], "task and dataset_label describe --dataset_name, which is not set"),
        (["--dataset_name", str(source), "--task", "math", "--dataset_label", "aime24"], "registered benchmark"),
        (["--dataset_name", str(source), "--task", "math", "--dataset_label", "a/b"], "letters, digits"),
    ]:
        with pytest.raises(SystemExit):
            main([*bad, "--model_name_or_path", "m", "--output_dir", str(tmp_path / "x")])
        assert message in capsys.readouterr().err


def test_no_module_imports_another_modules_private_helpers():
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    offenders = []
    for path in [*(root / "src" / "trl_srppo").rglob("*.py"), *(root / "benchmarks").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (
                node.level or (node.module or "").split(".")[0] in ("trl_srppo", "benchmarks")
            ):
                private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                offenders += [f"{path.relative_to(root)}: {name}" for name in private]
    assert offenders == []


def test_one_markdown_table_helper():
    """`trl_srppo.evaluation.markdown.markdown_table` writes every table: strings as given, numbers through `fmt`."""
    from trl_srppo.evaluation.markdown import markdown_table
    from trl_srppo.evaluation.report import pass_at_k_table

    table = markdown_table(["a", "b", "c", "d"], [["x", 0.123456, float("nan"), float("-inf")], ["y", 3, None, "z"]])
    assert table == "| a | b | c | d |\n| --- | --- | --- | --- |\n| x | 0.1235 | n/a | -inf |\n| y | 3 | n/a | z |\n"
    summary = {"label": "m", "benchmarks": {"b1": {"num_problems": 2, "n": 4, "pass_at_k": {"1": 0.5, "4": 0.75}}}}
    header = "| benchmark | problems | n | pass@1 | pass@4 |\n| --- | --- | --- | --- | --- |\n"
    assert pass_at_k_table([summary]).startswith(header + "| b1 | 2 | 4 | 0.500 | 0.750 |\n")


def _summary(model, pass_at_1, n=16, num_problems=30, label=None, revision=None):
    """A summary as `build_summary` writes it, with one benchmark."""
    from trl_srppo.evaluation.report import _default_label

    return {
        "model": model,
        "label": label or _default_label(model),
        "label_given": label is not None,
        "n": n,
        "settings": {"model": model, "revision": revision},
        "benchmarks": {"aime24": {"num_problems": num_problems, "n": n, "pass_at_k": {"1": pass_at_1}}},
    }


def _rows(table: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[2:] if line.startswith("|")]


def test_compare_keeps_apart_models_whose_folders_share_a_name():
    from trl_srppo.evaluation.report import pass_at_k_table

    runs = [_summary("runs/srppo/checkpoint-600", 0.30), _summary("runs/grpo/checkpoint-600", 0.50)]
    assert _rows(pass_at_k_table(runs)) == [
        ["srppo/checkpoint-600", "aime24", "30", "16", "0.300"],
        ["grpo/checkpoint-600", "aime24", "30", "16", "0.500"],
    ]
    # Evaluation seeds of one model are averaged: mean 0.4, sample std sqrt(2 * 0.1^2) = 0.141.
    seeds = [_summary("runs/srppo/checkpoint-600", 0.30), _summary("runs/srppo/checkpoint-600/", 0.50)]
    assert _rows(pass_at_k_table(seeds)) == [["aime24", "30", "16", "0.400 ± 0.141"]]
    # Labels given to the runs group them, whatever their models (e.g. training seeds of one method).
    trained = [_summary(f"runs/srppo-seed{i}/checkpoint-600", v, label="srppo") for i, v in enumerate((0.2, 0.4))]
    table = pass_at_k_table([*trained, _summary("runs/grpo/checkpoint-600", 0.1)])
    assert _rows(table) == [
        ["srppo", "aime24", "30", "16", "0.300 ± 0.141"],
        ["checkpoint-600", "aime24", "30", "16", "0.100"],
    ]
    assert _rows(pass_at_k_table(runs, labels=["a", "a"])) == [["aime24", "30", "16", "0.400 ± 0.141"]]
    # Only the revision differs: it is shown. A Hub id beside a local copy keeps its whole name.
    hub = [_summary("Qwen/Qwen3-1.7B", 0.1, revision="a1"), _summary("Qwen/Qwen3-1.7B", 0.2, revision="b2")]
    assert [row[0] for row in _rows(pass_at_k_table(hub))] == ["Qwen3-1.7B@a1", "Qwen3-1.7B@b2"]
    hub.append(_summary("models/Qwen/Qwen3-1.7B", 0.3))
    assert [row[0] for row in _rows(pass_at_k_table(hub))] == [
        "Qwen/Qwen3-1.7B@a1",
        "Qwen/Qwen3-1.7B@b2",
        "models/Qwen/Qwen3-1.7B",
    ]


def test_compare_refuses_to_average_runs_evaluated_differently():
    from trl_srppo.evaluation.report import group_runs, pass_at_k_table

    other_n = [_summary("m", 0.2, n=16, num_problems=30), _summary("m", 0.4, n=128, num_problems=30)]
    with pytest.raises(ValueError, match=r"grouped as 'm' .* aime24: n=16 on 30 problems .* n=128 on 30 problems"):
        pass_at_k_table(other_n)
    fewer = [_summary("a", 0.2, label="x"), _summary("b", 0.4, num_problems=5, label="x")]
    with pytest.raises(ValueError, match=r"n=16 on 30 problems \(a\); n=16 on 5 problems \(b\).*--labels"):
        group_runs(fewer)
    # Kept apart under their own labels, they are shown side by side.
    assert _rows(pass_at_k_table(fewer, labels=["x30", "x5"])) == [
        ["x30", "aime24", "30", "16", "0.200"],
        ["x5", "aime24", "5", "16", "0.400"],
    ]
    with pytest.raises(ValueError, match="same label"):
        group_runs([_summary("runs/a/ckpt", 0.1, label="ckpt"), _summary("ckpt", 0.2)])


def test_cli_compare_names_runs_that_cannot_share_a_row(tmp_path, capsys):
    from trl_srppo.evaluation.cli import main

    paths = []
    for i, n in enumerate((16, 128)):
        paths.append(tmp_path / f"run{i}.json")
        paths[-1].write_text(json.dumps(_summary("runs/srppo/checkpoint-600", 0.3, n=n)))
    with pytest.raises(SystemExit):
        main(["--compare", *map(str, paths), "--output_dir", str(tmp_path / "compare")])
    assert "n=16 on 30 problems" in capsys.readouterr().err
    assert not (tmp_path / "compare" / "comparison.md").exists()


def test_vllm_engine_loads_safetensors_only(tmp_path, monkeypatch):
    # vLLM cannot run here: a stand-in module records what the engine asks it to load.
    import sys
    import types

    import torch

    from trl_srppo.evaluation.engines import VLLMEngine

    calls = []
    fake = types.ModuleType("vllm")
    fake.LLM = lambda **kwargs: calls.append(kwargs)
    monkeypatch.setitem(sys.modules, "vllm", fake)
    monkeypatch.setattr("trl_srppo.runtime.vllm_cpu.vllm_on_cpu", lambda: False)  # the stand-in is a GPU build
    VLLMEngine("someone/model", tokenizer=None)
    assert calls[-1]["load_format"] == "safetensors" and calls[-1]["model"] == "someone/model"
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"r": 8}))
    torch.save({}, adapter / "adapter_model.bin")
    with pytest.raises(OSError, match=r"only PyTorch pickle weights \(adapter_model\.bin\)"):
        VLLMEngine("someone/model", tokenizer=None, adapter_path=str(adapter))
    assert len(calls) == 1


def test_vllm_engine_gives_every_sample_of_a_call_its_own_seed(monkeypatch):
    # vLLM seeds sample j of a request with n samples by `seed + j` (its parallel sampling): the engine's per-prompt
    # seeds must step by n, or prompt i's sample j + 1 and prompt i + 1's sample j would draw the same random numbers.
    import sys
    import types

    from trl_srppo.evaluation.engines import VLLMEngine

    requested = []

    class FakeLLM:
        def __init__(self, **kwargs):
            pass

        def generate(self, prompts, params, use_tqdm=False):
            requested.extend(params)
            sample = types.SimpleNamespace(text="1", token_ids=[5], finish_reason="stop")
            return [types.SimpleNamespace(outputs=[sample] * p["n"]) for p in params]

    fake = types.ModuleType("vllm")
    fake.LLM, fake.SamplingParams = FakeLLM, lambda **kwargs: kwargs
    monkeypatch.setitem(sys.modules, "vllm", fake)
    monkeypatch.setattr("trl_srppo.runtime.vllm_cpu.vllm_on_cpu", lambda: False)
    engine = VLLMEngine("someone/model", tokenizer=None)
    sampling = SamplingConfig(temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=4, seed=0)
    outputs = engine.generate([[1, 2], [3], [4, 5, 6]], 4, sampling, seed=100)
    assert [len(o) for o in outputs] == [4, 4, 4]
    child_seeds = [p["seed"] + j for p in requested for j in range(p["n"])]
    assert child_seeds == list(range(100, 112))  # 12 samples, 12 seeds, none shared
    requested.clear()
    engine.generate([[1], [2]], 1, sampling, seed=7)
    assert [p["seed"] for p in requested] == [7, 8]  # one sample per prompt: as before


def test_bad_eval_inputs_are_clear_errors(tmp_path):
    from trl_srppo.evaluation.report import load_summary

    with pytest.raises(ValueError, match="max_problems must be at least 1"):
        EvalConfig(model_name_or_path="m", benchmarks=["chain"], output_dir=str(tmp_path), max_problems=0)
    with pytest.raises(FileNotFoundError, match="--compare takes the output_dir of a `trl-srppo eval` run"):
        load_summary(tmp_path / "no_such_run")


def test_transformers_engine_encodes_each_prompt_once_and_draws_what_generate_draws():
    # n samples of a prompt share its key/value cache: the prompt is encoded once, not n times, and the seeded draws
    # are those of `generate` with `num_return_sequences = n` on the same left-padded batch.
    import torch
    from transformers import GenerationConfig

    from trl_srppo.evaluation.engines import generation_options
    from trl_srppo.evaluation.prompts import tokenize_prompts
    from trl_srppo.tasks.toy import build_model, build_tokenizer

    tokenizer = build_tokenizer()
    model = build_model(tokenizer, seed=0).eval()
    prompts = tokenize_prompts(tokenizer, ["1 2 3 4 5 =", "4 5 ="], True)  # different lengths: left padding
    sampling = SamplingConfig(temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=6, seed=0)
    encoded_rows = []
    hook = model.register_forward_pre_hook(
        lambda module, args, kwargs: encoded_rows.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True
    )
    try:
        out = TransformersEngine(model, tokenizer, batch_size=64).generate(prompts, 8, sampling, seed=3)
    finally:
        hook.remove()
    width = max(len(p) for p in prompts)
    assert encoded_rows[0] == (2, width - 1)  # every prompt but its last token, once
    assert all(rows == (16, 1) for rows in encoded_rows[1:])  # then one token of each of the 2 x 8 samples a step

    eos = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    input_ids = torch.full((2, width), pad)
    attention_mask = torch.zeros((2, width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        input_ids[row, width - len(prompt) :] = torch.tensor(prompt)
        attention_mask[row, width - len(prompt) :] = 1
    torch.manual_seed(3)
    config = GenerationConfig(**generation_options(sampling, False, 8, pad, [eos]))
    reference = model.generate(input_ids=input_ids, attention_mask=attention_mask, generation_config=config)
    for row in range(2):
        for sample, completion in enumerate(out[row]):
            tokens = reference[row * 8 + sample, width:].tolist()
            assert list(completion.token_ids) == tokens[: completion.num_tokens]
    assert len({c.token_ids for completions in out for c in completions}) > 4  # real draws, not one repeated


def test_transformers_engine_generates_as_usual_where_a_prompt_cache_cannot_be_shared():
    # A state-space model's cache is a recurrent state, not keys and values: it cannot be repeated per sample, so the
    # engine lets `generate` encode each sample's prompt itself, and draws what `num_return_sequences` draws.
    import torch
    from transformers import GenerationConfig, MambaConfig, MambaForCausalLM

    from trl_srppo.evaluation.engines import generation_options, prefill_once
    from trl_srppo.evaluation.prompts import tokenize_prompts
    from trl_srppo.tasks.toy import build_tokenizer

    tokenizer = build_tokenizer()
    torch.manual_seed(0)
    config = MambaConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        state_size=4,
        num_hidden_layers=1,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = MambaForCausalLM(config).eval()
    prompts = tokenize_prompts(tokenizer, ["1 2 3 =", "4 5 6 ="], True)  # one length: no padding
    ids = torch.tensor(prompts)
    assert prefill_once(model, ids, torch.ones_like(ids), 4) == {}
    sampling = SamplingConfig(temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=5, seed=0)
    out = TransformersEngine(model, tokenizer).generate(prompts, 4, sampling, seed=2)
    eos = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    torch.manual_seed(2)
    config = GenerationConfig(**generation_options(sampling, False, 4, pad, [eos]))
    reference = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=config)
    width = ids.shape[1]
    for row in range(2):
        for sample, completion in enumerate(out[row]):
            assert list(completion.token_ids) == reference[row * 4 + sample, width:].tolist()[: completion.num_tokens]

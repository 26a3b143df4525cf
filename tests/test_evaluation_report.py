# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""What `trl-srppo eval` reports: the share of unreadable answers, the names of benchmarks read from a user's file,
one scale for pass@k, and progress during generation."""

import json
import re

import pytest
from test_evaluation_helpers import FIXTURES, make_model, make_tokenizer

from trl_srppo.evaluation.benchmarks import benchmark_label, get_benchmark
from trl_srppo.evaluation.config import EvalConfig
from trl_srppo.evaluation.engines import Completion, TransformersEngine
from trl_srppo.evaluation.report import first_verified_samples, pass_at_k_table, problem_counts, sample_stats
from trl_srppo.evaluation.runner import evaluate


class CyclingEngine:
    """Returns, for each prompt, the completions `texts_for(prompt text)` in turn."""

    name = "cycling"

    def __init__(self, texts_for):
        self.tokenizer = make_tokenizer()
        self.texts_for = texts_for

    def generate(self, prompt_ids, n, sampling, seed=None):
        out = []
        for ids in prompt_ids:
            texts = self.texts_for(self.tokenizer.decode(ids))
            out.append([Completion(text=texts[i % len(texts)], num_tokens=3, finish_reason="stop") for i in range(n)])
        return out

    def close(self):
        pass


def _table_rows(text: str) -> list[list[str]]:
    lines = [line for line in text.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def test_summary_and_tables_give_the_share_of_answers_the_verifier_cannot_read(tmp_path, capsys):
    data_dir = FIXTURES
    aime25 = {p.prompt for p in get_benchmark("aime25").load(data_dir=data_dir, max_problems=2)}

    def texts_for(prompt):
        if any(problem in prompt for problem in aime25):
            return ["The answer is 12.", "I think it is 12"]  # never boxed: nothing for the math verifier to read
        return ["so \\boxed{12}.", "The answer is 12.", "\\boxed{-5}", "\\boxed{}"]  # 2 of 4 unreadable

    config = EvalConfig(
        model_name_or_path="cycling", benchmarks=["aime24", "aime25"], output_dir=str(tmp_path / "run"),
        num_generations=4, ks=[1, 4], data_dir=str(data_dir), max_problems=2, progress=False, plot=False,
    )  # fmt: skip
    summary = evaluate(config, engine=CyclingEngine(texts_for))
    assert summary["benchmarks"]["aime24"]["unreadable_fraction"] == 0.5
    assert [p["unreadable"] for p in summary["benchmarks"]["aime24"]["problems"]] == [2, 2]
    assert summary["benchmarks"]["aime25"]["unreadable_fraction"] == 1.0
    stored = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert stored["benchmarks"]["aime25"]["unreadable_fraction"] == 1.0

    header, _, aime24, aime25_row = _table_rows((tmp_path / "run" / "results.md").read_text())
    assert header[-1] == "unreadable"
    assert aime24[0] == "aime24" and aime24[-1] == "0.500"
    assert aime25_row[0] == "aime25" and aime25_row[-1] == "1.000"
    out = capsys.readouterr().out
    assert "warning: 100% of the aime25 samples hold no answer the 'math' verifier can read" in out
    assert "\\boxed{...}" in out and "aime24 samples" not in out  # half unreadable: no warning


def test_a_benchmark_read_from_a_users_file_is_named_with_it(tmp_path):
    data_dir = FIXTURES
    mine = tmp_path / "my_algebra.jsonl"
    mine.write_text('{"problem": "1+1?", "answer": "2"}\n{"problem": "2+3?", "answer": "5"}\n', encoding="utf-8")
    config = EvalConfig(
        model_name_or_path="cycling", benchmarks=["math500", "aime24"], output_dir=str(tmp_path / "run"),
        num_generations=2, ks=[1, 2], data_dir=str(data_dir), data_files={"math500": str(mine)}, max_problems=2,
        progress=False,
    )  # fmt: skip
    summary = evaluate(config, engine=CyclingEngine(lambda prompt: ["\\boxed{2}"]))
    assert summary["benchmarks"]["math500"]["label"] == "math500 (file: my_algebra.jsonl)"
    assert summary["benchmarks"]["math500"]["source"] == str(mine)
    assert summary["benchmarks"]["aime24"]["label"] == "aime24"  # the registered data: the registered name
    rows = _table_rows((tmp_path / "run" / "results.md").read_text())[2:]
    assert [row[0] for row in rows] == ["math500 (file: my_algebra.jsonl)", "aime24"]
    # Beside a run of the registered math500, the user's set is a row of its own, not averaged with it.
    registered = json.loads(json.dumps(summary))
    registered["benchmarks"]["math500"].update(label="math500", source=None)
    compared = _table_rows(pass_at_k_table([summary, registered], labels=["x", "x"]))[2:]
    assert [row[0] for row in compared] == ["math500 (file: my_algebra.jsonl)", "aime24", "math500"]
    assert benchmark_label("math500", "me/my-set") == "math500 (dataset: me/my-set)"


def test_pass_at_k_is_a_fraction_in_every_table(tmp_path):
    data_dir = FIXTURES
    config = EvalConfig(
        model_name_or_path="cycling", benchmarks=["aime24"], output_dir=str(tmp_path / "run"), num_generations=3,
        ks=[1, 3], data_dir=str(data_dir), max_problems=1, progress=False, plot=False,
    )  # fmt: skip
    gold = get_benchmark("aime24").load(data_dir=data_dir, max_problems=1)[0].columns["answer"]
    texts = [f"\\boxed{{{gold}}}", "\\boxed{-1}", "\\boxed{-2}"]  # one right answer in three
    summary = evaluate(config, engine=CyclingEngine(lambda prompt: texts))
    assert summary["benchmarks"]["aime24"]["pass_at_k"] == {"1": pytest.approx(1 / 3), "3": 1.0}
    text = (tmp_path / "run" / "results.md").read_text()
    header, _, row = _table_rows(text)
    assert row[header.index("pass@1")] == "0.333" and row[header.index("pass@3")] == "1.000"
    assert "%" not in text and "from 0 to 1" in text


def test_summary_steps_pick_the_first_n_verified_samples_and_count_them():
    records = [
        {"sample_index": 2, "correct": None, "reward": None, "num_tokens": 9, "finish_reason": "length"},
        {"sample_index": 1, "correct": True, "reward": 1.0, "num_tokens": 4, "finish_reason": "stop"},
        {"sample_index": 0, "correct": False, "reward": None, "num_tokens": 8, "finish_reason": "length"},
    ]
    chosen = first_verified_samples("aime24", "p1", records, 2)
    assert [r["sample_index"] for r in chosen] == [0, 1]  # the unverified third sample is not among the first two
    for n in (3, 4):  # one without a verdict, or too few
        with pytest.raises(RuntimeError, match=r"Benchmark 'aime24', problem 'p1': fewer than n verified samples"):
            first_verified_samples("aime24", "p1", records, n)

    assert problem_counts("p1", chosen, [True, False]) == {"id": "p1", "n": 2, "correct": 1, "unreadable": 1}
    assert problem_counts("p1", chosen, None)["unreadable"] is None
    assert sample_stats(chosen) == {"mean_reward": 0.5, "mean_num_tokens": 6.0, "truncated_fraction": 0.5}
    empty = sample_stats([])
    assert empty["truncated_fraction"] == 0 and all(v != v for k, v in empty.items() if k != "truncated_fraction")


class RecordingBar:
    """Stands in for the runner's tqdm bar and records what it is told."""

    bars = []

    def __init__(self, total, desc, enabled, unit):
        self.desc, self.updates, self.postfix = desc, [], []
        RecordingBar.bars.append(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n):
        self.updates.append(n)

    def set_postfix_str(self, text, refresh=True):
        self.postfix.append(text)


def _generation_bar(monkeypatch, config, engine):
    from trl_srppo.evaluation import progress

    RecordingBar.bars = []
    monkeypatch.setattr(progress, "progress_bar", RecordingBar)
    evaluate(config, engine=engine)
    return next(bar for bar in RecordingBar.bars if bar.desc == "generating")


def test_generation_progress_moves_during_an_engine_call_and_shows_the_rate(tmp_path, monkeypatch):
    tokenizer = make_tokenizer()
    engine = TransformersEngine(make_model(tokenizer), tokenizer, batch_size=2)  # 3 problems x 2 samples: 3 calls
    config = EvalConfig(
        model_name_or_path="tiny", benchmarks=["aime24"], output_dir=str(tmp_path / "run"), num_generations=2,
        ks=[1, 2], data_dir=str(FIXTURES), max_problems=3, max_completion_length=4, temperature=1.0,
        top_p=1.0, plot=False,
    )  # fmt: skip
    assert config.chunk_size >= 3  # all three problems go to the engine in one call
    bar = _generation_bar(monkeypatch, config, engine)
    assert bar.updates == [2, 2, 2]
    assert len(bar.postfix) == 3 and re.fullmatch(r"[0-9.]+ completions/s, [0-9,]+ tokens/s", bar.postfix[-1])


def test_an_engine_without_progress_moves_the_bar_when_its_call_returns(tmp_path, monkeypatch):
    config = EvalConfig(
        model_name_or_path="cycling", benchmarks=["aime24"], output_dir=str(tmp_path / "run"), num_generations=2,
        ks=[1, 2], data_dir=str(FIXTURES), max_problems=3, chunk_size=2, plot=False,
    )  # fmt: skip
    bar = _generation_bar(monkeypatch, config, CyclingEngine(lambda prompt: ["\\boxed{1}"]))
    assert bar.updates == [4, 2] and "completions/s" in bar.postfix[-1]


def test_without_matplotlib_a_run_writes_its_numbers_and_skips_its_figures(tmp_path, monkeypatch, caplog):
    # matplotlib is the `plot` extra: where it cannot be imported, eval and analyze write everything but the figure,
    # and say how to get it.
    import sys

    from trl_srppo.analysis.report import bar_figure, write_outputs
    from trl_srppo.evaluation.figures import PLOT_EXTRA

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` now raises ImportError
    config = EvalConfig(
        model_name_or_path="cycling", benchmarks=["aime24"], output_dir=str(tmp_path / "run"), num_generations=2,
        ks=[1, 2], data_dir=str(FIXTURES), max_problems=1, progress=False, plot=True,
    )  # fmt: skip
    with caplog.at_level("WARNING"):
        evaluate(config, engine=CyclingEngine(lambda prompt: ["\\boxed{12}", "no"]))
    written = sorted(p.name for p in (tmp_path / "run").iterdir())
    assert "summary.json" in written and "results.md" in written and "pass_at_k.png" not in written
    assert PLOT_EXTRA in caplog.text
    from trl_srppo.evaluation.cli import main

    run = str(tmp_path / "run" / "summary.json")
    assert main(["--compare", run, run, "--labels", "a", "b", "--output_dir", str(tmp_path / "compare")]) == 0
    assert sorted(p.name for p in (tmp_path / "compare").iterdir()) == ["comparison.md"]  # and no figure

    import dataclasses
    import os

    settings = dataclasses.make_dataclass("Settings", [("output_dir", str)])(str(tmp_path / "analysis"))
    figure = bar_figure(["a"], {"s": [1.0]}, "title", "y")
    paths = write_outputs("bins", settings, {"x": 1.0}, "# bins\n", figure)
    assert (
        figure is None
        and "figure" not in paths
        and sorted(os.listdir(tmp_path / "analysis")) == sorted(os.path.basename(p) for p in paths.values())
    )

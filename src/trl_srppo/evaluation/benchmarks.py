# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The benchmark registry: a benchmark is a task of `trl_srppo.tasks.registry` plus where its rows come from.

The task (how rows are prepared and rendered, which verifier scores them, what counts as correct) is the one training
uses; a [`Benchmark`] adds the source: a Hugging Face Hub dataset (`hub_path`, `hub_config`, `hub_split`) or a local
json/jsonl/parquet file (read by `trl_srppo.tasks.data.load_source`), the source's column names, and an optional
filter.
Adding a benchmark is one call:

```python
from trl_srppo.evaluation import Benchmark, register_benchmark

register_benchmark(Benchmark(name="my_math", task="math", hub_path="me/my-math", hub_split="test"))
```
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..tasks.registry import Task, get_task

__all__ = [
    "BENCHMARKS",
    "Benchmark",
    "Problem",
    "benchmark_label",
    "get_benchmark",
    "list_benchmarks",
    "load_rows",
    "register_benchmark",
]

logger = logging.getLogger(__name__)

# Column names under which an identifier is commonly stored; the row's position is used when none is present.
ID_FIELDS = ("id", "problem_idx", "unique_id", "Record ID", "idx", "index")

# Source column names accepted for a task field when a benchmark does not name its own (the first one present wins).
COMMON_COLUMNS: dict[str, tuple[str, ...]] = {
    "problem": ("problem", "Problem", "question"),
    "answer": ("answer", "Answer"),
    "question": ("question", "Question"),
}


@dataclass(frozen=True)
class Problem:
    """
    One evaluation problem, ready to be prompted and verified.

    Args:
        id (`str`):
            Identifier of the problem, unique within its benchmark (used to match stored samples when resuming).
        prompt (`str`):
            The user message (the task's prompt template filled with the prepared row).
        columns (`dict[str, Any]`):
            The keyword arguments passed to the verifier with each completion (e.g. `{"answer": "204"}`).
    """

    id: str
    prompt: str
    columns: dict[str, Any]


def row_id(row: Mapping[str, Any], position: int) -> str:
    """A source row's identifier: its first non-empty [`ID_FIELDS`] column, else its position."""
    column = next((c for c in ID_FIELDS if c in row and row[c] is not None), None)
    return str(row[column]) if column is not None else str(position)


@dataclass(frozen=True)
class Benchmark:
    """
    A registered benchmark: a task plus where its rows come from.

    Args:
        name (`str`):
            Registry name, used on the command line (`--benchmarks aime24 math500`).
        task ([`~trl_srppo.tasks.registry.Task`] or `str`):
            The task (or its registered name): row preparation, prompt template, verifier, what counts as correct.
        hub_path (`str`):
            Dataset name on the Hugging Face Hub.
        hub_split (`str`, *optional*, defaults to `"test"`):
            Split to load from the Hub; `datasets` slicing and concatenation syntax is allowed (`"train[-2000:]"`,
            `"3ppl+4ppl"`).
        hub_config (`str` or `None`, *optional*):
            Dataset configuration name on the Hub.
        local_file (`str` or `None`, *optional*):
            File name looked up in a data directory (`data_dir`) before falling back to the Hub.
        columns (`Mapping[str, tuple[str, ...]]` or `None`, *optional*):
            Task field -> accepted source column names (the first one present is used); fields not named here use
            [`COMMON_COLUMNS`] or the field's own name.
        keep (`Callable[[dict], bool]` or `None`, *optional*):
            Filter on prepared rows (e.g. only Countdown problems with 3 numbers).
        description (`str`, *optional*):
            One line shown by `trl-srppo eval --list_benchmarks`.
    """

    name: str
    task: Task | str
    hub_path: str
    hub_split: str = "test"
    hub_config: str | None = None
    local_file: str | None = None
    columns: Mapping[str, tuple[str, ...]] | None = None
    keep: Callable[[dict[str, Any]], bool] | None = None
    description: str = ""

    def __post_init__(self):
        if isinstance(self.task, str):
            object.__setattr__(self, "task", get_task(self.task))

    @property
    def verifier(self) -> str:
        """Name of the task's reward function in `trl_srppo.rewards`."""
        return self.task.reward

    @property
    def prompt_template(self) -> str:
        return self.task.prompt_template

    @property
    def reward_columns(self) -> tuple[str, ...]:
        return self.task.reward_columns

    def source_columns(self) -> dict[str, tuple[str, ...]]:
        """Task field -> accepted source columns."""
        given = dict(self.columns or {})
        return {f: tuple(given.get(f, COMMON_COLUMNS.get(f, (f,)))) for f in self.task.fields}

    def build_problems(self, rows: Iterable[Mapping[str, Any]], max_problems: int | None = None) -> list[Problem]:
        """
        Turn source rows into [`Problem`]s with the task's row preparation (malformed rows are left out and logged,
        as in training; math gold answers that do not parse are malformed).

        Args:
            rows (iterable of `Mapping[str, Any]`):
                Rows with the benchmark's source columns (a `datasets.Dataset` works).
            max_problems (`int` or `None`, *optional*):
                Keep only the first `max_problems` problems (after filtering).

        Returns:
            `list[Problem]`.
        """
        from ..tasks.data import prepare_rows

        usable, _ = prepare_rows(
            rows,
            self.task,
            columns=self.source_columns(),
            max_rows=max_problems,
            keep=self.keep,
            row_id=row_id,
            column_hint=f"Benchmark {self.name!r}: give the file these columns, or register it with `columns`.",
        )
        problems: list[Problem] = []
        seen: set[str] = set()
        for row in usable:
            problem_id = row.id
            if problem_id in seen:  # keep identifiers unique, since resuming matches samples on them
                problem_id = f"{problem_id}#{row.index}"
            seen.add(problem_id)
            columns = {name: row.fields[name] for name in self.task.reward_columns}
            problems.append(Problem(id=problem_id, prompt=self.task.render(row.fields), columns=columns))
        return problems

    def load(
        self,
        source: str | Path | None = None,
        data_dir: str | Path | None = None,
        max_problems: int | None = None,
    ) -> list[Problem]:
        """
        Load the benchmark's problems.

        Args:
            source (`str`, `Path` or `None`, *optional*):
                A local json/jsonl/parquet file, or a Hub dataset name overriding `hub_path`.
            data_dir (`str`, `Path` or `None`, *optional*):
                Directory searched for `local_file` when `source` is not given; the Hub is used when the file is not
                there.
            max_problems (`int` or `None`, *optional*):
                Keep only the first `max_problems` problems.

        Returns:
            `list[Problem]`.
        """
        rows = load_rows(self, source=source, data_dir=data_dir)
        problems = self.build_problems(rows, max_problems=max_problems)
        if not problems:
            raise ValueError(f"Benchmark {self.name!r} has no problems (source: {source or self.hub_path}).")
        return problems


def load_rows(
    benchmark: Benchmark, source: str | Path | None = None, data_dir: str | Path | None = None
) -> Iterable[Mapping]:
    """
    The raw rows of a benchmark, read by `trl_srppo.tasks.data.load_source`: from a local file when `source` is one (or
    `data_dir` holds the benchmark's `local_file`), otherwise from the Hub.

    Args:
        benchmark ([`Benchmark`]):
            The benchmark.
        source (`str`, `Path` or `None`, *optional*):
            A local file or a Hub dataset name.
        data_dir (`str`, `Path` or `None`, *optional*):
            Directory searched for `benchmark.local_file`.

    Returns:
        An iterable of row mappings.
    """
    from ..tasks.data import is_local_file_name, load_source

    if source is None and data_dir is not None and benchmark.local_file is not None:
        candidate = Path(data_dir) / benchmark.local_file
        if candidate.is_file():
            return load_source(str(candidate))
    if source is not None:
        if Path(source).is_dir():
            raise FileNotFoundError(
                f"Benchmark {benchmark.name!r}: {source} is a folder, not a json/jsonl/parquet file."
            )
        if Path(source).is_file() or is_local_file_name(str(source)):
            return load_source(str(source))
    return load_source(
        str(source) if source is not None else benchmark.hub_path, benchmark.hub_config, benchmark.hub_split
    )


def benchmark_label(name: str, source: str | Path | None = None) -> str:
    """
    How tables, plots and logs name a benchmark: its registered name, with the source when the user gave one
    (`data_files`): `math500 (file: my_set.jsonl)` for a local file, `math500 (dataset: me/my-set)` for a Hub dataset.
    The registered name alone means the registry's own data (its Hub dataset, or its `local_file` in `data_dir`).
    """
    from ..tasks.data import is_local_file_name

    if source is None:
        return name
    text = str(source)
    if Path(text).is_file() or is_local_file_name(text):
        return f"{name} (file: {Path(text).name})"
    return f"{name} (dataset: {text})"


# ---------------------------------------------------------------------------------------------------------- registry

BENCHMARKS: dict[str, Benchmark] = {}


def register_benchmark(benchmark: Benchmark, overwrite: bool = False) -> Benchmark:
    """
    Add a benchmark to the registry.

    Args:
        benchmark ([`Benchmark`]):
            The entry.
        overwrite (`bool`, *optional*, defaults to `False`):
            Replace an entry of the same name instead of raising.

    Returns:
        The benchmark, so that the call can be used as an expression.

    Raises:
        `ValueError`: if a benchmark with this name is already registered and `overwrite` is `False`.
    """
    if benchmark.name in BENCHMARKS and not overwrite:
        raise ValueError(
            f"A benchmark named {benchmark.name!r} is already registered; pass overwrite=True to replace it. "
            f"Registered: {', '.join(sorted(BENCHMARKS))}."
        )
    BENCHMARKS[benchmark.name] = benchmark
    return benchmark


def get_benchmark(name: str) -> Benchmark:
    """
    Look up a registered benchmark by name.

    Args:
        name (`str`):
            Registry name.

    Returns:
        [`Benchmark`].

    Raises:
        `KeyError`: if no benchmark has this name; the message lists the registered ones.
    """
    if name not in BENCHMARKS:
        raise KeyError(f"Unknown benchmark {name!r}. Registered benchmarks: {', '.join(sorted(BENCHMARKS))}.")
    return BENCHMARKS[name]


def list_benchmarks() -> list[str]:
    """The names of the registered benchmarks, sorted."""
    return sorted(BENCHMARKS)


def _countdown(name: str, num_count: int | None, description: str) -> Benchmark:
    """A Countdown benchmark over the held-out tail of Countdown-Tasks-3to4, optionally only `num_count` numbers."""
    return Benchmark(
        name=name,
        task="countdown",
        hub_path="Jiayi-Pan/Countdown-Tasks-3to4",
        hub_split="train[-2000:]",
        local_file="countdown_test.jsonl",
        keep=None if num_count is None else (lambda row: len(row["nums"]) == num_count),
        description=description,
    )


for _benchmark in (
    Benchmark(
        name="aime24",
        task="math",
        hub_path="HuggingFaceH4/aime_2024",
        hub_split="train",
        local_file="aime24.jsonl",
        description="AIME 2024, 30 problems (I and II), integer answers",
    ),
    Benchmark(
        name="aime25",
        task="math",
        hub_path="MathArena/aime_2025",
        hub_split="train",
        local_file="aime25.jsonl",
        description="AIME 2025, 30 problems (I and II), integer answers",
    ),
    Benchmark(
        name="aime26",
        task="math",
        hub_path="MathArena/aime_2026",
        hub_split="train",
        local_file="aime26.jsonl",
        description="AIME 2026, 30 problems (I and II), integer answers",
    ),
    Benchmark(
        name="hmmt25_feb",
        task="math",
        hub_path="MathArena/hmmt_feb_2025",
        hub_split="train",
        local_file="hmmt25_feb.jsonl",
        description="HMMT February 2025, 30 problems with closed-form answers",
    ),
    Benchmark(
        name="hmmt26_feb",
        task="math",
        hub_path="MathArena/hmmt_feb_2026",
        hub_split="train",
        local_file="hmmt26_feb.jsonl",
        description="HMMT February 2026, closed-form answers",
    ),
    Benchmark(
        name="math500",
        task="math",
        hub_path="HuggingFaceH4/MATH-500",
        hub_split="test",
        local_file="math500.jsonl",
        description="MATH-500, the 500-problem test subset of MATH",
    ),
    _countdown("countdown", None, "Countdown with 3 and 4 numbers: reach the target with + - * /"),
    _countdown("countdown3", 3, "Countdown, the problems with 3 numbers"),
    _countdown("countdown4", 4, "Countdown, the problems with 4 numbers"),
    Benchmark(
        name="knights_knaves",
        task="knights_knaves",
        hub_path="K-and-K/knights-and-knaves",
        hub_config="test",
        hub_split="3ppl+4ppl+5ppl+6ppl+7ppl",
        local_file="knights_knaves_test.jsonl",
        description="Knights and Knaves logic puzzles with 3 to 7 inhabitants",
    ),
    Benchmark(
        name="gpqa_diamond",
        task="multiple_choice",
        hub_path="Idavidrein/gpqa",
        hub_config="gpqa_diamond",
        hub_split="train",
        local_file="gpqa_diamond.jsonl",
        columns={
            "question": ("Question", "question"),
            "correct": ("Correct Answer",),
            "incorrect_1": ("Incorrect Answer 1",),
            "incorrect_2": ("Incorrect Answer 2",),
            "incorrect_3": ("Incorrect Answer 3",),
        },
        description="GPQA-Diamond, 198 four-option science questions (options shuffled with a fixed seed; gated)",
    ),
):
    register_benchmark(_benchmark)

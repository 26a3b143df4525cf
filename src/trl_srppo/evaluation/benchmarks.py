# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The benchmark registry: where each benchmark's problems come from, how they are turned into prompts, and which
verifier of `trl_srppo.rewards` scores them.

A benchmark is one [`Benchmark`] entry. Its rows come either from the Hugging Face Hub
(`datasets.load_dataset(hub_path, hub_config, split=hub_split)`) or from a local json/jsonl/parquet file with the
same fields. Adding a benchmark is one call:

```python
from trl_srppo.evaluation import Benchmark, register_benchmark

register_benchmark(
    Benchmark(name="my_math", verifier="math", hub_path="me/my-math", hub_split="test", prompt_template=MATH_PROMPT)
)
```
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..tasks import COUNTDOWN_PROMPT, KNIGHTS_KNAVES_PROMPT, MATH_PROMPT, MULTIPLE_CHOICE_PROMPT

__all__ = [
    "BENCHMARKS",
    "Benchmark",
    "Problem",
    "get_benchmark",
    "list_benchmarks",
    "load_rows",
    "register_benchmark",
]

# Column names under which an identifier is commonly stored; the row's position is used when none is present.
ID_FIELDS = ("id", "problem_idx", "unique_id", "Record ID", "idx", "index")


@dataclass(frozen=True)
class Problem:
    """
    One evaluation problem, ready to be prompted and verified.

    Args:
        id (`str`):
            Identifier of the problem, unique within its benchmark (used to match stored samples when resuming).
        prompt (`str`):
            The user message (the benchmark's prompt template filled with the row's fields).
        columns (`dict[str, Any]`):
            The keyword arguments passed to the verifier with each completion (e.g. `{"answer": "204"}`).
    """

    id: str
    prompt: str
    columns: dict[str, Any]


@dataclass(frozen=True)
class Benchmark:
    """
    A registered benchmark.

    Args:
        name (`str`):
            Registry name, used on the command line (`--benchmarks aime24 math500`).
        verifier (`str`):
            Name passed to `trl_srppo.rewards.get_reward_func` to score completions (`math`, `countdown`,
            `knights_knaves`, `multiple_choice`).
        prompt_template (`str`):
            `str.format` template of the user message; its fields are the row's canonical fields plus those added by
            `prepare`.
        hub_path (`str`):
            Dataset name on the Hugging Face Hub.
        hub_split (`str`, *optional*, defaults to `"test"`):
            Split to load from the Hub; `datasets` slicing and concatenation syntax is allowed (`"train[-2000:]"`,
            `"3ppl+4ppl"`).
        hub_config (`str` or `None`, *optional*):
            Dataset configuration name on the Hub.
        local_file (`str` or `None`, *optional*):
            File name looked up in a data directory (`--data-dir`) before falling back to the Hub.
        fields (`Mapping[str, tuple[str, ...]]`, *optional*):
            Canonical field -> accepted source column names (the first one present is used). Every canonical field is
            required.
        reward_columns (`tuple[str, ...]`, *optional*):
            Fields (canonical or added by `prepare`) passed to the verifier as keyword arguments.
        prepare (`Callable[[dict, int], dict | None]` or `None`, *optional*):
            Called with the row (canonical fields plus `id`) and its position; returns the fields to add to it, or
            `None` to drop the row (a filter).
        description (`str`, *optional*):
            One line shown by `trl-srppo eval --list-benchmarks`.
    """

    name: str
    verifier: str
    prompt_template: str
    hub_path: str
    hub_split: str = "test"
    hub_config: str | None = None
    local_file: str | None = None
    fields: Mapping[str, tuple[str, ...]] = field(
        default_factory=lambda: {"problem": ("problem", "Problem", "question"), "answer": ("answer", "Answer")}
    )
    reward_columns: tuple[str, ...] = ("answer",)
    prepare: Callable[[dict[str, Any], int], dict[str, Any] | None] | None = None
    description: str = ""

    def canonical_row(self, row: Mapping[str, Any], position: int) -> dict[str, Any] | None:
        """Map a source row to the canonical fields (plus `id` and the fields of `prepare`); `None` if filtered."""
        out: dict[str, Any] = {}
        for name, candidates in self.fields.items():
            source = next((column for column in candidates if column in row), None)
            if source is None:
                raise KeyError(
                    f"Benchmark {self.name!r}: a row has none of the columns {list(candidates)} for field {name!r}; "
                    f"its columns are {sorted(row)}."
                )
            out[name] = row[source]
        id_column = next((column for column in ID_FIELDS if column in row and row[column] is not None), None)
        out["id"] = str(row[id_column]) if id_column is not None else str(position)
        if self.prepare is not None:
            extra = self.prepare(out, position)
            if extra is None:
                return None
            out.update(extra)
        return out

    def build_problems(self, rows: Iterable[Mapping[str, Any]], max_problems: int | None = None) -> list[Problem]:
        """
        Turn source rows into [`Problem`]s.

        Args:
            rows (iterable of `Mapping[str, Any]`):
                Rows with the benchmark's source fields (a `datasets.Dataset` works).
            max_problems (`int` or `None`, *optional*):
                Keep only the first `max_problems` problems (after filtering).

        Returns:
            `list[Problem]`.
        """
        problems: list[Problem] = []
        seen: set[str] = set()
        for position, row in enumerate(rows):
            if max_problems is not None and len(problems) >= max_problems:
                break
            canonical = self.canonical_row(row, position)
            if canonical is None:
                continue
            problem_id = canonical["id"]
            if problem_id in seen:  # keep identifiers unique, since resuming matches samples on them
                problem_id = f"{problem_id}#{position}"
            seen.add(problem_id)
            columns = {name: canonical[name] for name in self.reward_columns}
            problems.append(Problem(id=problem_id, prompt=self.prompt_template.format(**canonical), columns=columns))
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
    The raw rows of a benchmark: from a local file when `source` is a file (or `data_dir` holds the benchmark's
    `local_file`), otherwise from the Hub with `datasets.load_dataset`.

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
    path: Path | None = None
    if source is not None and Path(source).is_file():
        path = Path(source)
    elif source is None and data_dir is not None and benchmark.local_file is not None:
        candidate = Path(data_dir) / benchmark.local_file
        if candidate.is_file():
            path = candidate
    if path is not None:
        return _read_local_file(path)
    if source is not None and (Path(source).suffix in (".json", ".jsonl", ".parquet") or Path(source).exists()):
        raise FileNotFoundError(f"Benchmark {benchmark.name!r}: {source} is not a readable json/jsonl/parquet file.")
    import datasets

    hub_path = str(source) if source is not None else benchmark.hub_path
    return datasets.load_dataset(hub_path, benchmark.hub_config, split=benchmark.hub_split)


def _read_local_file(path: Path) -> list[dict[str, Any]]:
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        with path.open(encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]
    if suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict):  # {"data": [...]} or a column-oriented dict
            if "data" in data and isinstance(data["data"], list):
                return data["data"]
            columns = list(data)
            return [dict(zip(columns, values)) for values in zip(*(data[c] for c in columns))]
        return list(data)
    if suffix == ".parquet":
        import datasets

        return datasets.Dataset.from_parquet(str(path))
    raise ValueError(f"Unsupported benchmark file {path}: expected .json, .jsonl or .parquet.")


# ----------------------------------------------------------------------------------------------------------- prepare


def _prepare_math(row: dict[str, Any], position: int) -> dict[str, Any]:
    # Some Hub copies store AIME answers as integers; verifiers compare strings.
    return {"answer": str(row["answer"])}


def _countdown_filter(num_count: int | None) -> Callable[[dict[str, Any], int], dict[str, Any] | None]:
    def prepare(row: dict[str, Any], position: int) -> dict[str, Any] | None:
        nums = [int(x) for x in row["nums"]]
        if num_count is not None and len(nums) != num_count:
            return None
        return {"nums": nums, "target": int(row["target"]), "nums_text": str(nums)}

    return prepare


def _prepare_knights_knaves(row: dict[str, Any], position: int) -> dict[str, Any]:
    return {"names": [str(name) for name in row["names"]], "solution": [bool(x) for x in row["solution"]]}


GPQA_SHUFFLE_SEED = 0
LETTERS = "ABCDEFGHIJ"


def _prepare_gpqa(row: dict[str, Any], position: int) -> dict[str, Any]:
    options = [row["correct"], row["incorrect_1"], row["incorrect_2"], row["incorrect_3"]]
    options = [str(option).strip() for option in options]
    order = list(range(len(options)))
    # A fixed permutation per question: seeded by a constant and the question's identifier (string seeds are hashed
    # with SHA-512 by `random`, so the order does not depend on PYTHONHASHSEED or on the position in the file).
    random.Random(f"gpqa-{GPQA_SHUFFLE_SEED}-{row['id']}").shuffle(order)
    choices = "\n".join(f"{LETTERS[slot]}) {options[index]}" for slot, index in enumerate(order))
    return {"question": str(row["question"]).strip(), "choices_text": choices, "answer": LETTERS[order.index(0)]}


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


_MATH_FIELDS = {"problem": ("problem", "Problem", "question"), "answer": ("answer", "Answer")}


def _countdown(name: str, num_count: int | None, description: str) -> Benchmark:
    """A Countdown benchmark over the held-out tail of Countdown-Tasks-3to4, optionally only `num_count` numbers."""
    return Benchmark(
        name=name,
        verifier="countdown",
        prompt_template=COUNTDOWN_PROMPT,
        hub_path="Jiayi-Pan/Countdown-Tasks-3to4",
        hub_split="train[-2000:]",
        local_file="countdown_test.jsonl",
        fields={"nums": ("nums",), "target": ("target",)},
        reward_columns=("nums", "target"),
        prepare=_countdown_filter(num_count),
        description=description,
    )


for _benchmark in (
    Benchmark(
        name="aime24",
        verifier="math",
        prompt_template=MATH_PROMPT,
        hub_path="HuggingFaceH4/aime_2024",
        hub_split="train",
        local_file="aime24.jsonl",
        fields=_MATH_FIELDS,
        prepare=_prepare_math,
        description="AIME 2024, 30 problems (I and II), integer answers",
    ),
    Benchmark(
        name="aime25",
        verifier="math",
        prompt_template=MATH_PROMPT,
        hub_path="MathArena/aime_2025",
        hub_split="train",
        local_file="aime25.jsonl",
        fields=_MATH_FIELDS,
        prepare=_prepare_math,
        description="AIME 2025, 30 problems (I and II), integer answers",
    ),
    Benchmark(
        name="aime26",
        verifier="math",
        prompt_template=MATH_PROMPT,
        hub_path="MathArena/aime_2026",
        hub_split="train",
        local_file="aime26.jsonl",
        fields=_MATH_FIELDS,
        prepare=_prepare_math,
        description="AIME 2026, 30 problems (I and II), integer answers",
    ),
    Benchmark(
        name="hmmt25_feb",
        verifier="math",
        prompt_template=MATH_PROMPT,
        hub_path="MathArena/hmmt_feb_2025",
        hub_split="train",
        local_file="hmmt25_feb.jsonl",
        fields=_MATH_FIELDS,
        prepare=_prepare_math,
        description="HMMT February 2025, 30 problems with closed-form answers",
    ),
    Benchmark(
        name="hmmt26_feb",
        verifier="math",
        prompt_template=MATH_PROMPT,
        hub_path="MathArena/hmmt_feb_2026",
        hub_split="train",
        local_file="hmmt26_feb.jsonl",
        fields=_MATH_FIELDS,
        prepare=_prepare_math,
        description="HMMT February 2026, closed-form answers",
    ),
    Benchmark(
        name="math500",
        verifier="math",
        prompt_template=MATH_PROMPT,
        hub_path="HuggingFaceH4/MATH-500",
        hub_split="test",
        local_file="math500.jsonl",
        fields=_MATH_FIELDS,
        prepare=_prepare_math,
        description="MATH-500, the 500-problem test subset of MATH",
    ),
    _countdown("countdown", None, "Countdown with 3 and 4 numbers: reach the target with + - * /"),
    _countdown("countdown3", 3, "Countdown, the problems with 3 numbers"),
    _countdown("countdown4", 4, "Countdown, the problems with 4 numbers"),
    Benchmark(
        name="knights_knaves",
        verifier="knights_knaves",
        prompt_template=KNIGHTS_KNAVES_PROMPT,
        hub_path="K-and-K/knights-and-knaves",
        hub_config="test",
        hub_split="3ppl+4ppl+5ppl+6ppl+7ppl",
        local_file="knights_knaves_test.jsonl",
        fields={"quiz": ("quiz",), "names": ("names",), "solution": ("solution",)},
        reward_columns=("solution", "names"),
        prepare=_prepare_knights_knaves,
        description="Knights and Knaves logic puzzles with 3 to 7 inhabitants",
    ),
    Benchmark(
        name="gpqa_diamond",
        verifier="multiple_choice",
        prompt_template=MULTIPLE_CHOICE_PROMPT,
        hub_path="Idavidrein/gpqa",
        hub_config="gpqa_diamond",
        hub_split="train",
        local_file="gpqa_diamond.jsonl",
        fields={
            "question": ("Question", "question"),
            "correct": ("Correct Answer",),
            "incorrect_1": ("Incorrect Answer 1",),
            "incorrect_2": ("Incorrect Answer 2",),
            "incorrect_3": ("Incorrect Answer 3",),
        },
        reward_columns=("answer",),
        prepare=_prepare_gpqa,
        description="GPQA-Diamond, 198 four-option science questions (options shuffled with a fixed seed; gated)",
    ),
):
    register_benchmark(_benchmark)

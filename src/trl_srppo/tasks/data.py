# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Training data: load a task's rows from the Hub or a local file, check them, and turn them into TRL prompts.

Every row becomes a conversational prompt (`[{"role": "user", "content": ...}]`, with an optional system message),
so the model's own chat template renders it (and GRPOConfig's `chat_template_kwargs`, such as
`{"enable_thinking": true}` for Qwen3, reach that template). The columns the task's reward function reads are kept
beside the prompt; TRL passes them to the reward function by name.
"""

import json
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import datasets
from datasets import Dataset

from .registry import MalformedRow, Task

logger = logging.getLogger(__name__)

LOCAL_FORMATS = {".json": "json", ".jsonl": "json", ".parquet": "parquet"}


_COLUMN_MAP_EXAMPLE = (
    '--dataset_column_map \'{"problem": "question"}\' (in a recipe, `dataset_column_map: {problem: question}`)'
)


def parse_column_map(value: Any) -> dict | None:
    """`dataset_column_map` as a dict (task field -> dataset column, or a list of accepted columns), from the JSON
    text of the command line or the mapping of a recipe; anything else is an error that shows the expected form."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as err:
            raise ValueError(
                f"dataset_column_map must be a JSON object of task field -> dataset column, got {value!r}, which is "
                f"not JSON ({err.msg}). Write it as {_COLUMN_MAP_EXAMPLE}."
            ) from None
    if value is None:
        return None
    columns_ok = isinstance(value, dict) and all(
        isinstance(k, str) and (isinstance(v, str) or (isinstance(v, list) and all(isinstance(c, str) for c in v)))
        for k, v in value.items()
    )
    if not columns_ok:
        raise ValueError(
            f"dataset_column_map must map task fields to dataset column names, got {value!r}. Write it as "
            f"{_COLUMN_MAP_EXAMPLE}."
        )
    return value


def is_local_file_name(name_or_path: str) -> bool:
    """Whether `name_or_path` names a local dataset file (by its extension) rather than a Hub dataset."""
    return os.path.splitext(str(name_or_path))[1].lower() in LOCAL_FORMATS


def load_source(name_or_path: str, config: str | None = None, split: str = "train") -> Dataset:
    """The one reader of rows: a dataset by Hub name (`datasets.load_dataset(name, config, split=split)`) or a local
    file.

    Local files: `.jsonl` (one object per line), `.json` (a list of objects, one object per line, a column-oriented
    object `{"column": [values, ...], ...}`, or `{"data": [objects, ...]}`) and `.parquet`. A malformed JSON file is an
    error that names the line.
    """
    name_or_path = str(name_or_path)
    extension = os.path.splitext(name_or_path)[1].lower()
    if extension not in LOCAL_FORMATS and os.path.isfile(name_or_path):
        raise ValueError(
            f"Dataset file {name_or_path} has an unsupported extension {extension!r}: use .json, .jsonl or .parquet."
        )
    if extension in LOCAL_FORMATS:
        if not os.path.isfile(name_or_path):
            raise FileNotFoundError(f"Dataset file {name_or_path} does not exist.")
        if extension != ".parquet" and _holds_no_rows(name_or_path):  # `datasets` fails with a bare StopIteration
            raise ValueError(f"Dataset file {name_or_path} is empty (no rows): point it at a file with data.")
        if extension == ".json":
            document = _json_object(name_or_path)
            if document is not None:
                return document
        try:
            return datasets.load_dataset(LOCAL_FORMATS[extension], data_files=name_or_path, split="train")
        except Exception as err:  # the `datasets` error buries the cause; name the file and line when it is JSON
            problem = first_json_error(name_or_path) if LOCAL_FORMATS[extension] == "json" else None
            if problem is None:
                raise
            raise ValueError(
                f"Dataset file {name_or_path}: {problem}. The file may be truncated or corrupt; fix or remove that "
                "line."
            ) from err
    return datasets.load_dataset(name_or_path, config, split=split)


def _holds_no_rows(path: str) -> bool:
    """Whether a JSON or JSON Lines file holds nothing but white space."""
    with open(path, encoding="utf-8") as f:
        return all(not line.strip() for line in f)


def _json_object(path: str) -> Dataset | None:
    """A `.json` file holding one object: `{"data": [rows]}` or column-oriented `{"column": [values]}`; `None` for any
    other file (a list of rows, JSON Lines, a single row), which `datasets` reads."""
    with open(path, encoding="utf-8") as f:
        start = f.read(1024).lstrip()
    if not start.startswith("{"):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            document = json.load(f)
    except json.JSONDecodeError:
        return None  # JSON Lines (or a broken file, whose line `first_json_error` names)
    if isinstance(document.get("data"), list):
        return Dataset.from_list(document["data"])
    if not document or not all(isinstance(v, list) for v in document.values()):
        return None  # one row (a one-line JSON Lines file)
    if len({len(v) for v in document.values()}) != 1:
        raise ValueError(
            f"Dataset file {path} is column-oriented JSON whose columns have different lengths "
            f"({ {k: len(v) for k, v in document.items()} }); give every column one value per row."
        )
    return Dataset.from_dict(document)


def first_json_error(path: str) -> str | None:
    """Where a `.json` / `.jsonl` file stops being valid JSON (`"line N is not valid JSON (...)"`), or `None`.

    A file that starts with `[` is one JSON document; any other is read as JSON Lines (one object per line).
    """
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    try:
        json.loads(text)
        return None
    except json.JSONDecodeError as whole:
        if text.lstrip().startswith("["):
            return f"line {whole.lineno} is not valid JSON ({whole.msg})"
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            return f"line {number} is not valid JSON ({err.msg}: {line[:60]!r})"
        if not isinstance(row, dict):
            return f"line {number} is a JSON {type(row).__name__}, not an object with the task's fields"
    return None


@dataclass
class BadRows:
    """The rows left out of a dataset: `(index, reason)` pairs, in source order."""

    rows: list[tuple[int, str]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.rows)

    def summary(self, limit: int = 10) -> str:
        shown = "; ".join(f"row {i}: {reason}" for i, reason in self.rows[:limit])
        more = f"; and {len(self.rows) - limit} more" if len(self.rows) > limit else ""
        return f"{len(self.rows)} malformed row(s): {shown}{more}"


@dataclass(frozen=True)
class PreparedRow:
    """A checked row: its position in the source, its identifier (when asked for) and the task's prepared fields."""

    index: int
    id: str | None
    fields: dict[str, Any]


def _column_names(rows: Iterable[Mapping[str, Any]]) -> list[str] | None:
    names = getattr(rows, "column_names", None)
    if names is not None:
        return list(names)
    if isinstance(rows, Sequence) and rows:
        return list(rows[0])
    return None


def prepare_rows(
    rows: Iterable[Mapping[str, Any]],
    task: Task,
    columns: Mapping[str, str | Sequence[str]] | None = None,
    on_bad_row: str = "skip",
    check_answers: bool = True,
    max_rows: int | None = None,
    keep: Callable[[dict[str, Any]], bool] | None = None,
    row_id: Callable[[Mapping[str, Any], int], str] | None = None,
    column_hint: str = 'Map them with `dataset_column_map`, e.g. {"problem": "question"}.',
) -> tuple[list[PreparedRow], BadRows]:
    """Check every row with the task's `prepare` (the one row preparation of training, evaluation and analysis).

    Args:
        rows (iterable of `Mapping`):
            Source rows (a `datasets.Dataset` works).
        task ([`~trl_srppo.tasks.registry.Task`]):
            The task.
        columns (`Mapping[str, str | Sequence[str]]`, *optional*):
            Task field -> source column, or the accepted source columns in order of preference (the first one the
            source has is used). A field not named here is read from the column of the same name.
        on_bad_row (`str`, *optional*, defaults to `"skip"`):
            `"skip"`: leave malformed rows out, log them and return them; `"error"`: raise a `ValueError` that lists
            them.
        check_answers (`bool`, *optional*, defaults to `True`):
            For the math task, also check that every gold answer parses.
        max_rows (`int`, *optional*):
            Stop after this many usable rows.
        keep (`Callable[[dict], bool]`, *optional*):
            A filter on prepared rows (e.g. only Countdown problems with 3 numbers); rows it drops are not malformed.
        row_id (`Callable[[Mapping, int], str]`, *optional*):
            Identifier of a source row and its position; when given, it is also passed to `prepare` as field `id`.
        column_hint (`str`, *optional*):
            How to fix a missing column, appended to the error.

    Returns:
        `tuple[list[PreparedRow], BadRows]`: the usable rows in source order and the rows left out.
    """
    if on_bad_row not in ("skip", "error"):
        raise ValueError(f"on_bad_row must be 'skip' or 'error', got {on_bad_row!r}.")
    if max_rows is not None and max_rows < 1:
        raise ValueError(f"max_rows must be >= 1 or None, got {max_rows}.")
    candidates = field_columns(task, columns, _column_names(rows), column_hint)
    bad = BadRows()
    usable: list[PreparedRow] = []
    check = check_answers and task.name == "math"
    pending: list[PreparedRow] = []  # prepared, gold answer not checked yet
    for index, source in enumerate(rows):
        if max_rows is not None and len(usable) >= max_rows:
            break
        item = _prepare_row(task, source, index, candidates, row_id, bad)
        if item is None or (keep is not None and not keep(item.fields)):
            continue
        if not check:
            usable.append(item)
            continue
        pending.append(item)
        if max_rows is not None and len(pending) >= max_rows - len(usable):
            usable += _keep_parsable(pending, bad)  # just enough rows checked to reach `max_rows`
            pending = []
    if pending:
        usable += _keep_parsable(pending, bad)
    bad.rows.sort()
    if bad:
        if on_bad_row == "error":
            raise ValueError(f"{bad.summary()}. Fix or remove these rows, or set on_bad_row='skip' to leave them out.")
        logger.warning("Skipping %s", bad.summary())
    return usable, bad


def field_columns(
    task: Task,
    columns: Mapping[str, str | Sequence[str]] | None,
    present: Sequence[str] | None,
    column_hint: str = "",
) -> dict[str, tuple[str, ...]]:
    """The source columns each of the task's fields may be read from.

    Args:
        task ([`~trl_srppo.tasks.registry.Task`]):
            The task.
        columns (`Mapping[str, str | Sequence[str]]` or `None`):
            Task field -> source column, or the accepted source columns in order of preference; a field not named
            here is read from the column of the same name.
        present (sequence of `str` or `None`):
            The source's columns, when known.
        column_hint (`str`, *optional*):
            How to fix a missing column, appended to the error.

    Returns:
        `dict[str, tuple[str, ...]]`: task field -> its candidate columns in order of preference, restricted to the
        `present` ones when those are known. A `ValueError` names the fields none of whose columns is present.
    """
    candidates = {}
    for name in task.fields:
        given = (columns or {}).get(name, name)
        candidates[name] = (given,) if isinstance(given, str) else tuple(given)
    if present is None:
        return candidates
    missing = [f for f, names in candidates.items() if not any(c in present for c in names)]
    if missing:
        mapped = [f"{f!r} -> {'/'.join(candidates[f])}" for f in missing if f in (columns or {})]
        mapped_note = f" The column map sends {', '.join(mapped)}, which the dataset lacks." if mapped else ""
        raise ValueError(
            f"The dataset has no column for the {task.name} task's field(s) {missing} (columns: {present})."
            f"{mapped_note} " + column_hint
        )
    return {f: tuple(c for c in names if c in present) for f, names in candidates.items()}


def read_fields(source: Mapping[str, Any], candidates: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """A source row's value of each task field: that of its first candidate column holding a value (not `None`), or
    `None` when none does."""
    return {
        name: next((source[c] for c in names if source.get(c) is not None), None) for name, names in candidates.items()
    }


def _prepare_row(
    task: Task,
    source: Mapping[str, Any],
    index: int,
    candidates: Mapping[str, Sequence[str]],
    row_id: Callable[[Mapping[str, Any], int], str] | None,
    bad: BadRows,
) -> PreparedRow | None:
    """Source row `index` checked by the task's `prepare` (with its identifier as field `id` when `row_id` is given);
    `None` for a malformed row, which is added to `bad`."""
    row = read_fields(source, candidates)
    identifier = row_id(source, index) if row_id is not None else None
    if identifier is not None:
        row["id"] = identifier
    try:
        return PreparedRow(index, identifier, task.prepare(row))
    except MalformedRow as err:
        bad.rows.append((index, str(err)))
        return None


def build_prompts(
    dataset: Dataset,
    task: Task,
    column_map: dict[str, str] | None = None,
    system_prompt: str | None = None,
    on_bad_row: str = "skip",
    check_answers: bool = True,
    max_rows: int | None = None,
) -> tuple[Dataset, BadRows]:
    """Check every row and turn it into a conversational prompt plus the task's reward columns.

    Args:
        dataset (`Dataset`):
            Source rows.
        task ([`~trl_srppo.tasks.registry.Task`]):
            The task (fields, prompt template, checks).
        column_map (`dict[str, str]`, *optional*):
            Task field -> source column, for datasets whose columns have other names (e.g. `{"problem": "question"}`).
        system_prompt (`str`, *optional*):
            A system message put before every prompt.
        on_bad_row (`str`, *optional*, defaults to `"skip"`):
            `"skip"`: leave malformed rows out, log them with their indices and return them; `"error"`: raise a
            `ValueError` that lists them.
        check_answers (`bool`, *optional*, defaults to `True`):
            For the math task, also check that every gold answer parses (with the time-bounded verifier of
            `trl_srppo.rewards.math`), so unscorable rows are found before training rather than during it.
        max_rows (`int`, *optional*):
            Stop after this many usable rows (the first ones in source order); the rows after them are not read,
            checked or reported.

    Returns:
        `tuple[Dataset, BadRows]`: the prompts (columns `prompt` and the reward columns) and the rows left out.
    """
    unknown = sorted(set(column_map or {}) - set(task.fields))
    if unknown:  # a typo in a field name would leave the map unused, and the field read from its own column
        raise ValueError(
            f"dataset_column_map maps {unknown}, which the {task.name} task has no field for: its fields are "
            f"{list(task.fields)}. Map those to the dataset's columns, e.g. {{{task.fields[0]!r}: '<column>'}}."
        )
    usable, bad = prepare_rows(
        dataset, task, columns=column_map, on_bad_row=on_bad_row, check_answers=check_answers, max_rows=max_rows
    )
    if not usable:
        raise ValueError(f"No usable rows for the {task.name} task ({bad.summary() if bad else 'empty dataset'}).")
    examples = []
    for row in usable:
        messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
        messages.append({"role": "user", "content": task.render(row.fields)})
        examples.append({"prompt": messages, **{c: row.fields[c] for c in task.reward_columns}})
    return Dataset.from_list(examples), bad


def load_task_prompts(
    dataset_name: str,
    task_name: str,
    dataset_config: str | None = None,
    split: str = "train",
    **options: Any,
) -> tuple[Dataset, BadRows]:
    """The rows of a Hub dataset or local file ([`load_source`]) made into the task's prompts ([`build_prompts`], with
    `options`: `column_map`, `system_prompt`, `on_bad_row`, `check_answers`, `max_rows`), as `trl-srppo train --task`
    and `trl-srppo analyze --task` read their data."""
    from .registry import get_task

    return build_prompts(load_source(dataset_name, dataset_config, split), get_task(task_name), **options)


def _keep_parsable(pending: list[PreparedRow], bad: BadRows) -> list[PreparedRow]:
    """The math rows of `pending` whose gold answer parses; the others are added to `bad`."""
    from ..rewards.math import score_answers

    golds = [row.fields["answer"] for row in pending]
    verdicts, _ = score_answers(golds, [f"\\boxed{{{gold}}}" for gold in golds])
    keep = []
    for row, verdict in zip(pending, verdicts, strict=True):
        if verdict is None:
            bad.rows.append((row.index, f"gold answer {row.fields['answer']!r} does not parse"))
        else:
            keep.append(row)
    return keep

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
from dataclasses import dataclass, field

from datasets import Dataset, load_dataset

from .tasks import MalformedRow, Task

logger = logging.getLogger(__name__)

LOCAL_FORMATS = {".json": "json", ".jsonl": "json", ".parquet": "parquet"}


def load_source(name_or_path: str, config: str | None = None, split: str = "train") -> Dataset:
    """A dataset by Hub name (`datasets.load_dataset`) or from a local `.json`, `.jsonl` or `.parquet` file."""
    extension = os.path.splitext(name_or_path)[1].lower()
    if extension in LOCAL_FORMATS:
        if not os.path.isfile(name_or_path):
            raise FileNotFoundError(f"Dataset file {name_or_path} does not exist.")
        try:
            return load_dataset(LOCAL_FORMATS[extension], data_files=name_or_path, split="train")
        except Exception as err:  # the `datasets` error buries the cause; name the file and line when it is JSON
            problem = first_json_error(name_or_path) if LOCAL_FORMATS[extension] == "json" else None
            if problem is None:
                raise
            raise ValueError(
                f"Dataset file {name_or_path}: {problem}. The file may be truncated or corrupt; fix or remove that "
                "line."
            ) from err
    return load_dataset(name_or_path, config, split=split)


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
        task ([`~trl_srppo.tasks.Task`]):
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
    if on_bad_row not in ("skip", "error"):
        raise ValueError(f"on_bad_row must be 'skip' or 'error', got {on_bad_row!r}.")
    column_map = dict(column_map or {})
    missing = [f for f in task.fields if column_map.get(f, f) not in dataset.column_names]
    if missing:
        raise ValueError(
            f"The dataset has no column for the {task.name} task's field(s) {missing} "
            f"(columns: {dataset.column_names}). "
            'Map them with `dataset_column_map`, e.g. {"problem": "question"}.'
        )
    if max_rows is not None and max_rows < 1:
        raise ValueError(f"max_rows must be >= 1 or None, got {max_rows}.")
    bad = BadRows()
    examples = []
    check = check_answers and task.name == "math"
    pending = []  # (index, example) prepared but whose gold answer is not checked yet
    for index, source in enumerate(dataset):
        if max_rows is not None and len(examples) >= max_rows:
            break
        row = {name: source.get(column_map.get(name, name)) for name in task.fields}
        try:
            prepared = task.prepare(row)
        except MalformedRow as err:
            bad.rows.append((index, str(err)))
            continue
        messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
        messages.append({"role": "user", "content": task.prompt_template.format(**prepared)})
        example = {"prompt": messages, **{c: prepared[c] for c in task.reward_columns}}
        if not check:
            examples.append(example)
            continue
        pending.append((index, example))
        if max_rows is not None and len(pending) >= max_rows - len(examples):
            examples += _keep_parsable(pending, bad)  # just enough rows checked to reach `max_rows`
            pending = []
    if pending:
        examples += _keep_parsable(pending, bad)
    bad.rows.sort()

    if bad:
        if on_bad_row == "error":
            raise ValueError(
                f"{bad.summary()}. Fix or remove these rows, or set on_bad_row='skip' to train without them."
            )
        logger.warning("Skipping %s", bad.summary())
    if not examples:
        raise ValueError(f"No usable rows for the {task.name} task ({bad.summary() if bad else 'empty dataset'}).")
    return Dataset.from_list(examples), bad


def _keep_parsable(pending: list[tuple[int, dict]], bad: BadRows) -> list[dict]:
    """The math examples of `pending` whose gold answer parses; the others are added to `bad`."""
    from .rewards.math import score_answers

    golds = [example["answer"] for _, example in pending]
    verdicts, _ = score_answers(golds, [f"\\boxed{{{gold}}}" for gold in golds])
    keep = []
    for (index, example), verdict in zip(pending, verdicts, strict=True):
        if verdict is None:
            bad.rows.append((index, f"gold answer {example['answer']!r} does not parse"))
        else:
            keep.append(example)
    return keep

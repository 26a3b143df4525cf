# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The repository's problem-set fixtures (`tests/fixtures`), which `make test` reads instead of the public sets: the
generated files are what their script writes, every puzzle has the solution its row gives, and every gold answer
scores 1 with its verifier."""

import itertools
import re
from pathlib import Path

import pytest
from helpers import FIXTURES_DIR, read_rows
from test_evaluation_helpers import solve_countdown

from tests.fixtures import make_fixtures  # the script, imported from the repository root (pyproject's pythonpath)
from trl_srppo.tasks.registry import get_task

FIXTURES = Path(FIXTURES_DIR)


def rows(name: str) -> list[dict]:
    return read_rows(FIXTURES / name)


def test_generated_files_are_what_the_script_writes():
    written = make_fixtures.rows()
    assert sorted(written) == [
        "arithmetic_train.jsonl",
        "countdown_test.jsonl",
        "knights_knaves_test.jsonl",
        "math_train.jsonl",
    ]
    for name, records in written.items():
        assert (FIXTURES / name).read_text(encoding="utf-8") == make_fixtures.render(records), name


# The statement forms of the quizzes, read back from the text (not from the script's own data).
ROLE = r"(knight|knave)"
CLAIMS = [
    (rf"(\w+) is a {ROLE} if and only if (\w+) is a {ROLE}", lambda a, x, rx, y, ry: (a[x] == rx) == (a[y] == ry)),
    (rf"if (\w+) is a {ROLE} then (\w+) is a {ROLE}", lambda a, x, rx, y, ry: a[x] != rx or a[y] == ry),
    (rf"(\w+) is a {ROLE} or (\w+) is a {ROLE}", lambda a, x, rx, y, ry: a[x] == rx or a[y] == ry),
    (rf"(\w+) is a {ROLE} and (\w+) is a {ROLE}", lambda a, x, rx, y, ry: a[x] == rx and a[y] == ry),
    (rf"(\w+) is a {ROLE}", lambda a, x, rx, y=None, ry=None: a[x] == rx),
]


def read_statements(quiz: str) -> list[tuple[str, object]]:
    """(speaker, claim as a function of the assignment name -> is a knight) for each statement of a quiz."""
    statements = []
    for speaker, claim in re.findall(r'(\w+) said, "([^"]+)\."', quiz):
        for pattern, truth in CLAIMS:
            match = re.fullmatch(pattern, claim, flags=re.IGNORECASE)
            if match:
                groups = [g if g not in ("knight", "knave") else g == "knight" for g in match.groups()]
                statements.append((speaker, lambda a, t=truth, g=groups: t(a, *g)))
                break
        else:
            raise AssertionError(f"unreadable statement {claim!r}")
    return statements


def test_every_knights_and_knaves_quiz_has_exactly_its_solution():
    for row in rows("knights_knaves_test.jsonl"):
        names, statements = row["names"], read_statements(row["quiz"])
        assert [speaker for speaker, _ in statements] == names and row["n_people"] == len(names)
        fitting = []
        for roles in itertools.product([True, False], repeat=len(names)):
            assignment = dict(zip(names, roles))
            if all(assignment[speaker] == claim(assignment) for speaker, claim in statements):
                fitting.append(list(roles))
        assert fitting == [row["solution"]], row["quiz"]
        assert row["solution_text"].splitlines() == [
            f"({k + 1}) {n} is a {'knight' if r else 'knave'}" for k, (n, r) in enumerate(zip(names, row["solution"]))
        ]


def test_every_countdown_row_has_an_expression():
    records = rows("countdown_test.jsonl")
    assert sorted(len(r["nums"]) for r in records) == [3] * 12 + [4] * 12
    for row in records:
        assert solve_countdown(row["nums"], row["target"]) is not None, row


@pytest.mark.parametrize(
    "name, task",
    [
        ("math500.jsonl", "math"),
        ("aime24.jsonl", "math"),
        ("aime25.jsonl", "math"),
        ("hmmt25_feb.jsonl", "math"),
        ("deepscaler_aime_1983_2023.jsonl", "math"),
        ("math_train.jsonl", "math"),
        ("arithmetic_train.jsonl", "arithmetic"),
    ],
)
def test_every_gold_answer_scores_one_and_a_wrong_one_zero(name, task):
    records = rows(name)
    if "id" in records[0]:
        assert len({r["id"] for r in records}) == len(records)
    golds = [str(r["answer"]) for r in records]
    if task == "math":
        right = [f"So the answer is $\\boxed{{{gold}}}$." for gold in golds]
        wrong = ["So the answer is $\\boxed{-123456789}$."] * len(golds)
    else:
        right = [f"{r['problem'].split('?')[0].removeprefix('What is ')} = {gold}" for r, gold in zip(records, golds)]
        wrong = ["The answer is -123456789."] * len(golds)
    columns = [{"answer": gold} for gold in golds]
    scores = get_task(task).score([""] * 2 * len(golds), right + wrong, columns + columns)
    assert scores == [1.0] * len(golds) + [0.0] * len(golds)

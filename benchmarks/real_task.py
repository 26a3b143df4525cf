# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`make bench-real`'s task: one-operation arithmetic questions in levels, with disjoint splits from one seed.

Every problem of a level is enumerated (e.g. `add1`: `a + b` for digits 1-9), shuffled with the data seed and cut
into `select` (the base model's success per level, which decides the levels kept), `val`, `test` and `train`; a
problem is in one split only. Rows are those of the package's `arithmetic` task (fields `problem`, `answer`;
verifier `number`), with the prompt as a one-message conversation, so the trainers and the evaluation render it with
the model's chat template.
"""

import random

PROMPT = "What is {a} {op} {b}? Reply with the number only."

# name -> (operator, first operand range, second operand range); subtraction keeps a >= b.
LEVELS: dict[str, tuple[str, range, range]] = {
    "add1": ("+", range(1, 10), range(1, 10)),
    "sub1": ("-", range(1, 10), range(1, 10)),
    "mul1": ("*", range(2, 10), range(2, 10)),
    "add21": ("+", range(10, 50), range(1, 10)),
}
SPLITS = ("select", "val", "test", "train")


def level_problems(level: str) -> list[dict]:
    """Every problem of `level`, as task rows with their level."""
    op, first, second = LEVELS[level]
    rows = []
    for a in first:
        for b in second:
            if op == "-" and a < b:
                continue
            value = {"+": a + b, "-": a - b, "*": a * b}[op]
            problem = PROMPT.format(a=a, op=op, b=b)
            rows.append({"problem": problem, "answer": str(value), "level": level})
    return rows


def level_splits(level: str, sizes: dict[str, int], seed: int) -> dict[str, list[dict]]:
    """`level`'s problems cut into `select`, `val` and `test` of the given sizes and `train` (the rest, at least as
    many as `sizes["train"]`), after a shuffle with `seed`."""
    rows = level_problems(level)
    random.Random(f"{seed}-{level}").shuffle(rows)
    needed = sum(sizes[name] for name in SPLITS)
    if len(rows) < needed:
        raise ValueError(
            f"level {level!r} has {len(rows)} problems, fewer than the {needed} the splits need ({sizes}); "
            "lower the evaluation sizes"
        )
    out, start = {}, 0
    for name in SPLITS[:-1]:
        out[name] = rows[start : start + sizes[name]]
        start += sizes[name]
    out["train"] = rows[start:]
    return out


def as_example(row: dict) -> dict:
    """A trainer's dataset row: the problem as a one-message conversation, and its gold answer."""
    return {"prompt": [{"role": "user", "content": row["problem"]}], "answer": row["answer"]}

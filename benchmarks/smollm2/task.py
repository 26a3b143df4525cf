# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`make bench-real`'s task: one-operation arithmetic questions in levels, with disjoint splits from one seed.

Every problem of a level is enumerated (e.g. `add1`: `a + b` for digits 1-9), shuffled with the data seed and cut
into `select` (the base model's success per level, which decides the levels kept), `val`, `test` and `train`; a
problem is in one split only. Rows are those of the package's `arithmetic` task (fields `problem`, `answer`;
verifier `number`), with the prompt as a one-message conversation, so the trainers and the evaluation render it with
the model's chat template.

Two testbeds (`TESTBEDS`) draw on the levels:

- `arithmetic` (`LEVELS`, the SmolLM2 study's): four levels whose base success lies between 0.08 and 0.27, which the
  level explains little of.
- `wide` (`WIDE_LEVELS`, the cold-start study's): levels whose difficulty for SmolLM2-135M-Instruct spans widely,
  each with a form of its own, so the level is readable from the prompt: `echo2` ("What is 47?"), `add1`
  ("What is 4 + 5?"), `plus1` ("What is 47 + 1?") and `mul21` ("What is 47 * 8?"), from easy to hard for the base
  model (its success per level: `reports/cold_start/README.md`, stage `base`).
- `long` (`LONG_LEVELS`, the long-horizon study's): the `wide` levels and three harder ones of two two-digit
  operands, `add2` ("What is 47 + 23?"), `sub2` ("What is 47 - 23?", a >= b) and `mul22` ("What is 47 * 23?"), so
  that hard problems stay in play after the easy levels saturate.
"""

import random

PROMPT = "What is {a} {op} {b}? Reply with the number only."
ECHO_PROMPT = "What is {a}? Reply with the number only."

# name -> (operator, first operand range, second operand range); subtraction keeps a >= b; the operator `None` asks
# for the first operand itself (`ECHO_PROMPT`, no second operand).
LEVELS: dict[str, tuple[str, range, range]] = {
    "add1": ("+", range(1, 10), range(1, 10)),
    "sub1": ("-", range(1, 10), range(1, 10)),
    "mul1": ("*", range(2, 10), range(2, 10)),
    "add21": ("+", range(10, 50), range(1, 10)),
}
WIDE_LEVELS: dict[str, tuple[str | None, range, range]] = {
    "echo2": (None, range(10, 100), range(1)),
    "add1": LEVELS["add1"],
    "plus1": ("+", range(10, 100), range(1, 2)),
    "mul21": ("*", range(10, 100), range(2, 10)),
}
LONG_LEVELS: dict[str, tuple[str | None, range, range]] = {
    **WIDE_LEVELS,
    "add2": ("+", range(10, 100), range(10, 100)),
    "sub2": ("-", range(10, 100), range(10, 100)),
    "mul22": ("*", range(10, 100), range(10, 100)),
}
TESTBEDS: dict[str, tuple[str, ...]] = {
    "arithmetic": tuple(LEVELS),
    "wide": tuple(WIDE_LEVELS),
    "long": tuple(LONG_LEVELS),
}
SPLITS = ("select", "val", "test", "train")


def level_spec(level: str) -> tuple[str | None, range, range]:
    """The operator and operand ranges of `level`, from any testbed."""
    for levels in (LEVELS, WIDE_LEVELS, LONG_LEVELS):
        if level in levels:
            return levels[level]
    known = sorted({*LEVELS, *LONG_LEVELS})
    raise KeyError(f"unknown level {level!r}; the levels are {known}")


def level_problems(level: str) -> list[dict]:
    """Every problem of `level`, as task rows with their level."""
    op, first, second = level_spec(level)
    rows = []
    for a in first:
        for b in second:
            if op == "-" and a < b:
                continue
            if op is None:
                value, problem = a, ECHO_PROMPT.format(a=a)
            else:
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


# The files `python -m benchmarks.smollm2.task DIR` writes for the real-model recipe (`recipes/cpu/`): per level, 25
# test and 8 validation problems, the rest for training (every level that `make bench-real` kept).
FILE_SIZES = {"select": 0, "val": 8, "test": 25, "train": 8}


def write_files(folder: str, seed: int = 0) -> dict[str, int]:
    """Write `train.jsonl`, `val.jsonl` and `test.jsonl` (fields `problem`, `answer`, `level`: the `arithmetic` task's
    rows, disjoint) of every level into `folder`; returns the row count of each file."""
    import json
    import os

    os.makedirs(folder, exist_ok=True)
    rows: dict[str, list[dict]] = {"train": [], "val": [], "test": []}
    for level in LEVELS:
        splits = level_splits(level, FILE_SIZES, seed)
        for name in rows:
            rows[name].extend(splits[name])
    for name, records in rows.items():
        random.Random(f"{seed}-{name}").shuffle(records)  # the levels mixed, in a fixed order
        with open(os.path.join(folder, f"{name}.jsonl"), "w", encoding="utf-8") as f:
            f.writelines(json.dumps(record) + "\n" for record in records)
    return {name: len(records) for name, records in rows.items()}


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Write the arithmetic task's train / val / test files.")
    parser.add_argument("folder", help="output folder, e.g. outputs/arithmetic")
    parser.add_argument("--seed", type=int, default=0, help="the shuffle's seed (make bench-real's data seed is 0)")
    args = parser.parse_args()
    counts = write_files(args.folder, args.seed)
    print(f"wrote {args.folder}/: " + ", ".join(f"{name}.jsonl ({count} rows)" for name, count in counts.items()))

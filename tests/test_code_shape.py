# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The package's code stays readable in pieces: no function or method in `src/` is over 80 lines (from its `def` to
its last line, docstring included)."""

import ast
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1] / "src"
MAX_LINES = 80


def long_functions(path: Path, root: Path = SOURCE, limit: int = MAX_LINES) -> list[str]:
    """`file:line name (lines)` for each function of `path` longer than `limit` lines, the file named from `root`."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [
        f"{path.relative_to(root)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > limit
    ]


def test_no_function_in_src_is_over_80_lines():
    found = [entry for path in sorted(SOURCE.rglob("*.py")) for entry in long_functions(path)]
    assert not found, "split these into named steps:\n" + "\n".join(found)


def test_long_functions_counts_from_def_to_the_last_line(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(79))
    (tmp_path / "probe.py").write_text(f"def fits():\n{body}\n\n\ndef too_long():\n{body}\n    y = 0\n")
    assert long_functions(tmp_path / "probe.py", root=tmp_path) == ["probe.py:83 too_long (81 lines)"]

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The one markdown-table helper of the package (evaluation reports, analyses and benchmarks), and the number format
of its cells."""

import math
from collections.abc import Callable, Sequence

__all__ = ["fmt", "markdown_table"]


def fmt(value, digits: int = 4) -> str:
    """A number for a markdown cell: `inf`, `n/a` for NaN or `None`, else `digits` significant digits; other values
    as `str` gives them."""
    if value is None:
        return "n/a"
    if isinstance(value, float):
        if math.isnan(value):
            return "n/a"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return f"{value:.{digits}g}"
    return str(value)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence], cell: Callable = fmt) -> str:
    """
    A GitHub-flavoured markdown table.

    Args:
        header (`Sequence[str]`):
            Column titles.
        rows (`Sequence[Sequence]`):
            One sequence of cells per row; strings are written as they are, other cells through `cell`.
        cell (`Callable`, *optional*, defaults to [`fmt`]):
            Formats a cell that is not a string.

    Returns:
        `str`: the table, one line per row after the header and separator lines, ending with a newline.
    """
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(c if isinstance(c, str) else cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"

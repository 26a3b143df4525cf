# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The cells and tables of the benchmarks' reports: a number (`fmt`), a mean ± std over seeds (`cell`), a paired
difference with its interval (`fmt_difference`) and a markdown table as lines (`table`)."""

import math

from .stats import excludes_zero, mean_std


def fmt(mean: float, std: float | None = None, digits: int = 3) -> str:
    """`0.123`, or `0.123 ± 0.045` with a `std`; `n/a` for a missing or non-finite mean."""
    if mean is None or not math.isfinite(mean):
        return "n/a"
    return f"{mean:.{digits}f}" if std is None else f"{mean:.{digits}f} ± {std:.{digits}f}"


def cell(values: list[float], digits: int = 3) -> str:
    """Mean ± sample std over the finite values; the mean alone for one value, `n/a` for none."""
    mean, std = mean_std(values, single=float("nan"))
    return fmt(mean, None if math.isnan(std) else std, digits)


def fmt_difference(d: dict, seeds: bool = True) -> str:
    """A paired difference (`stats.paired_t`, or any dict with `mean`, `low`, `high`, `seeds`):
    `+0.012 [-0.003, +0.027] (6 seeds)`, `*` when the interval excludes 0, and the sign-flip p-value where there is
    one; no interval below 2 seeds. `seeds=False` leaves the seed count out: `+0.012 [-0.003, +0.027]`."""
    if not d["seeds"]:
        return "n/a"
    count = f" ({d['seeds']} seed{'s' if d['seeds'] > 1 else ''})" if seeds else ""
    if not math.isfinite(d["low"]):
        return f"{d['mean']:+.3f}{count}, no interval"
    star = " *" if excludes_zero(d) else ""
    p = f", sign-flip p {d['p_sign_flip']:.3f}" if math.isfinite(d.get("p_sign_flip", float("nan"))) else ""
    return f"{d['mean']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]{count}{star}{p}"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A markdown table as a list of lines (cells already formatted)."""
    return [
        "| " + " | ".join(header) + " |",
        "|" + " --- |" * len(header),
        *("| " + " | ".join(r) + " |" for r in rows),
    ]

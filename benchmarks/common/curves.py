# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Lookups on a run's held-out learning curve (`result["curve"]`: one point per evaluation, with its `update`,
`generated_tokens` and metrics)."""

import numpy as np


def curve_point(result: dict, update: int) -> dict | None:
    """The run's curve point at `update` (`None` when it was not evaluated there)."""
    return next((p for p in result["curve"] if p["update"] == update), None)


def point_at(result: dict, update: int, metric: str = "pass@1") -> float | None:
    """The run's `metric` evaluated at `update`, `None` when it was not evaluated there."""
    point = curve_point(result, update)
    return None if point is None else float(point[metric])


def interpolate(curve: list[dict], tokens: float, metric: str) -> float | None:
    """`metric` on a run's held-out `curve` at `tokens` generated tokens, linear between its points (the value of the
    first point before it); `None` past the curve's last point, where the run never generated that many."""
    xs = [p["generated_tokens"] for p in curve]
    if tokens > xs[-1]:
        return None
    return float(np.interp(tokens, xs, [p[metric] for p in curve]))


def read_between(result: dict, axis: str, x: float, metric: str = "pass@1") -> float | None:
    """The run's `metric` at `x` on the curve's `axis` (`"training_seconds"`, `"generated_tokens"`), linear between
    its evaluations; its last evaluation when `x` is past it (a run that got there sooner is not extrapolated: its
    value is a lower bound), and `None` before its first."""
    points = sorted(result["curve"], key=lambda p: p[axis])
    if x < points[0][axis]:
        return None
    for before, after in zip(points, points[1:]):
        if x <= after[axis]:
            span = after[axis] - before[axis]
            t = (x - before[axis]) / span if span > 0 else 1.0
            return float(before[metric] + t * (after[metric] - before[metric]))
    return float(points[-1][metric])

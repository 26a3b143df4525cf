# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Writing an analysis' results in the layout of `trl-srppo eval`: `run_config.json` (the settings), `summary.json`
(the numbers), `results.md` (the markdown tables) and `<analysis>.png` (the figure), in the run's `output_dir`.

JSON has no NaN or infinity; they are written as the strings `"nan"`, `"inf"` and `"-inf"` so that no number is
silently lost or invented (`json.loads` with [`decode_special_floats`] turns them back into floats).
"""

import json
import math
import os
from dataclasses import asdict

from ..evaluation.figures import can_plot
from ..evaluation.markdown import fmt

RUN_CONFIG = "run_config.json"
SUMMARY = "summary.json"
RESULTS = "results.md"


def _sanitize(obj):
    if isinstance(obj, float):
        if math.isnan(obj):
            return "nan"
        if math.isinf(obj):
            return "inf" if obj > 0 else "-inf"
        return obj
    if isinstance(obj, dict):
        return {str(k): _sanitize(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_sanitize(v) for v in obj]
    return obj


def decode_special_floats(obj):
    """Inverse of the JSON encoding of NaN and infinities (for reading results back)."""
    if isinstance(obj, str) and obj in ("nan", "inf", "-inf"):
        return float(obj)
    if isinstance(obj, dict):
        return {k: decode_special_floats(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [decode_special_floats(v) for v in obj]
    return obj


def write_outputs(analysis: str, config, results: dict, markdown: str, figure) -> dict[str, str]:
    """Write `run_config.json`, `summary.json`, `results.md` and `<analysis>.png` into `config.output_dir` (the figure
    only with matplotlib, the `plot` extra: the figure functions below give `None` without it).

    Args:
        analysis (`str`):
            Name of the analysis (`bins`, `nsr`, ...); names the figure (`-` written `_`).
        config (`AnalysisConfig`):
            The run's settings, stored in `run_config.json` with the analysis' name.
        results (`dict`):
            The numbers.
        markdown (`str`):
            The markdown report.
        figure (`matplotlib.figure.Figure` or `None`):
            The figure, or `None` without matplotlib.

    Returns:
        `dict[str, str]`: paths of the `run_config`, `summary`, `results` and `figure` files.
    """
    output_dir = config.output_dir
    os.makedirs(output_dir, exist_ok=True)
    paths = {
        "run_config": os.path.join(output_dir, RUN_CONFIG),
        "summary": os.path.join(output_dir, SUMMARY),
        "results": os.path.join(output_dir, RESULTS),
        "figure": os.path.join(output_dir, analysis.replace("-", "_") + ".png"),
    }
    for key, record in (("run_config", {"analysis": analysis, "config": asdict(config)}), ("summary", results)):
        with open(paths[key], "w", encoding="utf-8") as f:
            json.dump(_sanitize(record), f, indent=2, allow_nan=False)
            f.write("\n")
    with open(paths["results"], "w", encoding="utf-8") as f:
        f.write(markdown)
    if figure is None:
        del paths["figure"]
    else:
        figure.savefig(paths["figure"], dpi=120, bbox_inches="tight")
    return paths


def bar_figure(groups: list[str], series: dict[str, list[float]], title: str, ylabel: str, log: bool = False):
    """Grouped bars: one group per entry of `groups`, one bar per series. Non-finite values are drawn as 0-height bars
    marked with their value."""
    if not can_plot(f"the figure '{title}'"):
        return None
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 3.5))
    ax = fig.subplots()
    width = 0.8 / max(1, len(series))
    for i, (label, values) in enumerate(series.items()):
        xs = [g + i * width for g in range(len(groups))]
        heights = [v if isinstance(v, (int, float)) and math.isfinite(v) else 0.0 for v in values]
        ax.bar(xs, heights, width=width, label=label)
        for x, v in zip(xs, values):
            if not (isinstance(v, (int, float)) and math.isfinite(v)):
                ax.annotate(fmt(float(v)), (x, 0), ha="center", va="bottom", fontsize=8)
    ax.set_xticks([g + width * (len(series) - 1) / 2 for g in range(len(groups))], groups)
    if log and any(v > 0 for values in series.values() for v in values if math.isfinite(v)):
        ax.set_yscale("log")
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.legend()
    return fig


def heatmap_figure(matrices: dict[str, list[list[float]]], labels: list[str], title: str):
    """One annotated heatmap per matrix (rows: source, columns: target), side by side."""
    if not can_plot(f"the figure '{title}'"):
        return None
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4 * len(matrices), 3.5))
    axes = fig.subplots(1, len(matrices), squeeze=False)
    for ax, (name, matrix) in zip(axes[0], matrices.items()):
        ax.imshow([[v if math.isfinite(v) else 0.0 for v in row] for row in matrix], cmap="coolwarm")
        for i, row in enumerate(matrix):
            for j, v in enumerate(row):
                ax.text(j, i, fmt(v, 3), ha="center", va="center", fontsize=8)
        ax.set_xticks(range(len(labels)), labels)
        ax.set_yticks(range(len(labels)), labels)
        ax.set_title(name, fontsize=9)
    fig.suptitle(title)
    return fig


def histogram_figure(values: list[float], xlabel: str, ylabel: str):
    """A histogram of `values` (at most 30 bins)."""
    if not can_plot("the histogram of " + xlabel):
        return None
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5, 3))
    ax = fig.subplots()
    ax.hist(values, bins=max(1, min(30, len(set(values)))))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    return fig

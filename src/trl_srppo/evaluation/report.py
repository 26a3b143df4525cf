# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Summaries, markdown tables and pass@k plots of evaluation runs, for one run or several (models, seeds)."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..markdown import markdown_table
from ..metrics import mean_and_std, pass_at_k_curve

__all__ = [
    "build_summary",
    "compare_runs",
    "load_summary",
    "pass_at_k_table",
    "plot_pass_at_k",
    "write_reports",
]

SUMMARY_FILE = "summary.json"
TABLE_FILE = "results.md"
PLOT_FILE = "pass_at_k.png"


def build_summary(
    config, problems: Mapping[str, Sequence], samples: Mapping[str, Mapping[str, list[dict]]], engine_name=None
):
    """
    Compute pass@k and per-problem counts from verified samples.

    Args:
        config ([`~evaluation.config.EvalConfig`]):
            The run's settings.
        problems (`Mapping[str, Sequence[Problem]]`):
            Benchmark name -> its problems.
        samples (`Mapping[str, Mapping[str, list[dict]]]`):
            Benchmark name -> problem id -> its sample records (with `sample_index` and `correct`); the first
            `config.num_generations` samples of each problem (by `sample_index`) are scored.
        engine_name (`str` or `None`, *optional*):
            Engine that generated the missing samples in this run (`None` when none was needed).

    Returns:
        `dict`: the summary written to `summary.json`. `benchmarks[<name>]["pass_at_k"]` maps `str(k)` to the mean
        pass@k over problems; `problems` lists `{"id", "n", "correct"}` per problem.
    """
    from .. import __version__
    from .benchmarks import get_benchmark

    result: dict[str, Any] = {}
    for name, bench_problems in problems.items():
        per_problem = []
        rewards, lengths, truncated = [], [], 0
        for problem in bench_problems:
            records = sorted(samples[name].get(problem.id, []), key=lambda r: r["sample_index"])[
                : config.num_generations
            ]
            if len(records) < config.num_generations or any(r.get("correct") is None for r in records):
                raise RuntimeError(f"Benchmark {name!r}, problem {problem.id!r}: fewer than n verified samples.")
            per_problem.append(
                {"id": problem.id, "n": len(records), "correct": sum(bool(r["correct"]) for r in records)}
            )
            rewards += [r["reward"] if r["reward"] is not None else 0.0 for r in records]
            lengths += [r.get("num_tokens", 0) for r in records]
            truncated += sum(r.get("finish_reason") == "length" for r in records)
        n = np.array([p["n"] for p in per_problem])
        c = np.array([p["correct"] for p in per_problem])
        curve = pass_at_k_curve(n, c, config.ks)
        result[name] = {
            "verifier": get_benchmark(name).verifier,
            "num_problems": len(per_problem),
            "n": config.num_generations,
            "pass_at_k": {str(k): v for k, v in curve.items()},
            "mean_reward": float(np.mean(rewards)) if rewards else float("nan"),
            "mean_num_tokens": float(np.mean(lengths)) if lengths else float("nan"),
            "truncated_fraction": truncated / max(1, len(lengths)),
            "solved_fraction": float(np.mean(c > 0)) if c.size else float("nan"),
            "problems": per_problem,
        }
    return {
        "model": config.model_name_or_path,
        "label": config.label or _default_label(config.model_name_or_path),
        "n": config.num_generations,
        "ks": list(config.ks),
        "engine": engine_name,
        "settings": config.generation_settings(),
        "benchmarks": result,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "trl_srppo_version": __version__,
    }


def _default_label(model: str) -> str:
    parts = [p for p in Path(model).parts if p not in ("", "/")]
    return parts[-1] if parts else model


def load_summary(summary: str | Path | Mapping) -> dict[str, Any]:
    """
    Load a summary: a `summary.json` path, a run folder holding one, or an already loaded dict (returned as is).
    """
    if isinstance(summary, Mapping):
        return dict(summary)
    path = Path(summary)
    if path.is_dir():
        path = path / SUMMARY_FILE
    return json.loads(path.read_text(encoding="utf-8"))


def _fmt(value: float) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{100 * value:.1f}"


def pass_at_k_table(summaries: Sequence[str | Path | Mapping], labels: Sequence[str] | None = None) -> str:
    """
    A markdown table of pass@k (in %), one row per (model, benchmark).

    Args:
        summaries (sequence of summary paths, run folders or dicts):
            The runs.
        labels (sequence of `str` or `None`, *optional*):
            Model names, one per summary; default to each summary's `label`. Runs sharing a label (e.g. several seeds)
            are averaged, shown as `mean ± std`.

    Returns:
        `str`: the table.
    """
    grouped = _group(summaries, labels)
    ks = sorted(
        {
            int(k)
            for runs in grouped.values()
            for run in runs
            for b in run["benchmarks"].values()
            for k in b["pass_at_k"]
        }
    )
    several_models = len(grouped) > 1
    header = (["model"] if several_models else []) + ["benchmark", "problems", "n"] + [f"pass@{k}" for k in ks]
    rows = []
    for label, runs in grouped.items():
        benches = list(dict.fromkeys(b for run in runs for b in run["benchmarks"]))
        for bench in benches:
            entries = [run["benchmarks"][bench] for run in runs if bench in run["benchmarks"]]
            stats = mean_and_std([{int(k): v for k, v in e["pass_at_k"].items()} for e in entries])
            cells = []
            for k in ks:
                if k not in stats:
                    cells.append("-")
                elif len(entries) > 1:
                    cells.append(f"{_fmt(stats[k][0])} ± {_fmt(stats[k][1])}")
                else:
                    cells.append(_fmt(stats[k][0]))
            row = ([label] if several_models else []) + [bench, str(entries[0]["num_problems"]), str(entries[0]["n"])]
            rows.append(row + cells)
    seeds = {label: len(runs) for label, runs in grouped.items() if len(runs) > 1}
    note = "\n\npass@k in %, unbiased estimator over n samples per problem, averaged over problems."
    if seeds:
        note += " mean ± std over runs: " + ", ".join(f"{label} ({count} runs)" for label, count in seeds.items())
    return markdown_table(header, rows).rstrip("\n") + note + "\n"


def _group(summaries, labels) -> dict[str, list[dict]]:
    loaded = [load_summary(s) for s in summaries]
    if labels is not None and len(labels) != len(loaded):
        raise ValueError(f"Got {len(labels)} labels for {len(loaded)} summaries.")
    grouped: dict[str, list[dict]] = {}
    for index, summary in enumerate(loaded):
        label = labels[index] if labels is not None else summary.get("label") or summary.get("model", f"run{index}")
        grouped.setdefault(str(label), []).append(summary)
    return grouped


def plot_pass_at_k(
    summaries: Sequence[str | Path | Mapping],
    output_path: str | Path,
    labels: Sequence[str] | None = None,
    title: str | None = None,
) -> Path:
    """
    Plot pass@k against k (log-scale x axis), one panel per benchmark and one line per model. Runs sharing a label
    (several seeds of one model) are drawn as their mean with a ±1 std band.

    Args:
        summaries (sequence of summary paths, run folders or dicts):
            The runs to draw.
        output_path (`str` or `Path`):
            The PNG file to write.
        labels (sequence of `str` or `None`, *optional*):
            Model names, one per summary; default to each summary's `label`.
        title (`str` or `None`, *optional*):
            Figure title.

    Returns:
        `Path`: `output_path`.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grouped = _group(summaries, labels)
    benches = list(dict.fromkeys(b for runs in grouped.values() for run in runs for b in run["benchmarks"]))
    if not benches:
        raise ValueError("No benchmark results to plot.")
    palette = plt.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
    colors = {label: palette[i % len(palette)] for i, label in enumerate(grouped)}  # one color per model everywhere
    columns = min(3, len(benches))
    rows = math.ceil(len(benches) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.4 * rows), squeeze=False)
    for ax, bench in zip(axes.flat, benches):
        all_ks: set[int] = set()
        for label, runs in grouped.items():
            curves = [
                {int(k): v for k, v in run["benchmarks"][bench]["pass_at_k"].items()}
                for run in runs
                if bench in run["benchmarks"]
            ]
            if not curves:
                continue
            stats = mean_and_std(curves)
            ks = sorted(stats)
            all_ks.update(ks)
            mean = np.array([100 * stats[k][0] for k in ks])
            std = np.array([100 * stats[k][1] for k in ks])
            name = label if len(curves) == 1 else f"{label} ({len(curves)} runs)"
            ax.plot(ks, mean, marker="o", markersize=3, label=name, color=colors[label])
            if len(curves) > 1:
                ax.fill_between(ks, mean - std, mean + std, color=colors[label], alpha=0.2)
        ax.set_xscale("log", base=2)
        if all_ks:
            ticks = sorted(all_ks)
            ax.set_xticks(ticks)
            ax.set_xticklabels([str(k) for k in ticks])
            ax.set_xlim(min(ticks) / 1.2, max(ticks) * 1.2)
        ax.set_ylim(-2, 102)
        ax.set_title(bench)
        ax.set_xlabel("k")
        ax.set_ylabel("pass@k (%)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(benches) :]:
        ax.set_visible(False)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    output_path = Path(output_path)
    output_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output_path, dpi=120)
    plt.close(fig)
    return output_path


def write_reports(summary: Mapping[str, Any], output_dir: str | Path, plot: bool = True) -> dict[str, Path]:
    """
    Write `summary.json`, `results.md` and (with `plot`) `pass_at_k.png` of one run into `output_dir`.

    Returns:
        `dict[str, Path]`: the written files by kind (`summary`, `table`, `plot`).
    """
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    paths = {"summary": output_dir / SUMMARY_FILE, "table": output_dir / TABLE_FILE}
    paths["summary"].write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    header = (
        f"# pass@k of {summary['label']}\n\nmodel: `{summary['model']}`, n = {summary['n']} samples per problem\n\n"
    )
    paths["table"].write_text(header + pass_at_k_table([summary]), encoding="utf-8")
    if plot:
        paths["plot"] = plot_pass_at_k([summary], output_dir / PLOT_FILE, title=summary["label"])
    return paths


def compare_runs(
    summaries: Sequence[str | Path | Mapping], output_dir: str | Path, labels: Sequence[str] | None = None
) -> dict[str, Path]:
    """
    Put several runs (models, or seeds of one model sharing a label) in one table and one plot.

    Args:
        summaries (sequence of summary paths, run folders or dicts):
            The runs.
        output_dir (`str` or `Path`):
            Where `comparison.md` and `pass_at_k_comparison.png` are written.
        labels (sequence of `str` or `None`, *optional*):
            Model names, one per summary.

    Returns:
        `dict[str, Path]`: the written files (`table`, `plot`).
    """
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    table = output_dir / "comparison.md"
    table.write_text("# pass@k comparison\n\n" + pass_at_k_table(summaries, labels), encoding="utf-8")
    plot = plot_pass_at_k(summaries, output_dir / "pass_at_k_comparison.png", labels=labels)
    return {"table": table, "plot": plot}

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

from .figures import can_plot
from .markdown import markdown_table
from .pass_at_k import mean_and_std, pass_at_k_curve

__all__ = [
    "build_summary",
    "compare_runs",
    "group_runs",
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
        pass@k over problems (a fraction, 0 to 1); `label` is how tables name the benchmark (see
        [`~evaluation.benchmarks.benchmark_label`]), `source` the file or dataset given for it in `data_files`;
        `unreadable_fraction` is the share of samples in which the verifier read no answer (`None` for a verifier
        without `extract_answer`); `problems` lists `{"id", "n", "correct", "unreadable"}` per problem.
    """
    from .. import __version__

    result = {name: _benchmark_entry(config, name, items, samples) for name, items in problems.items()}
    return {
        "model": config.model_name_or_path,
        "label": config.label or _default_label(config.model_name_or_path),
        "label_given": config.label is not None,
        "n": config.num_generations,
        "ks": list(config.ks),
        "engine": engine_name,
        "settings": config.generation_settings(),
        "benchmarks": result,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "trl_srppo_version": __version__,
    }


def _benchmark_entry(
    config, name: str, problems: Sequence, samples: Mapping[str, Mapping[str, list[dict]]]
) -> dict[str, Any]:
    """The summary of one benchmark, `summary["benchmarks"][name]` (see [`build_summary`] for its keys), from the
    first `config.num_generations` verified samples of each of its `problems`."""
    from ..rewards import get_reward_func
    from .benchmarks import benchmark_label, get_benchmark
    from .scoring import unreadable_completions

    benchmark = get_benchmark(name)
    verifier = get_reward_func(benchmark.verifier)
    per_problem, scored = [], []
    unreadable: list[bool] | None = []
    for problem in problems:
        records = first_verified_samples(name, problem.id, samples[name].get(problem.id, []), config.num_generations)
        flags = unreadable_completions(
            benchmark, [r["completion"] for r in records], [problem.columns] * len(records), verifier
        )
        unreadable = None if flags is None or unreadable is None else unreadable + flags
        per_problem.append(problem_counts(problem.id, records, flags))
        scored += records
    n = np.array([p["n"] for p in per_problem])
    c = np.array([p["correct"] for p in per_problem])
    curve = pass_at_k_curve(n, c, config.ks)
    source = config.data_files.get(name)
    return {
        "label": benchmark_label(name, source),
        "source": None if source is None else str(source),
        "verifier": benchmark.verifier,
        "num_problems": len(per_problem),
        "n": config.num_generations,
        "pass_at_k": {str(k): v for k, v in curve.items()},
        **sample_stats(scored),
        "unreadable_fraction": float(np.mean(unreadable)) if unreadable else None,
        "solved_fraction": float(np.mean(c > 0)) if c.size else float("nan"),
        "problems": per_problem,
    }


def first_verified_samples(benchmark: str, problem_id: str, records: Sequence[dict], n: int) -> list[dict]:
    """The `n` samples of a problem that its pass@k is computed from.

    Returns:
        `list[dict]`: the first `n` of `records` by `sample_index`. A `RuntimeError` when there are fewer than `n`, or
        when one of them has no verdict (`correct` is `None`).
    """
    chosen = sorted(records, key=lambda r: r["sample_index"])[:n]
    if len(chosen) < n or any(r.get("correct") is None for r in chosen):
        raise RuntimeError(f"Benchmark {benchmark!r}, problem {problem_id!r}: fewer than n verified samples.")
    return chosen


def problem_counts(problem_id: str, records: Sequence[dict], unreadable: Sequence[bool] | None) -> dict[str, Any]:
    """A problem's entry in `summary["benchmarks"][name]["problems"]`.

    Returns:
        `dict`: `id`, `n` (samples), `correct` (samples verified correct) and `unreadable` (samples without an answer
        the verifier can read, from the flags `unreadable`; `None` when the verifier cannot tell).
    """
    return {
        "id": problem_id,
        "n": len(records),
        "correct": sum(bool(r["correct"]) for r in records),
        "unreadable": None if unreadable is None else sum(unreadable),
    }


def sample_stats(records: Sequence[dict]) -> dict[str, float]:
    """Reward, length and truncation of a benchmark's scored samples.

    Returns:
        `dict[str, float]`: `mean_reward` (a missing reward counts as 0), `mean_num_tokens` (NaN for both when there
        are no samples) and `truncated_fraction`, the share of samples cut at the length limit (`finish_reason`
        `"length"`; 0 when there are none).
    """
    rewards = [r["reward"] if r["reward"] is not None else 0.0 for r in records]
    lengths = [r.get("num_tokens", 0) for r in records]
    truncated = sum(r.get("finish_reason") == "length" for r in records)
    return {
        "mean_reward": float(np.mean(rewards)) if rewards else float("nan"),
        "mean_num_tokens": float(np.mean(lengths)) if lengths else float("nan"),
        "truncated_fraction": truncated / max(1, len(lengths)),
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
    if not path.is_file():
        raise FileNotFoundError(
            f"No {SUMMARY_FILE} at {summary}: --compare takes the output_dir of a `trl-srppo eval` run (or its "
            f"{SUMMARY_FILE}). Check the path, or run the evaluation first."
        )
    return json.loads(path.read_text(encoding="utf-8"))


def _fmt(value: float) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"


def _by_label(run: Mapping) -> dict[str, dict]:
    """A run's benchmark entries by the name tables show (a benchmark read from a user's file is named with it)."""
    return {entry.get("label", bench): entry for bench, entry in run["benchmarks"].items()}


def pass_at_k_table(summaries: Sequence[str | Path | Mapping], labels: Sequence[str] | None = None) -> str:
    """
    A markdown table of pass@k (a fraction, 0 to 1, like every pass@k of trl-srppo), one row per (model, benchmark),
    and the share of samples whose answer the verifier could not read (`unreadable`, when the runs recorded it).

    A benchmark is named as [`build_summary`] labels it: its registered name, or `name (file: x.jsonl)` when it was
    read from a file given in `data_files`, so rows from different files stay apart.

    Runs are grouped as in [`group_runs`]: runs of the same model (e.g. evaluation seeds) or given the same label are
    averaged, shown as `mean ± std`; runs of different models stay apart even when their folders share a name.

    Args:
        summaries (sequence of summary paths, run folders or dicts):
            The runs.
        labels (sequence of `str` or `None`, *optional*):
            Model names, one per summary: runs sharing a label (e.g. several training seeds) are averaged. Defaults to
            the labels given at evaluation time, and to grouping by model otherwise.

    Returns:
        `str`: the table.
    """
    grouped = group_runs(summaries, labels)
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
    with_unreadable = any(
        entry.get("unreadable_fraction") is not None
        for runs in grouped.values()
        for run in runs
        for entry in run["benchmarks"].values()
    )
    header = (["model"] if several_models else []) + ["benchmark", "problems", "n"] + [f"pass@{k}" for k in ks]
    header += ["unreadable"] if with_unreadable else []
    rows = []
    for label, runs in grouped.items():
        by_bench: dict[str, list[dict]] = {}
        for run in runs:
            for bench, entry in _by_label(run).items():
                by_bench.setdefault(bench, []).append(entry)
        for bench, entries in by_bench.items():
            stats = mean_and_std([{int(k): v for k, v in e["pass_at_k"].items()} for e in entries])
            cells = []
            for k in ks:
                if k not in stats:
                    cells.append("-")
                elif len(entries) > 1:
                    cells.append(f"{_fmt(stats[k][0])} ± {_fmt(stats[k][1])}")
                else:
                    cells.append(_fmt(stats[k][0]))
            if with_unreadable:
                shares = [e["unreadable_fraction"] for e in entries if e.get("unreadable_fraction") is not None]
                cells.append(_fmt(float(np.mean(shares))) if shares else "-")
            row = ([label] if several_models else []) + [bench, str(entries[0]["num_problems"]), str(entries[0]["n"])]
            rows.append(row + cells)
    seeds = {label: len(runs) for label, runs in grouped.items() if len(runs) > 1}
    note = (
        "\n\npass@k: the share of problems solved within k samples, from 0 to 1 (unbiased estimator over n samples "
        "per problem, averaged over problems)."
    )
    if with_unreadable:
        note += (
            " unreadable: the share of samples in which the verifier found no answer to read (they score 0; see "
            "trl-srppo's docs/rewards.md for the format each verifier reads)."
        )
    if seeds:
        note += " mean ± std over runs: " + ", ".join(f"{label} ({count} runs)" for label, count in seeds.items())
    return markdown_table(header, rows).rstrip("\n") + note + "\n"


def group_runs(summaries: Sequence[str | Path | Mapping], labels: Sequence[str] | None = None) -> dict[str, list]:
    """
    Group runs into the rows of a comparison: one group per label given, and otherwise one per model.

    - With `labels`, or for a run evaluated with an explicit `label`, runs sharing the label form one group (e.g. the
      training seeds of one method).
    - Any other run is grouped by its model's identity: `model_name_or_path` (a folder, checkpoint, adapter folder or
      Hub id) and its Hub revision. Runs of one model (e.g. evaluation seeds) form one group, named by the shortest
      path suffix that tells it apart from the other groups (`srppo/checkpoint-600` and `grpo/checkpoint-600`, not
      `checkpoint-600` twice), with `@revision` when only the revision differs.

    Runs of one group are averaged, so they must have been evaluated alike: a `ValueError` is raised when, on some
    benchmark, they differ in `n` (samples per problem) or in the number of problems (e.g. `max_problems`). Their mean
    would mix estimates over different problem sets, so the comparison is refused rather than split silently; give
    such runs different labels to show them side by side.

    Args:
        summaries (sequence of summary paths, run folders or dicts):
            The runs.
        labels (sequence of `str` or `None`, *optional*):
            One label per summary (overrides the labels stored in the summaries).

    Returns:
        `dict[str, list[dict]]`: label -> the loaded summaries of its runs, in the order given.
    """
    loaded = [load_summary(s) for s in summaries]
    if labels is not None and len(labels) != len(loaded):
        raise ValueError(f"Got {len(labels)} labels for {len(loaded)} summaries.")
    keys = [
        ("label", str(labels[i])) if labels is not None else _group_key(summary, i) for i, summary in enumerate(loaded)
    ]  # (num_runs,) ("label", label) or ("model", path parts, revision)
    names = _group_names(list(dict.fromkeys(keys)))
    grouped: dict[str, list[dict]] = {}
    for key, summary in zip(keys, loaded):
        grouped.setdefault(names[key], []).append(summary)
    for label, runs in grouped.items():
        _check_same_protocol(label, runs)
    return grouped


def _label_given(summary: Mapping) -> bool:
    """Whether the run was evaluated with an explicit label (a summary of no model has only its label)."""
    return bool(summary.get("label_given")) or summary.get("model") is None


def _group_key(summary: Mapping, index: int) -> tuple:
    if _label_given(summary):
        return ("label", str(summary.get("label") or f"run{index}"))
    model = str(summary["model"])
    revision = (summary.get("settings") or {}).get("revision")
    return ("model", Path(model).parts or (model,), revision)


def _suffix_label(parts: tuple[str, ...], length: int) -> str:
    """The last `length` path components (all of them, the root included, when `length` covers the path)."""
    if length >= len(parts):
        return Path(*parts).as_posix()
    return "/".join(parts[-length:])


def _group_names(keys: list[tuple]) -> dict[tuple, str]:
    """A distinct display name for each group key: the label itself, or the model's shortest distinguishing suffix."""
    names = {key: key[1] for key in keys if key[0] == "label"}
    given = set(names.values())
    models = [key for key in keys if key[0] == "model"]  # ("model", path parts, revision)
    tags = {key: f"@{key[2]}" if key[2] and any(o[1] == key[1] and o != key for o in models) else "" for key in models}

    def name(key: tuple, length: int) -> str:
        return _suffix_label(key[1], length) + tags[key]

    for key in models:
        others = [o[1] for o in models if o[1] != key[1]]  # other paths (the same path differs by its revision tag)
        lengths = range(1, len(key[1]) + 1)
        distinct = (
            n
            for n in lengths
            if name(key, n) not in given and all(_suffix_label(o, n) != _suffix_label(key[1], n) for o in others)
        )
        names[key] = name(key, next(distinct, len(key[1])))
    shown = list(names.values())
    clashes = sorted({n for n in shown if shown.count(n) > 1})
    if clashes:
        raise ValueError(
            f"Different models would be shown under the same label {clashes} (a label given to one run is another "
            "run's model path); pass one label per run (--labels) to tell them apart."
        )
    return names


def _check_same_protocol(label: str, runs: list[dict]) -> None:
    """A `ValueError` when the runs of one group were evaluated with different `n` or numbers of problems."""
    benches = dict.fromkeys(b for run in runs for b in run["benchmarks"])
    for bench in benches:
        protocols = {
            (run["benchmarks"][bench]["n"], run["benchmarks"][bench]["num_problems"]): run.get("model", "?")
            for run in runs
            if bench in run["benchmarks"]
        }  # (n, num_problems) -> a model evaluated so
        if len(protocols) > 1:
            found = "; ".join(f"n={n} on {p} problems ({model})" for (n, p), model in protocols.items())
            raise ValueError(
                f"The runs grouped as {label!r} were evaluated differently on {bench}: {found}. Their pass@k cannot "
                "be averaged into one row. Evaluate them with the same num_generations and max_problems, or give "
                "them different labels (--labels) to compare them side by side."
            )


def plot_pass_at_k(
    summaries: Sequence[str | Path | Mapping],
    output_path: str | Path,
    labels: Sequence[str] | None = None,
    title: str | None = None,
) -> Path:
    """
    Plot pass@k against k (log-scale x axis), one panel per benchmark and one line per model. The runs of one group
    (see [`group_runs`]: several seeds of one model, or runs given one label) are drawn as their mean with a ±1 std
    band.

    Args:
        summaries (sequence of summary paths, run folders or dicts):
            The runs to draw.
        output_path (`str` or `Path`):
            The PNG file to write.
        labels (sequence of `str` or `None`, *optional*):
            Model names, one per summary; runs sharing a label are averaged (see [`group_runs`]).
        title (`str` or `None`, *optional*):
            Figure title.

    Returns:
        `Path`: `output_path`.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grouped = group_runs(summaries, labels)
    benches = list(dict.fromkeys(b for runs in grouped.values() for run in runs for b in _by_label(run)))
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
                {int(k): v for k, v in _by_label(run)[bench]["pass_at_k"].items()}
                for run in runs
                if bench in _by_label(run)
            ]
            if not curves:
                continue
            stats = mean_and_std(curves)
            ks = sorted(stats)
            all_ks.update(ks)
            mean = np.array([stats[k][0] for k in ks])
            std = np.array([stats[k][1] for k in ks])
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
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(bench)
        ax.set_xlabel("k")
        ax.set_ylabel("pass@k")
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
    if plot and can_plot(PLOT_FILE):
        paths["plot"] = plot_pass_at_k([summary], output_dir / PLOT_FILE, title=summary["label"])
    return paths


def compare_runs(
    summaries: Sequence[str | Path | Mapping], output_dir: str | Path, labels: Sequence[str] | None = None
) -> dict[str, Path]:
    """
    Put several runs (models, seeds of one model, or runs sharing a label) in one table and one plot, grouped as in
    [`group_runs`].

    Args:
        summaries (sequence of summary paths, run folders or dicts):
            The runs.
        output_dir (`str` or `Path`):
            Where `comparison.md` and `pass_at_k_comparison.png` are written.
        labels (sequence of `str` or `None`, *optional*):
            Model names, one per summary; runs sharing a label are averaged.

    Returns:
        `dict[str, Path]`: the written files (`table`, `plot`).
    """
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    table = output_dir / "comparison.md"
    table.write_text("# pass@k comparison\n\n" + pass_at_k_table(summaries, labels), encoding="utf-8")
    written = {"table": table}
    if can_plot("pass_at_k_comparison.png"):
        written["plot"] = plot_pass_at_k(summaries, output_dir / "pass_at_k_comparison.png", labels=labels)
    return written

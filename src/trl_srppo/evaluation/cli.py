# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`trl-srppo eval`: pass@k evaluation of a model on registered benchmarks.

    trl-srppo eval --model_name_or_path Qwen/Qwen3-1.7B --benchmarks aime24 aime25 math500 --num_generations 64 \\
        --output_dir runs/eval/qwen3
    trl-srppo eval --config eval.yaml --model_name_or_path outputs/srppo-run --output_dir runs/eval/srppo
    trl-srppo eval --compare runs/eval/qwen3 runs/eval/srppo --output_dir runs/eval/compare
    trl-srppo eval --list_benchmarks

Options are parsed like `trl-srppo train`: each is a key of a YAML `--config` file and a `--key value` flag (flags
win); an unknown key is an error that names it; booleans that default to true are turned off with `--no_<key>`.
Re-running with the same output_dir reuses the stored samples and generates only the missing ones. The output folder
holds run_config.json, problems/ and samples/ (JSONL), summary.json, results.md and pass_at_k.png.
"""

import argparse
import sys
from dataclasses import dataclass, field

__all__ = ["EvalCommandArguments", "build_parser", "main"]


@dataclass
class EvalCommandArguments:
    r"""
    What `trl-srppo eval` does instead of evaluating.

    Args:
        list_benchmarks (`bool`, *optional*, defaults to `False`):
            List the registered benchmarks and exit.
        compare (`list[str]`, *optional*):
            Put several runs (summary.json files or run folders) in one table and plot, written to `output_dir`;
            runs of the same model (e.g. evaluation seeds) or with the same label are shown as mean ± std, and runs
            of different models as separate rows, even when their folders share a name (see
            [`~evaluation.report.group_runs`]).
        labels (`list[str]`, *optional*):
            With `compare`: one label per run; runs sharing a label (e.g. training seeds) are averaged.
    """

    list_benchmarks: bool = field(default=False, metadata={"help": "List the registered benchmarks and exit."})
    compare: list[str] | None = field(
        default=None,
        metadata={"help": "Instead of evaluating: put several runs (summary.json or run folders) in one table."},
    )
    labels: list[str] | None = field(
        default=None, metadata={"help": "With --compare: one label per run (runs sharing a label are averaged)."}
    )


def build_parser():
    """The parser of `trl-srppo eval`: [`~evaluation.config.EvalConfig`] and [`EvalCommandArguments`]."""
    from trl import TrlParser

    from .config import EvalConfig

    return TrlParser(
        (EvalConfig, EvalCommandArguments),
        prog="trl-srppo eval",
        description=__doc__ + "\nOptions (each also a key of the --config YAML file):",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def list_benchmarks_text() -> str:
    from .benchmarks import BENCHMARKS

    lines = ["registered benchmarks:"]
    for name in sorted(BENCHMARKS):
        bench = BENCHMARKS[name]
        source = bench.hub_path + (f" ({bench.hub_config})" if bench.hub_config else "") + f" [{bench.hub_split}]"
        lines.append(f"  {name:<15} task={bench.task.name:<16} hub={source}  file={bench.local_file}")
        if bench.description:
            lines.append(f"  {'':<15} {bench.description}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Entry point of `trl-srppo eval`; returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    try:
        config, command = parser.parse_args_and_config(argv)
    except (KeyError, ValueError) as error:
        parser.error(str(error).strip("'\""))

    if command.list_benchmarks:
        print(list_benchmarks_text())
        return 0
    if command.compare:
        if not config.output_dir:
            parser.error("--compare needs --output_dir")
        from .report import compare_runs, pass_at_k_table

        try:
            table = pass_at_k_table(command.compare, labels=command.labels)
        except ValueError as error:  # runs that cannot share a row, or a label count that does not match
            parser.error(str(error))
        paths = compare_runs(command.compare, config.output_dir, labels=command.labels)
        print(table)
        print("wrote " + " and ".join(str(path) for path in paths.values()))
        return 0
    try:
        config.check_complete()
    except ValueError as error:
        parser.error(f"{error} (or --list_benchmarks / --compare)")

    from .figures import matplotlib_installed
    from .report import PLOT_FILE, pass_at_k_table
    from .runner import evaluate

    summary = evaluate(config)
    print(pass_at_k_table([summary]))
    drawn = config.plot and matplotlib_installed()
    print(f"wrote {config.output_dir}/summary.json, results.md" + (f", {PLOT_FILE}" if drawn else ""))
    return 0

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`trl-srppo analyze <analysis>`: the paper's analyses on a policy and critic checkpoint.

    trl-srppo analyze nsr --model_name_or_path ckpt --critic_model_name_or_path ckpt/critic \\
        --dataset_name data.jsonl --reward_funcs math --num_generations 8 --output_dir runs/nsr
    trl-srppo analyze bins --config analysis.yaml --output_dir runs/bins

Options are parsed like `trl-srppo train` and `trl-srppo eval`: each is a key of a YAML `--config` file and a
`--key value` flag (flags win); an unknown key is an error that names it. Each analysis writes, like `eval`,
run_config.json, summary.json, results.md and its figure (<analysis>.png) into `output_dir`; `critic-export` also
writes critic_labelling.jsonl. Each analysis' computation, table and figure live in its module of
`trl_srppo.analysis`; this module only parses and dispatches.
"""

import argparse
import sys

from .bins import BinsConfig, run_bins
from .config import MissingSetting
from .critic_quality import CriticExportConfig, CriticQualityConfig, run_critic_export, run_critic_quality
from .cross_bin import CrossBinConfig, run_cross_bin
from .policy import NSRConfig, run_nsr
from .safe_region import SafeRegionConfig, run_safe_region

__all__ = ["ANALYSES", "build_parser", "main"]

# analysis -> (config class, function that runs it, one-line description)
ANALYSES = {
    "bins": (BinsConfig, run_bins, "difficulty bins and each bin's share of the update weight"),
    "nsr": (NSRConfig, run_nsr, "gradient noise-to-signal ratio per prompt, bin and batch"),
    "cross-bin": (CrossBinConfig, run_cross_bin, "cross-bin log-probability changes and gradient cosines"),
    "critic-export": (CriticExportConfig, run_critic_export, "write the JSONL of sentences for an external judge"),
    "critic-quality": (CriticQualityConfig, run_critic_quality, "AUC of the critic on the labelled JSONL, by bin"),
    "safe-region": (SafeRegionConfig, run_safe_region, "safe region of the weights and an update's realised changes"),
}
_CONVENTION = __doc__.split("\n\n", 2)[2]  # the module docstring after its examples


def _usage() -> str:
    lines = ["usage: trl-srppo analyze <analysis> [--config FILE] [--key value ...]", "", "analyses:"]
    lines += [f"  {name:<15} {help_}" for name, (_, _, help_) in ANALYSES.items()]
    lines += ["", "Run `trl-srppo analyze <analysis> --help` for the options of one analysis."]
    return "\n".join(lines)


def build_parser(analysis: str):
    """The parser of `trl-srppo analyze <analysis>`: a `TrlParser` of the analysis' config dataclass."""
    from trl import TrlParser

    config_class, _, help_ = ANALYSES[analysis]
    return TrlParser(
        (config_class,),
        prog=f"trl-srppo analyze {analysis}",
        description=f"{help_}.\n\n{_CONVENTION}\nOptions (each also a key of the --config file):",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point of `trl-srppo analyze`; returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0
    analysis, rest = argv[0], argv[1:]
    if analysis not in ANALYSES:
        print(f"trl-srppo analyze: unknown analysis {analysis!r}; expected one of {list(ANALYSES)}.", file=sys.stderr)
        print(_usage(), file=sys.stderr)
        return 2
    parser = build_parser(analysis)
    try:
        (config,) = parser.parse_args_and_config(rest)
    except (KeyError, ValueError) as error:
        parser.error(str(error).strip("'\""))
    try:
        ANALYSES[analysis][1](config)
    except MissingSetting as error:  # a setting this run needs (the critic, the dataset) is not set
        parser.error(str(error))
    print(f"trl-srppo analyze {analysis}: run_config.json, summary.json, results.md written to {config.output_dir}")
    return 0

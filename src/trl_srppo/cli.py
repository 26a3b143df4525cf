# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The `trl-srppo` command: `train`, `eval` and `analyze`, each implemented in its own module."""

import importlib
import sys

# command -> (module with a `main(argv)` function, one-line description)
COMMANDS = {
    "train": ("trl_srppo.train", "train a policy with SR-PPO (or TRL's GRPO) from a YAML recipe"),
    "eval": ("trl_srppo.evaluation.cli", "pass@k evaluation of a model on registered benchmarks"),
    "analyze": (
        "trl_srppo.analysis.cli",
        "the paper's analyses: difficulty bins, gradient noise, critic, safe region",
    ),
}


def _usage() -> str:
    lines = ["usage: trl-srppo <command> [options]", "", "commands:"]
    lines += [f"  {name:<10} {help_}" for name, (_, help_) in COMMANDS.items()]
    lines += ["", "Run `trl-srppo <command> --help` for the options of one command."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        print(f"trl-srppo: unknown command {command!r}; expected one of {sorted(COMMANDS)}.\n", file=sys.stderr)
        print(_usage(), file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[command][0])
    return module.main(rest) or 0


if __name__ == "__main__":
    sys.exit(main())

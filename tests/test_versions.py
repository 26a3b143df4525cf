# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The versions the suite says it runs against are the versions `make install` installs: `constraints.txt`, the list in
`docs/development.md#tested-versions`, and the installed packages agree."""

import re
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def pins() -> dict[str, str]:
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    return dict(line.split("==") for line in lines if line and not line.startswith("#"))


def test_the_documented_versions_are_the_pins():
    text = (ROOT / "docs" / "development.md").read_text()
    section = text[text.index("## Tested versions") :].split("\n## ")[0]
    section = re.sub(r"\s+", " ", section)
    for name, pinned in pins().items():
        assert f"{name} {pinned}" in section, f"docs/development.md does not list {name} {pinned}"


def test_the_installed_versions_are_the_pins():
    # `make test` runs in `make install`'s environment; another environment is not the tested one.
    installed = {name: version(name) for name in pins()}
    assert installed == pins(), f"installed {installed}, constraints.txt pins {pins()}: run `make install`"

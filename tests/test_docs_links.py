"""Every relative link of the README and the docs points to a file of the repository, and every `#anchor` to a
heading of that file (GitHub's anchors: lower case, punctuation dropped, spaces as hyphens)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "recipes" / "README.md", ROOT / "benchmarks" / "README.md"]
PAGES += sorted((ROOT / "docs").glob("*.md")) + [ROOT / "reports" / "README.md", ROOT / "reports" / "demo.md"]

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")


def _prose(text: str) -> str:
    """The text without fenced code blocks and inline code spans, where brackets are not links."""
    lines, in_code = [], False
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            in_code = not in_code
            continue
        if not in_code:
            lines.append(line)
    return "\n".join(lines)


def _anchors(path: Path) -> set[str]:
    anchors, seen = set(), {}
    for line in _prose(path.read_text(encoding="utf-8")).splitlines():
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        slug = re.sub(r"[^\w\- ]", "", match.group(1).strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def _links(path: Path) -> list[str]:
    text = re.sub(r"`[^`\n]*`", "``", _prose(path.read_text(encoding="utf-8")))  # `[x](y)` in code is no link
    return [target for target in LINK.findall(text) if not re.match(r"^[a-z]+:", target)]


@pytest.mark.parametrize("page", [p for p in PAGES if p.exists()], ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    broken = []
    for target in _links(page):
        file_part, _, anchor = target.partition("#")
        resolved = (page.parent / file_part).resolve() if file_part else page
        if not resolved.exists():
            broken.append(f"{target}: no file {resolved}")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{target}: no heading #{anchor} in {resolved.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_readme_is_a_front_page():
    """The README stays short: studies and measurement history belong in docs/ and reports/."""
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200

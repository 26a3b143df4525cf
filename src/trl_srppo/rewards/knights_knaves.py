# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The ``knights_knaves`` reward: every inhabitant's role in the final answer matches the solution.

The answer part is the last ``<answer>...</answer>`` block when there is one (and then only it counts); otherwise
the text after the last "conclusion" / "answer" marker when it names everyone, otherwise the whole completion.
Roles are read by scanning names, role words (knight/knave, also plural, truth-teller, liar) and negations in order,
so all of these work: ``Alice is a knight``, ``(1) Zoey is a knave``, ``Alice: knight``, ``Alice and Bob are
knights``, ``Knaves: Carol, Dan``, ``The knight is Alice``, ``Bob is not a knight``. The last statement about a person
wins. Names are matched case-sensitively as whole words.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from trl_srppo.rewards._registry import register_reward
from trl_srppo.rewards._text import answer_tag, column, completion_text

__all__ = ["extract_answer", "knights_knaves_reward", "parse_roles", "score_knights_knaves"]

_ROLE_WORDS = r"knights?|knaves?|truth[- ]?tellers?|liars?"
# What may follow a role word or a name: spaces, an optional closing ``**`` / ``__`` with its own spaces, then the
# verb or punctuation. Each whitespace run belongs to one ``\s*``; ``\s*(?:\*\*|__)?\s*`` would let the engine split
# a long run of spaces between its two ``\s*`` in every way, quadratic time inside one C call that holds the GIL.
_HEADER_AFTER = re.compile(r"\s*(?:(?:\*\*|__)\s*)?(?::|=|\bare\b|\bis\b|\bwere\b|\bwas\b)", re.IGNORECASE)
_STATEMENT_AFTER = re.compile(r"\s*(?:(?:\*\*|__)\s*)?(?:\bis\b|\bare\b|\bwas\b|\bwere\b|:|-|=|\()", re.IGNORECASE)
_MARKER = re.compile(r"\b(?:conclusion|final answer|answer)\b", re.IGNORECASE)
_HEADER_STOPS = ".;!?"


@lru_cache(maxsize=1024)
def _token_pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    """Regex that finds the people's names, role words, negations and sentence stops."""
    alternatives = "|".join(re.escape(name) for name in sorted(names, key=len, reverse=True))
    return re.compile(
        rf"(?P<name>(?<!\w)(?:{alternatives})(?!\w))"
        rf"|(?P<role>\b(?i:{_ROLE_WORDS})\b)"
        r"|(?P<neg>\b(?i:not)\b|(?i:n't)\b)"
        r"|(?P<stop>[.;!?\n])"
    )


def _is_knight(word: str) -> bool:
    """Whether a role word means knight (truth-teller)."""
    word = word.lower()
    return word.startswith("knight") or word.startswith("truth")


def parse_roles(text: str, names: list[str]) -> dict[str, bool]:
    """Return ``{name: is_knight}`` for the people whose role ``text`` states (the last statement wins)."""
    roles: dict[str, bool] = {}
    if not text or not names:
        return roles
    pending: list[str] = []
    negated = False
    header: bool | None = None  # the role of a "Knights: A, B" or "The knaves are C" list being read
    for match in _token_pattern(tuple(names)).finditer(text):
        kind = match.lastgroup
        if kind == "name":
            name = match.group()
            if header is not None and not _STATEMENT_AFTER.match(text, match.end()):
                roles[name] = header  # an entry of a "Knights: A, B" list
            else:
                header = None  # "Name is ..." starts a statement of its own
                pending.append(name)
        elif kind == "role":
            role = _is_knight(match.group())
            if pending:
                for name in pending:
                    roles[name] = role != negated
                pending = []
                header = None
            elif _HEADER_AFTER.match(text, match.end()):
                header = role
            else:
                header = None
            negated = False
        elif kind == "neg":
            negated = bool(pending)
        else:
            pending = []
            negated = False
            if match.group() in _HEADER_STOPS:
                header = None
    return roles


def _gold(solution: Any, names: Any) -> tuple[list[str], list[bool]] | None:
    """Validate the gold ``solution`` and ``names``; return them as lists, or None when malformed."""
    if not isinstance(names, (list, tuple)) or not isinstance(solution, (list, tuple)):
        return None
    if not names or len(names) != len(solution):
        return None
    if not all(isinstance(name, str) and name.strip() for name in names) or len(set(names)) != len(names):
        return None
    roles = []
    for value in solution:
        if isinstance(value, bool):
            roles.append(value)
        elif isinstance(value, str) and value.strip().lower() in ("knight", "knave"):
            roles.append(value.strip().lower() == "knight")
        else:
            return None
    return [name.strip() for name in names], roles


def _read_roles(text: str, names: list[str]) -> dict[str, bool]:
    """The roles the reward reads: in the last ``<answer>`` block when there is one; else after the last marker when
    that names everyone, else in the whole completion."""
    tagged = answer_tag(text or "")
    if tagged is not None:
        return parse_roles(tagged, names)
    found = {}
    markers = list(_MARKER.finditer(text or ""))
    if markers:
        found = parse_roles(text[markers[-1].end() :], names)
    if len(found) < len(names):
        found = parse_roles(text or "", names)
    return found


def score_knights_knaves(text: str, solution: Any, names: Any) -> float | None:
    """1.0 if the completion states every person's role and all match ``solution``; None for a malformed gold."""
    gold = _gold(solution, names)
    if gold is None:
        return None
    gold_names, gold_roles = gold
    found = _read_roles(text, gold_names)
    if any(name not in found for name in gold_names):
        return 0.0
    return 1.0 if all(found[name] == role for name, role in zip(gold_names, gold_roles)) else 0.0


ANSWER_FORMAT = (
    'each person\'s role by name, e.g. <answer>Alice is a knight, Bob is a knave</answer> (or after "answer" / '
    '"conclusion")'
)


def extract_answer(text: str, names: Any = None, **columns: Any) -> str | None:
    """The roles the ``knights_knaves`` reward reads for the people of the ``names`` column, as ``"Alice: knight,
    Bob: knave"``, or None when no role of anyone is stated. Without usable ``names`` (the reward cannot score the
    example then), any role word (knight, knave, truth-teller, liar) counts as an answer."""
    if isinstance(names, (list, tuple)) and names and all(isinstance(n, str) and n.strip() for n in names):
        found = _read_roles(text, [n.strip() for n in names])
        return ", ".join(f"{n}: {'knight' if r else 'knave'}" for n, r in found.items()) or None
    match = re.search(rf"\b(?:{_ROLE_WORDS})\b", text or "", re.IGNORECASE)
    return match.group() if match else None


@register_reward("knights_knaves", answer_format=ANSWER_FORMAT, extract_answer=extract_answer)
def knights_knaves_reward(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
    """Reward 1.0 when all roles match. Reads kwargs ``solution`` (list of bools, True = knight) and ``names``."""
    solutions = column(kwargs, "solution", len(completions), "knights_knaves")
    names = column(kwargs, "names", len(completions), "knights_knaves")
    return [score_knights_knaves(completion_text(c), s, n) for c, s, n in zip(completions, solutions, names)]

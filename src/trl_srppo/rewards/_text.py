# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Text helpers shared by the reward functions: completion text, boxed answers, keyword columns."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

_BOXED_COMMANDS = ("\\boxed", "\\fbox")
_ANSWER_TAG = re.compile(r"<answer>(.*?)(?:</answer>|$)", re.DOTALL | re.IGNORECASE)
_ANSWER_OPEN = re.compile(r"<answer>", re.IGNORECASE)


def completion_text(completion: Any) -> str:
    """Return the text of one completion.

    A completion is either a string or, in TRL's conversational format, a list of messages such as
    ``[{"role": "assistant", "content": "..."}]``; then the content of the last assistant message is returned (or of
    the last message when none has the assistant role). Content given as a list of parts keeps the text parts.
    """
    if completion is None:
        return ""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return _content_text(completion.get("content"))
    if isinstance(completion, Sequence):
        messages = [m for m in completion if isinstance(m, dict)]
        if not messages:
            return ""
        assistant = [m for m in messages if m.get("role") == "assistant"]
        return _content_text((assistant or messages)[-1].get("content"))
    return str(completion)


def _content_text(content: Any) -> str:
    """Text of a message content given as a string or as a list of parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "".join(parts)
    return str(content)


def last_boxed(text: str) -> str | None:
    """Return the content of the last ``\\boxed{...}`` or ``\\fbox{...}`` in ``text``, or None.

    Braces are matched with escapes (``\\{``, ``\\}``) skipped. A last box whose braces never close (a truncated
    completion) gives None. ``\\boxed 5`` (argument without braces) gives ``"5"``. Runs in linear time.
    """
    if not text:
        return None
    start = -1
    command = ""
    for name in _BOXED_COMMANDS:
        pos = text.rfind(name)
        while pos >= 0 and pos + len(name) < len(text) and text[pos + len(name)].isalpha():
            # A longer command that merely starts with the name, e.g. \fboxsep.
            pos = text.rfind(name, 0, pos)
        if pos > start:
            start, command = pos, name
    if start < 0:
        return None
    i = start + len(command)
    n = len(text)
    while i < n and text[i] in " \t":
        i += 1
    if i >= n:
        return None
    if text[i] != "{":
        match = re.match(r"[^\s$]+", text[i:])
        return match.group(0) if match else None
    depth = 0
    j = i
    while j < n:
        char = text[j]
        if char == "\\":
            j += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j]
        j += 1
    return None


def answer_tag(text: str) -> str | None:
    """Return the content of the last ``<answer>...</answer>`` block (an unclosed last tag runs to the end)."""
    if not text:
        return None
    # Searched in ``text`` itself: an index into ``text.lower()`` is off after a character whose lower case is
    # longer ("İ" lowers to two characters), and would miss the tag.
    starts = [match.start() for match in _ANSWER_OPEN.finditer(text)]
    if not starts:
        return None
    match = _ANSWER_TAG.match(text, starts[-1])
    return match.group(1) if match else None


def column(kwargs: dict[str, Any], name: str, n: int, reward: str) -> list[Any]:
    """Return the keyword column ``name`` with one value per completion, or raise a clear error."""
    if name not in kwargs:
        raise ValueError(
            f"the {reward!r} reward needs a dataset column {name!r} (got columns: {sorted(kwargs)}); "
            f"add it to the dataset or choose another reward function"
        )
    values = kwargs[name]
    if not isinstance(values, (list, tuple)) or len(values) != n:
        size = len(values) if isinstance(values, (list, tuple)) else type(values).__name__
        raise ValueError(
            f"the {reward!r} reward expects {n} values for column {name!r} (one per completion), got {size}"
        )
    return list(values)

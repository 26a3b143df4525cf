# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The ``number`` reward: a numeric answer read as a small chat model writes it, without ``\\boxed{}``.

Small instruct models answer "What is 7 + 5?" with "7 + 5 = 12." or "The answer is 12, since ...": the ``math``
reward, which reads only ``\\boxed{...}``, scores every such completion 0. This verifier reads (``extract_answer``):

1. the number that directly follows the *last* "=", "equals", "is" or ":" (markdown bold around it allowed), the
   form "... = 12." or "The answer is 12, ..." takes, so that numbers written after the answer are not read;
2. otherwise the last number of the completion.

A number is an optional minus sign (``-`` or ``−``) and digits, with comma thousands separators (``1,234``) and a
decimal part (``12.5``); a dot that ends a sentence (``12.``) is not part of it, nor is a sign glued to a word
(``base-7`` reads ``7``). Numbers written in words ("eight") are not read: such a completion is unreadable.

The answer is right when it equals the gold answer (column ``answer``, a number as text or an integer) as a decimal
number (``12.0`` equals ``12``). A gold answer that is not a number gives None (the example cannot be scored).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

from trl_srppo.rewards._registry import register_reward
from trl_srppo.rewards._text import completion_text

__all__ = ["extract_answer", "number_reward", "parse_number"]

_NUMBER = r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_NUMBER_RE = re.compile(rf"(?<![\w.,]){_NUMBER}(?![\d])")
_MARKED_RE = re.compile(rf"(?:=|\bequals\b|\bis\b|:)\s*\**\s*((?<![\w.,]){_NUMBER})(?!\d)", re.IGNORECASE)
_MINUS_SIGNS = str.maketrans({"\u2212": "-", "\u2013": "-"})

ANSWER_FORMAT = 'a number: the one after the last "=", "equals", "is" or ":", else the last number of the completion'


def parse_number(text: str) -> Decimal | None:
    """A number written as text (``"1,234"``, ``"-3"``, ``"12.50"``) as a `Decimal`; None when it is not one."""
    if not isinstance(text, str):
        return None
    text = text.strip().translate(_MINUS_SIGNS)
    if not re.fullmatch(_NUMBER, text):
        return None
    try:
        return Decimal(text.replace(",", ""))
    except InvalidOperation:
        return None


def extract_answer(text: str, **columns: Any) -> str | None:
    """The answer the ``number`` reward reads from a completion's text, as written there; None when it holds no number.

    Example:

    ```python
    >>> extract_answer("7 + 5 = 12. Then 12 apples remain after 3 days.")
    '12'
    >>> extract_answer("I think it is probably -4")
    '-4'
    >>> extract_answer("eight")  # None
    ```
    """
    text = completion_text(text).translate(_MINUS_SIGNS)
    marked = _MARKED_RE.findall(text)
    if marked:
        return marked[-1]
    numbers = _NUMBER_RE.findall(text)
    return numbers[-1] if numbers else None


def _gold(value: Any) -> Decimal | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return Decimal(value)
    return parse_number(value) if isinstance(value, str) else None


@register_reward("number", answer_format=ANSWER_FORMAT, extract_answer=extract_answer)
def number_reward(prompts: list, completions: list, answer: list, **kwargs: Any) -> list[float | None]:
    """1.0 when the number read from the completion (see the module docstring) equals the gold ``answer``, else 0.0;
    None for a gold answer that is not a number."""
    rewards: list[float | None] = []
    for completion, gold in zip(completions, answer, strict=True):
        expected = _gold(gold)
        if expected is None:
            rewards.append(None)
            continue
        read = extract_answer(completion_text(completion))
        value = None if read is None else parse_number(read)
        rewards.append(1.0 if value is not None and value == expected else 0.0)
    return rewards

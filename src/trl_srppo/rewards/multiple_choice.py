# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The ``multiple_choice`` reward: the final letter choice of a completion equals the gold letter (GPQA style).

The valid options are ``A`` to ``D``, or up to the gold letter when it is later (``E``, ``F``, ...). The choice is,
in order of preference: the letter in the last ``\\boxed{...}``; the letter after the last "answer is" / "Answer:";
the last ``(C)``; the last standalone capital letter among the options (the article "A" before a lower-case word
does not count).
"""

from __future__ import annotations

import re
from typing import Any

from trl_srppo.rewards._registry import register_reward
from trl_srppo.rewards._text import column, completion_text, last_boxed

__all__ = ["extract_answer", "extract_choice", "multiple_choice_reward", "score_multiple_choice"]

# Each whitespace run in these patterns has one place to go: it is matched by the one ``\s*`` that follows the last
# token before it, never by two adjacent ``\s*`` with an optional token between them. Adjacent runs let the regex
# engine try every way to split a long run of spaces or newlines, which takes polynomial time on degenerate output
# (cubic here in the length of a whitespace run after "The answer is:"), inside one C call that holds the GIL.
_GOLD = re.compile(r"\s*(?:\(\s*)?([A-Za-z])\s*(?:\)\s*)?(?:[.:]\s*)?")
_ANSWER_PHRASE = re.compile(
    r"(?i:answer)(?:\s+(?i:is))?\s*(?:[:：]\s*)?(?:(?:\*\*|__)\s*)?(?:(?i:option|choice)\s+)?(?:[\(\[]\s*)?"
    r"(?:\$\s*)?(?:\\text\{\s*)?([A-Z])(?!\w)"
)
_PAREN = re.compile(r"\(([A-Z])\)")
_STANDALONE = re.compile(r"(?<![\w\\])([A-Z])(?!\w)")
_TEXT_WRAPPERS = re.compile(r"\\(?:text|textbf|mathrm|mathbf)\s*\{([^{}]*)\}")


def _gold_letter(answer: Any) -> str | None:
    """The gold option letter (``C``, ``(C)``, ``c.``), or None when the gold is not a single letter."""
    if not isinstance(answer, str):
        return None
    match = _GOLD.fullmatch(answer)
    return match.group(1).upper() if match else None


def _options(gold: str) -> str:
    """The valid option letters: A-D, or A up to the gold letter when it is later."""
    last = max("D", gold)
    return "".join(chr(code) for code in range(ord("A"), ord(last) + 1))


def _standalone_letters(text: str, options: str) -> list[str]:
    """Option letters standing alone in ``text``, in order, skipping the article "A"."""
    letters = []
    for match in _STANDALONE.finditer(text):
        letter = match.group(1)
        if letter not in options:
            continue
        if letter == "A" and re.match(r" +[a-z]", text[match.end() : match.end() + 3]):
            continue  # the article: "A good choice is ..."
        letters.append(letter)
    return letters


def extract_choice(text: str, options: str = "ABCD") -> str | None:
    """Return the final option letter chosen in ``text``, or None."""
    if not text:
        return None
    boxed = last_boxed(text)
    if boxed is not None:
        inner = _TEXT_WRAPPERS.sub(r"\1", boxed)
        letters = _standalone_letters(inner, options)
        if letters:
            return letters[0]
    phrases = [m.group(1) for m in _ANSWER_PHRASE.finditer(text) if m.group(1) in options]
    if phrases:
        return phrases[-1]
    parens = [m.group(1) for m in _PAREN.finditer(text) if m.group(1) in options]
    if parens:
        return parens[-1]
    letters = _standalone_letters(text, options)
    return letters[-1] if letters else None


def score_multiple_choice(text: str, answer: Any) -> float | None:
    """1.0 if the final choice equals the gold letter ``answer``, 0.0 otherwise, None if the gold is not a letter."""
    gold = _gold_letter(answer)
    if gold is None:
        return None
    return 1.0 if extract_choice(text, _options(gold)) == gold else 0.0


ANSWER_FORMAT = 'one option letter, e.g. \\boxed{C} or "The answer is C"'


def extract_answer(text: str, answer: Any = None, **columns: Any) -> str | None:
    """The option letter the ``multiple_choice`` reward reads (`extract_choice`), or None. The gold ``answer`` column,
    when given, sets the range of letters (A-D, or up to a later gold letter); other columns are unused."""
    gold = _gold_letter(answer)
    return extract_choice(text, _options(gold) if gold is not None else "ABCD")


@register_reward("multiple_choice", answer_format=ANSWER_FORMAT, extract_answer=extract_answer)
def multiple_choice_reward(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
    """Reward 1.0 for the right letter. Reads kwarg ``answer`` (the gold letter, such as ``"C"`` or ``"(C)"``)."""
    answers = column(kwargs, "answer", len(completions), "multiple_choice")
    return [score_multiple_choice(completion_text(c), a) for c, a in zip(completions, answers)]

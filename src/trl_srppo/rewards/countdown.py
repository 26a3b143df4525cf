# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The ``countdown`` reward: an arithmetic expression that uses each given number once and reaches the target.

The final answer is the content of the last ``<answer>...</answer>`` block if there is one, else the last
``\\boxed{...}``, else the last line that contains an expression. A right-hand side (``... = 24``) is ignored. The
expression may use ``+ - * /`` (``\\times``, ``\\cdot``, ``\\div``, ``×``, ``÷`` and ``−`` are accepted as aliases)
and parentheses; it is read by a small tokenizer and recursive-descent parser and evaluated exactly with
``fractions.Fraction``; nothing is ever passed to ``eval``. Unary signs, implicit multiplication and decimals are
not accepted. Bad syntax, division by zero, a number used twice or not at all, a wrong value or an overlong
expression score 0.0.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Iterable
from fractions import Fraction
from typing import Any

from trl_srppo.rewards._registry import register_reward
from trl_srppo.rewards._text import answer_tag, column, completion_text, last_boxed

__all__ = ["countdown_reward", "evaluate_expression", "extract_answer", "extract_expression", "score_countdown"]

MAX_EXPRESSION_CHARS = 500
MAX_DEPTH = 50
MAX_NUMBER_DIGITS = 12

_ALIASES = (
    ("\\left", ""),
    ("\\right", ""),
    ("\\times", "*"),
    ("\\cdot", "*"),
    ("\\div", "/"),
    ("×", "*"),
    ("·", "*"),
    ("÷", "/"),
    ("−", "-"),
    ("–", "-"),
    ("\\(", ""),
    ("\\)", ""),
    ("\\[", ""),
    ("\\]", ""),
    ("$", ""),
)
_RUN = re.compile(r"[0-9+\-*/() \t]+")
_OPERATOR = re.compile(r"[+\-*/]")
_TOKEN = re.compile(r"\s*(?:([0-9]+)|([+\-*/()]))")


class _Invalid(Exception):
    """The expression is not a valid countdown expression."""


def _normalize(text: str) -> str:
    """Replace LaTeX and Unicode operator spellings by ``+ - * /`` and drop math delimiters."""
    for old, new in _ALIASES:
        text = text.replace(old, new)
    return text


def _tokenize(text: str) -> list[str | int]:
    """Split an expression into integers and operator/parenthesis characters, or raise ``_Invalid``."""
    tokens: list[str | int] = []
    pos = 0
    end = len(text.rstrip())
    while pos < end:
        match = _TOKEN.match(text, pos)
        if match is None:
            raise _Invalid(f"unexpected character at {pos}")
        number, operator = match.groups()
        if number is not None:
            if len(number) > MAX_NUMBER_DIGITS:
                raise _Invalid("number too long")
            tokens.append(int(number))
        else:
            tokens.append(operator)
        pos = match.end()
    return tokens


class _Parser:
    """Recursive descent over ``expr := term (('+'|'-') term)*``, ``term := atom (('*'|'/') atom)*``,
    ``atom := NUMBER | '(' expr ')'``."""

    def __init__(self, tokens: list[str | int]):
        self.tokens = tokens
        self.pos = 0
        self.numbers: list[int] = []

    def peek(self) -> str | int | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str | int | None:
        token = self.peek()
        self.pos += 1
        return token

    def parse(self) -> Fraction:
        value = self.expr(0)
        if self.pos != len(self.tokens):
            raise _Invalid("trailing tokens")
        return value

    def expr(self, depth: int) -> Fraction:
        value = self.term(depth)
        while self.peek() in ("+", "-"):
            operator = self.take()
            right = self.term(depth)
            value = value + right if operator == "+" else value - right
        return value

    def term(self, depth: int) -> Fraction:
        value = self.atom(depth)
        while self.peek() in ("*", "/"):
            operator = self.take()
            right = self.atom(depth)
            if operator == "*":
                value = value * right
            elif right == 0:
                raise _Invalid("division by zero")
            else:
                value = value / right
        return value

    def atom(self, depth: int) -> Fraction:
        token = self.take()
        if isinstance(token, int):
            self.numbers.append(token)
            return Fraction(token)
        if token == "(":
            if depth >= MAX_DEPTH:
                raise _Invalid("parentheses nested too deep")
            value = self.expr(depth + 1)
            if self.take() != ")":
                raise _Invalid("unbalanced parentheses")
            return value
        raise _Invalid(f"unexpected token {token!r}")


def evaluate_expression(expression: str) -> tuple[Fraction, list[int]] | None:
    """Evaluate a countdown expression exactly; return its value and the numbers it uses, or None if invalid."""
    if not isinstance(expression, str) or len(expression) > MAX_EXPRESSION_CHARS:
        return None
    try:
        parser = _Parser(_tokenize(expression))
        return parser.parse(), parser.numbers
    except _Invalid:
        return None


def _pick_side(candidate: str) -> str:
    """Drop a right-hand side: keep the first side of ``a = b`` that contains an operator."""
    sides = candidate.split("=")
    for side in sides:
        if _OPERATOR.search(side) and re.search(r"\d", side):
            return side
    return sides[0]


def _expression_in(candidate: str) -> str | None:
    """The expression in a piece of text: the whole (left) side if it is one, else its last arithmetic run."""
    side = _pick_side(_normalize(candidate)).strip()
    if not side:
        return None
    if len(side) > MAX_EXPRESSION_CHARS:
        return side  # rejected later, without scanning further
    if evaluate_expression(side) is not None:
        return side
    runs = [run.strip() for run in _RUN.findall(side) if re.search(r"\d", run)]
    return runs[-1] if runs else side


def extract_expression(text: str) -> str | None:
    """Return the final expression of a completion (see the module docstring), or None."""
    if not text:
        return None
    tagged = answer_tag(text)
    if tagged is not None:
        boxed = last_boxed(tagged)
        return _expression_in(boxed if boxed is not None else tagged)
    boxed = last_boxed(text)
    if boxed is not None:
        return _expression_in(boxed)
    for line in reversed(text.splitlines()):
        normalized = _normalize(line)
        if re.search(r"\d", normalized) and _OPERATOR.search(normalized):
            return _expression_in(line)
    return None


def _as_int(value: Any) -> int | None:
    """An integral value as ``int`` (bools and non-integral values give None)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _as_int_list(values: Any) -> list[int] | None:
    """A non-empty list of integers as ``list[int]``, else None."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        return None
    ints = [_as_int(value) for value in values]
    return ints if ints and all(value is not None for value in ints) else None


def score_countdown(text: str, nums: Any, target: Any) -> float | None:
    """1.0 if the final expression uses each of ``nums`` exactly once and equals ``target``; None if malformed gold."""
    nums, target = _as_int_list(nums), _as_int(target)
    if nums is None or target is None:
        return None
    expression = extract_expression(text)
    if expression is None:
        return 0.0
    evaluated = evaluate_expression(expression)
    if evaluated is None:
        return 0.0
    value, used = evaluated
    return 1.0 if value == target and sorted(used) == sorted(nums) else 0.0


ANSWER_FORMAT = (
    "an arithmetic expression of the given numbers in <answer>...</answer> (else in \\boxed{...}, else the last line "
    "with an operator), e.g. <answer>(6 - 2) * 6</answer>"
)


def extract_answer(text: str, **columns: Any) -> str | None:
    """The expression the ``countdown`` reward reads (`extract_expression`), or None when the completion has none.
    An expression that is then invalid (bad syntax, a number used twice) is read, and scores 0.0 as a wrong answer.
    Dataset ``columns`` are accepted and unused."""
    return extract_expression(text)


@register_reward("countdown", answer_format=ANSWER_FORMAT, extract_answer=extract_answer)
def countdown_reward(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
    """Reward 1.0 for a correct countdown expression, else 0.0. Reads kwargs ``nums`` (list[int]) and ``target``."""
    nums = column(kwargs, "nums", len(completions), "countdown")
    targets = column(kwargs, "target", len(completions), "countdown")
    return [score_countdown(completion_text(c), n, t) for c, n, t in zip(completions, nums, targets)]

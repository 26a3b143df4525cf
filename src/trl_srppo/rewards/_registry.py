# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Registry of named reward functions, lookup by name or dotted import path, and which completions hold an answer a
verifier can read (`unreadable`)."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterable, Sequence
from types import MappingProxyType
from typing import Any

from trl_srppo.rewards._text import completion_text

RewardFunc = Callable[..., list]

_REGISTRY: dict[str, RewardFunc] = {}

#: Read-only view of the registered reward functions, by name.
REWARD_FUNCS = MappingProxyType(_REGISTRY)


def register_reward(
    name: str, *, answer_format: str | None = None, extract_answer: Callable[..., str | None] | None = None
) -> Callable[[RewardFunc], RewardFunc]:
    """Decorator that registers a reward function under ``name`` and sets its ``__name__`` to ``name``.

    TRL logs each reward under its function's ``__name__``, so the registered name is also the logged one. Registering
    a name twice raises ``ValueError``.

    Args:
        name (`str`):
            The registered (and logged) name.
        answer_format (`str` or `None`, *optional*):
            Where the verifier reads the answer, in words (e.g. ``"the final answer in \\boxed{...}"``); set as the
            function's ``answer_format`` attribute and shown in the warning about unreadable answers.
        extract_answer (`Callable` or `None`, *optional*):
            The verifier's extraction step, set as the function's ``extract_answer`` attribute: called as
            ``extract_answer(text, **columns)`` with a completion's text and those of its example's dataset columns
            (one value each) that it takes as keywords, it returns the answer it reads, or None when the completion
            holds none (see `unreadable`). ``extract_answer(text)`` alone is fine for a reader that needs no column.
    """
    if not isinstance(name, str) or not name or not name.replace("_", "").isalnum():
        raise ValueError(f"reward names must be non-empty identifiers, got {name!r}")

    def decorator(func: RewardFunc) -> RewardFunc:
        if name in _REGISTRY:
            raise ValueError(f"a reward function named {name!r} is already registered ({_REGISTRY[name]!r})")
        if not callable(func):
            raise TypeError(f"reward {name!r} must be callable, got {type(func).__name__}")
        # __qualname__ stays, so the function can still be found (and pickled) as module.<original name>.
        func.__name__ = name
        if answer_format is not None:
            func.answer_format = answer_format
        if extract_answer is not None:
            func.extract_answer = extract_answer
        _REGISTRY[name] = func
        return func

    return decorator


def _import_dotted(path: str) -> RewardFunc:
    """Import ``package.module:function`` or ``package.module.function`` and return the attribute."""
    if ":" in path:
        module_name, _, attr_path = path.partition(":")
    else:
        module_name, _, attr_path = path.rpartition(".")
    if not module_name or not attr_path:
        raise ValueError(f"cannot import reward function {path!r}: expected 'package.module:function'")
    try:
        obj = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import reward function {path!r}: {exc}") from exc
    for attr in attr_path.split("."):
        try:
            obj = getattr(obj, attr)
        except AttributeError as exc:
            raise ValueError(f"cannot import reward function {path!r}: {module_name} has no {attr_path!r}") from exc
    if not callable(obj):
        raise ValueError(f"reward function {path!r} is not callable (got {type(obj).__name__})")
    return obj


def get_reward_func(name: str) -> RewardFunc:
    """Return the reward function registered as ``name``, or import it from a dotted path.

    ``name`` is either a registered name (see ``REWARD_FUNCS``) or an import path of a user function written
    ``package.module:function`` or ``package.module.function``. An unknown name raises ``ValueError`` that lists the
    registered names.
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"reward function name must be a non-empty string, got {name!r}")
    name = name.strip()
    if name in _REGISTRY:
        return _REGISTRY[name]
    if "." in name or ":" in name:
        return _import_dotted(name)
    known = ", ".join(sorted(_REGISTRY))
    raise ValueError(
        f"unknown reward function {name!r}; registered names are: {known} "
        "(or pass an import path such as 'my_package.my_module:my_reward')"
    )


def get_reward_funcs(names: str | Iterable[str]) -> list[RewardFunc]:
    """Resolve several reward functions; ``names`` is a list or a comma-separated string."""
    if isinstance(names, str):
        names = [part for part in names.split(",") if part.strip()]
    return [get_reward_func(name) for name in names]


def unreadable(reward_func: Callable, completions: Sequence[Any], **columns: Any) -> list[bool] | None:
    """Which completions hold no answer that ``reward_func`` can read, whether or not a read answer would be right.

    Unreadable means the verifier's extraction step found nothing: no ``\\boxed{...}`` for ``math``, no expression for
    ``countdown``, no role stated for ``knights_knaves``, no option letter for ``multiple_choice``, words that are not
    the chain's digits for ``chain``, no number written in digits for ``number``. Such completions score 0 like wrong
    answers; a high share of them is a format problem (the model does not write the answer where the verifier reads
    it), not a reasoning one.

    Args:
        reward_func (`Callable`):
            A reward function; its ``extract_answer`` attribute (see `register_reward`) does the reading. Functions
            wrapped with ``functools.wraps`` keep it.
        completions (sequence of `str` or of message lists):
            The completions, as a reward function receives them.
        **columns:
            Dataset columns, one list with a value per completion (as a reward function receives them); other
            keyword values are ignored. ``knights_knaves`` reads ``names``, ``multiple_choice`` reads ``answer``
            (its range of option letters).

    Returns:
        `list[bool]` or `None`: True for each completion without a readable answer; None when ``reward_func`` has no
        ``extract_answer`` (a reward model, a user's own function).
    """
    extract = getattr(reward_func, "extract_answer", None)
    if not callable(extract):
        return None
    n = len(completions)
    per_row = {key: value for key, value in columns.items() if isinstance(value, (list, tuple)) and len(value) == n}
    per_row = {key: value for key, value in per_row.items() if key in _keywords(extract, per_row)}
    return [
        extract(completion_text(completion), **{key: value[i] for key, value in per_row.items()}) is None
        for i, completion in enumerate(completions)
    ]


def _keywords(func: Callable, names: Iterable[str]) -> set[str]:
    """Those of `names` that `func` takes as keyword arguments after its first parameter (all with ``**kwargs``)."""
    try:
        parameters = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return set(names)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return set(names) - {p.name for p in parameters[:1]}
    keywords = {p.name for p in parameters[1:] if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return set(names) & keywords

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Registry of named reward functions, and lookup by name or dotted import path."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from types import MappingProxyType

RewardFunc = Callable[..., list]

_REGISTRY: dict[str, RewardFunc] = {}

#: Read-only view of the registered reward functions, by name.
REWARD_FUNCS = MappingProxyType(_REGISTRY)


def register_reward(name: str) -> Callable[[RewardFunc], RewardFunc]:
    """Decorator that registers a reward function under ``name`` and sets its ``__name__`` to ``name``.

    TRL logs each reward under its function's ``__name__``, so the registered name is also the logged one. Registering
    a name twice raises ``ValueError``.
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

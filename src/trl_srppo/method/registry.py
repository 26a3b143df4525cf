# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""[`Registry`]: the named choices of one setting (an advantage estimator, a critic loss, an outcome, a critic type),
each name bound to what it runs, in the style of verl's `register_adv_est` / `get_adv_estimator_fn`.

One registry per setting; a value is checked once, by [`Registry.check`] (the config's `__post_init__` calls it), and
every refusal has one shape: `<setting> must be 'a', 'b' or 'c', got 'x'.` (and the setting's `hint`, if it has one).
Code that runs a choice looks it up with `registry[name]` instead of branching on the string again. To add a choice,
register it: `@REGISTRY.register("name")` on the function that runs it, and the config accepts it.
"""

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any


def either(names) -> str:
    """`names` as an error message lists them: `'a', 'b' or 'c'`."""
    *rest, last = (repr(name) for name in names)
    return f"{', '.join(rest)} or {last}" if rest else last


class Registry:
    """The choices of the setting `setting` (a config field's name), in the order they were registered.

    ```python
    ADVANTAGE_ESTIMATORS = Registry("advantage_baseline")

    @ADVANTAGE_ESTIMATORS.register("prefix")
    def prefix_advantages(...): ...

    ADVANTAGE_ESTIMATORS.check(args.advantage_baseline)  # once, in the config
    ADVANTAGE_ESTIMATORS[args.advantage_baseline](...)   # where it runs
    ```
    """

    def __init__(self, setting: str, hint: str = ""):
        self.setting = setting
        self.hint = hint  # a sentence the refusal ends with (what to do instead), if any
        self._entries: dict[Any, Any] = {}

    @classmethod
    def of(cls, setting: str, entries: Mapping | Iterable, hint: str = "") -> "Registry":
        """A registry of `entries`: a mapping of each name to its value, or names alone, each bound to itself (for
        a setting whose names are all its users need, such as a ZeRO stage)."""
        registry = cls(setting, hint)
        items = entries.items() if isinstance(entries, Mapping) else ((name, name) for name in entries)
        for name, value in items:
            registry.register(name, value)
        return registry

    def register(self, name, value=None):
        """Bind `name` to `value`; without `value`, a decorator that binds `name` to what it decorates. A name is
        registered once."""
        if value is None:

            def decorator(obj: Callable) -> Callable:
                self.register(name, obj)
                return obj

            return decorator
        if name in self._entries:
            raise ValueError(f"{self.setting}: {name!r} is registered already.")
        self._entries[name] = value
        return value

    def check(self, name) -> None:
        """Refuse a name outside the registry, naming the setting and its choices."""
        if name not in self:
            hint = f" {self.hint}" if self.hint else ""
            raise ValueError(f"{self.setting} must be {either(self._entries)}, got {name!r}.{hint}")

    def __getitem__(self, name):
        self.check(name)
        return self._entries[name]

    def __contains__(self, name) -> bool:
        try:
            return name in self._entries
        except TypeError:  # an unhashable value (a list from a recipe) is no name
            return False

    def __iter__(self) -> Iterator:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def names(self) -> tuple:
        return tuple(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.setting!r}: {', '.join(map(repr, self._entries))})"

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The package's import graph, read from the source with `ast`: no import cycle, and each layer imports only from its
own layer and the ones below it (verifiers, tasks, runtime, method, evaluation, analysis, command line), and the top
level holds those layers and nothing else.

Every import counts: at module level or inside a function, under `if TYPE_CHECKING:`, relative or absolute, and the
lazy ones a module makes by name (`importlib.import_module("trl_srppo.train")`, the name tables of `cli.py` and of the
packages' `__getattr__`)."""

import ast
from pathlib import Path

import pytest

PACKAGE = "trl_srppo"
SOURCE = Path(__file__).resolve().parents[1] / "src" / PACKAGE

# The layers, lowest first: a module may import from its own layer and the layers below it. Each is a list of
# packages or modules; a module belongs to the layer of the longest name that is it or contains it.
LAYERS = {
    # The verifiers: reward functions that read an answer and score it.
    "verifiers": ["trl_srppo.rewards"],
    # The verifiable tasks: registry (fields, prompts, row checks), data loading, the CPU toy family.
    "tasks": ["trl_srppo.tasks"],
    # What keeps any run alive, SR-PPO's or TRL's GRPO's: checkpoints, resume, preemption, checks, safe loading, ...
    "runtime": ["trl_srppo.runtime"],
    # SR-PPO: the estimator, the config, the trainer, the critic; the package's face hands on the trainer and config.
    "method": ["trl_srppo.method", "trl_srppo"],
    "evaluation": ["trl_srppo.evaluation"],
    "analysis": ["trl_srppo.analysis"],
    # `trl-srppo`, which dispatches to `train`, `eval` and `analyze`, and `trl-srppo train`.
    "command line": ["trl_srppo.cli", "trl_srppo.train"],
}
ORDER = tuple(LAYERS)
# The package's top level, each name its job: the layers above, and nothing else.
TOP_LEVEL = {"__init__", "analysis", "cli", "evaluation", "method", "rewards", "runtime", "tasks", "train"}


def module_files() -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its own name, for its `__init__.py`)."""
    modules = {}
    for path in sorted(SOURCE.rglob("*.py")):
        parts = (PACKAGE, *path.relative_to(SOURCE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


MODULES = module_files()


def layer(module: str) -> str:
    owners = [
        (len(prefix), name)
        for name, prefixes in LAYERS.items()
        for prefix in prefixes
        if module == prefix or module.startswith(prefix + ".") and prefix != PACKAGE
    ]
    if not owners:
        raise AssertionError(
            f"{module} is in no layer: add it, or the package holding it, to LAYERS in {Path(__file__).name}"
        )
    return max(owners)[1]


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def _resolve_from(module: str, node: ast.ImportFrom) -> str:
    # The absolute name of `from <dots><name> import ...` in `module`.
    if node.level == 0:
        return node.module or ""
    package = module if _is_package(module) else module.rpartition(".")[0]
    parts = package.split(".")
    base = ".".join(parts[: len(parts) - (node.level - 1)])
    return f"{base}.{node.module}" if node.module else base


def _names(module: str, tree: ast.AST) -> set[str]:
    # Modules named by a string a module imports lazily: a full dotted name anywhere (`importlib.import_module(...)`,
    # a table of commands), and, in a package, the name of one of its submodules (`_LAZY` tables). Docstrings and
    # the parts of f-strings are text, not names.
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            skipped.add(id(node.value))
        elif isinstance(node, ast.JoinedStr):
            skipped.update(id(value) for value in node.values)
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str) or id(node) in skipped:
            continue
        if node.value in MODULES:
            found.add(node.value)
        elif _is_package(module) and f"{module}.{node.value}" in MODULES:
            found.add(f"{module}.{node.value}")
    return found


def imports_of(module: str) -> set[str]:
    """The package's modules that `module` imports, at any level of its code."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"), filename=str(MODULES[module]))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in MODULES)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve_from(module, node)
            for alias in node.names:
                if f"{base}.{alias.name}" in MODULES:  # a submodule: `from . import critic`
                    found.add(f"{base}.{alias.name}")
                elif base in MODULES:
                    found.add(base)
    found |= _names(module, tree)
    found.discard(module)
    return found


def import_graph() -> dict[str, set[str]]:
    return {module: imports_of(module) for module in MODULES}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as the list of its modules, the first repeated at the end; `None` when there is none."""
    state = {}  # module -> "open" while on the current path, "done" once every path from it was followed
    path = []

    def visit(module):
        state[module] = "open"
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                return path[path.index(target) :] + [target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        path.pop()
        state[module] = "done"
        return None

    for module in sorted(graph):
        if module not in state:
            cycle = visit(module)
            if cycle:
                return cycle
    return None


def test_every_module_is_in_a_layer_and_every_listed_module_exists():
    for module in MODULES:
        layer(module)
    missing = sorted(prefix for prefixes in LAYERS.values() for prefix in prefixes if prefix not in MODULES)
    assert not missing, f"{Path(__file__).name} lists modules that do not exist: {missing}"


def test_the_top_level_holds_the_layers_only():
    top = {
        path.stem if path.is_file() else path.name
        for path in SOURCE.iterdir()
        if path.suffix == ".py" or (path / "__init__.py").is_file()
    }
    assert top == TOP_LEVEL, (
        f"the package's top level is {sorted(top)}, expected {sorted(TOP_LEVEL)}: put a new module in the package of "
        "its job (method, runtime, tasks, rewards, evaluation, analysis), or tooling the library does not use in "
        "scripts/ or benchmarks/"
    )
    assert len(top) <= 10


def test_the_package_has_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_each_layer_imports_only_from_its_own_layer_and_the_ones_below():
    wrong = [
        f"{module} ({layer(module)}) imports {target} ({layer(target)})"
        for module, targets in sorted(import_graph().items())
        for target in sorted(targets)
        if ORDER.index(layer(target)) > ORDER.index(layer(module))
    ]
    assert not wrong, "\n".join(wrong)


def test_the_runtime_serves_any_trainer_it_imports_no_method():
    # `trainer: grpo` runs on the same runtime as SR-PPO: nothing in it may need the method.
    graph = import_graph()
    for module in sorted(m for m in MODULES if layer(m) == "runtime"):
        above = sorted(t for t in graph[module] if ORDER.index(layer(t)) > ORDER.index("runtime"))
        assert not above, f"runtime module {module} imports {above}"


@pytest.mark.parametrize(
    "module, expected",
    [
        ("trl_srppo", "method"),
        ("trl_srppo.method.critics.base", "method"),
        ("trl_srppo.runtime.resume", "runtime"),
        ("trl_srppo.tasks.toy", "tasks"),
        ("trl_srppo.train", "command line"),
        ("trl_srppo.rewards._timeout", "verifiers"),
    ],
)
def test_layer_of_a_module_is_that_of_its_package(module, expected):
    assert layer(module) == expected


# ---- the checks themselves -----------------------------------------------------------------------------------------


def test_find_cycle_finds_a_cycle_through_a_lazy_import_and_none_in_a_tree():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]


@pytest.mark.parametrize(
    "source, expected",
    [
        ("from .method.core import srppo_advantages", {"trl_srppo.method.core"}),
        ("def f():\n    from .method import critics\n", {"trl_srppo.method.critics"}),
        ("if TYPE_CHECKING:\n    from .evaluation.config import EvalConfig\n", {"trl_srppo.evaluation.config"}),
        ("import trl_srppo.train", {"trl_srppo.train"}),
        ("import importlib\nimportlib.import_module('trl_srppo.analysis.cli')", {"trl_srppo.analysis.cli"}),
        ('"""A docstring that names trl_srppo.train."""\nx = f"{1}trl_srppo.train"', set()),
    ],
)
def test_imports_of_reads_every_kind_of_import(tmp_path, monkeypatch, source, expected):
    path = tmp_path / "probe.py"
    path.write_text(source, encoding="utf-8")
    monkeypatch.setitem(MODULES, "trl_srppo.probe", path)
    assert imports_of("trl_srppo.probe") == expected

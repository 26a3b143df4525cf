# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The package's import graph, read from the source with `ast`: no import cycle, and each layer imports only from its
own layer and the ones below it (training, then evaluation, then analysis, then the command line).

Every import counts: at module level or inside a function, under `if TYPE_CHECKING:`, relative or absolute, and the
lazy ones a module makes by name (`importlib.import_module("trl_srppo.train")`, the name tables of `cli.py` and of the
packages' `__getattr__`)."""

import ast
from pathlib import Path

import pytest

PACKAGE = "trl_srppo"
SOURCE = Path(__file__).resolve().parents[1] / "src" / PACKAGE

# The layers, lowest first: a module may import from its own layer and the layers below it.
# Training: the trainers, what they run on (critic, rewards, tasks, data, checkpoints, ...) and `trl-srppo train`.
TRAINING = {
    "trl_srppo",
    "trl_srppo.checkpoint_size",
    "trl_srppo.checkpoints",
    "trl_srppo.core",
    "trl_srppo.batch_metrics",
    "trl_srppo.critics",
    "trl_srppo.critics.base",
    "trl_srppo.critics.build",
    "trl_srppo.critics.data_parallel",
    "trl_srppo.critics.deepspeed_engine",
    "trl_srppo.critics.fsdp2",
    "trl_srppo.critics.model",
    "trl_srppo.critics.optimizer_state",
    "trl_srppo.critics.policy_head",
    "trl_srppo.critics.policy_lora",
    "trl_srppo.data",
    "trl_srppo.guards",
    "trl_srppo.markdown",
    "trl_srppo.metrics",
    "trl_srppo.preemption",
    "trl_srppo.prompt_sampling",
    "trl_srppo.real_model",
    "trl_srppo.reliable_trainer",
    "trl_srppo.reward_deadline",
    "trl_srppo.reward_models",
    "trl_srppo.rewards",
    "trl_srppo.rewards._math_worker",
    "trl_srppo.rewards._registry",
    "trl_srppo.rewards._text",
    "trl_srppo.rewards._timeout",
    "trl_srppo.rewards.chain",
    "trl_srppo.rewards.countdown",
    "trl_srppo.rewards.knights_knaves",
    "trl_srppo.rewards.math",
    "trl_srppo.rewards.multiple_choice",
    "trl_srppo.rewards.number",
    "trl_srppo.run_output",
    "trl_srppo.safetensors_rules",
    "trl_srppo.srppo_config",
    "trl_srppo.srppo_trainer",
    "trl_srppo.startup_checks",
    "trl_srppo.tasks",
    "trl_srppo.teardown",
    "trl_srppo.toy",
    "trl_srppo.train",
    "trl_srppo.unreadable",
    "trl_srppo.vllm_cpu",
}
# `trl-srppo`: dispatches to `train`, `eval` and `analyze`.
ENTRY_POINTS = {"trl_srppo.cli"}
LAYERS = ("training", "evaluation", "analysis", "entry point")


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
    if module.startswith(f"{PACKAGE}.evaluation.") or module == f"{PACKAGE}.evaluation":
        return "evaluation"
    if module.startswith(f"{PACKAGE}.analysis.") or module == f"{PACKAGE}.analysis":
        return "analysis"
    if module in ENTRY_POINTS:
        return "entry point"
    if module in TRAINING:
        return "training"
    raise AssertionError(f"{module} is in no layer: add it to TRAINING or ENTRY_POINTS in {Path(__file__).name}")


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
    missing = sorted((TRAINING | ENTRY_POINTS) - set(MODULES))
    assert not missing, f"{Path(__file__).name} lists modules that do not exist: {missing}"


def test_the_package_has_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_each_layer_imports_only_from_its_own_layer_and_the_ones_below():
    wrong = [
        f"{module} ({layer(module)}) imports {target} ({layer(target)})"
        for module, targets in sorted(import_graph().items())
        for target in sorted(targets)
        if LAYERS.index(layer(target)) > LAYERS.index(layer(module))
    ]
    assert not wrong, "\n".join(wrong)


def test_training_code_imports_neither_evaluation_nor_analysis():
    graph = import_graph()
    for module in sorted(TRAINING):
        above = sorted(t for t in graph[module] if layer(t) in ("evaluation", "analysis"))
        assert not above, f"training module {module} imports {above}"


# ---- the checks themselves -----------------------------------------------------------------------------------------


def test_find_cycle_finds_a_cycle_through_a_lazy_import_and_none_in_a_tree():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]


@pytest.mark.parametrize(
    "source, expected",
    [
        ("from .core import srppo_advantages", {"trl_srppo.core"}),
        ("def f():\n    from . import critics\n", {"trl_srppo.critics"}),
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

# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The import graph of `benchmarks/` and `scripts/`, read from the source with `ast`: no import circle, the packages of
`benchmarks/` import one way (`common` <- `smollm2` <- the studies, no study another study's package but the cold-start
study, which runs on the SmolLM2 study's harness and which nothing imports), the SmolLM2
study's design is a leaf that no stage is imported back into, and the library's tests (`tests/`) import nothing from
`benchmarks`.

Every import counts, at module level or inside a function, absolute or relative. `tests/test_layering.py` checks
`src/` the same way."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOP = ("benchmarks", "scripts")

# What each package of `benchmarks/` may import from the others (its own modules always).
ALLOWED = {
    "benchmarks.common": set(),
    "benchmarks.smollm2": {"benchmarks.common"},
    "benchmarks.toy": {"benchmarks.common"},
    "benchmarks.costs": {"benchmarks.common", "benchmarks.smollm2"},
    "benchmarks.real_study": {"benchmarks.common", "benchmarks.smollm2"},
    # the SmolLM2 study's runs, splits, base model and probe, on another testbed
    "benchmarks.cold_start": {"benchmarks.common", "benchmarks.smollm2", "benchmarks.real_study"},
    # the SmolLM2 study's trainer, splits and base model, and the cold-start study's rate, head and paired finals
    "benchmarks.long_horizon": {
        "benchmarks.common",
        "benchmarks.smollm2",
        "benchmarks.real_study",
        "benchmarks.cold_start",
    },  # fmt: skip
}


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(root: Path = ROOT, tops=TOP) -> dict[str, Path]:
    """Every module under `tops` by its dotted name (a package by its own name, for its `__init__.py`)."""
    return {module_name(p, root): p for top in tops for p in sorted((root / top).rglob("*.py"))}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of `known` that the module `name` at `path` imports, anywhere in it: `from a import b` counts as
    importing `a.b` when that is a module, else `a`."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # `benchmarks.toy.grid.Grid` -> `benchmarks.toy.grid`
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def graph(root: Path = ROOT, tops=TOP) -> dict[str, set[str]]:
    found = modules(root, tops)
    return {name: imports_of(name, path, set(found)) for name, path in found.items()}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import circle of `edges` as the modules along it (the first again at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def package_of(module: str) -> str | None:
    return next((p for p in ALLOWED if module == p or module.startswith(p + ".")), None)


GRAPH = graph()


def test_every_folder_of_benchmarks_is_a_package_in_the_rules():
    for folder in sorted(p for p in (ROOT / "benchmarks").iterdir() if p.is_dir() and p.name != "__pycache__"):
        assert (folder / "__init__.py").is_file(), folder
        assert folder.name == "tests" or f"benchmarks.{folder.name}" in ALLOWED, folder
    assert (ROOT / "scripts" / "__init__.py").is_file()


def test_benchmarks_and_scripts_have_no_import_circle():
    assert find_cycle(GRAPH) is None, " -> ".join(find_cycle(GRAPH))


def test_each_package_of_benchmarks_imports_only_the_shared_layers():
    wrong = []
    for module, targets in GRAPH.items():
        mine = package_of(module)
        if mine is None:  # scripts, the benchmarks' tests, `benchmarks/__init__.py`
            continue
        for target in targets:
            theirs = package_of(target)
            if theirs not in (mine, None) and theirs not in ALLOWED[mine]:
                wrong.append(f"{module} imports {target}")
            elif theirs is None and target.startswith("benchmarks"):
                wrong.append(f"{module} imports {target}")  # the suite's tests or its top level
    assert not wrong, "\n".join(wrong)


def test_the_smollm2_study_design_is_a_leaf_and_no_stage_imports_the_command_or_the_report_back():
    study = {m: t for m, t in GRAPH.items() if m.startswith("benchmarks.real_study.")}
    design = "benchmarks.real_study.design"
    assert not {t for t in study[design] if t.startswith("benchmarks.real_study")}, study[design]
    readings = {t for t in study["benchmarks.real_study.readings"] if t.startswith("benchmarks.real_study")}
    assert readings == {design}
    for module, targets in study.items():
        assert "benchmarks.real_study.study" not in targets, module  # the command, which runs the stages
        if module != "benchmarks.real_study.study":
            assert "benchmarks.real_study.report" not in targets, module
    readers = {m.rpartition(".")[2] for m, targets in study.items() if design in targets}
    assert {"base", "bench", "engine", "head", "readings", "report", "stability", "study"} <= readers, readers


def test_the_library_tests_import_nothing_from_benchmarks():
    found = modules(ROOT, ("tests",))
    wrong = []
    for name, path in found.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            wrong += [f"{name} imports {n}" for n in names if n == "benchmarks" or n.startswith("benchmarks.")]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(
    ("files", "cycle"),
    [
        ({"a/__init__.py": "", "a/x.py": "from . import y\n", "a/y.py": "def f():\n    from .z import g\n",
          "a/z.py": "from a.x import h\n"}, ["a.x", "a.y", "a.z", "a.x"]),
        ({"a/__init__.py": "", "a/x.py": "from .y import f\n", "a/y.py": "import os\n"}, None),
    ],
)  # fmt: skip
def test_find_cycle_finds_a_circle_through_a_lazy_relative_import_and_none_in_a_tree(tmp_path, files, cycle):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert find_cycle(graph(tmp_path, ("a",))) == cycle

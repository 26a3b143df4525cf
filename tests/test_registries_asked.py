# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""A choice is asked of its registry, never compared as a string: no module of the package compares a choice field
(a key of `SRPPOConfig`'s `CHOICES`, such as `critic_head`), or a local name that holds one, with a literal (`==`,
`!=`, `in`, `not in`, `is`; a string or number, or a tuple, list or set of them), nor looks for a literal in one
(`"bce" in args.critic_loss_type`). What a choice implies is an attribute of its registry entry
(`CRITIC_HEADS[args.critic_head].logits`, `PROMPT_SAMPLING_MODES[args.prompt_sampling].draws`, ...). The modules are
read with `ast`, not imported."""

import ast
from pathlib import Path

import pytest

from trl_srppo.method.srppo_config import CHOICES

SOURCE = Path(__file__).resolve().parents[1] / "src" / "trl_srppo"
CHOICE_FIELDS = frozenset(CHOICES)


def _name(node: ast.AST) -> str | None:
    # `critic_head`, `args.critic_head`, `self.args.critic_head`: the name a reference ends with.
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _is_literal(node: ast.AST) -> bool:
    # A string or a number (a ZeRO stage), or a tuple, list or set of them.
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return bool(node.elts) and all(_is_literal(element) for element in node.elts)
    return isinstance(node, ast.Constant) and isinstance(node.value, (str, int)) and not isinstance(node.value, bool)


def _aliases(scope: ast.AST) -> set[str]:
    # The local names of `scope` bound to a choice field as it is: `mode = args.critic_parallelism`.
    names = set()
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign) and _name(node.value) in CHOICE_FIELDS:
            names.update(target.id for target in node.targets if isinstance(target, ast.Name))
        elif isinstance(node, ast.AnnAssign) and node.value is not None and _name(node.value) in CHOICE_FIELDS:
            if isinstance(node.target, ast.Name):
                names.add(node.target.id)
    return names


def string_comparisons(source: str, filename: str = "<string>") -> list[str]:
    """Every comparison of a choice field (or a local name bound to one) with a literal in `source`, as
    `file:line: code`."""
    tree = ast.parse(source, filename)
    scopes = [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))]
    found = set()
    for scope in scopes:
        choices = CHOICE_FIELDS | _aliases(scope)
        for node in ast.walk(scope):
            if not isinstance(node, ast.Compare):
                continue
            operands = [node.left, *node.comparators]
            for left, right in zip(operands, operands[1:]):
                if (_name(left) in choices and _is_literal(right)) or (_name(right) in choices and _is_literal(left)):
                    found.add((node.lineno, f"{filename}:{node.lineno}: {ast.unparse(node)}"))
    return [text for _, text in sorted(found)]


def test_no_module_compares_a_choice_with_a_literal():
    found = []
    for path in sorted(SOURCE.rglob("*.py")):
        found += string_comparisons(path.read_text(encoding="utf-8"), str(path.relative_to(SOURCE.parent)))
    assert not found, "ask the choice's registry entry instead:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "code",
    [
        'if args.critic_head != "sigmoid": pass',
        'ok = self.args.prompt_sampling == "none"',
        'if "bce" in args.critic_loss_type: pass',
        'if critic_type in ("policy_head", "policy_lora"): pass',
        "if args.critic_zero_stage == 3: pass",
        'def f(args):\n    mode = args.critic_parallelism\n    return mode == "fsdp"',
        'def f(args):\n    mode: str = args.critic_type\n    return "separate" != mode',
        'if 0 < 1 and args.srppo_outcome not in ["reward_func"]: pass',
    ],
)
def test_a_planted_comparison_is_caught(code):
    assert len(string_comparisons(code)) == 1


@pytest.mark.parametrize(
    "code",
    [
        "if not CRITIC_HEADS[args.critic_head].logits: pass",
        "if PROMPT_SAMPLING_MODES[self.args.prompt_sampling].draws: pass",
        'if mode == "train": pass',  # a name that holds no choice here
        'def f(args):\n    mode = critic_mode(args)\n    return mode == "fsdp"',  # not the field as it is
        "if module.head != args.critic_head: pass",  # two values, no literal
        "if args.critic_lora_r is None: pass",
        'field = {"critic_head": "sigmoid"}',  # a registration, not a comparison
    ],
)
def test_what_asks_a_registry_passes(code):
    assert string_comparisons(code) == []

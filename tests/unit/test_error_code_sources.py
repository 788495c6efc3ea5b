"""Kafka's error numbers come from one table, ``samsa.errors.ErrorCode``: read from the source."""

from __future__ import annotations

import ast
from pathlib import Path

import samsa
from samsa.errors import ErrorCode

SRC = Path(samsa.__file__).parent


def _modules() -> list[tuple[str, ast.Module]]:
    return [
        (str(path.relative_to(SRC)), ast.parse(path.read_text(), str(path)))
        for path in sorted(SRC.rglob("*.py"))
        if path != SRC / "errors.py"
    ]


def _error_constants(tree: ast.Module) -> list[tuple[str, int]]:
    """``(name, number)`` of each module-level ``NAME = <int>`` named after a Kafka error."""
    found = []
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        value = getattr(node, "value", None)
        if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub):
            value = value.operand
            sign = -1
        else:
            sign = 1
        if not (isinstance(value, ast.Constant) and type(value.value) is int):
            continue
        for target in targets:
            if isinstance(target, ast.Name) and target.id in ErrorCode.__members__:
                found.append((target.id, sign * value.value))
    return found


def test_every_constant_named_after_a_kafka_error_has_that_errors_number() -> None:
    wrong = [
        f"{module}: {name} = {number} (Kafka's {name} is {ErrorCode[name].value})"
        for module, tree in _modules()
        for name, number in _error_constants(tree)
        if ErrorCode[name] != number
    ]
    assert wrong == []


def test_no_module_defines_its_own_kafka_error_constant() -> None:
    defined = [
        f"{module}: {name}" for module, tree in _modules() for name, _ in _error_constants(tree)
    ]
    assert defined == []


def test_no_module_looks_up_an_error_class_by_a_bare_number() -> None:
    lookups = [
        f"{module}:{node.lineno}"
        for module, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in {"for_code", "error_for"}
        and node.args
        and isinstance(node.args[0], ast.Constant | ast.UnaryOp)
    ]
    assert lookups == []

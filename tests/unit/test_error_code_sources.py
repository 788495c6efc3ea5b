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


def _int_value(node: ast.expr) -> int | None:
    sign = 1
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node, sign = node.operand, -1
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return sign * node.value
    return None


def _assigned(node: ast.stmt) -> list[tuple[ast.expr, ast.expr]]:
    """``(target, value)`` pairs of a module-level assignment, tuples unpacked pairwise."""
    if isinstance(node, ast.AnnAssign) and node.value is not None:
        return [(node.target, node.value)]
    if not isinstance(node, ast.Assign):
        return []
    pairs: list[tuple[ast.expr, ast.expr]] = []
    for target in node.targets:
        if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
            pairs += zip(target.elts, node.value.elts, strict=False)
        else:
            pairs.append((target, node.value))
    return pairs


def _error_constants(tree: ast.Module) -> list[tuple[str, int]]:
    """``(name, number)`` of each module-level ``NAME = <int>`` named after a Kafka error
    (``A, B = 1, 2`` included)."""
    found = []
    for node in tree.body:
        for target, value in _assigned(node):
            number = _int_value(value)
            if number is None:
                continue
            if isinstance(target, ast.Name) and target.id in ErrorCode.__members__:
                found.append((target.id, number))
    return found


def test_a_constant_assigned_in_a_tuple_is_found() -> None:
    tree = ast.parse("A, NOT_CONTROLLER = 3, 41\nUNKNOWN_SERVER_ERROR: int = -1\n")
    assert _error_constants(tree) == [("NOT_CONTROLLER", 41), ("UNKNOWN_SERVER_ERROR", -1)]


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

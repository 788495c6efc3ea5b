"""The broker package imports one way: no module of samsa.broker reaches itself again.

Read from the source with ast, so imports under ``TYPE_CHECKING`` and imports
inside functions count too: a lazy import is a cycle put off, not removed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import samsa

SRC = Path(samsa.__file__).parent


def _module_name(path: Path) -> str:
    parts = ["samsa", *path.relative_to(SRC).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    paths = {_module_name(path): path for path in SRC.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    base = f"{anchor}.{base}" if base else anchor
                for alias in node.names:
                    submodule = f"{base}.{alias.name}"
                    targets.add(submodule if submodule in paths else base)
        graph[name] = {target for target in targets if target in paths and target != name}
    return graph


def _cycle_through(start: str, graph: dict[str, set[str]]) -> list[str] | None:
    """A path of imports from ``start`` back to itself, if there is one."""
    stack = [(start, [start])]
    seen: set[str] = set()
    while stack:
        module, path = stack.pop()
        for target in sorted(graph[module]):
            if target == start:
                return [*path, start]
            if target not in seen:
                seen.add(target)
                stack.append((target, [*path, target]))
    return None


def test_no_module_of_the_broker_package_imports_itself_back() -> None:
    graph = _import_graph()
    broker_modules = sorted(
        m for m in graph if m == "samsa.broker" or m.startswith("samsa.broker.")
    )
    assert len(broker_modules) > 10  # the walk found the package
    cycles = [
        " -> ".join(cycle)
        for module in broker_modules
        if (cycle := _cycle_through(module, graph)) is not None
    ]
    assert cycles == []


def test_the_cycle_check_finds_a_cycle_between_two_modules() -> None:
    graph = {"a": {"b"}, "b": {"c", "a"}, "c": set()}
    assert _cycle_through("a", graph) == ["a", "b", "a"]
    assert _cycle_through("c", graph) is None

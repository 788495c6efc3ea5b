"""samsa imports one way: no module reaches itself again, and the packages keep to the
layers of docs/architecture.md ("Import rules").

Read from the source with ast, so imports under ``TYPE_CHECKING`` and imports
inside functions count too: a lazy import is a cycle put off, not removed.
"""

from __future__ import annotations

import ast
import functools
import graphlib
from pathlib import Path

import samsa

SRC = Path(samsa.__file__).parent


def _module_name(path: Path) -> str:
    parts = ["samsa", *path.relative_to(SRC).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
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


def _a_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A path of imports from a module back to itself, if there is one."""
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        return list(reversed(exc.args[1]))
    return None


def test_no_module_of_samsa_imports_itself_back() -> None:
    graph = _import_graph()
    assert len(graph) > 100  # the walk found the package
    cycle = _a_cycle(graph)
    assert cycle is None, " -> ".join(cycle)


def test_the_cycle_check_finds_a_cycle_between_two_modules() -> None:
    assert _a_cycle({"a": {"b"}, "b": {"c", "a"}, "c": set()}) in (["a", "b", "a"], ["b", "a", "b"])
    assert _a_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


_BASE = {
    "samsa.errors",
    "samsa.types",
    "samsa.config",
    "samsa.acl",
    "samsa._version",
    "samsa.tcp_listeners",
}

_SHARED = _BASE | {"samsa.records", "samsa.protocol", "samsa.security"}
_BROKER = _SHARED | {"samsa.storage", "samsa.cluster", "samsa.coordinator", "samsa.client"}

ALLOWED: dict[str, set[str]] = {
    # package (or base module): the packages it may import, besides itself
    **{base: _BASE for base in _BASE},
    "samsa.records": _BASE,
    "samsa.protocol": _BASE,
    "samsa.security": _BASE,
    "samsa.storage": _BASE | {"samsa.records"},
    "samsa.cluster": _BASE | {"samsa.records", "samsa.storage"},
    "samsa.coordinator": _BASE | {"samsa.records", "samsa.protocol", "samsa.storage"},
    "samsa.client": _SHARED,
    "samsa.registry": _BASE | {"samsa.records", "samsa.client"},
    "samsa.broker": _BROKER | {"samsa.registry"},  # of the client, only BROKER_USES_OF_THE_CLIENT
    "samsa.spark": _SHARED | {"samsa.client"},
    "samsa.console": _SHARED | {"samsa.client"},
    "samsa.testing": _SHARED | {"samsa.client"},
    "samsa.cli": _BROKER | {"samsa", "samsa.broker", "samsa.console"},
    "samsa": _BASE | {"samsa.client"},
    "samsa.__main__": {"samsa.cli"},
}
"""The layers of docs/architecture.md, bottom up."""

BROKER_USES_OF_THE_CLIENT = {"samsa.client.connection", "samsa.client.security"}
"""The broker reuses the client's connection (replica fetcher, transaction marker
channel) and its security settings (inter-broker listener); nothing else of it."""


def _package(module: str) -> str:
    parts = module.split(".")
    return module if len(parts) == 1 else ".".join(parts[:2])


def _breaches(graph: dict[str, set[str]]) -> list[str]:
    breaches = []
    for module, targets in sorted(graph.items()):
        package = _package(module)
        allowed = ALLOWED[package]
        for target in sorted(targets):
            used = _package(target)
            if (used != package and used not in allowed) or (
                package == "samsa.broker"
                and used == "samsa.client"
                and target not in BROKER_USES_OF_THE_CLIENT
            ):
                breaches.append(f"{module} -> {target}")
    return breaches


def test_every_package_of_samsa_has_a_layer() -> None:
    assert {_package(module) for module in _import_graph()} <= set(ALLOWED)


def test_no_package_imports_a_layer_above_it() -> None:
    assert _breaches(_import_graph()) == []


def test_the_layer_check_finds_an_import_upwards() -> None:
    graph = {
        "samsa.storage.log": {"samsa.broker.server", "samsa.records.batch"},
        "samsa.broker.server": {"samsa.client.admin", "samsa.client.connection"},
    }
    assert _breaches(graph) == [
        "samsa.broker.server -> samsa.client.admin",
        "samsa.storage.log -> samsa.broker.server",
    ]

"""The first-party packages import one another without a cycle.

A cycle is what local (function-level) imports were hiding: the graph counts
every import, at module level or inside a function, and leaves out only those
under ``if TYPE_CHECKING:``, which never run. It is read from the source with
``ast``, so it sees imports that a test run never executes.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("ballet", "tracker", "knowledge", "planner")

Graph = dict[str, set[str]]


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """Every node below ``node`` but those in the body of an ``if TYPE_CHECKING:`` (its else runs)."""
    for child in ast.iter_child_nodes(node):
        yield child
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for branch in child.orelse:
                yield branch
                yield from _runtime_nodes(branch)
        else:
            yield from _runtime_nodes(child)


def _imported(
    node: ast.Import | ast.ImportFrom, module: str, is_package: bool, modules: set[str]
) -> set[str]:
    """Which of ``modules`` ``node`` imports; ``from p import n`` imports the module p.n if any, else p."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names} & modules
    if node.level:  # relative: each level above the first climbs one package from this module's own
        package = module.split(".") if is_package else module.split(".")[:-1]
        base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    names = {f"{base}.{alias.name}" for alias in node.names}
    return {name if name in modules else base for name in names} & modules


def import_graph(root: Path, packages: tuple[str, ...]) -> Graph:
    """Module -> the modules of ``packages`` it imports, read from the source under ``root``."""
    files = {
        _module_name(root, path): path for package in packages for path in (root / package).rglob("*.py")
    }
    graph: Graph = {module: set() for module in files}
    modules = set(files)
    for module, path in files.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in _runtime_nodes(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                graph[module] |= _imported(node, module, path.name == "__init__.py", modules) - {module}
    return graph


def import_cycles(graph: Graph) -> list[list[str]]:
    """One cycle through each strongly connected group of modules (Tarjan), as a path back to its start."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group = {stack.pop()}
            while module not in group:
                group.add(stack.pop())
            if len(group) > 1:
                groups.append(group)

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return [_cycle_in(graph, group) for group in groups]


def _cycle_in(graph: Graph, group: set[str]) -> list[str]:
    """A shortest path from the group's first module back to itself, through the group (breadth first)."""
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt = []
        for module in frontier:
            for target in sorted(graph[module] & group):
                if target == start:
                    return [*paths[module], start]
                if target not in paths:
                    paths[target] = [*paths[module], target]
                    nxt.append(target)
        frontier = nxt
    raise AssertionError(f"no cycle through {start} in {sorted(group)}")


def test_first_party_packages_have_no_import_cycle():
    cycles = import_cycles(import_graph(ROOT, PACKAGES))
    assert cycles == [], "import cycles:\n" + "\n".join(" -> ".join(cycle) for cycle in cycles)


def test_the_graph_sees_function_level_imports_and_skips_type_checking(tmp_path):
    """The check can fail: a cycle closed by a function-level import is found, a typing-only one is not."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg import b\n")
    (package / "b.py").write_text("def f():\n    from . import a\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\nimport pkg.d\n")
    (package / "d.py").write_text(
        "import typing\nif typing.TYPE_CHECKING:\n    from pkg.c import x\nelse:\n    import json\n"
    )

    graph = import_graph(tmp_path, ("pkg",))

    assert graph["pkg.b"] == {"pkg.a"}
    assert graph["pkg.d"] == set()
    assert import_cycles(graph) == [["pkg.a", "pkg.b", "pkg.a"]]

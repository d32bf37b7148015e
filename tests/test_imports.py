"""The first-party packages import one another without a cycle, and only in the directions of
``docs/architecture.md``.

A cycle is what local (function-level) imports were hiding: the graph counts
every import, at module level or inside a function, and leaves out only those
under ``if TYPE_CHECKING:``, which never run. It is read from the source with
``ast``, so it sees imports that a test run never executes.

The directions (:data:`LAYERS`, and the agent's core): a rule is broken by a
path of runtime imports, however long, and importing a module runs its
packages' ``__init__`` too. A broken rule prints its shortest path.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cache, partial
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


def _external(node: ast.Import | ast.ImportFrom, packages: tuple[str, ...]) -> set[str]:
    """The modules outside ``packages`` that ``node`` imports (``django.db``, ``anthropic``)."""
    if isinstance(node, ast.Import):
        names = {alias.name for alias in node.names}
    else:
        names = {node.module} if node.module and not node.level else set()
    return {name for name in names if name.split(".")[0] not in packages}


@dataclass(frozen=True)
class Imports:
    """What each first-party module imports at runtime: ``graph`` the first-party modules, ``external``
    the others."""

    graph: Graph
    external: Graph


@cache
def read_imports(root: Path, packages: tuple[str, ...]) -> Imports:
    """The imports of every module of ``packages``, read from the source under ``root``."""
    files = {
        _module_name(root, path): path for package in packages for path in (root / package).rglob("*.py")
    }
    graph: Graph = {module: set() for module in files}
    external: Graph = {module: set() for module in files}
    modules = set(files)
    for module, path in files.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in _runtime_nodes(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                graph[module] |= _imported(node, module, path.name == "__init__.py", modules) - {module}
                external[module] |= _external(node, packages)
    return Imports(graph, external)


def import_graph(root: Path, packages: tuple[str, ...]) -> Graph:
    """Module -> the modules of ``packages`` it imports, read from the source under ``root``."""
    return read_imports(root, packages).graph


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


# -- the directions ---------------------------------------------------------------

# The agent's core knows the model and the tools' results, not Django: the loop runs under a
# scripted gateway, with no settings (docs/architecture.md, "The planner's rooms").
AGENT_CORE = (
    "planner.agent.loop",
    "planner.agent.gateway",
    "planner.agent.messages",
    "planner.agent.compaction",
    "planner.agent.frames",
)
# What the core may import of planner.agent: all but the parts that read the plan.
AGENT_DOMAIN = ("planner.agent.prompt", "planner.agent.tools")
# Modules outside planner.agent the core may import: Django-free, which the framework rule holds.
AGENT_CORE_MAY_IMPORT = ("tracker.errors",)
FRAMEWORKS = ("django", "channels", "rest_framework")

# (importers, what they may never reach): docs/architecture.md, "One process, four apps".
LAYERS = (
    (("tracker",), ("knowledge", "planner")),
    (("knowledge",), ("planner",)),
    # The domain is called by the runtime and the interfaces, never the other way.
    (
        ("planner.services",),
        (
            "planner.live.runner",
            "planner.live.hub",
            "planner.live.turn",
            "planner.live.relay",
            "planner.apis",
            "planner.question_apis",
            "planner.consumers",
            "planner.pages",
            "planner.page_urls",
            "planner.urls",
            "planner.routing",
            "planner.admin",
            "planner.mcp_server",
            "planner.tasks",
            "planner.management",
        ),
    ),
)


def _within(module: str, prefixes: Iterable[str]) -> bool:
    return any(module == prefix or module.startswith(f"{prefix}.") for prefix in prefixes)


def _packages_of(module: str) -> list[str]:
    """The packages whose ``__init__`` importing ``module`` runs: ``a.b.c`` -> ``a``, ``a.b``."""
    parts = module.split(".")
    return [".".join(parts[:n]) for n in range(1, len(parts))]


def _runs(imports: Imports, module: str) -> list[str]:
    """The first-party modules importing ``module`` runs next: its imports and its packages."""
    return sorted(imports.graph[module] | (set(_packages_of(module)) & imports.graph.keys()))


def _shortest_paths(
    imports: Imports, sources: Iterable[str], goes_on: Callable[[str], bool]
) -> dict[str, list[str]]:
    """Each module importing ``sources`` runs, with a shortest path of imports to it, walking on
    only from the modules that ``goes_on`` (breadth first)."""
    start = sorted(module for module in sources if module in imports.graph)
    paths = {module: [module] for module in start}
    queue = deque(start)
    while queue:
        module = queue.popleft()
        if goes_on(module):
            for target in _runs(imports, module):
                if target not in paths:
                    paths[target] = [*paths[module], target]
                    queue.append(target)
    return paths


def offending_paths(imports: Imports, sources: Iterable[str], offends: Callable[[str], bool]) -> list[str]:
    """The shortest path of runtime imports from ``sources`` to each module that ``offends``, as
    ``a -> b -> c`` (the walk goes on through the modules that do not)."""
    paths = _shortest_paths(imports, sources, lambda module: not offends(module))
    return sorted(" -> ".join(path) for module, path in paths.items() if offends(module))


def agent_core_departures(imports: Imports) -> list[str]:
    """Paths from the agent's core to a first-party module it may not import: outside
    ``planner.agent`` (but the Django-free :data:`AGENT_CORE_MAY_IMPORT` and the packages that
    hold them) or in :data:`AGENT_DOMAIN`."""
    allowed = {*AGENT_CORE_MAY_IMPORT, *_packages_of("planner.agent")}
    allowed |= {package for module in AGENT_CORE_MAY_IMPORT for package in _packages_of(module)}

    def offends(module: str) -> bool:
        inside = _within(module, ["planner.agent"]) and not _within(module, AGENT_DOMAIN)
        return not inside and module not in allowed

    return offending_paths(imports, AGENT_CORE, offends)


def agent_core_frameworks(imports: Imports) -> list[str]:
    """Paths from the agent's core to an import of Django, Channels or DRF, wherever its imports lead."""
    return sorted(
        " -> ".join([*path, name])
        for module, path in _shortest_paths(imports, AGENT_CORE, lambda _: True).items()
        for name in imports.external[module]
        if _within(name, FRAMEWORKS)
    )


def layer_breaches(imports: Imports) -> list[str]:
    """Paths along which a module reaches one that :data:`LAYERS` forbids it."""
    found = []
    for importers, forbidden in LAYERS:
        sources = [module for module in imports.graph if _within(module, importers)]
        found += offending_paths(imports, sources, partial(_within, prefixes=forbidden))
    return found


def _broken(rule: str, paths: list[str]) -> str:
    return f"{rule}:\n" + "\n".join(f"  {path}" for path in paths)


def test_the_agent_core_imports_only_itself_and_django_free_modules():
    departures = agent_core_departures(read_imports(ROOT, PACKAGES))
    assert departures == [], _broken("the agent's core imports beyond planner.agent", departures)


def test_the_agent_core_runs_without_django():
    frameworks = agent_core_frameworks(read_imports(ROOT, PACKAGES))
    assert frameworks == [], _broken("the agent's core imports a web framework", frameworks)


def test_imports_point_one_way():
    breaches = layer_breaches(read_imports(ROOT, PACKAGES))
    assert breaches == [], _broken("imports against the layers", breaches)


def test_every_direction_can_be_broken(tmp_path):
    """Each rule fails on a tree that breaks it, through a function-level or indirect import, and
    prints the path; a typing-only import breaks nothing."""
    files = {
        "planner/__init__.py": "",
        "planner/models.py": "",
        "planner/agent/__init__.py": "",
        "planner/agent/loop.py": "from planner.agent import frames, messages\n",
        "planner/agent/frames.py": "def f():\n    from planner.services.previews import Row\n",
        "planner/agent/gateway.py": "from tracker.errors import BalletError\n",
        "planner/agent/compaction.py": "from planner.agent import prompt\n",
        "planner/agent/prompt.py": "",
        "planner/agent/messages.py": (
            "import json\nfrom typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    import django\n"
        ),
        "planner/services/__init__.py": "",
        "planner/services/previews.py": "from django.db import models\nfrom planner.services import notes\n",
        "planner/services/notes.py": "from planner.live import runner\nfrom planner.live import turns\n",
        "planner/live/__init__.py": "",
        "planner/live/runner.py": "",
        "planner/live/turns.py": "",
        "tracker/__init__.py": "import channels.layers\n",
        "tracker/errors.py": "",
        "tracker/admin.py": "from tracker import errors\nfrom knowledge.selectors import visible\n",
        "knowledge/__init__.py": "",
        "knowledge/selectors.py": "import planner.models\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)

    imports = read_imports(tmp_path, ("planner", "tracker", "knowledge"))

    assert agent_core_departures(imports) == [
        "planner.agent.compaction -> planner.agent.prompt",
        "planner.agent.frames -> planner.services.previews",
    ]
    assert agent_core_frameworks(imports) == [
        "planner.agent.frames -> planner.services.previews -> django.db",
        "planner.agent.gateway -> tracker.errors -> tracker -> channels.layers",
    ]
    assert layer_breaches(imports) == [
        "tracker.admin -> knowledge.selectors",
        "knowledge.selectors -> planner.models",
        "planner.services.notes -> planner.live.runner",
    ]

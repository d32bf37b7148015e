"""The first-party packages import one another without a cycle, and only in the directions of
``docs/architecture.md``.

A cycle is what local (function-level) imports were hiding: the graph counts
every import, at module level or inside a function, and leaves out only those
under ``if TYPE_CHECKING:``, which never run. It is read from the source with
``ast``, so it sees imports that a test run never executes.

The directions (:data:`APPS`, planner's :data:`FLOORS`, the agent's core): a
rule is broken by a path of runtime imports, however long, and importing a
module runs its packages' ``__init__`` too. A broken rule prints its shortest
path. Beside them, the rules a line of code can break and a test can read:
only ``broadcast`` talks to the channel layer, the domain has no ``async def``,
the mode is read only where the runtime is assembled.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
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

# The apps, bottom up: each imports only those below it (docs/architecture.md, "One process, four apps");
# the rest of ballet/ assembles them, on top.
APPS = (
    (
        "ballet.env",
        "ballet.config_errors",
        "ballet.metrics",
        "ballet.markdown",
    ),  # configuration, /metrics, Markdown
    ("tracker",),
    ("knowledge",),
    ("planner",),
)

# planner's floors, bottom up (docs/architecture.md, "The planner's floors"): a module imports only
# modules of its own floor or of floors below it. What may this line import? Its path says.
FLOORS = (
    ("planner.agent",),  # the agent: the loop, the gateway, messages; no Django, nothing of planner
    ("planner.models",),
    ("planner.ground",),  # what the domain may know of this process: process, turns, histories, bridge
    ("planner.domain",),  # services, selectors, briefs, refs, the prompt, the tools
    ("planner.live",),  # the per-process runtime: hub, runner, relay, waits
    ("planner.web",),  # REST, the consumer, pages
    ("planner.mcp_server",),
    # Django's discovery points: what the framework finds by name, on top of everything.
    ("planner.admin", "planner.apps", "planner.tasks", "planner.management", "planner.templatetags"),
)
# planner's root holds nothing but its floors and Django's discovery points.
PLANNER_ROOT = {"planner", "planner.models", "planner.admin", "planner.apps", "planner.tasks"}
PLANNER_FOLDERS = {
    "agent",
    "ground",
    "domain",
    "live",
    "web",
    "mcp_server",
    "management",
    "templatetags",
    "migrations",
}
# Modules outside planner the agent may import: Django-free, which the framework rule holds.
AGENT_MAY_IMPORT = ("tracker.errors",)
FRAMEWORKS = ("django", "channels", "rest_framework")

# The one module that talks to the channel layer, and the code that reads the mode to assemble
# the runtime (the rest reads what the settings derive from it: ONE_PROCESS, BRIDGE_THREADS).
CHANNEL_LAYER = ("planner.live.broadcast",)
MODE_READERS = ("ballet.settings", "ballet.lifespan", "ballet.checks", "ballet.views", "planner.live.relay")
# The domain is synchronous, one transaction per call: the runtime awaits it on the bridge.
SYNCHRONOUS = (
    "planner.domain",
    "tracker.services",
    "tracker.selectors",
    "knowledge.services",
    "knowledge.selectors",
)
# The tracker's interfaces, imported by nothing of the tracker below them.
TRACKER_TOP = ("tracker.web", "tracker.admin", "tracker.management", "tracker.apps")


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


def _modules(imports: Imports, prefixes: Iterable[str]) -> list[str]:
    return [module for module in imports.graph if _within(module, prefixes)]


def downward_breaches(imports: Imports, floors: tuple[tuple[str, ...], ...]) -> list[str]:
    """Paths along which a module of a floor reaches a module of a floor above it."""
    found = []
    for level, floor in enumerate(floors):
        above = [prefix for higher in floors[level + 1 :] for prefix in higher]
        found += offending_paths(imports, _modules(imports, floor), partial(_within, prefixes=above))
    return found


def agent_departures(imports: Imports) -> list[str]:
    """Paths from the agent to a module of planner outside it, or to a first-party module beyond
    the Django-free :data:`AGENT_MAY_IMPORT` (and the packages that hold them)."""
    allowed = {*AGENT_MAY_IMPORT, "planner"}
    allowed |= {package for module in AGENT_MAY_IMPORT for package in _packages_of(module)}

    def offends(module: str) -> bool:
        return not _within(module, ["planner.agent"]) and module not in allowed

    return offending_paths(imports, _modules(imports, ["planner.agent"]), offends)


def agent_frameworks(imports: Imports) -> list[str]:
    """Paths from the agent to an import of Django, Channels or DRF, wherever its imports lead."""
    sources = _modules(imports, ["planner.agent"])
    return sorted(
        " -> ".join([*path, name])
        for module, path in _shortest_paths(imports, sources, lambda _: True).items()
        for name in imports.external[module]
        if _within(name, FRAMEWORKS)
    )


def unplaced(imports: Imports) -> list[str]:
    """planner's modules on no floor, and what its root holds beyond its floors and Django's
    discovery points."""
    floored = [prefix for floor in FLOORS for prefix in floor] + ["planner.migrations"]
    stray = [m for m in _modules(imports, ["planner"]) if m != "planner" and not _within(m, floored)]
    root = {m for m in imports.graph if m.count(".") == 1 and m.startswith("planner.")}
    root -= {f"planner.{folder}" for folder in PLANNER_FOLDERS}
    return sorted({*stray, *(root - PLANNER_ROOT)})


def external_users(imports: Imports, external: tuple[str, ...], allowed: tuple[str, ...]) -> list[str]:
    """Modules outside ``allowed`` that import a module of ``external`` themselves."""
    return sorted(
        f"{module} imports {name}"
        for module, names in imports.external.items()
        for name in names
        if _within(name, external) and not _within(module, allowed)
    )


def _files(root: Path, packages: Iterable[str]) -> dict[str, ast.Module]:
    return {
        _module_name(root, path): ast.parse(path.read_text(), filename=str(path))
        for package in packages
        for path in (root / package).rglob("*.py")
    }


def attribute_readers(root: Path, attribute: str, allowed: tuple[str, ...]) -> list[str]:
    """Modules outside ``allowed`` that read ``<something>.<attribute>`` (``settings.PRODUCTION_MODE``)."""
    return sorted(
        f"{module}:{node.lineno}"
        for module, tree in _files(root, PACKAGES).items()
        if not _within(module, allowed)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr == attribute
    )


def coroutines_in(root: Path, prefixes: tuple[str, ...]) -> list[str]:
    """Every ``async def`` in a module of ``prefixes``."""
    return sorted(
        f"{module}:{node.lineno} {node.name}"
        for module, tree in _files(root, {prefix.split(".")[0] for prefix in prefixes}).items()
        if _within(module, prefixes)
        for node in ast.walk(tree)
        if isinstance(node, ast.AsyncFunctionDef)
    )


def folder_cycles(graph: Graph) -> list[list[str]]:
    """Cycles between folders: each module stands for its package (a package's ``__init__`` and an
    app's root modules for themselves, as the halls they are)."""

    def folder(module: str) -> str:
        parts = module.split(".")
        return ".".join(parts[:2]) if len(parts) > 2 else module

    folders: Graph = {}
    for module, targets in graph.items():
        folders.setdefault(folder(module), set()).update(folder(t) for t in targets)
    for name, targets in folders.items():
        targets.discard(name)
    for targets in list(folders.values()):
        for target in targets:
            folders.setdefault(target, set())
    return import_cycles(folders)


def _broken(rule: str, paths: list[str]) -> str:
    return f"{rule}:\n" + "\n".join(f"  {path}" for path in paths)


def test_the_agent_imports_nothing_of_planner_beyond_itself():
    departures = agent_departures(read_imports(ROOT, PACKAGES))
    assert departures == [], _broken("the agent imports beyond planner.agent", departures)


def test_the_agent_runs_without_django():
    frameworks = agent_frameworks(read_imports(ROOT, PACKAGES))
    assert frameworks == [], _broken("the agent imports a web framework", frameworks)


def test_apps_import_only_the_apps_below_them():
    breaches = downward_breaches(read_imports(ROOT, PACKAGES), APPS)
    assert breaches == [], _broken("an app imports one above it", breaches)


def test_planners_floors_import_only_the_floors_below_them():
    breaches = downward_breaches(read_imports(ROOT, PACKAGES), FLOORS)
    assert breaches == [], _broken("a floor imports one above it", breaches)


def test_every_planner_module_stands_on_a_floor():
    assert unplaced(read_imports(ROOT, PACKAGES)) == []


def test_nothing_of_the_tracker_below_its_interfaces_imports_them():
    imports = read_imports(ROOT, PACKAGES)
    below = [m for m in _modules(imports, ["tracker"]) if not _within(m, TRACKER_TOP)]
    breaches = offending_paths(imports, below, partial(_within, prefixes=TRACKER_TOP))
    assert breaches == [], _broken("the tracker imports its interfaces from below", breaches)


def test_folders_import_one_another_without_a_cycle():
    cycles = folder_cycles(read_imports(ROOT, PACKAGES).graph)
    assert cycles == [], "folder cycles:\n" + "\n".join(" -> ".join(cycle) for cycle in cycles)


def test_only_broadcast_talks_to_the_channel_layer():
    users = external_users(read_imports(ROOT, PACKAGES), ("channels.layers",), CHANNEL_LAYER)
    assert users == [], _broken("the channel layer reached beside planner/live/broadcast.py", users)


def test_the_domain_is_synchronous():
    coroutines = coroutines_in(ROOT, SYNCHRONOUS)
    assert coroutines == [], _broken("async def in the domain", coroutines)


def test_the_mode_is_read_only_where_the_runtime_is_assembled():
    readers = attribute_readers(ROOT, "PRODUCTION_MODE", MODE_READERS)
    assert readers == [], _broken("PRODUCTION_MODE read beside the runtime's assembly", readers)


def test_every_rule_can_be_broken(tmp_path):
    """Each rule fails on a fake package that breaks it, through a function-level or indirect
    import, and prints the path; a typing-only import breaks nothing."""
    files = {
        "planner/__init__.py": "",
        "planner/models.py": "",
        "planner/stray.py": "",
        "planner/agent/__init__.py": "",
        "planner/agent/loop.py": "from planner.agent import frames, messages\n",
        "planner/agent/frames.py": "def f():\n    from planner.domain.previews import Row\n",
        "planner/agent/gateway.py": "from tracker.errors import BalletError\n",
        "planner/agent/compaction.py": "from planner.ground import turns\n",
        "planner/agent/messages.py": (
            "import json\nfrom typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    import django\n"
        ),
        "planner/ground/__init__.py": "",
        "planner/ground/turns.py": "",
        "planner/domain/__init__.py": "",
        "planner/domain/previews.py": "from django.db import models\nfrom planner.domain import notes\n",
        "planner/domain/notes.py": "from planner.live import runner\nfrom planner.ground import turns\n",
        "planner/domain/waits.py": "async def wait():\n    pass\n",
        "planner/live/__init__.py": "",
        "planner/live/runner.py": "import channels.layers\n",
        "planner/live/broadcast.py": "from channels.layers import get_channel_layer\n",
        "planner/live/relay.py": "from django.conf import settings\nMODE = settings.PRODUCTION_MODE\n",
        "planner/live/turn.py": "from django.conf import settings\nMODE = settings.PRODUCTION_MODE\n",
        "planner/web/__init__.py": "",
        "planner/web/apis.py": "from planner.live import runner\n",
        "tracker/__init__.py": "import channels.layers\n",
        "tracker/errors.py": "",
        "tracker/services/__init__.py": "",
        "tracker/services/items.py": "from tracker.web.pages import item_page\n",
        "tracker/web/__init__.py": "",
        "tracker/web/pages.py": "from tracker.services.items import item_create\n",
        "tracker/admin.py": "from tracker import errors\nfrom knowledge.selectors import visible\n",
        "knowledge/__init__.py": "",
        "knowledge/selectors.py": "import planner.models\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)

    imports = read_imports(tmp_path, ("planner", "tracker", "knowledge"))

    assert agent_departures(imports) == [
        "planner.agent.compaction -> planner.ground.turns",
        "planner.agent.frames -> planner.domain.previews",
    ]
    assert agent_frameworks(imports) == [
        "planner.agent.frames -> planner.domain.previews -> django.db",
        "planner.agent.frames -> planner.domain.previews -> planner.domain.notes -> planner.live.runner"
        " -> channels.layers",
        "planner.agent.gateway -> tracker.errors -> tracker -> channels.layers",
    ]
    assert downward_breaches(imports, APPS) == [
        "tracker.admin -> knowledge.selectors",
        "knowledge.selectors -> planner.models",
    ]
    assert downward_breaches(imports, FLOORS) == [
        "planner.agent.compaction -> planner.ground.turns",
        "planner.agent.frames -> planner.domain.previews",
        "planner.domain.notes -> planner.live.runner",
    ]
    assert unplaced(imports) == ["planner.stray"]
    below = [m for m in _modules(imports, ["tracker"]) if not _within(m, TRACKER_TOP)]
    assert offending_paths(imports, below, partial(_within, prefixes=TRACKER_TOP)) == [
        "tracker.services.items -> tracker.web.pages"
    ]
    assert folder_cycles(imports.graph) == [["tracker.services", "tracker.web", "tracker.services"]]
    assert external_users(imports, ("channels.layers",), CHANNEL_LAYER) == [
        "planner.live.runner imports channels.layers",
        "tracker imports channels.layers",
    ]
    assert coroutines_in(tmp_path, SYNCHRONOUS) == ["planner.domain.waits:1 wait"]
    assert attribute_readers(tmp_path, "PRODUCTION_MODE", MODE_READERS) == ["planner.live.turn:2"]


def test_the_anthropic_sdk_loads_only_for_a_call_to_anthropic():
    """The runtime, the interfaces and the domain run without loading the SDK (seconds of every
    test's start); the first call to Anthropic loads it, and a server loads it at its start."""
    script = (
        "import sys, django\n"
        "django.setup()\n"
        "import planner.live.runner, planner.web.urls, planner.web.consumers\n"
        "import planner.mcp_server.app, planner.tasks\n"
        "assert 'anthropic' not in sys.modules, 'the SDK loaded'\n"
        "import ballet.asgi\n"
        "assert 'anthropic' in sys.modules, 'a server did not load the SDK'\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "ballet.settings.test"}
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]

"""Where the dependency graph's boxes go: a layered, left-to-right layout (pure, no ORM).

A ticket sits one layer right of its furthest blocker (layers by longest path from the
tickets nothing blocks); a few barycenter sweeps order each layer to cross fewer edges; an
edge spanning several layers runs through placeholder slots so it passes between boxes, not
through them. Tickets with no dependency at all go in a compact grid under the rest, so a
plan of mostly independent tickets does not become one tall column.

The domain forbids cycles, but the layout never trusts that: the edges a depth-first search
finds going back are laid out reversed (and drawn as they are), so every loop here ends.
Everything is ordered by the input's order, so the same graph always gives the same picture.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

BOX_WIDTH = 200
BOX_HEIGHT = 60
GAP_X = 64  # between layers: room for the arrows
GAP_Y = 18
SLOT = 16  # the height a long edge takes where it passes a layer
MARGIN = 16
TOP = 40  # above the boxes: the caption
SECTION_GAP = 44  # between the connected part and the grid: room for the grid's heading
GRID_COLUMNS = 8  # the grid of isolated tickets is at most this wide, unless the layers are wider
SWEEPS = 4
MAX_SLOTS = 4000  # placeholder slots of long edges; past it an edge is drawn straight

Point = tuple[float, float]


@dataclass(frozen=True)
class Box:
    """A ticket's box: its top-left corner and its layer (-1 in the grid of isolated tickets)."""

    key: str
    x: float
    y: float
    layer: int


@dataclass(frozen=True)
class Route:
    """One dependency as drawn: from the blocker's box to the blocked one, through ``points``.
    ``back``: it closed a cycle, so it goes right to left."""

    blocker: str
    blocked: str
    points: tuple[Point, ...]
    back: bool = False


@dataclass(frozen=True)
class Layout:
    boxes: dict[str, Box]
    routes: tuple[Route, ...]
    width: float
    height: float
    grid_top: float | None  # where the grid of isolated tickets starts, if there is one


def layout(keys: Sequence[str], edges: Sequence[tuple[str, str]]) -> Layout:
    """The boxes and routes of the tickets ``keys`` (in order) and ``edges`` (blocker, blocked);
    edges naming an unknown ticket or the ticket itself are left out."""
    order = list(dict.fromkeys(keys))
    index = {key: n for n, key in enumerate(order)}
    pairs = [(index[a], index[b]) for a, b in dict.fromkeys(edges) if a in index and b in index and a != b]
    back = _back_edges(len(order), pairs)
    forward = list(dict.fromkeys((b, a) if (a, b) in back else (a, b) for a, b in pairs))
    layer = _layers(sorted({n for pair in forward for n in pair}), forward)
    slots = _slots(layer, forward, first_placeholder=len(order))
    _sweep(slots)
    boxes, lanes, height = _place(order, slots.rows)
    routes = tuple(
        _route(order, pair, back=pair in back, boxes=boxes, lanes=lanes, slots=slots) for pair in pairs
    )
    columns = len(slots.rows)
    width: float = MARGIN * 2 + max(columns * (BOX_WIDTH + GAP_X) - GAP_X, 0)
    isolated = [key for n, key in enumerate(order) if n not in layer]
    grid_top = None
    if isolated:
        grid_top = height + SECTION_GAP if layer else float(TOP)
        width, height = _grid(isolated, boxes, grid_top, columns, width)
    return Layout(boxes=boxes, routes=routes, width=width, height=height + MARGIN, grid_top=grid_top)


def _back_edges(count: int, pairs: list[tuple[int, int]]) -> set[tuple[int, int]]:
    """The edges an iterative depth-first search (in input order) finds closing a cycle."""
    successors: list[list[int]] = [[] for _ in range(count)]
    for a, b in pairs:
        successors[a].append(b)
    state = [0] * count  # 0 unseen, 1 on the stack, 2 done
    back: set[tuple[int, int]] = set()
    for root in range(count):
        if state[root]:
            continue
        state[root] = 1
        stack = [(root, 0)]
        while stack:
            node, next_child = stack[-1]
            if next_child == len(successors[node]):
                state[node] = 2
                stack.pop()
                continue
            stack[-1] = (node, next_child + 1)
            child = successors[node][next_child]
            if state[child] == 1:
                back.add((node, child))
            elif state[child] == 0:
                state[child] = 1
                stack.append((child, 0))
    return back


def _layers(connected: list[int], forward: list[tuple[int, int]]) -> dict[int, int]:
    """Each node's layer: one right of its furthest predecessor (Kahn's order; acyclic input)."""
    successors: dict[int, list[int]] = {n: [] for n in connected}
    waiting = dict.fromkeys(connected, 0)
    for a, b in forward:
        successors[a].append(b)
        waiting[b] += 1
    layer = dict.fromkeys(connected, 0)
    ready = [n for n in connected if not waiting[n]]
    for node in ready:  # grows while it is read: each node is appended once
        for child in successors[node]:
            layer[child] = max(layer[child], layer[node] + 1)
            waiting[child] -= 1
            if not waiting[child]:
                ready.append(child)
    return layer


@dataclass
class _Slots:
    """The ordering's view of the graph: real nodes and placeholders of long edges, by layer."""

    rows: list[list[int]]  # per layer, the node ids in order (placeholders are ids past the nodes)
    up: dict[int, list[int]]  # neighbours one layer left
    down: dict[int, list[int]]  # neighbours one layer right
    chains: dict[tuple[int, int], list[int]]  # a long edge's placeholders, left to right


def _sweep(slots: _Slots) -> None:
    """Order the rows by a few barycenter sweeps, down then up, ties kept in their order."""
    rows = slots.rows
    for sweep in range(SWEEPS):
        downward = sweep % 2 == 0
        sequence = range(1, len(rows)) if downward else range(len(rows) - 2, -1, -1)
        for n in sequence:
            neighbours = slots.up if downward else slots.down
            reference = rows[n - 1] if downward else rows[n + 1]
            rows[n] = _sorted_by_barycenter(rows[n], neighbours, reference)


def _sorted_by_barycenter(
    row: list[int], neighbours: dict[int, list[int]], reference: list[int]
) -> list[int]:
    """``row`` by the mean position of each node's neighbours in ``reference`` (the adjacent
    layer, where every one of them is: segments join adjacent layers); a node without
    neighbours there keeps its place."""
    position = {node: n for n, node in enumerate(reference)}
    keyed = []
    for n, node in enumerate(row):
        near = neighbours.get(node)
        centre = sum(position[other] for other in near) / len(near) if near else float(n)
        keyed.append((centre, n, node))
    keyed.sort()
    return [node for _, _, node in keyed]


def _slots(layer: dict[int, int], forward: list[tuple[int, int]], *, first_placeholder: int) -> _Slots:
    connected = sorted(layer)
    depth = max(layer.values(), default=-1) + 1
    rows: list[list[int]] = [[] for _ in range(depth)]
    for node in connected:
        rows[layer[node]].append(node)
    up: dict[int, list[int]] = {}
    down: dict[int, list[int]] = {}
    chains: dict[tuple[int, int], list[int]] = {}
    next_id = first_placeholder
    budget = MAX_SLOTS
    # Shorter edges first: if the budget runs out, the longest edges are the ones drawn straight.
    for a, b in sorted(forward, key=lambda pair: (layer[pair[1]] - layer[pair[0]], pair)):
        span = layer[b] - layer[a]
        if span > 1 and span - 1 > budget:
            continue
        path = [a]
        for step in range(1, span):
            rows[layer[a] + step].append(next_id)
            path.append(next_id)
            next_id += 1
        budget -= span - 1
        path.append(b)
        chains[(a, b)] = path[1:-1]
        for left, right in itertools.pairwise(path):
            down.setdefault(left, []).append(right)
            up.setdefault(right, []).append(left)
    return _Slots(rows=rows, up=up, down=down, chains=chains)


def _place(order: list[str], rows: list[list[int]]) -> tuple[dict[str, Box], dict[int, Point], float]:
    """The boxes, and the left end of each placeholder's lane, each layer centred on the
    tallest; and the bottom of the tallest."""

    def height(row: list[int]) -> float:
        return sum(BOX_HEIGHT + GAP_Y if node < len(order) else SLOT for node in row)

    tallest = max((height(row) for row in rows), default=0.0)
    boxes: dict[str, Box] = {}
    lanes: dict[int, Point] = {}
    for n, row in enumerate(rows):
        x = MARGIN + n * (BOX_WIDTH + GAP_X)
        y = TOP + (tallest - height(row)) / 2
        for node in row:
            if node < len(order):
                boxes[order[node]] = Box(key=order[node], x=x, y=y, layer=n)
                y += BOX_HEIGHT + GAP_Y
            else:
                lanes[node] = (x, y + SLOT / 2)
                y += SLOT
    return boxes, lanes, TOP + max(tallest - GAP_Y, 0.0)


def _grid(
    isolated: list[str], boxes: dict[str, Box], top: float, columns: int, width: float
) -> tuple[float, float]:
    """Isolated tickets row by row under ``top``; the picture's new width and bottom."""
    count = len(isolated)
    across = max(columns, min(GRID_COLUMNS, math.ceil(math.sqrt(count))))
    across = min(across, count)
    for n, key in enumerate(isolated):
        row, column = divmod(n, across)
        boxes[key] = Box(
            key=key,
            x=MARGIN + column * (BOX_WIDTH + GAP_X),
            y=top + row * (BOX_HEIGHT + GAP_Y),
            layer=-1,
        )
    rows = math.ceil(count / across)
    grid_width = MARGIN * 2 + across * (BOX_WIDTH + GAP_X) - GAP_X
    return max(width, grid_width), top + rows * (BOX_HEIGHT + GAP_Y) - GAP_Y


def _route(
    order: list[str],
    pair: tuple[int, int],
    *,
    back: bool,
    boxes: dict[str, Box],
    lanes: dict[int, Point],
    slots: _Slots,
) -> Route:
    """From the right side of the left box, along its lanes, to the left side of the right box."""
    left, right = (pair[1], pair[0]) if back else pair
    start, end = boxes[order[left]], boxes[order[right]]
    points: list[Point] = [(start.x + BOX_WIDTH, start.y + BOX_HEIGHT / 2)]
    for placeholder in slots.chains.get((left, right), ()):
        x, y = lanes[placeholder]
        points += [(x, y), (x + BOX_WIDTH, y)]
    points.append((end.x, end.y + BOX_HEIGHT / 2))
    if back:
        points.reverse()
    return Route(blocker=order[pair[0]], blocked=order[pair[1]], points=tuple(points), back=back)

"""``/metrics``: the counters of every process of the host in one scrape (docs/operations.md).

Production runs several daphne processes and Celery workers. With ``BALLET_METRICS_DIR``
set, prometheus_client's multiprocess mode (turned on by the settings,
``ballet.env.share_metrics``) keeps each process's counters and histograms in
memory-mapped files of that directory, one set per process id: an increment is a write
to memory, and the counts of a process killed with SIGKILL are still there. A scrape
adds the files up (:class:`HostCollector`). The directory is one host's: each host is
scraped apart, and Prometheus adds the hosts up (``docs/operations.md``, *Metrics*).

A dead process's files stay: without its counts every counter would seem to reset. So
that they do not pile up, each process folds those of processes that are gone into one
archive per metric type when it starts (:func:`fold_dead`). The file names say how far a
fold got, so that a scrape during a fold, or after a fold that crashed half-way, adds
every count once:

- ``counter_<pid>.db``: a process's own file (prometheus_client's name);
- ``counter_<pid>.db.fold-<n>``: a dead process's file on its way into archive ``n``,
  counted while no archive ``n`` or later exists;
- ``counter_archive-<n>.db``: the archive; only the latest counts.

A fold holds the directory's lock exclusively and a scrape holds it shared. Gauges
describe live processes: a dead process's gauge files are deleted. Without the directory
(the embedded mode's one process) ``/metrics`` shows the process's own registry.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.mmap_dict import MmapedDict, mmap_key
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.registry import Collector

KEPT = "counter|histogram|summary"  # the types whose counts outlive their process
OWN = re.compile(rf"(?P<kind>{KEPT})_(?P<pid>\d+)\.db")
FOLDING = re.compile(rf"(?P<kind>{KEPT})_(?P<pid>\d+)\.db\.fold-(?P<n>\d+)")
ARCHIVE = re.compile(rf"(?P<kind>{KEPT})_archive-(?P<n>\d+)\.db")
GAUGE = re.compile(r"gauge_[a-z]+_(?P<pid>\d+)\.db")
LOCK = ".lock"


@dataclass
class Listing:
    """The files of a metrics directory, sorted by what they are."""

    own: dict[str, list[tuple[Path, int]]] = field(default_factory=lambda: defaultdict(list))  # pid
    folding: dict[str, list[tuple[Path, int]]] = field(default_factory=lambda: defaultdict(list))  # n
    archives: dict[str, list[tuple[Path, int]]] = field(default_factory=lambda: defaultdict(list))  # n
    gauges: list[tuple[Path, int]] = field(default_factory=list)  # pid

    def archive(self, kind: str) -> tuple[Path | None, int]:
        """The latest archive of ``kind`` and its number (0 without one)."""
        return max(self.archives[kind], key=lambda entry: entry[1], default=(None, 0))

    def counted(self) -> list[Path]:
        """The files a scrape adds up: each count in exactly one of them."""
        files = [path for entries in self.own.values() for path, _ in entries]
        files += [path for path, _ in self.gauges]
        for kind in {*self.archives, *self.folding}:
            archive, latest = self.archive(kind)
            files += [archive] if archive else []
            files += [path for path, n in self.folding[kind] if n > latest]
        return files


def list_directory(directory: Path) -> Listing:
    listing = Listing()
    for path in directory.iterdir():
        if match := OWN.fullmatch(path.name):
            listing.own[match["kind"]].append((path, int(match["pid"])))
        elif match := FOLDING.fullmatch(path.name):
            listing.folding[match["kind"]].append((path, int(match["n"])))
        elif match := ARCHIVE.fullmatch(path.name):
            listing.archives[match["kind"]].append((path, int(match["n"])))
        elif match := GAUGE.fullmatch(path.name):
            listing.gauges.append((path, int(match["pid"])))
    return listing


@contextmanager
def _locked(directory: Path, operation: int) -> Iterator[None]:
    with (directory / LOCK).open("a") as handle:
        fcntl.flock(handle, operation)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class HostCollector:
    """Collects what every process of the host counted, from the files of ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def collect(self) -> Iterable[Metric]:
        with _locked(self.directory, fcntl.LOCK_SH):
            files = list_directory(self.directory).counted()
            return list(MultiProcessCollector.merge([str(path) for path in files], accumulate=True))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a process of another user
        return True
    return True


def fold_dead(directory: Path) -> None:
    """Fold the files of processes that are gone into the archives, delete their gauges."""
    with _locked(directory, fcntl.LOCK_EX):
        listing = list_directory(directory)
        for kind in sorted({*listing.own, *listing.folding, *listing.archives}):
            _fold(directory, kind, listing)
        for path, pid in listing.gauges:
            if not _alive(pid):
                path.unlink(missing_ok=True)


def _fold(directory: Path, kind: str, listing: Listing) -> None:
    archive, latest = listing.archive(kind)
    pending = _tidy(kind, listing, latest) + [path for path, pid in listing.own[kind] if not _alive(pid)]
    if not pending:
        return
    target = max([latest, *(n for _, n in listing.folding[kind])]) + 1
    folding = []
    for path in pending:  # each rename leaves its counts counted once: by the .fold-n rule
        renamed = directory / f"{path.name.split('.db', 1)[0]}.db.fold-{target}"
        path.rename(renamed)
        folding.append(renamed)
    merged = [*([archive] if archive else []), *folding]
    # Histograms unaccumulated: bucket by bucket, as a process stores them.
    draft = directory / f"{kind}_archive.draft"
    _write(draft, MultiProcessCollector.merge([str(path) for path in merged], accumulate=False))
    draft.replace(directory / f"{kind}_archive-{target}.db")  # from here the archive holds them all
    for path in merged:
        path.unlink()


def _tidy(kind: str, listing: Listing, latest: int) -> list[Path]:
    """Delete what a fold cut short left counted elsewhere; the files it had yet to fold."""
    for path, n in listing.archives[kind]:
        if n < latest:  # a later archive holds its counts
            path.unlink()
    unfolded = []
    for path, n in listing.folding[kind]:
        if n <= latest:  # in the archive already
            path.unlink()
        else:
            unfolded.append(path)
    return unfolded


def _write(path: Path, metrics: Iterable[Metric]) -> None:
    """Store ``metrics`` in a file the way prometheus_client stores a process's values."""
    path.unlink(missing_ok=True)
    store = MmapedDict(str(path))
    try:
        for metric in metrics:
            for sample in metric.samples:
                labels = sample.labels
                key = mmap_key(
                    metric.name, sample.name, list(labels), list(labels.values()), metric.documentation
                )
                store.write_value(key, sample.value, 0.0)
    finally:
        store.close()


_registries: dict[Path, CollectorRegistry] = {}


def registry() -> CollectorRegistry:
    """What ``/metrics`` shows: the host's processes, or this process alone."""
    directory: Path | None = settings.METRICS_DIR
    if directory is None:
        return REGISTRY
    if directory not in _registries:
        host = CollectorRegistry()
        host.register(HostCollector(directory))
        _registries[directory] = host
    return _registries[directory]


# What the database holds, read at each scrape: the apps register their collectors when they are
# ready (planner/apps.py), so that ballet/, which every app imports for its settings, imports none.
_STATE = CollectorRegistry(auto_describe=False)
_state_kinds: set[type[Collector]] = set()


def state_collector_register(collector: Collector) -> None:
    """Add ``collector`` to every scrape of ``/metrics``; one of each class (a second ``ready()``
    changes nothing)."""
    if type(collector) not in _state_kinds:
        _STATE.register(collector)
        _state_kinds.add(type(collector))


def metrics_view(_request: HttpRequest) -> HttpResponse:
    """``/metrics`` in Prometheus's text format: the processes' counts, then what the database
    holds (agents' questions)."""
    body = generate_latest(registry()) + generate_latest(_STATE)
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)


_exit_hook = False


def process_started() -> None:
    """At the start of a process (and of each Celery pool process): fold the files of the
    processes that are gone; at its exit, drop its gauges that count only while it lives."""
    global _exit_hook  # noqa: PLW0603 - one hook per process, inherited by forked children
    directory: Path | None = settings.METRICS_DIR
    if directory is None:
        return
    fold_dead(directory)
    if not _exit_hook:
        # os.getpid() at exit: a forked child that exits normally runs the hook for itself.
        atexit.register(lambda: mark_process_dead(os.getpid(), str(directory)))
        _exit_hook = True

"""Hybrid search: relevance, latency and indexing throughput (docs/search.md, docs/benchmarks.md).

0. The model: the memory it adds to the process (RSS before it loads, and
   after loading and embedding), the threads it starts, and the p50 of a
   short query's embedding.
1. Relevance: the project's relevance set, on which the engine was tuned
   (tests/search/relevance.py: 521 items, skills and knowledge entries, 84
   graded queries), and the held-out set, which it must never be tuned on
   (tests/search/relevance_heldout.py: an online bookshop, 385 documents, 76
   queries, hard negatives); each indexed with the local model into an
   organization of its own. nDCG@10 and recall@10 of lexical only, semantic
   only and hybrid, overall and per query family; and the unrelated share:
   of the first five hits the search calls matches (not shown apart as
   related), those the set grades not at all for the query.
2. Latency: a project of 10,000 items; p50 and p99 of a project search (items
   and skills, hybrid, the query's embedding computed each time), and of each
   ranking alone, and the database queries per search.
3. Indexing throughput: documents per second through the indexer (embedding
   and writing), for the relevance set and for the 10,000 items.

    .venv/bin/python bench/search.py                 # SQLite (embedded mode)
    .venv/bin/python bench/search.py --skip-latency --set heldout   # relevance on the held-out set only
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ballet REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/search.py             # PostgreSQL (--database NAME: not ballet_bench_search)

Vectors of the 10,000 generated items are kept in a file under the temporary
directory keyed by their text, so a second run (the other database) does not
embed them again; the throughput figures only count documents embedded anew.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import math
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from _setup import _analyze, setup_django

VECTOR_CACHE = Path(tempfile.gettempdir()) / "ballet-search-bench-vectors.npz"
K = 10
MATCHES = 5  # the unrelated share looks at the first five matches, what a page shows first
# The relevance sets: the module of each, and the organization it is indexed into.
RELEVANCE_SETS = {
    "tuned": ("tests.search.relevance", "relevance-bench"),
    "heldout": ("tests.search.relevance_heldout", "relevance-heldout-bench"),
}
FAMILIES = ["all", "keyword", "paraphrase", "identifier", "natural"]
SHORT_QUERIES = ["login fails", "dark mode", "export invoices", "flaky build"]


class CachingBackend:
    """The real backend, with vectors of texts it has seen kept on disk; counts what it embeds anew."""

    def __init__(self, inner) -> None:  # type: ignore[no-untyped-def]
        self.inner = inner
        self.name, self.dimensions = inner.name, inner.dimensions
        self.vectors: dict[str, np.ndarray] = {}
        if VECTOR_CACHE.exists():
            with np.load(VECTOR_CACHE) as data:
                self.vectors = {key: data[key] for key in data.files}
        self.embedded = 0
        self.seconds = 0.0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        keys = [hashlib.sha1(t.encode()).hexdigest() for t in texts]
        missing = [i for i, key in enumerate(keys) if key not in self.vectors]
        if missing:
            started = time.perf_counter()
            fresh = self.inner.embed([texts[i] for i in missing])
            self.seconds += time.perf_counter() - started
            self.embedded += len(missing)
            for i, vector in zip(missing, fresh, strict=True):
                self.vectors[keys[i]] = vector
        return np.vstack([self.vectors[key] for key in keys]) if keys else np.zeros((0, self.dimensions))

    def save(self) -> None:
        np.savez(VECTOR_CACHE, **self.vectors)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def fresh_organization(slug: str, key: str):  # type: ignore[no-untyped-def]
    from django.contrib.auth.models import User

    from tracker.models import Organization, Project

    Project.objects.filter(key=key).delete()
    Organization.objects.filter(slug=slug).delete()
    organization = Organization.objects.create(slug=slug, name=slug.title())
    project = Project.objects.create(organization=organization, key=key, name=key.title())
    user, _ = User.objects.get_or_create(username="search-bench")
    return organization, project, user


def load_relevance_set(project, user, relevance) -> dict[tuple[str, str], str]:  # type: ignore[no-untyped-def]
    """Write the corpus of the set ``relevance`` (a module) with bulk inserts (the indexer runs
    after); the ref of each (kind, key)."""
    from knowledge.models import KnowledgeEntry
    from tracker.models import Item, Skill, SkillVersion

    docs = relevance.corpus()
    items = [d for d in docs if d.kind == "item"]
    Item.objects.bulk_create(
        Item(
            project=project,
            kind=d.subkind,
            number=n,
            title=d.title,
            description=d.body,
            state=d.state or "draft",
        )
        for n, d in enumerate(items, start=1)
    )
    refs = {("item", key): ref for ref, key in relevance.item_keys().items()}
    for d in (d for d in docs if d.kind == "skill"):
        skill = Skill.objects.create(organization_id=project.organization_id, project=project, name=d.ref)
        SkillVersion.objects.create(skill=skill, version=1, body=d.body, author=user)
        refs["skill", d.ref] = d.ref
    for d in (d for d in docs if d.kind == "knowledge"):
        entry = KnowledgeEntry.objects.create(
            organization_id=project.organization_id,
            kind=d.subkind,
            title=d.title,
            body=d.body,
            author=user,
            last_editor=user,
        )
        entry.projects.add(project)
        refs["knowledge", str(entry.pk)] = d.ref
    return refs


def index_organization(organization_id: int, batch: int = 64) -> tuple[int, float]:
    from tracker.search.indexing import search_index_refresh, search_sources

    started = time.perf_counter()
    count = 0
    for kind, source in sorted(search_sources().items()):
        ids = source.ids_of_organization(organization_id)
        for start in range(0, len(ids), batch):
            count += search_index_refresh(kind=kind, ids=ids[start : start + batch])
    return count, time.perf_counter() - started


def ndcg(ranked: list[str], grades: dict[str, int]) -> float:
    dcg = sum((2 ** grades.get(ref, 0) - 1) / math.log2(i + 2) for i, ref in enumerate(ranked[:K]))
    ideal = sorted(grades.values(), reverse=True)[:K]
    idcg = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg


def recall(ranked: list[str], grades: dict[str, int]) -> float:
    relevant = {ref for ref, grade in grades.items() if grade > 0}
    return len(relevant & set(ranked[:K])) / len(relevant)


@dataclass
class Unrelated:
    """One query's first matches as a judge would see them."""

    matches: int  # how many of the first MATCHES hits are matches (the rest were shown apart)
    unrelated: int  # of those, how many the set does not grade for the query
    hard: int  # of those, how many are the query's hard negatives
    related: int  # hits the search showed apart as related, in all it returned
    related_graded: int  # of those, how many the set grades


def unrelated(hits, ranked: list[str], grades: dict[str, int], negatives: frozenset[str]) -> Unrelated:  # type: ignore[no-untyped-def]
    """What the first MATCHES matches hold; a hit counts as a match unless the search marks it
    ``related`` (a field SearchHit may not have: then every hit is a match)."""
    shown = [(getattr(hit, "related", False), ref) for hit, ref in zip(hits, ranked, strict=True)]
    matches = [ref for related, ref in shown if not related][:MATCHES]
    apart = [ref for related, ref in shown if related]
    return Unrelated(
        matches=len(matches),
        unrelated=sum(ref not in grades for ref in matches),
        hard=sum(ref in negatives for ref in matches),
        related=len(apart),
        related_graded=sum(ref in grades for ref in apart),
    )


def relevance_figures(mode_name: str, set_name: str) -> None:
    from tracker.search import ITEM, KNOWLEDGE, SKILL, SearchScope, search

    module, slug = RELEVANCE_SETS[set_name]
    relevance = importlib.import_module(module)
    negatives: dict[str, frozenset[str]] = getattr(relevance, "HARD_NEGATIVES", {})
    organization, project, user = fresh_organization(slug, relevance.PROJECT_KEY)
    refs = load_relevance_set(project, user, relevance)
    count, seconds = index_organization(organization.pk)
    _analyze()
    rate = count / seconds
    print(
        f"relevance set {set_name} ({module}) · {mode_name} · {count} documents indexed in {seconds:.1f} s "
        f"({rate:.0f}/s)"
    )
    scope = SearchScope(
        organization_id=organization.pk, kinds=frozenset({ITEM, SKILL, KNOWLEDGE}), project_id=project.pk
    )
    keys = relevance.item_keys()
    scores: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    judged: dict[str, dict[str, list[Unrelated]]] = defaultdict(lambda: defaultdict(list))
    for query in relevance.QUERIES:
        text = relevance.query_text(query, keys)
        for mode in ("lexical", "semantic", "hybrid"):
            hits = search(scope=scope, query=text, limit=K, mode=mode)  # type: ignore[arg-type]
            ranked = [refs.get((hit.kind, hit.key), "?") for hit in hits]
            pair = (ndcg(ranked, query.grades), recall(ranked, query.grades))
            seen = unrelated(hits, ranked, query.grades, negatives.get(query.text, frozenset()))
            for family in ("all", query.family):
                scores[mode][family].append(pair)
                judged[mode][family].append(seen)
    print(
        f"  {'ranking':<9} "
        + " ".join(f"{f + ' (' + str(len(scores['hybrid'][f])) + ')':>22}" for f in FAMILIES)
    )
    for mode in ("lexical", "semantic", "hybrid"):
        cells = []
        for family in FAMILIES:
            pairs = scores[mode][family]
            cell = f"{statistics.mean(p[0] for p in pairs):.3f} / {statistics.mean(p[1] for p in pairs):.3f}"
            cells.append(cell.rjust(22))
        print(f"  {mode:<9} " + " ".join(cells))
    print("  (each cell: nDCG@10 / recall@10, mean over the queries of the family)")
    unrelated_figures(judged, bool(negatives))


def unrelated_figures(judged: dict[str, dict[str, list[Unrelated]]], hard: bool) -> None:
    """The unrelated share per ranking and family, and what was shown apart as related."""
    print(f"  unrelated matches in the first {MATCHES} (ungraded for the query):")
    print(f"  {'ranking':<9} " + " ".join(f"{family:>22}" for family in FAMILIES))
    for mode in ("lexical", "semantic", "hybrid"):
        cells = []
        for family in FAMILIES:
            rows = judged[mode][family]
            with_matches = [r for r in rows if r.matches]
            share = statistics.mean(r.unrelated / r.matches for r in with_matches) if with_matches else 0.0
            some = sum(r.unrelated > 0 for r in rows) / len(rows)
            cells.append(f"{share:.3f} / {some:.2f}".rjust(22))
        print(f"  {mode:<9} " + " ".join(cells))
        rows = judged[mode]["all"]
        empty = sum(not r.matches for r in rows)
        related, graded = sum(r.related for r in rows), sum(r.related_graded for r in rows)
        line = f"    no match: {empty} queries; shown apart as related: {related} hits ({graded} graded)"
        if hard:
            hits, queries = sum(r.hard for r in rows), sum(r.hard > 0 for r in rows)
            line += f"; hard negatives among the matches: {hits} in {queries} queries"
        print(line)
    print(
        "  (each cell: share of the first matches that are unrelated, mean over the queries with a match /"
        " share of queries with at least one)"
    )


def generated_items(project, count: int) -> None:  # type: ignore[no-untyped-def]
    """``count`` items in the relevance set's vocabulary: its hand-written items, then variations."""
    from tests.search import relevance
    from tracker.models import Item

    core = [d for d in relevance.CORE if d.kind == "item"]
    actions, components = relevance._ACTIONS, relevance._COMPONENTS
    sentences = [d.body for d in relevance.CORE]
    rows = [
        Item(project=project, kind="ticket", number=n, title=d.title, description=d.body, state="ready")
        for n, d in enumerate(core, start=1)
    ]
    for n in range(len(core) + 1, count + 1):
        action, detail = actions[n % len(actions)]
        component = components[(n // len(actions)) % len(components)]
        rows.append(
            Item(
                project=project,
                kind="ticket",
                number=n,
                title=f"{action} {component} (part {n // 330 + 1})",
                description=f"{detail} {sentences[(n * 7) % len(sentences)]}",
                state=relevance._STATES[n % 6],
            )
        )
    Item.objects.bulk_create(rows, batch_size=1000)
    project.next_item_number = count + 1
    project.save(update_fields=["next_item_number"])


def latency_figures(mode_name: str, items: int, searches: int, backend: CachingBackend) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tests.search import relevance
    from tracker.search import project_search, search
    from tracker.search.embeddings import embedding_backend_set
    from tracker.search.engine import query_vector
    from tracker.search.store import organization_index_forget
    from tracker.search.types import ITEM, SKILL, SearchScope

    organization, project, _ = fresh_organization("latency-bench", "LOAD")
    generated_items(project, items)
    embedded_before, seconds_before = backend.embedded, backend.seconds
    count, seconds = index_organization(organization.pk, batch=256)
    backend.save()
    _analyze()  # fresh statistics (and GIN pending lists merged), as autovacuum would leave them
    fresh = backend.embedded - embedded_before
    print(f"latency · {mode_name} · {count} items indexed in {seconds:.1f} s", end="")
    if fresh:
        model_seconds = backend.seconds - seconds_before
        print(f"; {fresh} embedded anew: {fresh / seconds:.0f} items/s ({model_seconds:.1f} s in the model)")
    else:
        print(" (vectors from the cache: not a throughput figure)")
    embedding_backend_set(backend.inner)  # the cache is for indexing: every search embeds its query
    keys = {ref: key.replace("DEMO-", "LOAD-") for ref, key in relevance.item_keys().items()}
    texts = [relevance.query_text(q, keys) for q in relevance.QUERIES]
    organization_index_forget()
    started = time.perf_counter()
    project_search(project=project, query="warm up the process's copy of the index")
    cold = time.perf_counter() - started
    print(f"  first search of a process (reads {items} documents into memory): {cold:.2f} s")
    scope = SearchScope(
        organization_id=organization.pk, kinds=frozenset({ITEM, SKILL}), project_id=project.pk
    )
    modes = ("hybrid", "lexical", "semantic")
    timings: dict[str, list[float]] = {mode: [] for mode in modes}
    for i in range(searches):  # the modes take turns, so that they share whatever else the machine does
        for mode in modes:
            query_vector.cache_clear()  # every search embeds its query
            started = time.perf_counter()
            search(scope=scope, query=texts[i % len(texts)], limit=10, mode=mode)  # type: ignore[arg-type]
            timings[mode].append((time.perf_counter() - started) * 1000)
    for mode in modes:
        p50, p99 = statistics.median(timings[mode]), percentile(timings[mode], 0.99)
        print(f"  {mode:<8} search: p50 {p50:.1f} ms, p99 {p99:.1f} ms ({searches} searches)")
    embed = []
    for i in range(min(searches, 100)):
        started = time.perf_counter()
        backend.inner.embed([texts[i % len(texts)]])
        embed.append((time.perf_counter() - started) * 1000)
    print(f"  of which the query's embedding: p50 {statistics.median(embed):.2f} ms")
    query_vector.cache_clear()
    with CaptureQueriesContext(connection) as captured:
        project_search(project=project, query=texts[0])
    print(f"  database queries per search: {len(captured.captured_queries)}")


def _rss_mb() -> float:
    status = Path("/proc/self/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1]) / 1024


def model_figures(model) -> None:  # type: ignore[no-untyped-def]
    """What loading the model costs the process, and a short query's embedding."""
    import tracker.search.engine  # noqa: F401 - what a process that searches has imported anyway

    threads, before = len(list(Path("/proc/self/task").iterdir())), _rss_mb()
    started = time.perf_counter()
    model.embed(["load the model"])
    print(f"model load (once per process): {time.perf_counter() - started:.2f} s")
    timings = []
    for i in range(300):
        started = time.perf_counter()
        model.embed([SHORT_QUERIES[i % len(SHORT_QUERIES)]])
        timings.append((time.perf_counter() - started) * 1000)
    after = _rss_mb()
    print(
        f"  memory: RSS {before:.0f} MB before, +{after - before:.0f} MB loaded and after 300 queries; "
        f"threads: {threads} before, {len(list(Path('/proc/self/task').iterdir()))} after"
    )
    p50, p99 = statistics.median(timings), percentile(timings, 0.99)
    print(f"  a short query's embedding ({', '.join(SHORT_QUERIES)}): p50 {p50:.2f} ms, p99 {p99:.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--searches", type=int, default=300)
    parser.add_argument("--skip-relevance", action="store_true")
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument(
        "--set",
        choices=("tuned", "heldout", "both"),
        default="both",
        help="relevance set: the one the engine was tuned on, the held-out one, or both",
    )
    parser.add_argument("--database", default="ballet_bench_search", help="PostgreSQL database to use")
    args = parser.parse_args()
    mode_name = setup_django(args.database)
    from tracker.search.embeddings import LocalModelBackend, embedding_backend_set

    model = LocalModelBackend()
    model_figures(model)
    if not args.skip_relevance:
        embedding_backend_set(model)
        for set_name in RELEVANCE_SETS if args.set == "both" else (args.set,):
            relevance_figures(mode_name, set_name)
    if not args.skip_latency:
        backend = CachingBackend(model)
        embedding_backend_set(backend)  # type: ignore[arg-type]
        latency_figures(mode_name, args.items, args.searches, backend)


if __name__ == "__main__":
    main()

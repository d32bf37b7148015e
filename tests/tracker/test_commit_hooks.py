"""Robust on-commit hooks (``tracker/commit_hooks.py``): one that fails is logged by name and never
reaches the write's caller, whatever callable it was given; and no code queues one any other way,
read from the source with ``ast`` (a partial handed to ``on_commit(..., robust=True)`` made a
committed claim answer 500)."""

from __future__ import annotations

import ast
from functools import partial
from pathlib import Path

import pytest
from django.db import transaction

from tracker.commit_hooks import on_commit_robust
from tracker.models import Project

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("ballet", "tracker", "knowledge", "planner")


def _refuse(reason: str) -> None:
    raise ConnectionError(reason)


@pytest.mark.django_db(transaction=True)
def test_a_failing_hook_of_any_callable_is_logged_by_name_and_the_write_stands(project, caplog):
    with transaction.atomic():
        Project.objects.filter(pk=project.pk).update(name="Renamed")
        on_commit_robust(partial(_refuse), "the broker is down")  # a partial has no __qualname__
        on_commit_robust(_refuse, "still down")

    logged = [r.getMessage() for r in caplog.records if r.name == "django.db.backends.base"]
    assert Project.objects.get(pk=project.pk).name == "Renamed"
    assert len(logged) == 2
    assert "functools.partial(<function _refuse" in logged[0]
    assert "the broker is down" in logged[0]
    assert logged[1].startswith(f"Error calling {__name__}._refuse in on_commit()")


def _robust_on_commits(root: Path, packages: tuple[str, ...]) -> set[str]:
    """The files of ``packages`` whose code calls ``on_commit`` robustly (``robust=`` or a second
    argument)."""
    found = set()
    for path in sorted(p for package in packages for p in (root / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name == "on_commit" and (len(node.args) > 1 or any(k.arg == "robust" for k in node.keywords)):
                found.add(path.relative_to(root).as_posix())
    return found


def test_robust_hooks_are_queued_only_by_on_commit_robust():
    assert _robust_on_commits(ROOT, PACKAGES) == {"tracker/commit_hooks.py"}


def test_the_source_check_finds_a_robust_partial(tmp_path):
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "hooks.py").write_text(
        "from functools import partial\nfrom django.db import transaction\n"
        "transaction.on_commit(partial(print, 1), robust=True)\n"
    )
    (tmp_path / "app" / "plain.py").write_text(
        "from django.db import transaction\ntransaction.on_commit(print)\n"
    )

    assert _robust_on_commits(tmp_path, ("app",)) == {"app/hooks.py"}

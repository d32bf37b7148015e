"""The migrations added since the previous release are safe to apply while its processes serve
(docs/operations.md#upgrades): they expand the schema, and never break a query of the old code.

The old code writes rows without the columns it does not know and reads the tables and columns it
knows. So a migration of a release may create tables, add nullable columns or columns with a
database default, and add indexes; dropping, renaming or tightening what the old code uses waits
for the release after the one whose code stopped using it (contract), and is listed below with
the reason it is safe. ``tests/e2e/test_upgrade.py`` runs the upgrade itself, with a chat open.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import migrations, models
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.operations.base import Operation

from tests.releases import APPS, previous_release_migrations

EXPAND = (migrations.CreateModel, migrations.AddIndex, migrations.AlterModelOptions)
# "app.migration": why its contracting operations are safe while the previous release serves.
REVIEWED: dict[str, str] = {}


def unsafe_while_old_code_serves(operation: Operation, created: frozenset[str] = frozenset()) -> str | None:
    """Why ``operation`` can break the previous release's queries, or None if it cannot. Anything
    on a table its migration ``created`` is new to the old code, whatever it does."""
    if isinstance(operation, EXPAND) or getattr(operation, "model_name", None) in created:
        return None
    if isinstance(operation, migrations.AddField):
        field = operation.field
        if field.null or field.many_to_many or field.db_default is not models.NOT_PROVIDED:
            return None
        return f"adds the NOT NULL column {operation.model_name}.{operation.name} without db_default"
    target = getattr(operation, "model_name", None) or getattr(operation, "name", None) or "the data"
    return f"{type(operation).__name__} on {target}"


def _unsafe(operations: Sequence[Operation]) -> list[str]:
    created = frozenset(op.name_lower for op in operations if isinstance(op, migrations.CreateModel))
    return [why for op in operations if (why := unsafe_while_old_code_serves(op, created))]


def test_the_migrations_since_the_previous_release_only_expand():
    previous = previous_release_migrations()
    assert "tracker.0001_initial" in previous  # the release was read
    loader = MigrationLoader(None, ignore_no_migrations=True)
    added = {
        f"{app}.{name}": migration
        for (app, name), migration in loader.disk_migrations.items()
        if app in APPS and f"{app}.{name}" not in previous
    }
    unsafe = [
        f"{key}: {why}"
        for key, migration in sorted(added.items())
        if key not in REVIEWED
        for why in _unsafe(migration.operations)
    ]
    assert unsafe == [], "contract in a later release, or list the migration in REVIEWED with why"


def test_a_contracting_operation_is_caught():
    assert unsafe_while_old_code_serves(migrations.RemoveField("item", "title")) == "RemoveField on item"
    assert "NOT NULL" in (
        unsafe_while_old_code_serves(migrations.AddField("item", "rank", models.IntegerField(default=0)))
        or ""
    )
    nullable = migrations.AddField("item", "rank", models.IntegerField(null=True))
    assert unsafe_while_old_code_serves(nullable) is None
    with_default = migrations.AddField("item", "rank", models.IntegerField(db_default=0))
    assert unsafe_while_old_code_serves(with_default) is None
    new_table = [
        migrations.CreateModel("Mirror", [("id", models.BigAutoField(primary_key=True))]),
        migrations.AddConstraint("mirror", models.UniqueConstraint(fields=["id"], name="one")),
    ]
    assert _unsafe(new_table) == []
    assert _unsafe(new_table[1:]) == ["AddConstraint on mirror"]

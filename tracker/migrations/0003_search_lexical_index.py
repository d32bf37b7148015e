"""The lexical index of search documents, which each database builds its own way.

PostgreSQL: a stored generated ``search_vector`` column (title weighted A over
body B, English configuration) with a GIN index; the database keeps it
current on every write. SQLite: an FTS5 table (porter stemming) whose rowid
is the document's id; the indexer writes it beside the document.
"""

from django.db import migrations

POSTGRES_FORWARD = (
    "ALTER TABLE tracker_searchdocument ADD COLUMN search_vector tsvector GENERATED ALWAYS AS ("
    "setweight(to_tsvector('english'::regconfig, coalesce(title, '')), 'A') || "
    "setweight(to_tsvector('english'::regconfig, coalesce(body, '')), 'B')) STORED",
    "CREATE INDEX tracker_searchdocument_vector ON tracker_searchdocument USING gin (search_vector)",
)
POSTGRES_BACKWARD = (
    "DROP INDEX IF EXISTS tracker_searchdocument_vector",
    "ALTER TABLE tracker_searchdocument DROP COLUMN IF EXISTS search_vector",
)
SQLITE_FORWARD = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS tracker_search_fts USING fts5("
    "title, body, tokenize = 'porter unicode61 remove_diacritics 2')",
    "INSERT INTO tracker_search_fts (rowid, title, body) "
    "SELECT id, title, body FROM tracker_searchdocument WHERE NOT deleted",
)
SQLITE_BACKWARD = ("DROP TABLE IF EXISTS tracker_search_fts",)


def _run(statements_by_vendor):
    def run(apps, schema_editor):
        for statement in statements_by_vendor.get(schema_editor.connection.vendor, ()):
            schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [("tracker", "0002_search_document")]

    operations = [
        migrations.RunPython(
            _run({"postgresql": POSTGRES_FORWARD, "sqlite": SQLITE_FORWARD}),
            _run({"postgresql": POSTGRES_BACKWARD, "sqlite": SQLITE_BACKWARD}),
        ),
    ]

"""The plan's dependency graph: as data, laid out, drawn as SVG, and what a changeset would do
to what can run (``docs/domain.md#the-dependency-graph``)."""

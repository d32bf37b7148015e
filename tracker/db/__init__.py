"""What the tracker writes in SQL rather than through the ORM: the turn's hot path, the plan's
rows as the planner's tools show them, and row locks (``docs/architecture.md#the-hot-path-in-sql``)."""

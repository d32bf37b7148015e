"""The planner's domain: synchronous functions, one transaction each, that the runner, the
interfaces and the tools call (``docs/domain.md``)."""

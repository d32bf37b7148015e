"""Floor 3 of the planner: the domain, synchronous, one transaction per call. Services (writes),
selectors (reads), transcripts, briefs, refs, the system prompt and the planner's tools. It
imports the ground, the agent and the models, never the live runtime or an interface
(``docs/architecture.md#the-planners-floors``)."""

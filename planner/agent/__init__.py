"""The planner agent: the turn loop, the model gateway, the transcript's messages, compaction,
the system prompt, the frames it emits and its tools. The loop and what it needs know nothing of
Django or of how frames travel (``docs/architecture.md``)."""

"""Floor 1 of the planner: the agent, free of Django and of the rest of the planner. The turn
loop, the model gateway, the transcript's messages, compaction, clearing, the frames it emits,
who answers a model call (the Anthropic SDK or the demo) and tool calls in words. It imports
nothing of ``planner`` outside itself (``docs/architecture.md#the-planners-floors``)."""

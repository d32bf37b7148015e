"""The planner's Prometheus metrics (the gateway keeps the LLM ones)."""

from prometheus_client import Counter

COMPACTIONS = Counter("ballet_planner_compactions_total", "Context compactions of planner sessions.")
TURNS = Counter("ballet_planner_turns_total", "Planner turns by how they ended.", ["reason"])
TOOL_CALLS = Counter("ballet_planner_tool_calls_total", "Planner tool calls.", ["tool", "outcome"])

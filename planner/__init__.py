"""The planner: an LLM agent a human chats with, proposing changes to the plan."""

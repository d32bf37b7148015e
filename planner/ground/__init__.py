"""Floor 2 of the planner: what the domain may know of this process. Its id and liveness, the
registry of its turns, the transcripts it keeps between turns, and the one bridge from async
code to the database. It imports only the agent and the models below it
(``docs/architecture.md#the-planners-floors``)."""

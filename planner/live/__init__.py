"""Floor 4 of the planner: this process's live runtime. The hub that owns its turns and
watchers, the runner that gives a message its meaning, the turns themselves, the links to other
processes and the agents' waits. It imports the floors below it, never an interface
(``docs/architecture.md#the-planners-floors``)."""

"""Floor 5 of the planner: its interfaces on HTTP and the WebSocket. REST and its serializers,
the consumer and its sign-in, the pages, the URLs. Each parses, authorizes, calls the runtime or
the domain, and answers (``docs/architecture.md#the-planners-floors``)."""

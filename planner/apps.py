"""Django app configuration for the planner."""

from django.apps import AppConfig


class PlannerConfig(AppConfig):
    name = "planner"
    verbose_name = "Planner"

    def ready(self) -> None:
        from ballet.metrics import state_collector_register  # noqa: PLC0415
        from planner.domain.metrics import QuestionsCollector  # noqa: PLC0415
        from planner.domain.signals import question_settled  # noqa: PLC0415
        from planner.live.decisions import changeset_decided_receiver  # noqa: PLC0415 - models are ready now
        from planner.live.event_waits import events_recorded_receiver  # noqa: PLC0415
        from planner.live.inbox_waits import inbox_changed_receiver  # noqa: PLC0415
        from planner.live.question_waits import question_settled_receiver  # noqa: PLC0415
        from tracker.signals import changeset_decided, events_recorded, inbox_changed  # noqa: PLC0415

        # A chat's changeset cards follow the decision live (docs/protocol.md, the ``changeset`` frame).
        changeset_decided.connect(changeset_decided_receiver, dispatch_uid="planner.changeset_frames")
        # An agent's wait for its question hears the outcome, from whichever process gives it.
        question_settled.connect(question_settled_receiver, dispatch_uid="planner.question_waits")
        # A wait on a project's events (the feed, its stream, MCP) hears them from every process.
        events_recorded.connect(events_recorded_receiver, dispatch_uid="planner.event_waits")
        # The header's inbox count follows each user's notifications live, from every process.
        inbox_changed.connect(inbox_changed_receiver, dispatch_uid="planner.inbox_waits")
        # /metrics counts agents' questions; ballet/ imports none of the apps it configures.
        state_collector_register(QuestionsCollector())

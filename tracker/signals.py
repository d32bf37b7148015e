"""Signals the tracker sends for other apps to follow (the tracker never imports them).

``changeset_decided`` is sent once a changeset's decision — applied, rejected or
conflicted — has been committed, with ``changeset`` as it was saved. The planner
follows it to tell the chat that proposed the changeset (docs/protocol.md, the ``changeset``
frame). A receiver runs in the thread that decided, after the commit; what it raises
is logged, never undoes the decision.
"""

from __future__ import annotations

from django.dispatch import Signal

changeset_decided = Signal()

# Events were committed (``tracker/services/events.py``): ``project_ids``, the projects whose feeds
# have news. The planner wakes the feeds' waiters, in every process (planner/live/event_waits.py).
events_recorded = Signal()

# People's inboxes changed (``tracker/services/notifications.py``), once committed: ``user_ids``.
# The planner tells each one's live count in the header (planner/live/inbox_waits.py).
inbox_changed = Signal()

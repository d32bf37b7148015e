"""The tracker's Django admin: one module per concept, registered on import.

Every ModelAdmin derives from :class:`tracker.admin.base.BalletAdmin`, which
decides visibility and rights with the one permission check; writes go
through the services. The changeset change page is the review (Apply/Reject).
"""

from tracker.admin import access, activity, changesets, plan, skills, work

__all__ = ["access", "activity", "changesets", "plan", "skills", "work"]

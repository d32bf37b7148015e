"""Project settings and the write-only credential (memberships: ``tracker.services.members``)."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from ballet.env import PROJECT_SETTINGS, ConfigError, project_setting
from tracker.errors import ValidationError
from tracker.inputs import refuse_nul
from tracker.models import Project
from tracker.services.activity import Actor, activity_record
from tracker.services.members import membership_remove, membership_set  # noqa: F401 - their old home
from tracker.trust.crypto import encrypt
from tracker.trust.permissions import PROJECT_ADMIN, require

MAX_CREDENTIAL = 500


def project_settings_clean(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValidationError({"settings": ["Expected a JSON object."]})
    errors: dict[str, list[str]] = {}
    clean: dict[str, Any] = {}
    for name, raw in value.items():
        if name not in PROJECT_SETTINGS:
            known = ", ".join(PROJECT_SETTINGS)
            errors[f"settings.{name}"] = [f"Unknown setting; expected one of: {known}."]
            continue
        if raw is None:
            continue
        try:
            clean[name] = project_setting(name, raw)
        except ConfigError as exc:
            errors[f"settings.{name}"] = [str(exc)]
    if errors:
        raise ValidationError(errors)
    return clean


@transaction.atomic
def project_update(
    *,
    actor: Actor,
    project: Project,
    name: str | None = None,
    description: str | None = None,
    settings: dict[str, Any] | None = None,
    credential: str | None = None,
) -> Project:
    """Change a project's name, description, planner overrides or credential.

    ``credential`` is stored encrypted; an empty string removes it. It is never
    written to the activity log, only the fact that it changed.
    """
    require(actor.user, project, PROJECT_ADMIN)
    refuse_nul(name=name, description=description, settings=settings, credential=credential)
    changed: list[str] = []
    columns: list[str] = []  # the model fields written: never the counters another writer moves
    if name is not None:
        if not name.strip() or len(name) > 200:
            raise ValidationError({"name": ["Expected 1 to 200 characters."]})
        project.name = name.strip()
        changed.append("name")
        columns.append("name")
    if description is not None:
        project.description = description
        changed.append("description")
        columns.append("description")
    if settings is not None:
        project.settings = project_settings_clean(settings)
        changed.append("settings")
        columns.append("settings")
    if credential is not None:
        if len(credential) > MAX_CREDENTIAL:
            raise ValidationError({"credential": [f"At most {MAX_CREDENTIAL} characters."]})
        project.credential_encrypted = encrypt(credential.strip()) if credential.strip() else ""
        changed.append("credential")
        columns.append("credential_encrypted")
    if changed:
        project.save(update_fields=columns)
        activity_record(
            actor=actor,
            organization_id=project.organization_id,
            project=project,
            verb="project.updated",
            target=project.key,
            data={"fields": changed},
        )
    return project

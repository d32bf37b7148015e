"""What a project's owners do with its webhooks (docs/events.md#webhooks): register an endpoint
(its secret is shown once, then kept encrypted), change, enable, disable or delete it, send a
test ping, and deliver a delivery again.

Owners only (``project.admin``). Every input is checked here, whichever interface sent it: a
name of 1 to 100 characters, an http(s) URL of at most 2000 whose host resolves to no private,
loopback, link-local, reserved, multicast or unspecified address (unless ``[webhooks]
allow_private``), event types of the catalogue (none: all), a format of ``standard`` or
``slack``, no NUL anywhere. One bad field: a ValidationError naming each, nothing stored.
"""

from __future__ import annotations

import base64
import secrets
import uuid
from typing import Any, Final

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from tracker import webhook_sender
from tracker.commit_hooks import on_commit_robust
from tracker.errors import InvalidStateError, ValidationError
from tracker.inputs import refuse_nul
from tracker.models import DeliveryStatus, Project, Webhook, WebhookDelivery, WebhookFormat
from tracker.services.activity import Actor, activity_record
from tracker.services.events import EVENT_TYPES
from tracker.services.webhooks import deliveries_bring_forward, deliveries_kick, webhook_disable
from tracker.trust import crypto
from tracker.trust.permissions import PROJECT_ADMIN, require
from tracker.webhook_selectors import delivery_get, webhook_get

MAX_NAME: Final = 100
MAX_URL: Final = 2000
SECRET_BYTES: Final = 24
PING: Final = "ping"


def secret_new() -> str:
    """A Standard Webhooks secret: ``whsec_`` and 24 random bytes in base64."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def _name_errors(name: Any) -> list[str]:
    if not isinstance(name, str):
        return ["Expected a string."]
    if not name.strip():
        return ["Give the webhook a name."]
    if len(name.strip()) > MAX_NAME:
        return [f"At most {MAX_NAME} characters."]
    return []


def _url_errors(url: Any) -> list[str]:
    if not isinstance(url, str):
        return ["Expected a string."]
    if not url.strip():
        return ["Give the URL the events are posted to."]
    if len(url.strip()) > MAX_URL:
        return [f"At most {MAX_URL} characters."]
    refusal = webhook_sender.url_refusal(url.strip(), allow_private=settings.BALLET_WEBHOOKS.allow_private)
    return [refusal] if refusal else []


def _types_errors(types: Any) -> list[str]:
    if not isinstance(types, list | tuple) or not all(isinstance(kind, str) for kind in types):
        return ["Expected a list of event types."]
    unknown = [kind for kind in types if kind not in EVENT_TYPES]
    if unknown:
        return [f"Unknown event type {unknown[0]!r}: one of {', '.join(EVENT_TYPES)}, or none for all."]
    return []


def _format_errors(format: Any) -> list[str]:
    if format not in WebhookFormat.values:
        return [f"One of {', '.join(WebhookFormat.values)}."]
    return []


def _checked(**fields: Any) -> dict[str, Any]:
    """``fields`` cleaned (the ones given: not None); a ValidationError naming every bad one."""
    given = {name: value for name, value in fields.items() if value is not None}
    refuse_nul(**given)
    check = {"name": _name_errors, "url": _url_errors, "types": _types_errors, "format": _format_errors}
    errors = {name: problems for name, value in given.items() if (problems := check[name](value))}
    if errors:
        raise ValidationError(errors, "The webhook was not saved: " + " ".join(errors[next(iter(errors))]))
    cleaned = dict(given)
    for name in ("name", "url"):
        if name in cleaned:
            cleaned[name] = cleaned[name].strip()
    if "types" in cleaned:
        cleaned["types"] = [kind for kind in EVENT_TYPES if kind in cleaned["types"]]
    return cleaned


def _record(actor: Actor, project: Project, verb: str, hook: Webhook, **data: Any) -> None:
    # The name only: a URL may hold a token (a Slack incoming webhook's), and every reader sees this.
    activity_record(
        actor=actor,
        organization_id=project.organization_id,
        project=project,
        verb=verb,
        target=f"webhook:{hook.pk}",
        data={"name": hook.name, **data},
    )


def webhook_create(
    *,
    actor: Actor,
    project: Project,
    name: Any,
    url: Any,
    types: Any = (),
    format: Any = WebhookFormat.STANDARD,
) -> tuple[Webhook, str]:
    """Register an endpoint for the project's events: the webhook and its secret, shown this once."""
    require(actor.user, project, PROJECT_ADMIN)
    cleaned = _checked(
        name=name, url=url, types=list(types) if isinstance(types, tuple) else types, format=format
    )
    secret = secret_new()
    with transaction.atomic():
        hook = Webhook.objects.create(
            project=project, secret=crypto.encrypt(secret), created_by=actor.user, **cleaned
        )
        _record(actor, project, "webhook.created", hook)
    return hook, secret


def webhook_update(
    *,
    actor: Actor,
    project: Project,
    webhook_id: int,
    name: Any = None,
    url: Any = None,
    types: Any = None,
    format: Any = None,
    enabled: bool | None = None,
) -> Webhook:
    """Change what is given (None: unchanged). Enabled again, an endpoint starts afresh; disabled,
    its pending deliveries fail (each can be delivered again)."""
    require(actor.user, project, PROJECT_ADMIN)
    hook = webhook_get(project=project, webhook_id=webhook_id)
    if enabled is not None and not isinstance(enabled, bool):
        raise ValidationError({"enabled": ["Expected true or false."]})
    cleaned = _checked(name=name, url=url, types=types, format=format)
    with transaction.atomic():
        if cleaned:
            Webhook.objects.filter(pk=hook.pk).update(**cleaned)
        if enabled is True and not hook.enabled:
            Webhook.objects.filter(pk=hook.pk).update(
                enabled=True, disabled_reason="", failing_since=None, failures_in_row=0
            )
        elif enabled is False and hook.enabled:
            webhook_disable(hook, f"Disabled by {actor.user.get_username()}.", notify=False)
        changed = sorted(cleaned) + ([] if enabled is None or enabled == hook.enabled else ["enabled"])
        hook.refresh_from_db()
        if changed:
            _record(actor, project, "webhook.updated", hook, changes=changed)
    return hook


def webhook_delete(*, actor: Actor, project: Project, webhook_id: int) -> None:
    """Delete the endpoint with its deliveries and their log."""
    require(actor.user, project, PROJECT_ADMIN)
    hook = webhook_get(project=project, webhook_id=webhook_id)
    with transaction.atomic():
        _record(actor, project, "webhook.deleted", hook)
        hook.delete()


def _enabled(hook: Webhook) -> None:
    if not hook.enabled:
        raise InvalidStateError(f"The webhook “{hook.name}” is disabled: enable it first.")


def webhook_ping(*, actor: Actor, project: Project, webhook_id: int) -> WebhookDelivery:
    """Queue a test delivery of type ``ping``; in order, after what is pending, which is due now."""
    require(actor.user, project, PROJECT_ADMIN)
    hook = webhook_get(project=project, webhook_id=webhook_id)
    _enabled(hook)
    payload = {
        "webhook": hook.pk,
        "name": hook.name,
        "project": project.key,
        "by": actor.user.get_username(),
        "message": "A test delivery from Ballet.",
    }
    with transaction.atomic():
        delivery = WebhookDelivery.objects.create(
            webhook=hook,
            msg_id=f"msg_{uuid.uuid4().hex}",
            type=PING,
            payload=payload,
            next_attempt_at=timezone.now(),
        )
        deliveries_bring_forward(hook.pk)
        on_commit_robust(deliveries_kick)
    return delivery


def delivery_redeliver(
    *, actor: Actor, project: Project, webhook_id: int, delivery_id: int
) -> WebhookDelivery:
    """Send the delivery again, with the same ``webhook-id`` (a receiver drops a repeat it has seen),
    and its retries afresh; the endpoint's oldest pending delivery is due now."""
    require(actor.user, project, PROJECT_ADMIN)
    hook = webhook_get(project=project, webhook_id=webhook_id)
    _enabled(hook)
    delivery = delivery_get(webhook=hook, delivery_id=delivery_id)
    with transaction.atomic():
        WebhookDelivery.objects.filter(pk=delivery.pk).update(
            status=DeliveryStatus.PENDING, attempts=0, next_attempt_at=timezone.now(), delivered_at=None
        )
        deliveries_bring_forward(hook.pk)
        on_commit_robust(deliveries_kick)
    delivery.refresh_from_db()
    return delivery

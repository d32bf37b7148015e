"""``/api/v1/projects/{key}/webhooks/`` (docs/events.md#webhooks): owners register, read, change and
delete webhooks, read their deliveries with every attempt, deliver again and ping; the secret is
answered once and stored encrypted; bad input is a readable 400 with nothing stored; nobody else
learns a webhook exists."""

from __future__ import annotations

from typing import Any

import pytest
from standardwebhooks import Webhook as Verifier

from ballet.env import WebhooksTable
from tests.factories import make_key, make_membership, make_project, make_user
from tracker.models import ActivityEvent, DeliveryStatus, Role, Webhook, WebhookDelivery
from tracker.services import webhooks
from tracker.services.activity import Actor
from tracker.services.members import membership_remove
from tracker.services.webhook_endpoints import webhook_create
from tracker.services.webhooks import attempt_record
from tracker.trust import crypto
from tracker.webhook_sender import Answer

pytestmark = pytest.mark.django_db
API = "/api/v1/projects/BAL/webhooks/"
GOOD = {"name": "CI", "url": "https://93.184.216.34/ballet", "types": ["item.created", "claim.taken"]}


@pytest.fixture(autouse=True)
def _nothing_published(monkeypatch):
    class Publisher:
        def send_task(self, name: str, *args: Any, **kwargs: Any) -> None:
            pass

    monkeypatch.setattr(webhooks, "current_app", Publisher())


def made(owner, project, **fields: Any) -> Webhook:
    return webhook_create(actor=Actor(user=owner), project=project, **{**GOOD, **fields})[0]


def test_an_owner_registers_a_webhook_and_sees_its_secret_once(client_for, owner):
    client = client_for(owner)

    created = client.post(API, GOOD, format="json")

    assert created.status_code == 201
    body = created.json()
    secret = body["secret"]
    assert secret.startswith("whsec_")
    Verifier(secret)  # a Standard Webhooks secret: whsec_ and base64 of 24 bytes
    assert body["types"] == ["item.created", "claim.taken"]
    assert (body["format"], body["enabled"], body["created_by"]) == ("standard", True, "owner")
    stored = Webhook.objects.get(pk=body["id"])
    assert secret not in stored.secret
    assert crypto.decrypt(stored.secret) == secret
    listed = client.get(API).json()
    detail = client.get(f"{API}{body['id']}/").json()
    assert [hook["name"] for hook in listed["results"]] == ["CI"]
    assert "secret" not in listed["results"][0]
    assert "secret" not in detail
    assert secret not in str(listed) + str(detail)
    assert ActivityEvent.objects.filter(verb="webhook.created", data__name="CI").exists()


def test_types_are_kept_in_the_catalogue_s_order_and_none_means_every_type(client_for, owner):
    client = client_for(owner)

    every = client.post(API, {"name": "All", "url": "https://93.184.216.34/"}, format="json").json()
    two = client.post(
        API, {**GOOD, "types": ["claim.taken", "item.created", "claim.taken"]}, format="json"
    ).json()

    assert every["types"] == []
    assert two["types"] == ["item.created", "claim.taken"]


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({**GOOD, "url": "ftp://93.184.216.34/"}, "url", "http"),
        ({**GOOD, "url": "https://user:pw@93.184.216.34/"}, "url", "password"),
        ({**GOOD, "url": "http://10.0.0.1/hook"}, "url", "private"),
        ({**GOOD, "url": "http://127.0.0.1:8000/hook"}, "url", "loopback"),
        ({**GOOD, "url": "http://169.254.169.254/latest/meta-data/"}, "url", "link-local"),
        ({**GOOD, "url": "http://[::1]/hook"}, "url", "loopback"),
        ({**GOOD, "url": "http://localhost:9000/hook"}, "url", "loopback"),
        ({**GOOD, "url": "http://0.0.0.0/hook"}, "url", "unspecified"),
        ({**GOOD, "url": "http://224.0.0.1/hook"}, "url", "multicast"),
        ({**GOOD, "url": "http://[::ffff:10.0.0.1]/hook"}, "url", "private"),
        ({**GOOD, "url": "https://93.184.216.34/" + "a" * 2000}, "url", "2000"),
        ({**GOOD, "url": "http://[::1"}, "url", "valid URL"),
        ({**GOOD, "url": "http://93.184.216.34:99999/"}, "url", "valid URL"),
        ({**GOOD, "url": "http:///nohost"}, "url", "host"),
        ({**GOOD, "url": 12}, "url", "string"),
        ({**GOOD, "types": ["item.exploded"]}, "types.0", "not a valid choice"),
        ({**GOOD, "types": "item.created"}, "types", "list"),
        ({**GOOD, "name": ""}, "name", "blank"),
        ({**GOOD, "name": "   "}, "name", "blank"),
        ({**GOOD, "name": "n" * 101}, "name", "100"),
        ({**GOOD, "name": "a\x00b"}, "name", "NUL"),
        ({**GOOD, "url": "https://93.184.216.34/\x00"}, "url", "NUL"),
        ({**GOOD, "types": ["item.created\x00"]}, "types[0]", "NUL"),
        ({**GOOD, "format": "teams"}, "format", "not a valid choice"),
        ({**GOOD, "secret": "whsec_mine"}, "secret", "Unknown field"),
    ],
)
def test_bad_input_is_a_readable_400_and_nothing_is_stored(client_for, owner, body, field, words):
    answer = client_for(owner).post(API, body, format="json")

    assert answer.status_code == 400
    fields = answer.json()["error"]["fields"]
    assert field in fields
    assert words.lower() in " ".join(fields[field]).lower()
    assert Webhook.objects.count() == 0


def test_allow_private_lets_a_receiver_on_this_host_or_the_lan_be_registered(client_for, owner, settings):
    settings.BALLET_WEBHOOKS = WebhooksTable(allow_private=True)
    client = client_for(owner)

    local = client.post(API, {**GOOD, "url": "http://127.0.0.1:9000/hook"}, format="json")
    lan = client.post(API, {**GOOD, "url": "http://10.0.0.1/hook"}, format="json")
    multicast = client.post(API, {**GOOD, "url": "http://224.0.0.1/hook"}, format="json")

    assert (local.status_code, lan.status_code, multicast.status_code) == (201, 201, 400)


def test_an_owner_changes_disables_and_enables_a_webhook(client_for, owner, project):
    hook = made(owner, project)
    Webhook.objects.filter(pk=hook.pk).update(failures_in_row=3)
    pending = WebhookDelivery.objects.create(
        webhook=hook, msg_id="msg_x", type="ping", next_attempt_at=hook.created_at
    )
    client = client_for(owner)

    renamed = client.patch(
        f"{API}{hook.pk}/", {"name": "Deploys", "types": [], "format": "slack"}, format="json"
    )
    disabled = client.patch(f"{API}{hook.pk}/", {"enabled": False}, format="json")
    pending.refresh_from_db()
    enabled = client.patch(f"{API}{hook.pk}/", {"enabled": True}, format="json")

    assert renamed.status_code == 200
    assert (renamed.json()["name"], renamed.json()["types"], renamed.json()["format"]) == (
        "Deploys",
        [],
        "slack",
    )
    assert disabled.json()["enabled"] is False
    assert "owner" in disabled.json()["disabled_reason"]
    assert pending.status == DeliveryStatus.FAILED  # disabled: what was pending failed
    assert enabled.json()["enabled"] is True
    assert (enabled.json()["disabled_reason"], enabled.json()["failures_in_row"]) == ("", 0)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"enabled": "false"}, "enabled"),
        ({"enabled": 0}, "enabled"),
        ({"url": "http://10.0.0.1/"}, "url"),
        ({"name": ""}, "name"),
        ({"types": ["nope"]}, "types.0"),
    ],
)
def test_a_bad_change_is_a_400_and_changes_nothing(client_for, owner, project, body, field):
    hook = made(owner, project)

    answer = client_for(owner).patch(f"{API}{hook.pk}/", body, format="json")

    assert answer.status_code == 400
    assert field in answer.json()["error"]["fields"]
    hook.refresh_from_db()
    assert (hook.name, hook.url, hook.enabled, hook.types) == ("CI", GOOD["url"], True, GOOD["types"])


def test_an_owner_reads_the_deliveries_with_their_attempts(client_for, owner, project):
    hook = made(owner, project)
    delivery = WebhookDelivery.objects.create(
        webhook=hook, msg_id="msg_1_1", type="ping", payload={}, next_attempt_at=hook.created_at
    )
    attempt_record(delivery_id=delivery.pk, answer=Answer(500, 12, "x" * 2000, "The receiver answered 500."))
    attempt_record(delivery_id=delivery.pk, answer=Answer(200, 8, "ok"))

    page = client_for(owner).get(f"{API}{hook.pk}/deliveries/").json()

    [row] = page["results"]
    assert (row["msg_id"], row["status"], row["event"]) == ("msg_1_1", "delivered", None)
    first, second = row["attempts"]
    assert (first["status_code"], first["duration_ms"], len(first["response"])) == (500, 12, 1024)
    assert "500" in first["error"]
    assert (second["status_code"], second["response"], second["error"]) == (200, "ok", "")


def test_redeliver_and_ping_queue_deliveries_and_a_disabled_webhook_refuses_them(client_for, owner, project):
    hook = made(owner, project)
    client = client_for(owner)

    ping = client.post(f"{API}{hook.pk}/ping/")
    delivery = WebhookDelivery.objects.get(pk=ping.json()["id"])
    WebhookDelivery.objects.filter(pk=delivery.pk).update(status=DeliveryStatus.DELIVERED, attempts=1)
    again = client.post(f"{API}{hook.pk}/deliveries/{delivery.pk}/redeliver/")
    client.patch(f"{API}{hook.pk}/", {"enabled": False}, format="json")
    refused_ping = client.post(f"{API}{hook.pk}/ping/")
    refused_again = client.post(f"{API}{hook.pk}/deliveries/{delivery.pk}/redeliver/")

    assert ping.status_code == 202
    assert (ping.json()["type"], ping.json()["status"]) == ("ping", "pending")
    assert again.status_code == 202
    assert (again.json()["msg_id"], again.json()["status"]) == (delivery.msg_id, "pending")
    assert WebhookDelivery.objects.get(pk=delivery.pk).attempts == 0  # its retries start afresh
    assert (refused_ping.status_code, refused_again.status_code) == (409, 409)


def test_another_webhook_s_delivery_and_unknown_ids_are_not_found(client_for, owner, project):
    first, second = made(owner, project), made(owner, project, name="Other")
    delivery = WebhookDelivery.objects.create(
        webhook=second, msg_id="msg_2", type="ping", next_attempt_at=second.created_at
    )
    client = client_for(owner)

    assert client.post(f"{API}{first.pk}/deliveries/{delivery.pk}/redeliver/").status_code == 404
    assert client.get(f"{API}999999/").status_code == 404
    assert client.get(f"{API}99999999999999999999/").status_code == 404
    assert client.post(f"{API}{first.pk}/deliveries/99999999999999999999/redeliver/").status_code == 404


def test_a_webhook_is_deleted_with_its_deliveries(client_for, owner, project):
    hook = made(owner, project)
    WebhookDelivery.objects.create(webhook=hook, msg_id="msg_3", type="ping", next_attempt_at=hook.created_at)

    answer = client_for(owner).delete(f"{API}{hook.pk}/")

    assert answer.status_code == 204
    assert not Webhook.objects.exists()
    assert not WebhookDelivery.objects.exists()


@pytest.mark.parametrize(
    ("who", "status"), [("viewer", 403), ("member", 403), ("maintainer", 403), ("stranger", 404)]
)
def test_only_owners_reach_any_of_it(client_for, users, owner, project, who, status):
    hook = made(owner, project)
    delivery = WebhookDelivery.objects.create(
        webhook=hook, msg_id="msg_4", type="ping", next_attempt_at=hook.created_at
    )
    client = client_for(users[who])
    calls = [
        client.get(API),
        client.post(API, GOOD, format="json"),
        client.get(f"{API}{hook.pk}/"),
        client.patch(f"{API}{hook.pk}/", {"name": "Mine"}, format="json"),
        client.delete(f"{API}{hook.pk}/"),
        client.get(f"{API}{hook.pk}/deliveries/"),
        client.post(f"{API}{hook.pk}/deliveries/{delivery.pk}/redeliver/"),
        client.post(f"{API}{hook.pk}/ping/"),
    ]

    assert [call.status_code for call in calls] == [status] * len(calls)
    assert Webhook.objects.get().name == "CI"
    assert Webhook.objects.count() == 1
    assert WebhookDelivery.objects.count() == 1


def test_another_project_s_owner_and_a_removed_owner_find_nothing(client_for, owner, project):
    hook = made(owner, project)
    elsewhere = make_user(username="elsewhere")
    make_membership(project=make_project(key="OTH"), user=elsewhere, role=Role.OWNER)
    second = make_user(username="second")
    make_membership(project=project, user=second, role=Role.OWNER)
    membership_remove(actor=Actor(user=second), project=project, username="owner")

    for user in (elsewhere, owner):
        client = client_for(user)
        assert client.get(API).status_code == 404
        assert client.get(f"{API}{hook.pk}/").status_code == 404
        assert client.post(f"{API}{hook.pk}/ping/").status_code == 404


def test_no_api_key_manages_webhooks(owner, api_client, project):
    hook = made(owner, project)
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_key(owner)}")

    listed = api_client.get(API)
    created = api_client.post(API, GOOD, format="json")
    pinged = api_client.post(f"{API}{hook.pk}/ping/")

    assert (listed.status_code, created.status_code, pinged.status_code) == (403, 403, 403)
    assert Webhook.objects.count() == 1

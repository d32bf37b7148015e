"""``/projects/{key}/webhooks/``: an owner's pages of the project's webhooks (docs/events.md#webhooks):
register one and see its secret once, enable, disable, delete; one webhook's deliveries with
their attempts, Redeliver and Send test ping; the settings page links to them."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from pytest_django.asserts import assertContains, assertNotContains

from ballet.env import WebhooksTable
from tests.factories import make_membership, make_project
from tracker.models import DeliveryStatus, Role, Webhook, WebhookDelivery
from tracker.services import webhooks
from tracker.services.activity import Actor
from tracker.services.webhook_endpoints import webhook_create
from tracker.services.webhooks import attempt_record
from tracker.trust import crypto
from tracker.webhook_sender import Answer

pytestmark = pytest.mark.django_db
PAGE = "/projects/BAL/webhooks/"
URL = "https://93.184.216.34/ballet"


@pytest.fixture(autouse=True)
def _nothing_published(monkeypatch):
    class Publisher:
        def send_task(self, name: str, *args: Any, **kwargs: Any) -> None:
            pass

    monkeypatch.setattr(webhooks, "current_app", Publisher())


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def once(client: Client) -> str:
    found = re.search(r'name="once" value="([^"]+)"', client.get(PAGE).content.decode())
    assert found
    return found.group(1)


def made(owner, project, **fields: Any) -> Webhook:
    return webhook_create(actor=Actor(user=owner), project=project, **{"name": "CI", "url": URL, **fields})[0]


def test_an_owner_registers_a_webhook_and_its_secret_is_shown_once(owner, project):
    client = signed_in(owner)
    form = {"once": once(client), "name": "CI", "url": URL, "types": ["item.created"], "format": "standard"}

    answer = client.post(f"{PAGE}new/", form)
    again = client.post(f"{PAGE}new/", form)  # a reload sends the same form

    assert answer.status_code == 200
    assert answer["Cache-Control"] == "no-store"
    assert "default-src 'none'" in answer["Content-Security-Policy"]
    hook = Webhook.objects.get()
    secret = crypto.decrypt(hook.secret)
    assert secret is not None
    assertContains(answer, secret)
    assert hook.types == ["item.created"]
    assert again.status_code == 302
    assert Webhook.objects.count() == 1
    listed = client.get(PAGE)
    assertContains(listed, "CI")
    assertContains(listed, URL)
    assertNotContains(listed, secret)
    assertNotContains(client.get(f"{PAGE}{hook.pk}/"), secret)


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"url": "http://10.0.0.1/hook"}, "private address"),
        ({"url": "http://localhost:8000/"}, "loopback"),
        ({"url": "gopher://93.184.216.34/"}, "http"),
        ({"name": "n" * 101}, "at most 100"),
        ({"name": "a\x00b"}, "null characters"),
        ({"types": ["item.exploded"]}, "not one of the available choices"),
        ({"format": "teams"}, "not one of the available choices"),
    ],
)
def test_a_bad_form_is_shown_again_with_its_error_and_nothing_stored(owner, project, fields, words):
    client = signed_in(owner)
    form = {"once": once(client), "name": "CI", "url": URL, "format": "standard", **fields}

    answer = client.post(f"{PAGE}new/", form)

    assert answer.status_code == 400
    assert words in answer.content.decode().lower()
    assert Webhook.objects.count() == 0


def test_an_owner_disables_enables_edits_and_deletes_a_webhook(owner, project):
    hook = made(owner, project)
    client = signed_in(owner)

    client.post(f"{PAGE}{hook.pk}/enabled/", {"enabled": "0", "back": "list"})
    hook.refresh_from_db()
    assert not hook.enabled
    assertContains(client.get(PAGE), "Disabled by owner")
    client.post(f"{PAGE}{hook.pk}/enabled/", {"enabled": "1"})
    hook.refresh_from_db()
    assert hook.enabled
    edited = client.post(
        f"{PAGE}{hook.pk}/edit/", {"name": "Deploys", "url": URL, "types": ["claim.taken"], "format": "slack"}
    )
    refused = client.post(
        f"{PAGE}{hook.pk}/edit/", {"name": "Deploys", "url": "http://10.1.2.3/", "format": "slack"}
    )
    hook.refresh_from_db()
    assert edited.status_code == 302
    assert refused.status_code == 400
    assert (hook.name, hook.types, hook.format, hook.url) == ("Deploys", ["claim.taken"], "slack", URL)
    client.post(f"{PAGE}{hook.pk}/delete/")
    assert not Webhook.objects.exists()


def test_the_deliveries_page_shows_each_attempt_and_its_buttons(owner, project):
    hook = made(owner, project)
    delivery = WebhookDelivery.objects.create(
        webhook=hook, msg_id="msg_7_1", type="item.created", next_attempt_at=hook.created_at
    )
    attempt_record(
        delivery_id=delivery.pk, answer=Answer(503, 41, "<b>busy</b>", "The receiver answered 503.")
    )
    client = signed_in(owner)

    page = client.get(f"{PAGE}{hook.pk}/")

    assert page.status_code == 200
    text = page.content.decode()
    assert "msg_7_1" in text
    assert "41 ms" in text
    assert "The receiver answered 503." in text
    assert "&lt;b&gt;busy&lt;/b&gt;" in text  # the answer is escaped
    assert f"{PAGE}{hook.pk}/deliveries/{delivery.pk}/redeliver/" in text
    assert "Send test ping" in text
    redelivered = client.post(f"{PAGE}{hook.pk}/deliveries/{delivery.pk}/redeliver/")
    pinged = client.post(f"{PAGE}{hook.pk}/ping/")
    assert (redelivered.status_code, pinged.status_code) == (302, 302)
    assert WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING).count() == 2
    assertContains(client.get(f"{PAGE}{hook.pk}/"), "ping")


@pytest.mark.parametrize(
    ("who", "status"), [("viewer", 403), ("member", 403), ("maintainer", 403), ("stranger", 404)]
)
def test_only_owners_open_the_pages_or_post_their_forms(users, owner, project, who, status):
    hook = made(owner, project)
    delivery = WebhookDelivery.objects.create(
        webhook=hook, msg_id="msg_8", type="ping", next_attempt_at=hook.created_at
    )
    client = signed_in(users[who])
    answers = [
        client.get(PAGE),
        client.post(f"{PAGE}new/", {"name": "Mine", "url": URL, "format": "standard"}),
        client.get(f"{PAGE}{hook.pk}/"),
        client.post(f"{PAGE}{hook.pk}/edit/", {"name": "Mine", "url": URL, "format": "standard"}),
        client.post(f"{PAGE}{hook.pk}/enabled/", {"enabled": "0"}),
        client.post(f"{PAGE}{hook.pk}/delete/"),
        client.post(f"{PAGE}{hook.pk}/ping/"),
        client.post(f"{PAGE}{hook.pk}/deliveries/{delivery.pk}/redeliver/"),
    ]

    assert [answer.status_code for answer in answers] == [status] * len(answers)
    hook.refresh_from_db()
    assert (hook.name, hook.enabled) == ("CI", True)
    assert WebhookDelivery.objects.count() == 1


def test_another_project_s_webhook_is_not_found_from_this_one(owner, project):
    elsewhere = make_project(key="OTH")
    make_membership(project=elsewhere, user=owner, role=Role.OWNER)
    theirs = made(owner, elsewhere)
    client = signed_in(owner)

    assert client.get(f"{PAGE}{theirs.pk}/").status_code == 404
    assert client.post(f"{PAGE}{theirs.pk}/delete/").status_code == 404
    assert Webhook.objects.filter(pk=theirs.pk).exists()


def test_the_settings_page_links_owners_to_the_webhooks(owner, project):
    page = signed_in(owner).get("/projects/BAL/settings/")

    assertContains(page, 'href="/projects/BAL/webhooks/"')


def test_a_receiver_on_this_host_can_be_registered_with_allow_private(owner, project, settings):
    settings.BALLET_WEBHOOKS = WebhooksTable(allow_private=True)
    client = signed_in(owner)
    form = {"once": once(client), "name": "Local", "url": "http://127.0.0.1:9000/hook", "format": "standard"}

    assert client.post(f"{PAGE}new/", form).status_code == 200
    assert Webhook.objects.get().url == "http://127.0.0.1:9000/hook"

"""People's mail (docs/events.md#e-mail): sent through Django's backend with a link to its page and
a signed one-click unsubscribe, each mail once even when a sender dies, the daily digest, the
e-mail settings page and the unsubscribe page, which needs no sign-in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core import signing
from django.core.mail.backends.base import BaseEmailBackend
from django.test import Client
from django.utils import timezone

from tracker.mail import (
    DIGEST_SWEEP,
    MAX_ATTEMPTS,
    Unsubscribe,
    mail_deliver,
    mail_send_digests,
    mail_send_pending,
    mail_settle,
    mail_take_now,
    unsubscribe_read,
    unsubscribe_token,
)
from tracker.models import Mail, Membership, NotificationPreference, Sweep, Watch
from tracker.services.activity import Actor
from tracker.services.changesets import changeset_propose
from tracker.services.comments import comment_add, watch_set
from tracker.services.items import item_update
from tracker.services.notifications import notify_modes

pytestmark = pytest.mark.django_db

MORNING = datetime(2026, 3, 4, 8, 0, tzinfo=UTC)


@pytest.fixture
def ticket(make_item):
    return make_item(title="Login form", state="ready")


def mention(users: dict[str, Any], ticket: Any, body: str = "@owner please look") -> Any:
    return comment_add(actor=Actor(user=users["member"]), item=ticket, body=body)


class BrokenBackend(BaseEmailBackend):
    """A mail server that refuses every message."""

    def send_messages(self, email_messages: Any) -> int:
        raise ConnectionRefusedError("the mail server said no")


# --- sending ----------------------------------------------------------------------------------------


def test_a_mail_goes_through_the_backend_with_its_page_and_its_unsubscribe_link(users, ticket, mailoutbox):
    comment = mention(users, ticket, "@owner is <script>alert(1)</script> fine?")

    assert mail_send_pending() == 1

    [message] = mailoutbox
    assert message.to == ["owner@example.com"]
    assert message.subject == f"[BAL] member mentioned you on {ticket.key}: Login form"
    page = f"http://127.0.0.1:8000/projects/BAL/items/{ticket.key}/#comment-{comment.pk}"
    assert f"Open it: {page}" in message.body
    one_click = message.extra_headers["List-Unsubscribe"].strip("<>")
    assert one_click.startswith("http://127.0.0.1:8000/notifications/unsubscribe/")
    assert message.extra_headers["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert f"No more e-mail about mentions of you: {one_click}" in message.body
    [(html, kind)] = message.alternatives
    assert kind == "text/html"
    assert "<script>" not in html
    assert "&lt;script&gt;" in html
    assert f'href="{page}"' in html
    token = one_click.rstrip("/").rsplit("/", 1)[1]
    assert unsubscribe_read(token) == Unsubscribe(user_id=users["owner"].pk, kind="mention")
    assert Mail.objects.get().status == "sent"

    assert mail_send_pending() == 0  # sent once
    assert len(mailoutbox) == 1


def test_the_file_backend_writes_the_mail_to_a_file(users, ticket, settings, tmp_path):
    settings.EMAIL_BACKEND = "django.core.mail.backends.filebased.EmailBackend"
    settings.EMAIL_FILE_PATH = str(tmp_path)
    mention(users, ticket)

    assert mail_send_pending() == 1

    [written] = list(tmp_path.iterdir())
    text = written.read_text()
    assert "To: owner@example.com" in text
    assert f"member mentioned you on {ticket.key}" in text


def test_a_refused_mail_is_tried_again_later_and_failed_after_the_last_attempt(users, ticket, settings):
    settings.EMAIL_BACKEND = "tests.tracker.test_notifications_mail.BrokenBackend"
    mention(users, ticket)

    assert mail_send_pending() == 0

    mail = Mail.objects.get()
    assert (mail.status, mail.attempts) == ("pending", 1)
    assert mail.next_attempt_at is not None
    assert mail.next_attempt_at > timezone.now()
    assert mail_send_pending() == 0  # not due yet: not tried
    assert Mail.objects.get().attempts == 1
    for _ in range(MAX_ATTEMPTS - 1):
        Mail.objects.update(next_attempt_at=None)
        mail_send_pending()
    assert (Mail.objects.get().status, Mail.objects.get().attempts) == ("failed", MAX_ATTEMPTS)


def test_an_unreachable_server_leaves_the_rest_of_the_batch_for_the_next_pass(users, ticket, settings):
    settings.EMAIL_BACKEND = "tests.tracker.test_notifications_mail.BrokenBackend"
    mention(users, ticket, "@owner and @viewer, look")

    assert mail_send_pending() == 0

    tried = dict(Mail.objects.values_list("user__username", "attempts"))
    assert sorted(tried.values()) == [0, 1]  # the first met the refusal; the second was not tried
    untried = Mail.objects.get(attempts=0)
    assert (untried.status, untried.next_attempt_at) == ("pending", None)


def test_a_taken_mail_is_not_taken_twice_and_a_dead_senders_mail_is_not_lost(users, ticket, mailoutbox):
    mention(users, ticket)
    taken = mail_take_now()  # a sender took it, then died before sending

    assert len(taken) == 1
    assert mail_take_now() == []  # another sender meanwhile: not twice

    later = timezone.now() + timedelta(hours=1)  # the lease ran out
    again = mail_take_now(now=later)
    assert [item.mail_ids for item in again] == [taken[0].mail_ids]
    assert mail_settle(mail_deliver(again)) == 1
    assert len(mailoutbox) == 1
    assert Mail.objects.get().status == "sent"


def test_a_mail_to_someone_who_left_the_project_since_is_not_sent(users, ticket, mailoutbox):
    mention(users, ticket)
    Membership.objects.filter(user=users["owner"]).delete()

    assert mail_send_pending() == 0

    assert mailoutbox == []
    assert Mail.objects.get().status == "failed"


def test_the_digest_gathers_each_users_mail_into_one_once_a_day(project, users, ticket, mailoutbox):
    watch_set(user=users["owner"], item=ticket, on=True)
    item_update(actor=Actor(user=users["member"]), item=ticket, fields={"title": "Sign in form"})
    changeset_propose(
        actor=Actor(user=users["member"]),
        project=project,
        title="Split the form",
        operations=[{"op": "update", "item": ticket.key, "base_version": 2, "fields": {"priority": "high"}}],
    )
    assert Mail.objects.filter(mode="digest").count() == 3  # owner: 2, maintainer: 1

    assert mail_send_digests(now=MORNING - timedelta(hours=2)) == 0  # before 07:00: not yet
    assert mail_send_digests(now=MORNING) == 2

    by_user = {message.to[0]: message for message in mailoutbox}
    owners = by_user["owner@example.com"]
    assert owners.subject == "Ballet: your daily digest, 2 notifications"
    assert "Changesets waiting for your decision (1)" in owners.body
    assert "- [BAL] member proposes changeset #1: Split the form" in owners.body
    assert f"- [BAL] member changed the title of {ticket.key}: Sign in form" in owners.body
    assert "http://127.0.0.1:8000/projects/BAL/changesets/1/" in owners.body
    token = owners.extra_headers["List-Unsubscribe"].strip("<>").rstrip("/").rsplit("/", 1)[1]
    assert unsubscribe_read(token) == Unsubscribe(user_id=users["owner"].pk, kind="digest")
    assert by_user["maintainer@example.com"].subject == "Ballet: your daily digest, 1 notification"
    assert set(Mail.objects.values_list("status", flat=True)) == {"sent"}

    mention(users, ticket)
    assert mail_send_digests(now=MORNING + timedelta(hours=3)) == 0  # once a day
    assert Sweep.objects.get(name=DIGEST_SWEEP).finished_at == MORNING
    assert mail_send_digests(now=MORNING + timedelta(days=1)) == 0  # a mention goes at once, not here


def test_mail_waiting_to_go_now_is_not_in_the_digest(users, ticket, mailoutbox):
    mention(users, ticket)

    assert mail_send_digests(now=MORNING) == 0
    assert Mail.objects.get().status == "pending"


# --- the signed unsubscribe -------------------------------------------------------------------------


def unsubscribe(client: Client, token: str, **extra: Any) -> Any:
    return client.post(f"/notifications/unsubscribe/{token}/", **extra)


def test_the_unsubscribe_link_asks_on_get_and_stops_its_kind_on_post_without_sign_in(member):
    client = Client(enforce_csrf_checks=True)
    token = unsubscribe_token(user_id=member.pk, kind="mention")

    page = client.get(f"/notifications/unsubscribe/{token}/")
    assert page.status_code == 200
    assert "Stop the e-mail about mentions of you to" in page.content.decode()
    assert notify_modes(user=member)["mention"] == "now"  # a GET (a mail scanner) changes nothing

    done = unsubscribe(
        client, token, data="List-Unsubscribe=One-Click", content_type="application/x-www-form-urlencoded"
    )

    assert done.status_code == 200
    assert "no more e-mail about mentions of you" in done.content.decode()
    modes = notify_modes(user=member)
    assert modes["mention"] == "off"
    assert modes["question"] == "now"  # another kind: as it was


def test_a_tampered_or_foreign_token_is_refused_and_changes_nothing(member, owner):
    client = Client()
    token = unsubscribe_token(user_id=member.pk, kind="mention")
    value, _, signature = token.rpartition(":")
    forged = [
        f"{value}:{signature[:-2]}xx",  # a changed signature
        signing.dumps({"u": owner.pk, "k": "mention"}, salt="another.purpose"),  # signed for something else
        signing.dumps({"u": owner.pk, "k": "everything"}, salt="tracker.mail.unsubscribe"),  # no such kind
        signing.dumps([owner.pk], salt="tracker.mail.unsubscribe"),
        "nonsense",
    ]
    for bad in forged:
        assert unsubscribe_read(bad) is None, bad
        assert client.get(f"/notifications/unsubscribe/{bad}/").status_code == 400
        answer = unsubscribe(client, bad)
        assert answer.status_code == 400
        assert "This link is not valid" in answer.content.decode()
    assert not NotificationPreference.objects.exists()


def test_a_token_stops_only_its_own_kind_and_its_own_user(member, owner):
    unsubscribe(Client(), unsubscribe_token(user_id=member.pk, kind="ticket"))

    assert notify_modes(user=member)["ticket"] == "off"
    assert notify_modes(user=member)["mention"] == "now"
    assert notify_modes(user=owner)["ticket"] == "digest"


def test_the_digests_link_stops_every_kind_sent_in_the_digest(member):
    unsubscribe(Client(), unsubscribe_token(user_id=member.pk, kind="digest"))

    modes = notify_modes(user=member)
    assert {kind for kind, mode in modes.items() if mode == "off"} == {
        "changeset",
        "ticket",
        "claim",
        "webhook",
    }
    assert modes["mention"] == "now"


def test_a_deactivated_users_link_is_refused(member):
    token = unsubscribe_token(user_id=member.pk, kind="mention")
    User.objects.filter(pk=member.pk).update(is_active=False)

    assert Client().get(f"/notifications/unsubscribe/{token}/").status_code == 400


# --- the e-mail settings page -----------------------------------------------------------------------


def test_the_settings_page_shows_each_kind_and_saves_with_a_message(client, member):
    client.force_login(member)
    page = client.get("/notifications/")
    html = page.content.decode()
    assert page.status_code == 200
    assert "<legend>Mentions of you</legend>" in html
    assert '<input type="radio" name="mention" value="now" id="id_mention_0" required checked>' in html
    assert "Mail goes to <strong>member@example.com</strong>" in html

    choices = {**notify_modes(user=member), "mention": "digest", "ticket": "off"}
    saved = client.post("/notifications/", choices, follow=True)

    assert saved.status_code == 200
    assert "Your e-mail settings were saved." in saved.content.decode()
    assert notify_modes(user=member)["mention"] == "digest"
    assert notify_modes(user=member)["ticket"] == "off"


def test_a_bad_choice_is_a_400_and_saves_nothing(client, member):
    client.force_login(member)

    answer = client.post("/notifications/", {**notify_modes(user=member), "mention": "hourly"})

    assert answer.status_code == 400
    assert "Nothing was saved" in answer.content.decode()
    assert not NotificationPreference.objects.exists()


def test_the_settings_page_needs_a_sign_in_and_is_linked_from_every_page(client, member):
    assert client.get("/notifications/").status_code == 302
    client.force_login(member)
    assert 'href="/notifications/">E-mail settings</a>' in client.get("/inbox/").content.decode()


def test_the_watch_button_on_the_ticket_page_makes_its_watcher_told(client, users, ticket):
    client.force_login(users["viewer"])
    page = client.get(f"/projects/BAL/items/{ticket.key}/")
    assert f"Watch {ticket.key}" in page.content.decode()

    client.post(f"/projects/BAL/items/{ticket.key}/watch/", {"watch": "on"})
    assert Watch.objects.filter(user=users["viewer"], item=ticket).exists()
    item_update(actor=Actor(user=users["owner"]), item=ticket, fields={"title": "Sign in form"})

    assert Mail.objects.filter(user=users["viewer"], kind="ticket").count() == 1

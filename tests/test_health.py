"""``ballet/views.py``: /healthz checks the database and the channel layer and names a sweep of lapsed
leases that stopped, /favicon.ico; /metrics serves Prometheus text."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import pytest
from channels.layers import channel_layers
from django.utils import timezone

from planner.live.hub import hub
from tracker.models import Claim, Sweep
from tracker.services.activity import Actor
from tracker.services.work import claim_take, claims_expire


@pytest.mark.django_db
def test_healthz_reports_database_and_channel_layer(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "checks": {"database": True, "channel_layer": True, "relay": True},
    }


@pytest.mark.django_db
def test_healthz_is_503_when_the_channel_layer_fails(client, settings):
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": ["redis://127.0.0.1:1/0"]},
        }
    }
    channel_layers.backends.clear()
    try:
        response = client.get("/healthz")
    finally:
        channel_layers.backends.clear()
    assert response.status_code == 503
    assert response.json()["checks"] == {"database": True, "channel_layer": False, "relay": True}


@pytest.mark.django_db
def test_metrics_are_exposed(client):
    client.get("/healthz")
    response = client.get("/metrics")
    assert response.status_code == 200
    assert b"django_http_requests_total_by_method_total" in response.content


@pytest.mark.django_db
def test_unknown_api_paths_answer_json_404(client):
    response = client.get("/api/v1/projects/BAL/changesets/abc/")
    assert response.status_code == 404
    assert response.json() == {"error": {"code": "not_found", "message": "Not found."}}


def test_the_icon_browsers_ask_for_is_served(client):
    answer = client.get("/favicon.ico")
    assert answer.status_code == 301
    assert answer["Location"].endswith(".svg")
    assert 'rel="icon"' in client.get("/accounts/login/").content.decode()


@pytest.mark.django_db
def test_healthz_is_503_while_the_relay_joins_the_channel_layer_again(client, monkeypatch):
    monkeypatch.setattr(hub, "relay", SimpleNamespace(available=False))  # as after Redis restarted
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json() == {
        "status": "unavailable",
        "checks": {"database": True, "channel_layer": True, "relay": False},
    }


# --- the sweep of lapsed leases: named when it stopped, never for a deployment that has not needed it


def swept_at(moment) -> None:
    Sweep.objects.update_or_create(name="leases", defaults={"finished_at": moment})


def lapsed_claim(make_item, member, minutes: int) -> Claim:
    ticket = make_item(title="Add the cache", state="ready")
    claim = claim_take(actor=Actor(user=member), project=ticket.project, item=ticket)
    past = timezone.now() - timedelta(minutes=minutes)
    Claim.objects.filter(pk=claim.pk).update(renewed_at=past - timedelta(minutes=30), expires_at=past)
    return claim


@pytest.mark.django_db
def test_healthz_names_a_sweep_that_last_finished_minutes_ago(client, make_item, member):
    swept_at(timezone.now() - timedelta(minutes=7, seconds=5))
    lapsed_claim(make_item, member, minutes=2)

    response = client.get("/healthz")

    assert response.status_code == 200  # this process serves: the sweep is beat's and the worker's
    body = response.json()
    assert body["status"] == "degraded"
    assert body["checks"] == {"database": True, "channel_layer": True, "relay": True}
    assert body["warnings"]["lease_sweep"].startswith(
        "The sweep of lapsed leases last finished 7 minutes ago; 1 claim whose lease ran out still "
        "waits for it (every read counts it as expired). "
    )


@pytest.mark.django_db
def test_healthz_names_a_sweep_that_never_ran_once_a_lease_waited_long_for_it(client, make_item, member):
    lapsed_claim(make_item, member, minutes=12)

    body = client.get("/healthz").json()

    assert body["status"] == "degraded"
    assert body["warnings"]["lease_sweep"].startswith(
        "No sweep of lapsed leases has finished, and a lease ran out 12 minutes ago; 1 claim "
    )


@pytest.mark.django_db
@pytest.mark.parametrize("swept_ago", [None, timedelta(minutes=1)])
def test_healthz_says_nothing_of_a_sweep_that_is_on_time(client, make_item, member, swept_ago):
    if swept_ago is not None:
        swept_at(timezone.now() - swept_ago)
    lapsed_claim(make_item, member, minutes=2)  # the next sweep is due, not late

    response = client.get("/healthz")

    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "checks": {"database": True, "channel_layer": True, "relay": True},
    }


@pytest.mark.django_db
def test_healthz_of_a_sweep_that_just_ran_after_a_stop_says_nothing(client, make_item, member):
    swept_at(timezone.now() - timedelta(hours=3))
    lapsed_claim(make_item, member, minutes=90)
    assert client.get("/healthz").json()["status"] == "degraded"

    claims_expire()

    assert client.get("/healthz").json()["status"] == "ok"

"""``ballet/views.py``: /healthz checks the database and the channel layer, /favicon.ico; /metrics serves
Prometheus text."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from channels.layers import channel_layers

from planner.live.hub import hub


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

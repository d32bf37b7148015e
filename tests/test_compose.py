"""compose.yaml runs what the README's production setup runs, with every variable it exports."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.production_steps import ROOT, production_steps

STEPS = production_steps()


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    found: dict[str, Any] = compose["services"]
    return found


def command_of(service: dict[str, Any]) -> str:
    command = service["command"]
    return command if isinstance(command, str) else " ".join(command)


def app_services(services: dict[str, Any]) -> dict[str, Any]:
    return {name: s for name, s in services.items() if s.get("image") == "ballet"}


def test_compose_has_the_stores_the_setup_two_daphnes_a_worker_and_one_beat(services):
    assert {"postgres", "redis", "setup", "worker", "beat"} <= set(services)
    commands = {name: command_of(s) for name, s in app_services(services).items()}
    daphnes = [name for name, command in commands.items() if ".venv/bin/daphne" in command]
    assert len(daphnes) == 2
    assert [name for name, command in commands.items() if " beat" in command] == ["beat"]
    assert " worker" in commands["worker"]


def test_every_variable_the_readme_exports_is_set_for_every_process(services):
    processes = app_services(services)
    assert set(processes) == {"setup", "daphne-1", "daphne-2", "worker", "beat"}
    for name, service in processes.items():
        assert set(STEPS.exported) <= set(service["environment"]), name
        assert service["environment"]["DJANGO_SETTINGS_MODULE"] == STEPS.exported["DJANGO_SETTINGS_MODULE"]
    assert "DJANGO_SUPERUSER_PASSWORD" in processes["setup"]["environment"]


def test_the_processes_start_as_the_readme_starts_them(services):
    processes = app_services(services)
    daphne = STEPS.named("daphne")
    for name in ("daphne-1", "daphne-2"):
        assert processes[name]["command"] == daphne.argv, name
    assert processes["worker"]["command"][:4] == STEPS.named("celery", "worker").argv
    assert processes["beat"]["command"][:4] == STEPS.named("celery", "beat").argv


def test_the_setup_runs_the_readme_steps_first_and_the_processes_wait_for_it(services):
    setup = command_of(services["setup"])
    steps = [
        " ".join(STEPS.named("python", step).argv[:3]) for step in ("migrate", "collectstatic", "bootstrap")
    ]
    positions = [setup.find(step) for step in steps]
    assert -1 not in positions, (steps, setup)
    assert positions == sorted(positions)
    assert "--noinput" in setup.split("bootstrap", 1)[1]
    for name in ("daphne-1", "daphne-2", "worker", "beat"):
        assert services[name]["depends_on"] == {"setup": {"condition": "service_completed_successfully"}}
    assert services["setup"]["depends_on"]["postgres"] == {"condition": "service_healthy"}


def test_the_daphnes_share_the_collected_static_files_with_the_setup(services):
    for name in ("setup", "daphne-1", "daphne-2"):
        assert "static:/app/staticfiles" in services[name]["volumes"], name

"""compose.yaml runs what the README's production setup runs, with every variable it exports; the
image (Dockerfile) runs as a user of its own and says whether its daphne is healthy."""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

import pytest
import yaml

from ballet import healthcheck
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


DOCKERFILE = (ROOT / "Dockerfile").read_text()


def dockerfile_instructions() -> list[tuple[str, str]]:
    """The Dockerfile's instructions as (INSTRUCTION, rest), continuation lines joined."""
    joined = DOCKERFILE.replace("\\\n", " ")
    lines = [
        line.strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def test_the_image_runs_as_a_user_of_its_own_who_owns_only_what_it_writes(services):
    instructions = dockerfile_instructions()
    users = [rest.strip() for name, rest in instructions if name == "USER"]
    assert users, "the image runs as root"
    assert users[-1].split(":")[0] not in ("root", "0")
    made = " ".join(rest for name, rest in instructions if name == "RUN")
    assert re.search(rf"useradd .*--uid 10001 .*\b{re.escape(users[-1])}\b", made), made
    owned = re.search(r"chown -R \S+ (.+?)(?:&&|$)", made)
    assert owned, "the user owns nothing it must write"
    assert set(owned.group(1).split()) == {"/app/staticfiles", "/app/db"}
    # The folders the volumes cover are the user's: collectstatic and the mirrors' fetches write there.
    last_user = max(i for i, (name, _) in enumerate(instructions) if name == "USER")
    assert [i for i, (name, _) in enumerate(instructions) if name == "COPY"][-1] < last_user
    for volume in services["setup"]["volumes"]:
        assert volume.split(":")[1].startswith(("/app/staticfiles", "/app/db")), volume


def test_the_image_probes_healthz_with_its_own_python():
    checks = [rest for name, rest in dockerfile_instructions() if name == "HEALTHCHECK"]
    assert len(checks) == 1
    command = json.loads(checks[0].split("CMD", 1)[1])
    assert command[:3] == ["/app/.venv/bin/python", "-I", "/app/ballet/healthcheck.py"]
    assert (ROOT / "ballet" / "healthcheck.py").is_file()
    assert healthcheck.DEFAULT_URL == "http://127.0.0.1:8000/healthz"
    assert "EXPOSE 8000" in DOCKERFILE


def test_the_daphnes_are_probed_on_healthz_and_the_worker_by_a_ping(services):
    for name in ("daphne-1", "daphne-2"):
        test = services[name]["healthcheck"]["test"]
        assert test[0] == "CMD", (name, test)
        assert "/app/ballet/healthcheck.py" in test, (name, test)
        port = services[name]["command"][services[name]["command"].index("-p") + 1]
        assert test[-1] == f"http://127.0.0.1:{port}/healthz", (name, test)
    worker = services["worker"]["healthcheck"]["test"]
    assert worker[0] == "CMD-SHELL"
    assert "celery -A ballet inspect ping --destination celery@$$HOSTNAME" in worker[1]
    # The image's probe asks a daphne: where none listens it is turned off, never left to fail.
    for name in ("setup", "beat"):
        assert services[name]["healthcheck"] == {"disable": True}, name
    assert set(app_services(services)) == {"setup", "daphne-1", "daphne-2", "worker", "beat"}


def test_the_setup_bootstraps_with_the_readmes_arguments(services):
    """compose.yaml's variables default to the README's values: with none set, the same command."""
    setup = command_of(services["setup"])
    ours = shlex.split(
        re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", setup.split("manage.py bootstrap", 1)[1].split("&&")[0])
    )
    readme = STEPS.named("python", "bootstrap").argv[3:]
    assert ours == readme
    assert "--email" in ours


def test_the_proxy_fronts_both_daphnes_with_the_repositorys_caddyfile(services):
    """deploy/Caddyfile (run by tests/e2e/test_proxy.py) in front of every daphne, at its port."""
    proxy = services["proxy"]
    assert proxy["image"].split(":")[0] == "caddy"
    assert "./deploy/Caddyfile:/etc/caddy/Caddyfile:ro" in proxy["volumes"]
    caddyfile = (ROOT / "deploy" / "Caddyfile").read_text()
    read = set(re.findall(r"\{\$(\w+)", caddyfile))
    assert set(proxy["environment"]) <= read, set(proxy["environment"]) - read
    daphnes = {name: s for name, s in app_services(services).items() if ".venv/bin/daphne" in command_of(s)}
    upstreams = proxy["environment"]["BALLET_UPSTREAMS"].split()
    assert sorted(upstreams) == sorted(
        f"{name}:{s['command'][s['command'].index('-p') + 1]}" for name, s in daphnes.items()
    )
    assert all("--proxy-headers" in s["command"] for s in daphnes.values())
    assert set(proxy["depends_on"]) == set(daphnes)
    # The site's name is the one Django allows (and trusts as an https origin).
    assert proxy["environment"]["BALLET_HOST"] == services["daphne-1"]["environment"]["DJANGO_ALLOWED_HOSTS"]
    assert {"80:80", "443:443"} <= set(proxy["ports"])

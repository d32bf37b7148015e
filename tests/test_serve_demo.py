"""What ``make run`` prints last (``manage.py serve_demo``): the address to open and, from the
seed's lines, demo's password and the worker's key when this seed made them, else where new ones
come from. The first run's banner, against a real ``make run``: tests/e2e/test_readme_walk.py."""

from __future__ import annotations

from ballet.management.commands.serve_demo import RESET, banner, url

FIRST_SEED = """demo (owner): created password: s3cret-Pass_1
viewer (viewer): created password: other-Pass
agent (member, a worker): API key (read+ask+work): ballet_abc.DEF_123
Built project DEMO (Courtside) in Demo Org: 14 tickets"""
AGAIN = """demo (owner): exists, password unchanged (--reset-passwords prints a new one)
viewer (viewer): exists, password unchanged (--reset-passwords prints a new one)
agent (member, a worker): exists, API key unchanged (--reset-passwords prints a new one)
Already seeded, nothing changed: project DEMO (Courtside) in Demo Org: 14 tickets"""


def test_a_wildcard_address_is_opened_on_the_loopback_one():
    assert url("127.0.0.1", 8000) == "http://127.0.0.1:8000/"
    assert url("0.0.0.0", 8080) == "http://127.0.0.1:8080/"
    assert url("::", 8000) == "http://[::1]:8000/"
    assert url("::1", 8000) == "http://[::1]:8000/"
    assert url("ballet.internal", 8000) == "http://ballet.internal:8000/"


def test_the_first_seed_gives_demos_password_and_the_workers_key_to_paste():
    lines = banner("http://127.0.0.1:8000/", FIRST_SEED).splitlines()

    assert "Ballet is serving http://127.0.0.1:8000/ (Ctrl-C stops it)." in lines
    assert "Open it and sign in as demo, password s3cret-Pass_1" in lines
    assert "  export BALLET_KEY=ballet_abc.DEF_123" in lines
    assert "other-Pass" not in "\n".join(lines)  # viewer's stays among the seed's lines


def test_new_passwords_from_a_reset_are_given_too():
    reset = FIRST_SEED.replace("created password", "new password").replace("API key", "new API key")

    text = banner("http://127.0.0.1:8000/", reset)

    assert "password s3cret-Pass_1" in text
    assert "export BALLET_KEY=ballet_abc.DEF_123" in text


def test_a_seeded_database_says_where_new_ones_come_from():
    text = banner("http://127.0.0.1:8000/", AGAIN)

    assert "sign in as demo, with the password the first seed printed" in text
    assert text.count(RESET) == 2
    assert "export" not in text


def test_behind_https_settings_the_pages_are_the_proxys():
    assert "open the address of the TLS proxy" in banner("http://127.0.0.1:8000/", FIRST_SEED, proxied=True)
    assert "proxy" not in banner("http://127.0.0.1:8000/", FIRST_SEED)

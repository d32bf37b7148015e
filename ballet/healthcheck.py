"""The image's health probe: does the daphne in this container answer ``/healthz`` with a 200?

Docker runs it every few seconds (the Dockerfile's ``HEALTHCHECK``, compose.yaml's daphnes), so it
imports the standard library only, never Django: ``.venv/bin/python -I ballet/healthcheck.py``
starts in a few milliseconds. python:slim has no curl, hence Python. It exits 0 when healthy
(``ok`` or ``degraded``: a stopped sweep is worth a warning, not a restart), 1 otherwise, and says
why on one line, which ``docker inspect`` keeps.

Django refuses a Host it does not serve (400) before any view runs, so the request names the
first of ``DJANGO_ALLOWED_HOSTS``, as the proxy would.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request

DEFAULT_URL = "http://127.0.0.1:8000/healthz"
TIMEOUT_SECONDS = 5.0


def served_host(allowed_hosts: str | None) -> str:
    """A Host header the server accepts: the first allowed host, a pattern made a name."""
    first = (allowed_hosts or "").split(",")[0].strip()
    if first in ("", "*"):
        return "localhost"  # the settings' own default names it
    return first.lstrip(".")  # ".example.com" serves example.com too


def probe(url: str, host: str) -> tuple[bool, str]:
    """Whether ``url`` answered 200, and what it said."""
    if not url.startswith(("http://", "https://")):
        return False, f"not an http URL: {url}"
    request = urllib.request.Request(url, headers={"Host": host})  # noqa: S310 - http(s) only, above
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:  # noqa: S310
            return response.status == 200, f"{response.status} {response.read(300).decode(errors='replace')}"
    except urllib.error.HTTPError as exc:
        return False, f"{exc.code} {exc.read(300).decode(errors='replace')}"
    except (OSError, ValueError) as exc:  # refused, timed out, a bad URL
        return False, f"no answer from {url}: {exc}"


def main(argv: list[str]) -> int:
    url = argv[1] if len(argv) > 1 else DEFAULT_URL
    healthy, said = probe(url, served_host(os.environ.get("DJANGO_ALLOWED_HOSTS")))
    sys.stdout.write(said.replace("\n", " ") + "\n")
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))

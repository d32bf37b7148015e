"""``manage.py serve_demo``: what ``make run`` ends with. Seeds the demo, indexes it for search,
serves it with daphne and, once the port takes connections, says last where to go and who to be.

Daphne's "Listening on TCP address" would otherwise be the last line, far below the seed's
passwords: the address, ``demo``'s password (when this seed made one) and the seeded worker's key
(likewise, as an ``export`` line to paste) come after it. Daphne's log passes through this
command, which prints the banner once daphne has said it listens: knocking on the port could be
answered by another server holding it. Ctrl-C reaches daphne with the terminal's process group
and this command waits for it to end; a SIGTERM sent to this process alone is passed on. Either
way the command exits as daphne did (a daphne that could not listen fails it).
"""

from __future__ import annotations

import io
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import IO, Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

# The seed's lines about the owner's password and the worker's key (planner/management/commands/seed_demo.py).
PASSWORD_LINE = re.compile(r"^demo \([^)]*\): (?:created|new) password: (?P<secret>\S+)$", re.M)
KEY_LINE = re.compile(r"^agent \([^)]*\): (?:new )?API key \([^)]*\): (?P<secret>ballet_\S+)$", re.M)
RESET = ".venv/bin/python manage.py seed_demo --reset-passwords"
STOP_GRACE = 10.0  # seconds daphne has to end after a signal before it is killed
RELAY_GRACE = 2.0  # seconds for daphne's last log lines once it ended
# Daphne's log line once its port listens (daphne/server.py, listen_success).
LISTENING = "Listening on TCP address"
# A wildcard address listens on the loopback one too: the address to open.
LOOPBACK = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}  # noqa: S104 - read, never bound


class Command(BaseCommand):
    help = "Seed the demo, index it, serve it with daphne, and print where to sign in once it listens."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="Address to listen on (default 127.0.0.1).")
        parser.add_argument("--port", type=int, default=8000, help="Port to listen on (default 8000).")

    def handle(self, *args: Any, host: str, port: int, **options: Any) -> None:
        seeded = io.StringIO()
        call_command("seed_demo", stdout=seeded)
        self.stdout.write(seeded.getvalue().rstrip("\n"))
        call_command("search_backfill", "--all", "--unindexed", stdout=self.stdout, stderr=self.stderr)
        connections.close_all()  # the server opens its own
        serve = ["-b", host, "-p", str(port), "ballet.asgi:application"]  # as `make serve` does
        daphne = subprocess.Popen(  # noqa: S603 - this venv's daphne, no shell
            [str(Path(sys.executable).parent / "daphne"), *serve], stderr=subprocess.PIPE, text=True
        )
        # Only a signal sent to this process alone needs passing on; Ctrl-C reaches daphne too.
        signal.signal(signal.SIGTERM, lambda signum, frame: _pass_on(daphne, signum, frame))
        listening = threading.Event()
        assert daphne.stderr is not None
        relay = threading.Thread(target=_relay, args=(daphne.stderr, listening), daemon=True)
        relay.start()
        try:
            if _listening(daphne, listening):
                proxied = getattr(settings, "SECURE_SSL_REDIRECT", False)
                self.stdout.write(banner(url(host, port), seeded.getvalue(), proxied=proxied))
                self.stdout.flush()
            code = daphne.wait()
        except KeyboardInterrupt:
            code = _ended(daphne)
        relay.join(timeout=RELAY_GRACE)  # daphne's last lines (a child of daphne's may hold its pipe)
        if code:
            raise CommandError(f"daphne exited with {code}", returncode=code if code > 0 else 1)


def url(host: str, port: int) -> str:
    """The address to open in a browser."""
    shown = LOOPBACK.get(host, host)
    return f"http://[{shown}]:{port}/" if ":" in shown else f"http://{shown}:{port}/"


def banner(address: str, seeded: str, *, proxied: bool = False) -> str:
    """The last lines ``make run`` prints: where to go, the sign-in, the worker's key to export.
    ``proxied``: the settings redirect plain HTTP to https, so the pages are the proxy's."""
    password = PASSWORD_LINE.search(seeded)
    key = KEY_LINE.search(seeded)
    lines = ["", f"Ballet is serving {address} (Ctrl-C stops it)."]
    if proxied:
        lines.append("These settings redirect to https: open the address of the TLS proxy in front of it.")
    if password:
        lines.append(f"Open it and sign in as demo, password {password['secret']}")
    else:
        lines.append(
            "Open it and sign in as demo, with the password the first seed printed "
            f"(`{RESET}` prints new ones)."
        )
    if key:
        lines += [
            "The seeded worker's API key, for the README's curl and MCP examples:",
            "",
            f"  export BALLET_KEY={key['secret']}",
            "",
        ]
    else:
        lines.append(
            f"The seeded worker's API key is the one the first seed printed (`{RESET}` makes a new one)."
        )
    return "\n".join(lines)


def _relay(log: IO[str], listening: threading.Event) -> None:
    """Daphne's log to this command's, line by line; ``listening`` set once daphne says so."""
    for line in log:
        sys.stderr.write(line)
        sys.stderr.flush()
        if LISTENING in line:
            listening.set()


def _listening(daphne: subprocess.Popen[str], listening: threading.Event) -> bool:
    """Wait until daphne listens (True), or ended (False)."""
    while not listening.wait(0.1):
        if daphne.poll() is not None:
            return False
    return True


def _pass_on(daphne: subprocess.Popen[str], signum: int, frame: FrameType | None) -> None:
    if daphne.poll() is None:
        daphne.send_signal(signum)


def _ended(daphne: subprocess.Popen[str]) -> int:
    """Daphne's exit code once the Ctrl-C it also got ends it; killed if it outlasts the grace."""
    try:
        return daphne.wait(timeout=STOP_GRACE)
    except subprocess.TimeoutExpired:
        daphne.kill()
        return daphne.wait()

"""``manage.py serve_metrics``: ``/metrics`` of the host's processes, for a host without daphne.

Every daphne answers ``/metrics`` with the counts of all the processes of its host
(``ballet/metrics.py``). A host that runs only Celery workers has no daphne to
scrape: this serves the same page from the same directory, and nothing else.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from prometheus_client import start_http_server

from ballet.metrics import registry


class Command(BaseCommand):
    help = "Serve /metrics of this host's processes (BALLET_METRICS_DIR) for Prometheus to scrape."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--bind", default="127.0.0.1", help="Address to listen on (default 127.0.0.1).")
        parser.add_argument("--port", type=int, default=9808, help="Port to listen on (default 9808).")

    def handle(self, *args: Any, bind: str, port: int, **options: Any) -> None:
        if settings.METRICS_DIR is None:
            raise CommandError("BALLET_METRICS_DIR is not set: there is no directory of the host to serve.")
        server, thread = start_http_server(port, addr=bind, registry=registry())
        self.stdout.write(f"serving the metrics of {settings.METRICS_DIR} on http://{bind}:{port}/metrics")
        try:
            thread.join()
        finally:
            server.shutdown()

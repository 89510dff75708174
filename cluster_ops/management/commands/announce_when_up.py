"""Say the site's address once its web server answers: `make run` starts this beside the product's processes.

The address printed before the processes start was wrong for half a minute (gunicorn loads the whole product before
it listens); this line comes when a request has been answered. It gives up, saying so, after ``--seconds``.
"""

from __future__ import annotations

import os
import time
import urllib.error
import urllib.request

from django.core.management.base import BaseCommand, CommandError, CommandParser

POLL_SECONDS = 0.5


def answers(url: str) -> bool:
    """Whether a web server answers ``url`` with any HTTP status below 500."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status < 500
    except urllib.error.HTTPError as refused:
        return refused.code < 500
    except (OSError, ValueError):
        return False


class Command(BaseCommand):
    help = "Wait until the web server (WEB_ADDRESS) answers, then print its address."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--seconds", type=float, default=600.0, help="give up after this long (default 600)")

    def handle(self, *args: object, **options: object) -> None:
        address = os.environ.get("WEB_ADDRESS", "127.0.0.1:8000")
        site = f"http://{address}/"
        deadline = time.monotonic() + float(options["seconds"])  # type: ignore[arg-type]
        while not answers(f"{site}accounts/login/"):
            if time.monotonic() > deadline:
                raise CommandError(f"the web server did not answer on {site} within {options['seconds']:.0f} s: "
                                   "its log is above")
            time.sleep(POLL_SECONDS)
        self.stdout.write(f"Cluster Ops answers on {site} — a process that dies is restarted; Ctrl-C stops them all")

"""``manage.py fetch_traces [--folder NAME ...] [--mirror URL]``: the public traces from their published sources.

Downloads each catalogued folder's repositories at their recorded commits and writes into ``TRACES_DIR`` every file
whose SHA-256 the catalogue records (``scheduler/whatif/trace_download``). Files already in place and intact are kept.
Exits non-zero when a file could not be found in what its authors published; its folder's ``PROVENANCE.md`` (in the
reference copy) says how it was made.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from scheduler.whatif import trace_download

SHOWN = 5  # file names listed; the rest counted


class Command(BaseCommand):
    help = "Download the public traces into TRACES_DIR from their published repositories, checked file by file."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--folder", action="append", help="repeatable; default: every catalogued folder")
        parser.add_argument("--mirror", default=trace_download.GITHUB_ARCHIVES,
                            help="a server laid out like codeload.github.com (<owner>/<name>/tar.gz/<commit>); "
                                 "default: GitHub")

    def handle(self, *args: object, **options: Any) -> None:
        try:
            mirror = trace_download.check_mirror(options["mirror"])
        except ValueError as error:
            raise CommandError(str(error)) from None
        traces_dir = Path(settings.TRACES_DIR)
        try:
            results = trace_download.fetch(traces_dir, options["folder"], mirror)
        except KeyError as error:
            raise CommandError(error.args[0]) from None
        for result in results:
            self.stdout.write(f"{result.folder}: {len(result.written)} written, {len(result.already)} already in "
                              f"place, {len(result.not_found)} not found in the published archives")
            for failure in result.errors:
                self.stdout.write(f"  download failed: {failure}")
            if result.not_found:
                more = f" and {len(result.not_found) - SHOWN} more" if len(result.not_found) > SHOWN else ""
                self.stdout.write(f"  not found: {', '.join(result.not_found[:SHOWN])}{more}")
        incomplete = [result.folder for result in results if not result.ok]
        if incomplete:
            raise CommandError(f"TRACES_DIR={traces_dir}: {', '.join(incomplete)} incomplete; the files named are "
                               "not published in this form (see the folder's PROVENANCE.md in a reference copy)")

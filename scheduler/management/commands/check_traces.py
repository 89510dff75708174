"""``manage.py check_traces [--folder NAME ...] [--record]``: TRACES_DIR's public traces against their checksums.

Every file of every catalogued folder (``scheduler/whatif/trace_catalogue.json``) is hashed and compared; a folder is
"ok", or the files missing or different are named. Exits non-zero unless every folder checked is ok.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from scheduler.whatif import trace_catalogue

SHOWN = 5  # file names listed per problem; the rest counted


class Command(BaseCommand):
    help = "Check TRACES_DIR's public traces, file by file, against their recorded SHA-256 checksums."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--folder", action="append", help="repeatable; default: every catalogued folder")
        parser.add_argument("--record", action="store_true",
                            help="rewrite the catalogue's checksums from this TRACES_DIR (after a deliberate update)")

    def handle(self, *args: object, **options: Any) -> None:
        traces_dir = Path(settings.TRACES_DIR)
        if options["record"]:
            recorded = trace_catalogue.record(traces_dir, trace_catalogue.load_catalogue())
            self.stdout.write(f"recorded {sum(len(e['files']) for e in recorded.values())} files' checksums")
            return
        try:
            results = trace_catalogue.check(traces_dir, options["folder"])
        except KeyError as error:
            raise CommandError(error.args[0]) from None
        for result in results:
            if result.ok:
                self.stdout.write(f"{result.folder}: ok ({result.files} files; {result.source})")
                continue
            self.stdout.write(f"{result.folder}: {len(result.missing)} of {result.files} files missing, "
                              f"{len(result.different)} different ({result.source})")
            for what, names in (("missing", result.missing), ("different", result.different)):
                if names:
                    more = f" and {len(names) - SHOWN} more" if len(names) > SHOWN else ""
                    self.stdout.write(f"  {what}: {', '.join(names[:SHOWN])}{more}")
        bad = [result.folder for result in results if not result.ok]
        if bad:
            raise CommandError(f"TRACES_DIR={traces_dir}: {', '.join(bad)} not as published; each folder's "
                               "PROVENANCE.md names its source and commit")

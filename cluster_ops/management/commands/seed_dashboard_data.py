"""``manage.py seed_dashboard_data``: a month of a 1,024-GPU cluster for the dashboards (``dashboards/seed.py``)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from cluster_ops.dashboards import seed


class Command(BaseCommand):
    help = ("Seed the configured database with GPU inventory, finished, running and pending jobs with allocations "
            "and rescale events, and hour/minute rollups, for the dashboards and their benchmark. Refuses a "
            "database that already has jobs or GPUs unless --force, which deletes them (and all telemetry) first.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--gpus", type=int, default=1024, help="GPUs, in nodes of 8 (default 1024)")
        parser.add_argument("--days", type=int, default=30, help="days of history (default 30)")
        parser.add_argument("--jobs", type=int, default=10_000, help="finished jobs (default 10000)")
        parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
        parser.add_argument("--force", action="store_true",
                            help="delete existing jobs, inventory and telemetry first")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["gpus"] < 8 or options["days"] < 1 or options["jobs"] < 1:
            raise CommandError("need --gpus ≥ 8, --days ≥ 1 and --jobs ≥ 1")
        try:
            counts = seed.seed(gpus=options["gpus"], days=options["days"], jobs=options["jobs"],
                               seed=options["seed"], force=options["force"], now=timezone.now())
        except seed.AlreadySeeded as error:
            raise CommandError(str(error)) from error
        self.stdout.write(", ".join(f"{name} {value:,}" if isinstance(value, int) else f"{name} {value}"
                                    for name, value in counts.items()))

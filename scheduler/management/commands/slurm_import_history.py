from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.utils import timezone

from scheduler.backends.slurm.client import SlurmError, connect
from scheduler.backends.slurm.observer import history_jobs, mirror_slurm_jobs
from scheduler.bounds import MAX_GPUS


class Command(BaseCommand):
    help = ("Mirror the last N days of sacct into the console's jobs, so that the what-ifs replay this Slurm "
            "cluster's real history through any policy (What-if → this cluster's history).")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days", type=int, default=7, help="how far back (default 7, at most 366)")

    def handle(self, *args: object, **options: Any) -> None:
        if not 1 <= options["days"] <= 366:
            raise CommandError("--days: between 1 and 366")
        now = timezone.now()
        try:
            runs = connect().commands.accounting(now - timedelta(days=options["days"]), now)
        except SlurmError as error:
            raise CommandError(str(error)) from None
        jobs = [job for job in history_jobs(runs) if 0 < job.gpus <= MAX_GPUS and job.started_at is not None]
        with transaction.atomic():
            mirrored = mirror_slurm_jobs(jobs, now)
        self.stdout.write(f"{mirrored} Slurm jobs with GPUs from the last {options['days']} days mirrored")

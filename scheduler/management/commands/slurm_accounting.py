from datetime import datetime, timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from scheduler.backends.slurm.accounting import reconcile
from scheduler.backends.slurm.client import SlurmError, connect


def _moment(value: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise CommandError("--since/--until: expected an ISO date or date-time, e.g. 2026-12-01T08:00") from None
    return timezone.make_aware(moment) if timezone.is_naive(moment) else moment


class Command(BaseCommand):
    help = "The console's GPU-hours per job, user and tenant beside sacct's (gres/gpu), for a period."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--since", help="start of the period (ISO); default: a day ago")
        parser.add_argument("--until", help="end of the period (ISO); default: now")

    def handle(self, *args: object, **options: Any) -> None:
        now = timezone.now()
        end = _moment(options["until"]) if options["until"] else now
        start = _moment(options["since"]) if options["since"] else end - timedelta(days=1)
        if not start < end:
            raise CommandError("--since must be before --until")
        try:
            result = reconcile(connect(), start, end, now)
        except SlurmError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(f"GPU-hours {start:%Y-%m-%d %H:%M} .. {end:%Y-%m-%d %H:%M} (console / sacct / difference)")
        for job in result.jobs:
            console = "—" if job.console_gpu_seconds is None else f"{job.console_gpu_seconds / 3600:.4f}"
            diff = "not the console's" if job.difference is None else f"{job.difference / 3600:+.4f}"
            mark = " (partial)" if job.partial else ""
            ids = ",".join(map(str, job.slurm_ids))
            self.stdout.write(f"  Slurm job {ids} (console {job.console_id or '—'}, {job.tenant}/{job.user}): "
                              f"{console} / {job.slurm_gpu_seconds / 3600:.4f} / {diff}{mark}")
        for key in ("user", "tenant"):
            for name, (console_seconds, slurm_seconds) in result.totals(key).items():
                self.stdout.write(f"{key} {name}: {console_seconds / 3600:.4f} / {slurm_seconds / 3600:.4f} / "
                                  f"{(console_seconds - slurm_seconds) / 3600:+.4f}")

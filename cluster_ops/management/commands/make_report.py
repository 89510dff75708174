"""``manage.py make_report --period daily|weekly|YYYY-MM-DD..YYYY-MM-DD [--tenant NAME] [--send]``."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from cluster_ops.reports import periods, services, tasks
from cluster_ops.reports.models import ReportStatus
from scheduler.models import Tenant


class Command(BaseCommand):
    help = ("Make (or make again, replacing its files) the report of a period: the last complete day (daily), the "
            "last Monday-to-Sunday week (weekly) or the days FIRST..LAST (both included), for the whole cluster or "
            "one tenant. --send queues one e-mail per recipient (a Celery worker sends and retries them).")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--period", required=True, help="daily, weekly or YYYY-MM-DD..YYYY-MM-DD")
        parser.add_argument("--tenant", help="a tenant's name (default: the whole cluster)")
        parser.add_argument("--send", action="store_true", help="e-mail it to its recipients")

    def handle(self, *args: Any, **options: Any) -> None:
        now = timezone.now()
        try:
            period = periods.parse(options["period"], now, services.first_data_day())
        except ValueError as error:
            raise CommandError(str(error)) from error
        tenant = None
        if options["tenant"]:
            tenant = Tenant.objects.filter(name=options["tenant"]).first()
            if tenant is None:
                known = ", ".join(Tenant.objects.values_list("name", flat=True)) or "none"
                raise CommandError(f"no tenant {options['tenant']!r} (known: {known})")
        report = services.make_report(period, tenant, now=now)
        if report.status != ReportStatus.READY:
            raise CommandError(f"{report}: {report.error}")
        self.stdout.write(f"{report}: {', '.join(f.path for f in (report.pdf, report.html, report.csv))}")
        for note in report.notes:
            self.stdout.write(f"note: {note}")
        if options["send"]:
            sent = tasks.send_report(report)
            self.stdout.write(f"queued {len(sent)} e-mail{'s' if len(sent) != 1 else ''}")

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from scheduler.jobs import verbs
from scheduler.models import Job


class Command(BaseCommand):
    help = "Cancel a job, releasing its GPUs (a job already cancelled stays so)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("job_id", type=int, help="the job's id")
        parser.add_argument("--reason", default="cancelled from the command line")

    def handle(self, *args: object, **options: Any) -> None:
        job = Job.objects.filter(pk=options["job_id"]).first()
        if job is None:
            raise CommandError(f"job_id: no job with id {options['job_id']}.")
        try:
            job = verbs.cancel_job(job, reason=options["reason"])
        except ValidationError as error:
            raise CommandError(" ".join(error.messages)) from None
        self.stdout.write(f"job {job.pk} ({job.name}) is {job.state}")

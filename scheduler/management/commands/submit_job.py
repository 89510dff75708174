from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from scheduler.jobs.intake import IdempotencyConflict, submit_job_once


class Command(BaseCommand):
    help = "Queue a training job; prints its id and the token its workers report progress with."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True, help="tenant name")
        parser.add_argument("--name", required=True)
        parser.add_argument("--profile", required=True, help="workload profile, e.g. cifar10")
        parser.add_argument("--work", type=float, required=True, help="total work, in the profile's units")
        parser.add_argument("--min-gpus", type=int, default=1)
        parser.add_argument("--max-gpus", type=int, default=None, help="default: --min-gpus (rigid)")
        parser.add_argument("--priority", type=int, default=0)
        parser.add_argument("--gpu-type", default="", help="a100, v100, …; default: any")
        parser.add_argument("--batch-size", type=int, default=None, help="global batch; default: tuned")
        parser.add_argument("--command", default="", help="what each worker runs (local executor)")
        parser.add_argument("--idempotency-key", default="", help="a rerun with the same key submits nothing")

    def handle(self, *args: object, **options: Any) -> None:
        try:
            job, created = submit_job_once(
                tenant=options["tenant"], name=options["name"], workload_profile=options["profile"],
                total_work=options["work"], min_gpus=options["min_gpus"], max_gpus=options["max_gpus"],
                priority=options["priority"], gpu_type=options["gpu_type"], batch_size=options["batch_size"],
                command=options["command"], client_key=options["idempotency_key"],
            )
        except ValidationError as error:
            raise CommandError(explained(error)) from None
        except IdempotencyConflict as conflict:
            raise CommandError(f"--idempotency-key: {conflict}") from None
        verb = "submitted" if created else "already submitted with this key"
        self.stdout.write(f"job {job.pk} {verb}\nreport token: {job.report_token}")


def explained(error: ValidationError) -> str:
    """``--max-gpus: Max GPUs must be at least min GPUs.``, one line per field."""
    if not hasattr(error, "error_dict"):
        return " ".join(error.messages)
    return "\n".join(
        f"{_option(field)}: {' '.join(messages)}" for field, messages in error.message_dict.items()
    )


def _option(field: str) -> str:
    names = {"workload_profile": "profile", "total_work": "work", "client_key": "idempotency-key"}
    return "--" + names.get(field, field).replace("_", "-")

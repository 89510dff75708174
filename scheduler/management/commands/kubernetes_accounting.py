from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from scheduler.backends.kubernetes.accounting import read_pod_runs, reconcile
from scheduler.backends.kubernetes.client import KubernetesError, connect


class Command(BaseCommand):
    help = ("The console's GPU-hours per job and tenant beside its pods' in the Kubernetes API (GPUs × each "
            "container's running time), for the jobs whose pods the API still has.")

    def handle(self, *args: object, **options: Any) -> None:
        now = timezone.now()
        try:
            accounts = reconcile(read_pod_runs(connect()), now)
        except KubernetesError as error:
            raise CommandError(str(error)) from None
        self.stdout.write("GPU-hours (console / its pods in the API / difference)")
        tenants: dict[str, list[float]] = {}
        for job in accounts:
            mark = " (partial: pods deleted by a resize or preemption are gone from the API)" if job.partial else ""
            share = f" ({job.difference / job.pod_gpu_seconds:+.2%})" if job.pod_gpu_seconds else ""
            self.stdout.write(f"  job {job.console_id} ({job.tenant}): {job.console_gpu_seconds / 3600:.4f} / "
                              f"{job.pod_gpu_seconds / 3600:.4f} / {job.difference / 3600:+.4f}{share}{mark}")
            if not job.partial:
                totals = tenants.setdefault(job.tenant, [0.0, 0.0])
                totals[0] += job.console_gpu_seconds
                totals[1] += job.pod_gpu_seconds
        for tenant, (console, pods) in sorted(tenants.items()):
            share = f" ({(console - pods) / pods:+.2%})" if pods else ""
            self.stdout.write(f"tenant {tenant}, jobs with every pod: {console / 3600:.4f} / {pods / 3600:.4f} / "
                              f"{(console - pods) / 3600:+.4f}{share}")

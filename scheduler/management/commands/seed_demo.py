from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from scheduler.backends.kubernetes.client import KubernetesError
from scheduler.backends.slurm.client import SlurmError
from scheduler.demo import seed_demo
from scheduler.on_kubernetes.setup import seed_kubernetes
from scheduler.on_slurm.setup import seed_slurm


class Command(BaseCommand):
    help = "Seed the demo cluster: 16 nodes × 8 GPUs, 3 tenants, the first hour of a real trace (idempotent)."

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("--seed", type=int, default=0, help="generator seed where no trace is found")

    def handle(self, *args: object, **options: object) -> None:
        if settings.CLUSTER_BACKEND == "slurm":  # a real cluster: set up from Slurm, no simulated demo
            try:
                added = seed_slurm(timezone.now())
            except SlurmError as error:
                raise CommandError(f"CLUSTER_BACKEND=slurm: {error}") from None
            self.stdout.write(f"Slurm cluster: {added['nodes']} node(s), {added['tenants']} tenant(s) added, "
                              f"{added['jobs']} example job(s) submitted")
            return
        if settings.CLUSTER_BACKEND == "kubernetes":
            try:
                added = seed_kubernetes(timezone.now())
            except KubernetesError as error:
                raise CommandError(f"CLUSTER_BACKEND=kubernetes: {error}") from None
            self.stdout.write(f"Kubernetes cluster: {added['nodes']} node(s), {added['tenants']} tenant(s) added, "
                              f"{added['jobs']} example job(s) submitted")
            return
        added = seed_demo(settings.TRACES_DIR, timezone.now(), seed=int(options["seed"]))  # type: ignore[call-overload]
        self.stdout.write(
            f"demo cluster: {added['nodes']} node(s), {added['tenants']} tenant(s), {added['jobs']} job(s) added"
        )

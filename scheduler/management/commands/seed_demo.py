from collections.abc import Callable
from datetime import datetime

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from scheduler.backends.kubernetes.client import KubernetesError
from scheduler.backends.slurm.client import SlurmError
from scheduler.demo import seed_demo
from scheduler.on_kubernetes.setup import seed_kubernetes
from scheduler.on_slurm.setup import seed_slurm

# A real cluster is set up from what it has, instead of the simulated demo: its name, its setup, what it raises.
CLUSTER_SETUPS: dict[str, tuple[str, Callable[[datetime], dict[str, int]], type[Exception]]] = {
    "slurm": ("Slurm", seed_slurm, SlurmError),
    "kubernetes": ("Kubernetes", seed_kubernetes, KubernetesError),
}


class Command(BaseCommand):
    help = "Seed the demo cluster: 16 nodes × 8 GPUs, 3 tenants, the first hour of a real trace (idempotent)."

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("--seed", type=int, default=0, help="generator seed where no trace is found")

    def handle(self, *args: object, **options: object) -> None:
        if settings.CLUSTER_BACKEND in CLUSTER_SETUPS:
            name, set_up, refusal = CLUSTER_SETUPS[settings.CLUSTER_BACKEND]
            try:
                added = set_up(timezone.now())
            except refusal as error:
                raise CommandError(f"CLUSTER_BACKEND={settings.CLUSTER_BACKEND}: {error}") from None
            self.stdout.write(f"{name} cluster: {added['nodes']} node(s), {added['tenants']} tenant(s) added, "
                              f"{added['jobs']} example job(s) submitted or on their way")
            return
        added = seed_demo(settings.TRACES_DIR, timezone.now(), seed=int(options["seed"]))  # type: ignore[call-overload]
        self.stdout.write(
            f"demo cluster: {added['nodes']} node(s), {added['tenants']} tenant(s), {added['jobs']} job(s) added"
        )

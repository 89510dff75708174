"""``manage.py bench_kubernetes [--pods N] [--json]``: the observer's mirror of N pods with GPUs, timed against the
Kubernetes lab (``research/k8s_bench.py``)."""

import json
import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from cluster_ops.common.benchdb import throwaway_database
from research import k8s_bench
from scheduler.backends.kubernetes.client import KubernetesError, connect

MAX_PODS = 20_000


class Command(BaseCommand):
    help = ("On an idle Kubernetes lab: time the observer's mirror of N pods asking for GPUs (a throwaway database; "
            "every pod made is deleted).")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--pods", type=int, default=10_000, help=f"pods, 1–{MAX_PODS} (default 10000)")
        parser.add_argument("--admin-kubeconfig", default=os.environ.get("K8S_LAB_ADMIN_KUBECONFIG", ""),
                            help="a kubeconfig allowed to create and delete pods (default: the lab's, from "
                                 "K8S_LAB_ADMIN_KUBECONFIG); the rounds use KUBECONFIG, the console's own")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: object, **options: Any) -> None:
        if not 1 <= options["pods"] <= MAX_PODS:
            raise CommandError(f"--pods: between 1 and {MAX_PODS}")
        if not options["admin_kubeconfig"]:
            raise CommandError("--admin-kubeconfig: needed to make the pods (`make k8s-lab` exports it)")
        try:
            admin = connect(options["admin_kubeconfig"])
            k8s_bench.refuse_a_busy_lab(admin)
            with throwaway_database("bench_kubernetes"):
                try:
                    report = k8s_bench.mirror(admin, options["pods"])
                finally:
                    k8s_bench.delete_pods(admin)
        except (KubernetesError, RuntimeError) as error:
            raise CommandError(str(error)) from None
        if options["json"]:
            self.stdout.write(json.dumps(report))
            return
        self.stdout.write(f"observer: {report['mirrored']} of {report['pods']} pods mirrored in "
                          f"{report['first_round_ms']} ms (a round), {report['next_round_ms']} ms again; listing the "
                          f"pods alone {report['listing_pods_ms']} ms; creating them took {report['creating_s']} s")

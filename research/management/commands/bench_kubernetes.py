"""``manage.py bench_kubernetes [--jobs J] [--pods N] [--json]``: a live round with J console jobs as suspended Jobs,
and the observer's mirror of N pods with GPUs, timed against the Kubernetes lab (``research/k8s_bench.py``)."""

import json
import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from cluster_ops.common.benchdb import throwaway_database
from research import k8s_bench
from scheduler.backends.kubernetes.client import KubernetesError, connect
from scheduler.models import Job

MAX_PODS = 20_000


class Command(BaseCommand):
    help = ("On an idle Kubernetes lab: time live rounds with J console jobs as Jobs, and the observer's mirror of N "
            "pods asking for GPUs (a throwaway database; every Job and pod made is deleted).")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--jobs", type=int, default=1000, help="console jobs, 0–5000 (default 1000; 0: skip)")
        parser.add_argument("--rounds", type=int, default=5, help="timed rounds, 1–50 (default 5)")
        parser.add_argument("--pods", type=int, default=10_000, help=f"pods, 0–{MAX_PODS} (default 10000; 0: skip)")
        parser.add_argument("--admin-kubeconfig", default=os.environ.get("K8S_LAB_ADMIN_KUBECONFIG", ""),
                            help="a kubeconfig allowed to create and delete pods (default: the lab's, from "
                                 "K8S_LAB_ADMIN_KUBECONFIG); the rounds use KUBECONFIG, the console's own")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: object, **options: Any) -> None:
        for name, low, high in (("jobs", 0, 5000), ("rounds", 1, 50), ("pods", 0, MAX_PODS)):
            if not low <= options[name] <= high:
                raise CommandError(f"--{name}: between {low} and {high}")
        if not options["admin_kubeconfig"]:
            raise CommandError("--admin-kubeconfig: needed to make the pods (`make k8s-lab` exports it)")
        try:
            admin = connect(options["admin_kubeconfig"])
            k8s_bench.refuse_a_busy_lab(admin)
            report: dict[str, Any] = {}
            with throwaway_database("bench_kubernetes"):
                if options["jobs"]:
                    try:
                        report["round"] = k8s_bench.round_with_queue(admin, options["jobs"], options["rounds"])
                    finally:
                        k8s_bench.delete_jobs(admin)
                    Job.objects.all().delete()
                    k8s_bench.wait_until_no_pods(admin)
                if options["pods"]:
                    try:
                        report["mirror"] = k8s_bench.mirror(admin, options["pods"])
                    finally:
                        k8s_bench.delete_pods(admin)
        except (KubernetesError, RuntimeError) as error:
            raise CommandError(str(error)) from None
        if options["json"]:
            self.stdout.write(json.dumps(report))
            return
        if "round" in report:
            row = report["round"]
            self.stdout.write(f"live round, {row['jobs']} console jobs ({row['suspended_jobs']} suspended Jobs, "
                              f"{row['running']} running): median {row['median_ms']} ms, max {row['max_ms']} ms over "
                              f"{row['rounds']} rounds; making their Jobs took {row['queueing_rounds']} rounds, "
                              f"{row['queueing_s']} s")
        if "mirror" in report:
            row = report["mirror"]
            self.stdout.write(f"observer: {row['mirrored']} of {row['pods']} pods mirrored in {row['first_round_ms']} "
                              f"ms (a round), {row['next_round_ms']} ms again; listing the pods alone "
                              f"{row['listing_pods_ms']} ms; creating them took {row['creating_s']} s")

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from cluster_ops.common.benchdb import throwaway_database
from research.round_bench import bench
from scheduler.core.config import get_policy
from scheduler.core.policy import UnknownPolicy


class Command(BaseCommand):
    help = (
        "Time full live rounds (snapshot + policy + writes) on a seeded busy cluster, in a throwaway "
        "database beside the configured one (SQLite or PostgreSQL): the product's data is not touched."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--jobs", type=int, default=1000)
        parser.add_argument("--gpus", type=int, default=1024, help="in nodes of 8")
        parser.add_argument("--rounds", type=int, default=5, help="timed rounds per policy, one minute apart")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--policy", action="append",
                            help="repeatable; default: tiresias, pollux, sia and sia-profiled")
        parser.add_argument("--json", action="store_true")
        parser.add_argument("--output", type=Path, help="also write the JSON result to this file")

    def handle(self, *args: Any, **options: Any) -> None:
        policies = options["policy"] or ["tiresias", "pollux", "sia", "sia-profiled"]
        for name in policies:
            try:
                get_policy(name)
            except UnknownPolicy as error:
                raise CommandError(str(error)) from None
        if options["jobs"] < 1 or options["gpus"] < 8 or options["rounds"] < 1:
            raise CommandError("need --jobs ≥ 1, --gpus ≥ 8 and --rounds ≥ 1")
        vendor = connection.vendor
        with throwaway_database("bench_round"):
            results = bench(options["jobs"], options["gpus"], policies, options["rounds"], options["seed"])
        report = {"database": vendor, "jobs": options["jobs"], "gpus": options["gpus"], "policies": results}
        if options["output"]:
            options["output"].write_text(json.dumps(report, indent=2) + "\n")
        self.stdout.write(json.dumps(report) if options["json"] else self._table(report))

    def _table(self, report: dict[str, Any]) -> str:
        lines = [f"full live round, {report['jobs']} jobs on {report['gpus']} GPUs, {report['database']} (ms):",
                 f"  {'policy':10s} {'median':>8s} {'max':>8s} {'snapshot':>9s} {'policy':>8s} {'write':>8s}"]
        for name, row in report["policies"].items():
            lines.append(f"  {name:10s} {row['median_ms']:8.1f} {row['max_ms']:8.1f} {row['snapshot_ms']:9.1f} "
                         f"{row['policy_ms']:8.1f} {row['write_ms']:8.1f}")
        return "\n".join(lines)

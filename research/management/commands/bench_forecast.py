"""``manage.py bench_forecast``: the live forecast, end to end, on ``bench_round``'s busy cluster."""

import json
import statistics
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from django.utils import timezone

from cluster_ops.common.benchdb import throwaway_database
from research.round_bench import seed_cluster
from scheduler.core.config import get_policy
from scheduler.core.policy import UnknownPolicy
from scheduler.forecasting import forecasts
from scheduler.models import SchedulerSettings


class Command(BaseCommand):
    help = ("Time the live forecast (snapshot, predictor, simulation to the last job's end, writes) on the "
            "bench_round cluster, in a throwaway database: a point forecast and one with arrival samples.")

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--jobs", type=int, default=1000)
        parser.add_argument("--gpus", type=int, default=1024, help="in nodes of 8")
        parser.add_argument("--policy", action="append", help="repeatable; default: tiresias and fifo")
        parser.add_argument("--samples", type=int, default=5, help="arrival samples of the ranged forecast")
        parser.add_argument("--repeats", type=int, default=3)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        policies = options["policy"] or ["tiresias", "fifo"]
        for name in policies:
            try:
                get_policy(name)
            except UnknownPolicy as error:
                raise CommandError(str(error)) from None
        if options["jobs"] < 1 or options["gpus"] < 8 or options["repeats"] < 1 or not 0 <= options["samples"] <= 20:
            raise CommandError("need --jobs ≥ 1, --gpus ≥ 8, --repeats ≥ 1 and 0 ≤ --samples ≤ 20")
        report: dict[str, Any] = {"database": connection.vendor, "jobs": options["jobs"], "gpus": options["gpus"],
                                  "samples": options["samples"], "policies": {}}
        with throwaway_database("bench_forecast"):
            now = timezone.now()
            seed_cluster(options["jobs"], options["gpus"], options["seed"], now)
            for policy in policies:
                SchedulerSettings.objects.update_or_create(pk=1, defaults={"policy": policy, "simulated_speedup": 1})
                report["policies"][policy] = {
                    "point_s": _timed(options["repeats"], now, 0),
                    "ranged_s": _timed(options["repeats"], now, options["samples"]),
                }
        self.stdout.write(json.dumps(report) if options["json"] else _table(report))


def _timed(repeats: int, now: Any, samples: int) -> dict[str, float]:
    walls, simulated = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        row = forecasts.refresh(now, force=True, samples=samples)
        walls.append(time.perf_counter() - started)
        simulated.append(row.wall_ms / 1000 if row else 0.0)
    return {"median": round(statistics.median(walls), 3), "max": round(max(walls), 3),
            "simulation_median": round(statistics.median(simulated), 3)}


def _table(report: dict[str, Any]) -> str:
    lines = [f"live forecast, {report['jobs']} jobs on {report['gpus']} GPUs, {report['database']} (s, end to end; "
             f"in brackets the simulation alone):"]
    for name, row in report["policies"].items():
        point, ranged = row["point_s"], row["ranged_s"]
        lines.append(f"  {name:10s} point {point['median']:.2f} (max {point['max']:.2f}; "
                     f"{point['simulation_median']:.2f})   {report['samples']} samples {ranged['median']:.2f} "
                     f"(max {ranged['max']:.2f}; {ranged['simulation_median']:.2f})")
    return "\n".join(lines)

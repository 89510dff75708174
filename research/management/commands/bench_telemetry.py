import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from cluster_ops.common.benchdb import throwaway_database
from research.telemetry_bench import run


class Command(BaseCommand):
    help = (
        "Time telemetry ingest, roll-ups and the 7-day dashboard queries at cluster scale, in a throwaway "
        "database beside the configured one (SQLite or PostgreSQL): the product's data is not touched."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--samples", type=int, default=100_000, help="readings to ingest")
        parser.add_argument("--gpus", type=int, default=1024, help="in nodes of 8")
        parser.add_argument("--repeats", type=int, default=5, help="timed runs per query, after one warm-up")
        parser.add_argument("--json", action="store_true")
        parser.add_argument("--output", type=Path, help="also write the JSON result to this file")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["samples"] < 1 or options["gpus"] < 1 or options["repeats"] < 1:
            raise CommandError("need --samples ≥ 1, --gpus ≥ 1 and --repeats ≥ 1")
        with throwaway_database("bench_telemetry"):
            report = run(options["samples"], options["gpus"], options["repeats"])
        if options["output"]:
            options["output"].write_text(json.dumps(report, indent=2) + "\n")
        self.stdout.write(json.dumps(report) if options["json"] else table(report))


def table(report: dict[str, Any]) -> str:
    ingest = report["ingest"]
    lines = [
        f"telemetry on {report['gpus']} GPUs, {report['database']}:",
        f"  ingest      {ingest['samples']:,} samples in {ingest['calls']} calls: {ingest['seconds']:.2f} s, "
        f"{ingest['samples_per_s']:,} samples/s",
        "  roll-up     " + ", ".join(f"{name} {s:.2f} s" for name, s in report["roll_up_s"].items()),
        "  seeding     " + ", ".join(f"{name} {s:.1f} s" for name, s in report["seed_s"].items()),
        "  queries (median ms):",
    ]
    lines += [f"    {name:24s} {ms:8.1f}" for name, ms in report["queries_ms"].items()]
    return "\n".join(lines)

import argparse
import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from scheduler.core.config import DEFAULT_RESTART_SECONDS, DEFAULT_ROUND_SECONDS
from scheduler.core.policy import UnknownPolicy
from scheduler.sim.catalogue import metric
from scheduler.sim.runner import Scenario, run_scenario
from scheduler.sim.trace_formats import FORMATS
from scheduler.sim.traces import TraceError

# What the readable table shows, in order; labels and units from the metric catalogue.
TABLE = [metric(key) for key in (
    "policy", "jobs", "completed", "avg_jct_s", "p50_jct_s", "p99_jct_s", "makespan_s", "avg_queue_s", "utilization",
    "effective_utilization", "jain", "ftf_p99", "rescales", "preemptions", "energy_kwh", "co2_kg", "wall_s",
)]


class Command(BaseCommand):
    help = "Replay a trace through a policy on a simulated cluster and print its metrics."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--trace", required=True, type=Path, help="trace file (formats: the manual, What-ifs)")
        parser.add_argument("--format", default="auto", choices=FORMATS)
        parser.add_argument("--policy", default="pollux")
        parser.add_argument("--preset", help="cluster preset instead of --nodes/--gpus-per-node/--gpu-type")
        parser.add_argument("--nodes", type=int, default=16)
        parser.add_argument("--gpus-per-node", type=int, default=4)
        parser.add_argument("--gpu-type", default="t4")
        parser.add_argument("--round-seconds", type=float, default=DEFAULT_ROUND_SECONDS)
        parser.add_argument("--restart-seconds", type=float, default=DEFAULT_RESTART_SECONDS)
        parser.add_argument("--power-cap-fraction", type=float, default=1.0,
                            help="power cap of every GPU type, as a fraction of its board power")
        parser.add_argument("--power-cap", action="append", type=_type_cap, default=[], metavar="TYPE=FRACTION",
                            help="a GPU type's own power cap, e.g. a100=0.7 (repeatable; overrides the fraction)")
        parser.add_argument("--power-down-spares", type=int,
                            help="switch idle nodes off, keeping this many spare (Helios CES style)")
        parser.add_argument("--power-on-seconds", type=float, default=300.0, help="boot time of a switched-off node")
        parser.add_argument("--min-off-seconds", type=float, default=600.0, help="least time a node stays off")
        parser.add_argument("--load-factor", type=float, default=1.0, help="2.0: the same jobs arrive twice as fast")
        parser.add_argument("--elastic", action="store_true", default=None, help="force elastic job bounds")
        parser.add_argument("--rigid", dest="elastic", action="store_false", help="force rigid replay")
        parser.add_argument("--max-jobs", type=int)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            scenario = self._scenario(options)
            _, summary = run_scenario(scenario, settings.TRACES_DIR)
        except (TraceError, UnknownPolicy, ValueError, FileNotFoundError) as error:
            raise CommandError(str(error)) from None
        self.stdout.write(json.dumps(summary) if options["json"] else _table(summary))

    def _scenario(self, options: dict[str, Any]) -> Scenario:
        if not options["trace"].is_file():
            raise CommandError(f"--trace {options['trace']}: no such file")
        return Scenario(
            trace=str(options["trace"]), policy=options["policy"], format=options["format"],
            elastic=options["elastic"], preset=options["preset"], nodes=options["nodes"],
            gpus_per_node=options["gpus_per_node"], gpu_type=options["gpu_type"],
            round_seconds=options["round_seconds"], restart_seconds=options["restart_seconds"],
            power_cap_fraction=options["power_cap_fraction"], power_caps_by_type=dict(options["power_cap"]),
            load_factor=options["load_factor"], seed=options["seed"], max_jobs=options["max_jobs"],
            power_down_spares=options["power_down_spares"], power_on_seconds=options["power_on_seconds"],
            min_off_seconds=options["min_off_seconds"],
        )


def _type_cap(text: str) -> tuple[str, float]:
    """``TYPE=FRACTION`` as (type, fraction); the scenario checks the type and the range."""
    gpu_type, _, fraction = text.partition("=")
    try:
        return gpu_type.strip().lower(), float(fraction)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected TYPE=FRACTION (e.g. a100=0.7), got {text!r}") from None


def _table(summary: dict[str, Any]) -> str:
    return "\n".join(f"{m.label:30s} {_value(summary.get(m.key))} {m.unit}".rstrip() for m in TABLE)


def _value(value: object) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.0f}"
    return str(value)

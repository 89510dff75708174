import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from research.policy_bench import bench_policies
from scheduler.core.config import get_policy, policy_names
from scheduler.core.fitted_profiles import FITTED_PROFILES
from scheduler.core.policy import UnknownPolicy


class Command(BaseCommand):
    help = "Time one scheduling round (run_cycle) per policy on a seeded synthetic cluster."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--jobs", type=int, default=1000)
        parser.add_argument("--gpus", type=int, default=1024, help="in nodes of 8")
        parser.add_argument("--rounds", type=int, default=11, help="timed rounds per policy, after one warm-up")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--policy", action="append", help="repeatable; default: every policy")
        parser.add_argument("--json", action="store_true", help='print {policy: {"median_ms", "p95_ms"}}')
        parser.add_argument("--output", type=Path, help="also write the JSON result to this file")

    def handle(self, *args: Any, **options: Any) -> None:
        names = self._policies(options["policy"])
        if options["jobs"] < 1 or options["gpus"] < 8 or options["rounds"] < 1:
            raise CommandError("need --jobs ≥ 1, --gpus ≥ 8 and --rounds ≥ 1")
        result = bench_policies(options["jobs"], options["gpus"], names, FITTED_PROFILES,
                                rounds=options["rounds"], seed=options["seed"])
        if options["output"]:
            options["output"].write_text(json.dumps(result, indent=2) + "\n")
        self.stdout.write(json.dumps(result) if options["json"] else self._table(result, options))

    def _policies(self, requested: list[str] | None) -> list[str]:
        for name in requested or []:
            try:
                get_policy(name)
            except UnknownPolicy as error:
                raise CommandError(str(error)) from None
        return requested or policy_names()

    def _table(self, result: dict[str, dict[str, float]], options: dict[str, Any]) -> str:
        lines = [f"one round, {options['jobs']} jobs on {options['gpus']} GPUs (median / p95 ms):"]
        lines += [f"  {name:10s} {row['median_ms']:9.1f} {row['p95_ms']:9.1f}" for name, row in result.items()]
        return "\n".join(lines)

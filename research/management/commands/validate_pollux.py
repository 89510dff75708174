import json
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from research.pollux import LOADS, POLICIES, WORKLOADS, cases, grid_table, replay, run_case
from scheduler.core.config import policy_names
from scheduler.sim.sampling import PHILLY_JOBS

MAX_SEED = 2**31 - 1


class Command(BaseCommand):
    help = ("Replay the Pollux authors' workloads (8 × 4 loads) with pollux, tiresias, optimus and ours; compare "
            "average JCTs with theirs (ours: with Pollux's).")

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--policy", action="append", choices=policy_names(),
                            help=f"repeatable; default {' '.join(POLICIES)}")
        parser.add_argument("--load", action="append", choices=LOADS, help="repeatable; default all four")
        parser.add_argument("--workload", action="append", type=int, choices=WORKLOADS, help="repeatable")
        parser.add_argument("--seed", action="append", type=int,
                            help=f"repeatable: instead of the authors' files, workloads drawn from Philly's job list "
                                 f"as they drew theirs, at these seeds (0–{MAX_SEED}; no published figure)")
        parser.add_argument("--workers", type=int, default=2, help="parallel processes (default 2)")
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        seeds = tuple(options["seed"] or ())  # the arguments first: a bad one is named wherever the traces are
        if seeds and options["workload"]:
            raise CommandError("--seed and --workload: give one or the other")
        if any(not 0 <= seed <= MAX_SEED for seed in seeds):
            raise CommandError(f"--seed must be 0–{MAX_SEED}")
        if not (settings.TRACES_DIR / "pollux").is_dir():
            raise CommandError(f"no Pollux traces under TRACES_DIR={settings.TRACES_DIR}")
        if seeds and not (settings.TRACES_DIR / PHILLY_JOBS).is_file():
            raise CommandError(f"--seed needs Philly's job list, {PHILLY_JOBS}, under TRACES_DIR")
        todo = cases(tuple(options["policy"] or POLICIES), tuple(options["load"] or LOADS),
                     seeds or tuple(options["workload"] or WORKLOADS), sampled=bool(seeds))
        results, wall = replay(run_case, todo, settings.TRACES_DIR, options["workers"])
        rows = grid_table(results)
        if options["json"]:
            self.stdout.write(json.dumps({"rows": rows, "cases": len(results), "wall_s": round(wall, 1)}))
        else:
            self.stdout.write(self._table(rows, len(results), wall))

    def _table(self, rows: list[dict[str, Any]], count: int, wall: float) -> str:
        lines = ["mean of the workloads' average JCT (s), ours vs the Pollux authors' simulator:",
                 f"  {'policy':12s} {'load':>4s} {'ours':>8s} {'published':>10s} {'diff':>7s} {'vs our pollux':>13s} "
                 f"{'sim s':>7s}"]
        for row in rows:
            ours, theirs, diff = row["ours_avg_jct_s"], row["published_avg_jct_s"], row["difference"]
            suffix = ""
            if theirs is None and row["published_pollux_avg_jct_s"] is not None:  # ours: against Pollux's
                theirs, suffix = row["published_pollux_avg_jct_s"], " (Pollux's)"
                diff = ours / theirs - 1 if ours else None
            lines.append(f"  {row['policy']:12s} {row['load']:>4s} {_num(ours):>8s} {_num(theirs):>10s} "
                         f"{'' if diff is None else f'{diff:+.1%}':>7s} {_percent(row.get('vs_our_pollux')):>13s} "
                         f"{row['wall_s']:7.1f}{suffix}")
        lines.append(f"{count} simulations in {wall:.0f} s wall")
        return "\n".join(lines)


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f}"


def _percent(value: Any) -> str:
    return "–" if value is None else f"{value:+.1%}"

import json
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from research.pollux import replay
from research.sia import DEFAULT_SETS, POLICIES, SETS, cases, run_case, table
from scheduler.core.config import policy_names
from scheduler.sim.sampling import PHILLY_JOBS


class Command(BaseCommand):
    help = "Replay Sia's (SOSP'23) workload sets on its clusters; print ours beside its published Tables 3 and 4."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--sets", nargs="+", choices=sorted(SETS), default=list(DEFAULT_SETS),
                            help=f"default: {' '.join(DEFAULT_SETS)}")
        parser.add_argument("--policy", action="append", choices=policy_names(), help=f"repeatable; default {POLICIES}")
        parser.add_argument("--workloads", type=int, help="only each set's first N workload files")
        parser.add_argument("--workers", type=int, default=2, help="parallel processes (default 2)")
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["workloads"] is not None and options["workloads"] < 1:
            raise CommandError("--workloads must be ≥ 1")
        if not (settings.TRACES_DIR / "sia" / "workloads").is_dir():
            raise CommandError(f"no Sia workloads under TRACES_DIR={settings.TRACES_DIR}/sia/workloads")
        sampled = [name for name in options["sets"] if SETS[name].sampled]
        if sampled and not (settings.TRACES_DIR / PHILLY_JOBS).is_file():
            raise CommandError(f"--sets {' '.join(sampled)}: drawn from Philly's job list, {PHILLY_JOBS}, which "
                               f"TRACES_DIR lacks")
        todo = cases(tuple(options["policy"] or POLICIES), tuple(options["sets"]), options["workloads"])
        results, wall = replay(run_case, todo, settings.TRACES_DIR, options["workers"])
        rows = table(results)
        if options["json"]:
            self.stdout.write(json.dumps({"rows": rows, "cases": len(results), "wall_s": round(wall, 1)}))
        else:
            self.stdout.write(self._table(rows, len(results), wall))

    def _table(self, rows: list[dict[str, Any]], count: int, wall: float) -> str:
        head = (f"  {'policy':14s} {'set':19s} {'avg JCT h':>15s} {'p99 JCT h':>13s} {'makespan h':>13s} "
                f"{'GPU-h/job':>11s} {'restarts/job':>12s} {'worst FTF':>11s} {'vs our sia':>10s}")
        lines = ["ours / published (Sia, SOSP'23 draft, Tables 3 and 4; worst FTF from Fig. 8; restarts per job, "
                 "rescales and resumes, ours only: Sia published none; vs our sia: average JCT against our sia's on "
                 "the same files):", head]
        for row in rows:
            cells = [f"{_num(row[f'ours_{m}'])}/{_num(row[f'published_{m}'])}"
                     for m in ("avg_jct_h", "p99_jct_h", "makespan_h", "gpu_h_per_job", "worst_ftf")]
            diff = row["avg_jct_difference"]
            cells[0] += f" ({diff:+.0%})" if diff is not None else ""
            if row["published_avg_jct_h"] is None and row["published_sia_avg_jct_h"] is not None:
                cells[0] = f"{_num(row['ours_avg_jct_h'])}/sia {_num(row['published_sia_avg_jct_h'])}"
            lines.append(f"  {row['policy']:14s} {row['set']:19s} {cells[0]:>15s} {cells[1]:>13s} {cells[2]:>13s} "
                         f"{cells[3]:>11s} {_num(row['ours_restarts_per_job']):>12s} {cells[4]:>11s} "
                         f"{_percent(row.get('vs_our_sia')):>10s}")
        lines.append(f"{count} simulations in {wall:.0f} s wall")
        return "\n".join(lines)


def _num(value: Any) -> str:
    return "–" if value is None else f"{value:.2f}"


def _percent(value: Any) -> str:
    return "–" if value is None else f"{value:+.1%}"

"""``manage.py slurm_forecast_backtest [--jobs N] [--seed S] [--seeds K] [--json]``: the console's start
estimates beside ``squeue --start``, against the real starts, on a Slurm lab (``scheduler/on_slurm/backtest.py``).

Seeds S … S+K−1 run one after the other, each on an empty cluster. Without ``--json`` each job's errors are listed;
with it, one JSON object a line per seed: ``seed``, ``scored`` (the jobs both estimated), and the median absolute
error of each, ``console_median_abs_error_s`` and ``slurm_median_abs_error_s`` (null when nothing was scored).
"""

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from scheduler.backends.slurm.client import SlurmError, connect
from scheduler.on_slurm.backtest import Compared, backtest, median_errors, scored

MAX_JOBS, MAX_SEEDS, MAX_SEED = 400, 20, 2**31 - 1


class Command(BaseCommand):
    help = ("On a Slurm lab (it submits jobs and switches the console to observing): the console's start "
            "estimates beside squeue --start, against the real starts.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--jobs", type=int, default=72, help=f"jobs in each burst, 1–{MAX_JOBS} (default 72)")
        parser.add_argument("--seed", type=int, default=1, help="the first seed (default 1)")
        parser.add_argument("--seeds", type=int, default=1, help=f"how many seeds, 1–{MAX_SEEDS} (default 1)")
        parser.add_argument("--json", action="store_true", help="one JSON object a line per seed")

    def handle(self, *args: object, **options: Any) -> None:
        for name, low, high in (("jobs", 1, MAX_JOBS), ("seed", 0, MAX_SEED), ("seeds", 1, MAX_SEEDS)):
            if not low <= options[name] <= high:
                raise CommandError(f"--{name}: between {low} and {high}")
        say = (lambda line: None) if options["json"] else self.stdout.write
        client = connect()
        for seed in range(options["seed"], options["seed"] + options["seeds"]):
            try:
                compared = backtest(client, options["jobs"], seed, say=say)
            except SlurmError as error:
                raise CommandError(str(error)) from None
            if options["json"]:
                self.stdout.write(json.dumps(seed_summary(seed, compared)))
            else:
                self._table(seed, compared)

    def _table(self, seed: int, compared: list[Compared]) -> None:
        self.stdout.write(f"seed {seed}\njob    started   error of squeue --start   error of the console (s)")
        for row in compared:
            slurm, console = row.errors()
            self.stdout.write(f"{row.slurm_id:<6} {row.started_at:%H:%M:%S}  "
                              f"{'—' if slurm is None else f'{slurm:.0f}':>20}   "
                              f"{'—' if console is None else f'{console:.0f}':>20}")
        slurm_median, console_median = median_errors(compared)
        self.stdout.write(f"median absolute error over the {len(scored(compared))} waiting jobs both estimated: "
                          f"squeue --start {'—' if slurm_median is None else f'{slurm_median:.0f} s'}, console "
                          f"{'—' if console_median is None else f'{console_median:.0f} s'}")


def seed_summary(seed: int, compared: list[Compared]) -> dict[str, Any]:
    slurm_median, console_median = median_errors(compared)
    return {"seed": seed, "scored": len(scored(compared)), "console_median_abs_error_s": console_median,
            "slurm_median_abs_error_s": slurm_median}

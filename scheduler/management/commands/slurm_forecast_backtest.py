from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from scheduler.backends.slurm.client import SlurmError, connect
from scheduler.on_slurm.backtest import backtest, median_errors


class Command(BaseCommand):
    help = ("On a Slurm lab (it submits jobs and switches the console to observing): the console's start "
            "estimates beside squeue --start, against the real starts.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--jobs", type=int, default=16, help="jobs in the burst (default 16)")
        parser.add_argument("--seed", type=int, default=1)
        parser.add_argument("--policy", default="fifo", help="the policy the console forecasts with (default fifo)")

    def handle(self, *args: object, **options: Any) -> None:
        if not 1 <= options["jobs"] <= 200:
            raise CommandError("--jobs: between 1 and 200")
        try:
            compared = backtest(connect(), options["jobs"], options["seed"], options["policy"],
                                say=self.stdout.write)
        except SlurmError as error:
            raise CommandError(str(error)) from None
        self.stdout.write("job    started   error of squeue --start   error of the console (s)")
        for row in compared:
            slurm, console = row.errors()
            self.stdout.write(f"{row.slurm_id:<6} {row.started_at:%H:%M:%S}  "
                              f"{'—' if slurm is None else f'{slurm:.0f}':>20}   "
                              f"{'—' if console is None else f'{console:.0f}':>20}")
        slurm_median, console_median = median_errors(compared)
        self.stdout.write(f"median absolute error over {len(compared)} waiting jobs: squeue --start "
                          f"{'—' if slurm_median is None else f'{slurm_median:.0f} s'}, console "
                          f"{'—' if console_median is None else f'{console_median:.0f} s'}")

"""``manage.py bench_slurm [--jobs N] [--mirror M] [--rounds R] [--policy P] [--json]``: a live round with the
console's queue held in a real Slurm, and the observer's mirror of ``squeue`` and ``sacct``, timed against the lab
(``research/slurm_bench.py``)."""

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from cluster_ops.common.benchdb import throwaway_database
from research import slurm_bench
from scheduler.backends.slurm.client import SlurmError, connect
from scheduler.core.config import get_policy
from scheduler.core.policy import UnknownPolicy

MAX_JOBS, MAX_MIRROR = 5_000, 20_000


class Command(BaseCommand):
    help = ("On an idle Slurm lab: time live rounds with N console jobs held in Slurm, and the observer's mirror "
            "of M jobs in squeue and M runs in sacct (a throwaway database; every job made is cancelled).")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--jobs", type=int, default=1000, help=f"console jobs, 1–{MAX_JOBS} (default 1000)")
        parser.add_argument("--mirror", type=int, default=10_000,
                            help=f"jobs mirrored, 0–{MAX_MIRROR} (default 10000; 0: skip the mirror)")
        parser.add_argument("--rounds", type=int, default=5, help="timed rounds, 1–50 (default 5)")
        parser.add_argument("--policy", default="fifo", help="the console's policy (default fifo: rigid)")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: object, **options: Any) -> None:
        for name, low, high in (("jobs", 1, MAX_JOBS), ("mirror", 0, MAX_MIRROR), ("rounds", 1, 50)):
            if not low <= options[name] <= high:
                raise CommandError(f"--{name}: between {low} and {high}")
        try:
            get_policy(options["policy"])
        except UnknownPolicy as error:
            raise CommandError(str(error)) from None
        try:
            client = connect()
            slurm_bench.refuse_a_busy_lab(client)
            report = self._run(client, options)
        except (SlurmError, RuntimeError) as error:
            raise CommandError(str(error)) from None
        self.stdout.write(json.dumps(report) if options["json"] else self._table(report))

    def _run(self, client: Any, options: dict[str, Any]) -> dict[str, Any]:
        version = client.rest.version
        with throwaway_database("bench_slurm"), slurm_bench.throwaway_job_dir():
            try:
                rounds = slurm_bench.round_with_queue(client, options["jobs"], options["rounds"], options["policy"],
                                                      options["seed"])
            finally:
                slurm_bench.cancel_console_jobs(client)
            slurm_bench.clear()
            mirrored = slurm_bench.mirror(client, options["mirror"]) if options["mirror"] else None
        return {"rest_version": version, "round": rounds, "mirror": mirrored}

    def _table(self, report: dict[str, Any]) -> str:
        row = report["round"]
        lines = [f"Slurm via slurmrestd {report['rest_version']}",
                 f"live round, {row['jobs']} console jobs ({row['held_in_slurm']} held in Slurm, {row['running']} "
                 f"running): median {row['median_ms']} ms, max {row['max_ms']} ms over {row['rounds']} rounds "
                 f"(snapshot {row['snapshot_ms']}, policy {row['policy_ms']}, write {row['write_ms']} ms); "
                 f"submitting them held took {row['submitting_rounds']} rounds, {row['submitting_s']} s"]
        mirrored = report["mirror"]
        if mirrored:
            lines.append(f"observer: {mirrored['mirrored']} of {mirrored['squeue_jobs']} squeue jobs mirrored in "
                         f"{mirrored['first_round_ms']} ms (a round), {mirrored['next_round_ms']} ms again; "
                         f"{mirrored['sacct_runs']} sacct runs read in {mirrored['sacct_read_ms']} ms and mirrored "
                         f"in {mirrored['history_mirror_ms']} ms")
        return "\n".join(lines)

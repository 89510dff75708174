"""The Slurm commands, for what a REST version lacks (requeue on every version; placing and releasing on
v0.0.38), for per-run accounting (``sacct --duplicates``), and for reading a large queue fast (``squeue``)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime

from scheduler.backends.slurm.listings import (
    SACCT_FIELDS,
    SEPARATOR,
    SQUEUE_FIELDS,
    accounted_runs,
    free_text,
    queue_jobs,
    squeue_format,
)
from scheduler.backends.slurm.records import AccountedRun, SlurmJob, SlurmRefused, SlurmUnavailable


class Commands:
    """The Slurm commands, for what REST v0.0.38 cannot do: place a job on given nodes, requeue, per-run sacct."""

    def __init__(self, slurm_conf: str, timeout: float) -> None:
        # Times printed as epoch seconds, and those given read as UTC, whatever the host's zone and Slurm's format.
        self.env = dict(os.environ, SLURM_TIME_FORMAT="%s", TZ="UTC",
                        **({"SLURM_CONF": slurm_conf} if slurm_conf else {}))
        self.timeout = timeout

    def run(self, *args: str) -> str:
        what = " ".join(args[:2])
        try:
            done = subprocess.run(list(args), env=self.env, capture_output=True, text=True, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            raise SlurmUnavailable(f"{what}: no answer within {self.timeout:g} s") from None
        except FileNotFoundError:
            raise SlurmUnavailable(f"{args[0]} is not installed") from None
        if done.returncode != 0:
            message = (done.stderr.strip().splitlines() or ["no message"])[-1][:200]
            if "Unable to contact slurm controller" in message or "Connection refused" in message:
                raise SlurmUnavailable(f"{what}: {message}")
            raise SlurmRefused(f"{what}: {message}")
        return done.stdout

    def place(self, job_id: int, gpus_per_node: Mapping[str, int], gpu_type: str) -> None:
        """Pin a pending job to exactly these nodes and GPUs per node, eligible now."""
        per_node = max(gpus_per_node.values())  # one count for every node: see SlurmExecutor._placement
        gres = f"gpu:{gpu_type}:{per_node}" if gpu_type else f"gpu:{per_node}"
        nodes = len(gpus_per_node)
        self.run("scontrol", "update", f"JobId={int(job_id)}", f"NodeList={','.join(gpus_per_node)}",
                 f"NumNodes={nodes}-{nodes}", f"Gres={gres}", "StartTime=now")

    def release(self, job_id: int) -> None:
        self.run("scontrol", "release", str(int(job_id)))

    def hold(self, job_id: int) -> None:
        self.run("scontrol", "hold", str(int(job_id)))

    def requeue_hold(self, job_id: int) -> None:
        """SIGTERM to the job (it checkpoints), back to the queue, held until placed again."""
        self.run("scontrol", "requeuehold", str(int(job_id)))

    def installed(self, program: str) -> bool:
        return shutil.which(program, path=self.env.get("PATH")) is not None

    def queue(self) -> list[SlurmJob]:
        """Every job slurmctld knows — waiting, running, and ended within ``MinJobAge`` — as ``squeue`` lists them
        (``listings``: the records, then their names)."""
        listing = ("squeue", "--all", "--noheader", "--states=all")
        lines = self.run(*listing, f"--Format={squeue_format(SQUEUE_FIELDS)}").splitlines()
        names = free_text(self.run(*listing, f"--Format={squeue_format(('JobID', 'Name'))}"), _ids(lines))
        return queue_jobs(lines, names)

    def accounting(self, start: datetime, end: datetime) -> list[AccountedRun]:
        """Every run (``--duplicates``: each start of a requeued job) that overlaps [start, end] (``listings``: the
        runs, then their jobs' comments and names)."""
        listing = ("sacct", "--parsable2", "--noheader", "--duplicates", "--allusers", "-X",
                   f"--starttime={start.astimezone(UTC):%Y-%m-%dT%H:%M:%S}",
                   f"--endtime={end.astimezone(UTC):%Y-%m-%dT%H:%M:%S}")
        lines = self.run(*listing, "--format=" + ",".join(SACCT_FIELDS)).splitlines()
        runs = _ids(lines)
        comments = free_text(self.run(*listing, "--format=JobIDRaw,Comment"), runs)
        names = free_text(self.run(*listing, "--format=JobIDRaw,JobName"), runs)
        return accounted_runs(lines, comments, names)


def _ids(lines: list[str]) -> Counter[int]:
    """How many lines each job id heads."""
    heads = (line.partition(SEPARATOR)[0] for line in lines)
    return Counter(int(head) for head in heads if head.isdigit())

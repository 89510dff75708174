"""The Slurm commands, for what a REST version lacks (requeue on every version; placing and releasing on
v0.0.38) and for per-run accounting (``sacct --duplicates``)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from scheduler.backends.slurm.records import AccountedRun, SlurmRefused, SlurmUnavailable, epoch_time


class Commands:
    """The Slurm commands, for what REST v0.0.38 cannot do: place a job on given nodes, requeue, per-run sacct."""

    def __init__(self, slurm_conf: str, timeout: float) -> None:
        self.env = dict(os.environ, **({"SLURM_CONF": slurm_conf} if slurm_conf else {}))
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

    def accounting(self, start: datetime, end: datetime) -> list[AccountedRun]:
        """Every run (``--duplicates``: each start of a requeued job) that overlaps [start, end]."""
        text = self.run("sacct", "--json", "--duplicates", "--allusers", "-X",
                        f"--starttime={start.astimezone(UTC):%Y-%m-%dT%H:%M:%S}",
                        f"--endtime={end.astimezone(UTC):%Y-%m-%dT%H:%M:%S}")
        try:
            document = json.loads(text)
        except ValueError:
            raise SlurmRefused("sacct --json printed something that is not JSON") from None
        return [_accounted_run(raw) for raw in document.get("jobs") or []]


def _accounted_run(raw: Mapping[str, Any]) -> AccountedRun:
    allocated = (raw.get("tres") or {}).get("allocated") or []
    gpus = sum(int(tres.get("count") or 0) for tres in allocated
               if tres.get("type") == "gres" and tres.get("name") == "gpu")
    times = raw.get("time") or {}
    comment = raw.get("comment") or {}
    return AccountedRun(
        job_id=int(raw["job_id"]), account=str(raw.get("account") or ""), user=str(raw.get("user") or ""),
        gpus=gpus, started_at=epoch_time(times.get("start")), ended_at=epoch_time(times.get("end")),
        state=_current_state((raw.get("state") or {}).get("current")),
        comment=str(comment.get("job") or "") if isinstance(comment, dict) else str(comment),
        name=str(raw.get("name") or "")[:200],
        submitted_at=epoch_time(times.get("submission")) or datetime(1970, 1, 1, tzinfo=UTC),
    )


def _current_state(value: Any) -> str:
    """sacct's ``state.current``: a word up to Slurm 23.02, a list from 23.11 (the base state, then flags)."""
    if isinstance(value, list):
        return str(value[0]) if value else ""
    return str(value or "")

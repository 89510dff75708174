"""The local executor: real processes on the cluster's own machines, run by node agents.

``launch`` sends each ``Launch`` as a ``scheduler.node_apply`` task to the queue
``node.<hostname>`` of every node it concerns: those of its new placement and every node
the job ever ran on, so that ranks on a node it left are stopped (an agent with nothing of
the job there does nothing). A launch is acknowledged once its tasks are with the broker;
with the broker unreachable it is not, and the next round resends it — agents ignore a
generation they already run (``scheduler/backends/local/agent.py``).

``observe`` counts GPU time (GPUs × seconds since ``accounted_at``), asks every node with
an active job to check its ranks (``scheduler.node_poll``, fire-and-forget: the agent
records finishes and failures in the database, and a later round sees them) and hands the
policy the jobs that are still schedulable, with the progress the jobs themselves reported.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from celery import Celery, current_app
from django.db import transaction
from kombu.exceptions import OperationalError

from scheduler.backends import GpuPlace, Launch, acknowledge, charge_gpu_time, register_backend
from scheduler.core.types import ClusterSnapshot
from scheduler.models import ACTIVE_STATES, Allocation, Job

logger = logging.getLogger(__name__)

APPLY_TASK = "scheduler.node_apply"
POLL_TASK = "scheduler.node_poll"
# Publishing to a broker that is down fails after these tries instead of holding the round up.
RETRY_POLICY = {"max_retries": 2, "interval_start": 0, "interval_step": 0.5, "interval_max": 1}
POLL_EXPIRES = 300.0  # seconds: polls piled up while an agent was away are dropped, not all run


def node_queue(hostname: str) -> str:
    return f"node.{hostname}"


def to_message(launch: Launch) -> dict[str, Any]:
    """A launch as JSON for the agents."""
    return {"job_id": launch.job_id, "generation": launch.generation, "restart": launch.restart,
            "gpus": [[gpu.hostname, gpu.index, gpu.uuid] for gpu in launch.gpus]}


def from_message(message: dict[str, Any]) -> Launch:
    gpus = tuple(GpuPlace(str(host), int(index), str(uuid)) for host, index, uuid in message["gpus"])
    return Launch(int(message["job_id"]), int(message["generation"]), gpus, bool(message["restart"]))


@dataclass(frozen=True)
class LocalExecutor:
    app: Celery | None = None  # None: the current Celery app
    name: ClassVar[str] = "local"
    decides: ClassVar[bool] = True
    notes: list[str] = field(default_factory=list)
    measured_restarts: list[float] = field(default_factory=list)  # none measured here

    def refresh_inventory(self, now: datetime) -> None:
        """Nothing to read: node agents register their own GPUs."""

    def observe(self, snap: ClusterSnapshot, now: datetime) -> ClusterSnapshot:
        placed = {job.id: job for job in snap.jobs if job.placement}
        with transaction.atomic():
            active = {str(job.pk): job for job in Job.objects.select_for_update().filter(state__in=ACTIVE_STATES)}
            charged = [job for key, job in active.items() if key in placed]
            for job in charged:
                charge_gpu_time(job, len(placed[str(job.pk)].placement), now)
            Job.objects.bulk_update(charged, ["attained_gpu_seconds", "accounted_at"], batch_size=500)
        hosts = {snap.index.node_of[gpu] for key in active if key in placed for gpu in placed[key].placement}
        for host in sorted(hosts):
            self._send(POLL_TASK, [], host, expires=POLL_EXPIRES)
        # A job placed in the snapshot but no longer active has ended meanwhile (an agent said so).
        kept = tuple(
            job.progressed(active[job.id].progress, active[job.id].attained_gpu_seconds) if job.id in active else job
            for job in snap.jobs if not (job.placement and job.id not in active)
        )
        return dataclasses.replace(snap, jobs=kept)

    def launch(self, launches: Sequence[Launch], now: datetime) -> None:
        """Tell every node concerned; acknowledge a launch once all its tasks are with the broker."""
        ran_on = _hosts_ever_used([launch.job_id for launch in launches])
        for launch in launches:
            hosts = set(launch.hosts) | ran_on.get(launch.job_id, set())
            if not all(self._send(APPLY_TASK, [to_message(launch)], host) for host in sorted(hosts)):
                return  # the broker is unreachable: the next round resends whatever is not acknowledged
            acknowledge([launch])

    def _send(self, task: str, args: list[Any], host: str, expires: float | None = None) -> bool:
        try:
            # ignore_result: no result-backend subscription, which would retry for 20 s with Redis down
            (self.app or current_app).send_task(task, args=args, queue=node_queue(host), ignore_result=True,
                                                expires=expires, retry=True, retry_policy=RETRY_POLICY)
        except OperationalError as error:  # kombu's wrapper of redis' connection errors
            logger.warning("cannot send %s to %s: %s", task, node_queue(host), error)
            return False
        return True


def _hosts_ever_used(job_ids: list[int]) -> dict[int, set[str]]:
    """Every node each job has held a GPU on, now or before."""
    used: dict[int, set[str]] = {}
    rows = Allocation.objects.filter(job_id__in=job_ids).values_list("job_id", "gpu__node__hostname").distinct()
    for job_id, hostname in rows:
        used.setdefault(job_id, set()).add(hostname)
    return used


register_backend("local", lambda config: LocalExecutor(), label="local (real processes through node agents)")

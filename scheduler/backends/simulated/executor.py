"""The simulated executor: jobs progress in wall-clock time as their goodput model says.

It is the executor of the demo cluster and of any cluster without real workers. A job
on k GPUs progresses at ``job_speed`` (the same function the what-if simulator uses)
times ``speedup``; after a rescale or a restart it first spends ``restart_seconds`` (on
the sped-up clock) reloading its checkpoint, holding its GPUs without progress. A job
whose progress reaches its total work succeeds at the moment it did.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import ClassVar

from django.db import transaction

from scheduler.backends import Launch, acknowledge, finish_jobs, register_backend
from scheduler.bulk import db_datetime, update_many, update_where
from scheduler.core.config import DEFAULT_RESTART_SECONDS
from scheduler.core.speed import job_speed
from scheduler.core.types import ClusterSnapshot, JobInfo
from scheduler.models import ACTIVE_STATES, Job, JobState


@dataclass(frozen=True)
class SimulatedExecutor:
    speedup: float = 1.0
    restart_seconds: float = DEFAULT_RESTART_SECONDS
    name: ClassVar[str] = "simulated"
    decides: ClassVar[bool] = True
    notes: list[str] = field(default_factory=list)
    measured_restarts: list[float] = field(default_factory=list)  # none measured here

    def refresh_inventory(self, now: datetime) -> None:
        """Nothing to read: the demo's inventory is seeded."""

    def observe(self, snap: ClusterSnapshot, now: datetime) -> ClusterSnapshot:
        infos = {job.id: job for job in snap.jobs}
        later: dict[str, JobInfo] = {}
        with transaction.atomic():
            jobs = list(Job.objects.select_for_update().filter(state__in=ACTIVE_STATES))
            finished: dict[int, datetime] = {}
            for job in jobs:
                info = infos.get(str(job.pk))
                if info is None or not info.placement:
                    continue  # started after the snapshot: next round counts it
                done_at = self._advance(job, info, snap, now)
                if done_at:
                    finished[job.pk] = done_at
                else:
                    later[info.id] = info.progressed(job.progress, job.attained_gpu_seconds)
            update_many(Job, ["progress", "attained_gpu_seconds", "accounted_at", "state"],
                        [job for job in jobs if job.pk not in finished])
            finish_jobs([job for job in jobs if job.pk in finished], finished, JobState.SUCCEEDED,
                        "finished: all its work is done")
        kept = tuple(later.get(job.id, job) for job in snap.jobs if int(job.id) not in finished)
        return dataclasses.replace(snap, jobs=kept)

    def _advance(self, job: Job, info: JobInfo, snap: ClusterSnapshot, now: datetime) -> datetime | None:
        """Move ``job`` (a row) forward to ``now``; returns when it finished, if it did."""
        since = job.accounted_at or now
        training_from = max(since, job.restart_until) if job.restart_until else since
        nodes = len({snap.index.node_of[gpu] for gpu in info.placement})
        # At the batch the policy chose for this allocation (as the simulator runs it), else the job's own.
        rate = job_speed(info, snap, info.gpus, nodes, job.policy_batch_size) * self.speedup  # work per wall second
        remaining = max(job.total_work - job.progress, 0.0)
        training = max((now - training_from).total_seconds(), 0.0)
        done_at = None
        if rate > 0 and rate * training >= remaining:
            done_at = training_from + timedelta(seconds=remaining / rate)
            training = remaining / rate
        end = done_at or now
        job.progress = job.total_work if done_at else job.progress + rate * training
        job.attained_gpu_seconds += info.gpus * max((end - since).total_seconds(), 0.0)
        job.accounted_at = end
        if job.state == JobState.RESCALING and (job.restart_until is None or job.restart_until <= now):
            job.state = JobState.RUNNING
        return done_at

    def launch(self, launches: Sequence[Launch], now: datetime) -> None:
        """Nothing to start: a (re)started job only pays its restart delay before it progresses."""
        restart_until = db_datetime(now + timedelta(seconds=self.restart_seconds / self.speedup))
        with transaction.atomic():
            update_where(Job, ["restart_until"], "id = %s AND generation = %s", [
                (restart_until if launch.restart else None, launch.job_id, launch.generation)
                for launch in launches if launch.gpus
            ])
            acknowledge(launches)


register_backend("simulated", lambda config: SimulatedExecutor(speedup=config.simulated_speedup,
                                                                restart_seconds=config.restart_seconds),
                 label="simulated (progress by the goodput model)",
                 clock_speedup=lambda config: config.simulated_speedup)

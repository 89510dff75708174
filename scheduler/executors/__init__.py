"""Executors: what turns a round's decisions into running work.

A round commits its decisions first and then hands the executor one ``Launch`` per job
whose GPUs changed (``Job.generation`` ahead of ``Job.launched_generation``). An executor
must be idempotent: a launch may be resent after a crash, and the executor acknowledges
it with ``acknowledge`` once acted on. Before each round the executor ``observe``s its
jobs: it brings progress and GPU time up to date and records the jobs that finished.

Two executors ship: ``simulated`` (progress by the goodput model, for demos and what-ifs
of the live cluster) and ``local`` (real processes started by node agents).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar, Protocol

from scheduler.core.types import ClusterSnapshot
from scheduler.models import Allocation, Job, RescaleEvent, RescaleKind, SchedulerSettings


@dataclass(frozen=True)
class GpuPlace:
    hostname: str
    index: int  # NVML index on its node: what CUDA_VISIBLE_DEVICES takes
    uuid: str


@dataclass(frozen=True)
class Launch:
    """Run ``job_id`` on exactly ``gpus`` (none: stop it), as of allocation ``generation``."""

    job_id: int
    generation: int
    gpus: tuple[GpuPlace, ...]
    restart: bool  # it ran before: it must resume from its checkpoint

    @property
    def hosts(self) -> list[str]:
        """Its nodes, in first-GPU order: rank 0 lives on the first."""
        return list(dict.fromkeys(gpu.hostname for gpu in self.gpus))


class Executor(Protocol):
    name: ClassVar[str]

    def observe(self, snap: ClusterSnapshot, now: datetime) -> ClusterSnapshot:
        """Bring progress, GPU time and finishes up to ``now`` in the database.

        Returns the snapshot the policy should see: finished jobs removed, progress updated.
        """
        ...

    def launch(self, launches: Sequence[Launch], now: datetime) -> None:
        """Start, resize or stop each job as given; acknowledge each one acted on."""
        ...


def acknowledge(launches: Iterable[Launch]) -> int:
    """Record that the executor acted on these launches (never moves a job's generation back)."""
    done = 0
    for launch in launches:
        done += Job.objects.filter(pk=launch.job_id, launched_generation__lt=launch.generation).update(
            launched_generation=launch.generation
        )
    return done


def finish_jobs(jobs: Sequence[Job], at: Mapping[int, datetime], state: str, reason: str) -> None:
    """End ``jobs`` (rows locked by the caller's transaction) in ``state``, each at its own time.

    Their allocations close and an event says why; the generation moves on so that the
    executor is told to stop whatever still runs.
    """
    kind = RescaleKind.FINISH
    for job in jobs:
        held = Allocation.objects.filter(job=job, ended_at__isnull=True).update(ended_at=at[job.pk])
        job.state, job.finished_at, job.generation = state, at[job.pk], job.generation + 1
        RescaleEvent.objects.create(job=job, at=at[job.pk], kind=kind, from_gpus=held, to_gpus=0, reason=reason)
    Job.objects.bulk_update(
        jobs, ["state", "finished_at", "generation", "progress", "attained_gpu_seconds", "accounted_at"],
        batch_size=500,
    )


def get_executor(config: SchedulerSettings) -> Executor:
    """The executor the settings name (imported here: each executor imports this module)."""
    if config.executor == "local":
        from .local import LocalExecutor

        return LocalExecutor()
    from .simulated import SimulatedExecutor

    return SimulatedExecutor(speedup=config.simulated_speedup, restart_seconds=config.restart_seconds)



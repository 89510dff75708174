"""Executors: what turns a round's decisions into running work.

A round commits its decisions first and then hands the executor one ``Launch`` per job
whose GPUs changed (``Job.generation`` ahead of ``Job.launched_generation``). An executor
must be idempotent: a launch may be resent after a crash, and the executor acknowledges
it with ``acknowledge`` once acted on. Before each round the executor ``observe``s its
jobs: it brings progress and GPU time up to date and records the jobs that finished.

Executors are the cluster back-end seam: ``simulated`` (progress by the goodput model, for demos and what-ifs
of the live cluster), ``local`` (real processes started by node agents), ``slurm`` (Slurm jobs on the decided
nodes, ``scheduler/backends/slurm``), ``slurm-observer`` and ``kubernetes-observer`` (Slurm or Kubernetes schedules;
the console mirrors what it does, ``scheduler/backends/mirror.py``). Each
back-end registers itself by name (``register_backend``, called where it is defined); the scheduler app imports
them when Django starts (``scheduler.apps``, ``BACKEND_MODULES``), so this seam imports none of them. A new back-end
is a class with these verbs, its registration (with the check it makes of a new job) and its module's path in
``BACKEND_MODULES``; the settings offer every registered name, with no migration.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar, Protocol

from django.core.exceptions import ValidationError
from django.db.models import Count

from scheduler.bulk import db_datetime, update_many, update_where
from scheduler.core.config import SchedulingConfig
from scheduler.core.types import ClusterSnapshot
from scheduler.models import Allocation, Job, JobReport, RescaleEvent, RescaleKind, SchedulerSettings


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
    batch_size: int | None = None  # the global batch the policy chose for this allocation; None: the job's own

    @property
    def hosts(self) -> list[str]:
        """Its nodes, in first-GPU order: rank 0 lives on the first."""
        return list(dict.fromkeys(gpu.hostname for gpu in self.gpus))


class ClusterUnavailable(Exception):
    """The cluster manager could not be read (no answer, or one that cannot be used): the round is skipped with
    this reason, nothing written."""


class Executor(Protocol):
    name: ClassVar[str]
    decides: ClassVar[bool]  # False: an observer; the round mirrors the cluster and runs no policy

    @property
    def notes(self) -> list[str]:
        """What the round should record about the cluster (``SchedulingRound.note``), appended to as it goes."""
        ...

    @property
    def measured_restarts(self) -> list[float]:
        """Restart delays (s) seen while observing (``measure_restart``): the round prices them (``live.restarts``)."""
        ...

    def refresh_inventory(self, now: datetime) -> None:
        """Bring the nodes and GPUs (and their health) up to date from the cluster, before the snapshot."""
        ...

    def observe(self, snap: ClusterSnapshot, now: datetime) -> ClusterSnapshot:
        """Bring progress, GPU time and finishes up to ``now`` in the database.

        Returns the snapshot the policy should see: finished jobs removed, progress updated.
        """
        ...

    def launch(self, launches: Sequence[Launch], now: datetime) -> None:
        """Start, resize or stop each job as given; acknowledge each one acted on."""
        ...


def acknowledge(launches: Iterable[Launch]) -> None:
    """Record that the executor acted on these launches (never moves a job's generation back)."""
    update_where(Job, ["launched_generation"], "id = %s AND launched_generation < %s",
                 [(launch.generation, launch.job_id, launch.generation) for launch in launches])


def finish_jobs(jobs: Sequence[Job], at: Mapping[int, datetime], state: str, reason: str) -> None:
    """End ``jobs`` (rows locked by the caller's transaction) in ``state``, each at its own time.

    Their allocations close and an event says why; the generation moves on so that the
    executor is told to stop whatever still runs.
    """
    if not jobs:
        return
    open_rows = Allocation.objects.filter(job__in=jobs, ended_at__isnull=True)
    held = dict(open_rows.values("job").annotate(gpus=Count("pk")).values_list("job", "gpus"))
    update_where(Allocation, ["ended_at"], "job_id = %s AND ended_at IS NULL",
                 [(db_datetime(at[job.pk]), job.pk) for job in jobs])
    RescaleEvent.objects.bulk_create(
        RescaleEvent(job=job, at=at[job.pk], kind=RescaleKind.FINISH, from_gpus=held.get(job.pk, 0), to_gpus=0,
                     reason=reason)
        for job in jobs
    )
    for job in jobs:
        job.state, job.finished_at, job.generation = state, at[job.pk], job.generation + 1
    update_many(Job, ["state", "finished_at", "generation", "progress", "attained_gpu_seconds", "accounted_at"], jobs)


def charge_gpu_time(job: Job, gpus: int, until: datetime) -> None:
    """Add ``gpus`` × the time from ``job.accounted_at`` to ``until`` to the job's GPU time (row not saved)."""
    since = job.accounted_at or until
    job.attained_gpu_seconds += gpus * max((until - since).total_seconds(), 0.0)
    job.accounted_at = max(since, until)


MAX_PLAUSIBLE_RESTART_SECONDS = 3600.0  # a job held for an hour (preempted, waiting) is not a restart delay


def measure_restart(job_id: int, running_since: datetime) -> float | None:
    """Seconds from the job's last rescale or restart decision until it trained again, if it can be told."""
    decided = RescaleEvent.objects.filter(job_id=job_id, kind__in=[RescaleKind.RESCALE, RescaleKind.START]).order_by(
        "-at").values_list("at", flat=True).first()
    if decided is None or running_since < decided:
        return None
    first_report = JobReport.objects.filter(job_id=job_id, at__gte=running_since).order_by("at").values_list(
        "at", flat=True).first()
    seconds = ((first_report or running_since) - decided).total_seconds()
    return seconds if 0 <= seconds <= MAX_PLAUSIBLE_RESTART_SECONDS else None


SubmissionCheck = Callable[[Job], None]


def refuse_scripts(job: Job) -> None:
    """The submission check of a back-end that runs no batch scripts: a job naming one is refused by the field."""
    if job.script_path:
        raise ValidationError({"script_path": "Batch scripts run on the Slurm back-end only; this cluster's back-end "
                                              "starts the job's command."})


AccountingComparison = Callable[[dict[str, float], datetime, datetime, "str | None"], list[str]]
ForecastModel = Callable[[SchedulingConfig], SchedulingConfig]


def wall_clock(row: SchedulerSettings) -> float:
    return 1.0


@dataclass(frozen=True)
class Backend:
    """A cluster back-end as the registry knows it: what makes its executor from the settings, what it checks of
    a job before the job is stored (``ValidationError`` naming the field; it may normalise the job's fields), how
    fast its jobs' clock runs against the wall, and how a report compares its GPU-hours with the cluster's own
    accounting (``None``: the cluster keeps none)."""

    name: str
    label: str
    make: Callable[[SchedulerSettings], Executor]
    check_submission: SubmissionCheck = refuse_scripts
    clock_speedup: Callable[[SchedulerSettings], float] = wall_clock
    compare_accounting: AccountingComparison | None = None
    even_spread: bool = False  # it runs one GPU count per node: placement spreads jobs evenly
    # Where the cluster's own scheduler decides (an observer): the live scheduling settings → those of a model of
    # that scheduler, which forecasts run instead of the console's policy. None: forecasts run the console's.
    forecast_model: ForecastModel | None = None


# Back-end name (``SchedulerSettings.executor``) → the back-end.
BACKENDS: dict[str, Backend] = {}


def register_backend(name: str, make: Callable[[SchedulerSettings], Executor], *, label: str,
                     check_submission: SubmissionCheck = refuse_scripts,
                     clock_speedup: Callable[[SchedulerSettings], float] = wall_clock,
                     compare_accounting: AccountingComparison | None = None, even_spread: bool = False,
                     forecast_model: ForecastModel | None = None) -> None:
    """Make ``name`` a back-end the settings may name: ``make(settings)`` gives its executor, ``check_submission(job)``
    vets a new job (see ``Backend`` for the rest). Each back-end's module calls this; no migration is needed."""
    BACKENDS[name] = Backend(name, label, make, check_submission, clock_speedup, compare_accounting, even_spread,
                             forecast_model)


def backend_choices() -> list[tuple[str, str]]:
    """``(name, label)`` of every registered back-end: what the settings offer."""
    return [(name, BACKENDS[name].label) for name in sorted(BACKENDS)]


def get_backend(name: str) -> Backend:
    """The back-end registered as ``name`` (``LookupError`` naming the known ones)."""
    try:
        return BACKENDS[name]
    except KeyError:
        raise LookupError(f"no cluster back-end {name!r}; known: {', '.join(sorted(BACKENDS))}") from None


def get_executor(config: SchedulerSettings) -> Executor:
    """The executor of the back-end the settings name."""
    return get_backend(config.executor).make(config)

"""A job's mutable state inside one simulation: progress, GPUs held, and how the policy sees it.

Shared by the engine (engine.py), which moves it through time, and the executor model
(execution.py), which sets how fast it progresses. Here too: how a job resumes from a forecast's ``StartState``,
what it hands to a ``Checkpoint``, and its ``JobOutcome`` at the end.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from scheduler.core.speed import job_speed
from scheduler.core.types import ClusterSnapshot, JobInfo, PolicyState

from .grad_curves import GradCurves
from .metrics import fair_share_seconds
from .records import JobOutcome, WorkloadJob
from .start import Checkpoint, RunningJob, StartState


@dataclass(slots=True)
class JobRun:
    """A job's mutable state inside one simulation."""

    spec: WorkloadJob
    active_integral_at_submit: float
    progress: float = 0.0
    progress_at: float = 0.0
    gpus: tuple[str, ...] = ()
    gpus_by_type: dict[str, int] = field(default_factory=dict)
    rate: float = 0.0
    restart_until: float = 0.0
    start_time: float | None = None
    finish_time: float | None = None
    gpu_seconds: float = 0.0
    held_since: float = 0.0
    restarts: int = 0
    rescales: int = 0
    preemptions: int = 0
    version: int = 0  # invalidates stale completion and restart events
    waiting_info: JobInfo | None = None  # a waiting job's JobInfo does not change: built once per wait
    running_info: JobInfo | None = None  # built once per allocation; each round only advances its progress
    nodes: int = 0  # nodes its GPUs span
    placement: tuple[int, ...] = ()  # its GPUs on each node it spans, in the nodes' order
    policy_batch: int | None = None  # the global batch the policy chose at its allocation, if any
    # With measured gradient statistics only (grad_curves.py):
    adaptive: bool = False  # it tunes its own batch size
    batch: int | None = None  # global batch it trains at
    phi: float | None = None  # the noise scale it last measured (None: nothing yet)
    finishing: bool = True  # its pending event is its completion, not the end of an epoch
    ran_before: bool = False  # it ran before the simulation began (a forecast's preempted job)
    final_gpus: dict[str, int] = field(default_factory=dict)  # GPUs by type it held when it finished

    def progress_now(self, now: float) -> float:
        """Work done by ``now``, at most the job's total; none accrues during a restart delay.

        ``min`` and ``max`` written as comparisons, same results: this runs for every
        running job every round, and the builtins cost as much as the rest of it.
        """
        since = self.restart_until if self.restart_until > self.progress_at else self.progress_at
        done = self.progress + self.rate * (now - since) if now > since else self.progress
        total = self.spec.total_work
        return total if total < done else done

    def attained_now(self, now: float) -> float:
        return self.gpu_seconds + len(self.gpus) * (now - self.held_since)

    def info(self, now: float) -> JobInfo:
        """The job as a policy sees it at ``now``.

        A waiting job's ``JobInfo`` does not change, and a running one's changes only in
        progress and attained GPU-time: each is built once per wait or allocation, then
        advanced. Every active job passes here every round, hence the cache.
        """
        if not self.gpus:
            if self.waiting_info is None:
                self.waiting_info = self.job_info(now)
            return self.waiting_info
        if self.running_info is None:
            self.running_info = self.job_info(now)
        return self.running_info.progressed(self.progress_now(now), self.attained_now(now))

    def job_info(self, now: float) -> JobInfo:
        spec = self.spec
        return JobInfo(
            id=spec.id, tenant=spec.tenant, submit_time=spec.submit_time, min_gpus=spec.min_gpus,
            max_gpus=spec.max_gpus, total_work=spec.total_work,
            progress=self.progress_now(now), profile=spec.profile,
            gpu_type=spec.gpu_type, placement=self.gpus, attained_gpu_seconds=self.attained_now(now),
            restarts=self.restarts, batch_size=spec.batch_size, grad_noise_scale=self.phi,
            expected_seconds=spec.expected_seconds, restart_until=self.restart_until, priority=spec.priority,
            time_limit=spec.time_limit,
        )

    def event_eta(self, curves: GradCurves | None) -> float:
        """When it finishes or, with measured gradient statistics, ends its epoch (``finishing`` says which)."""
        total = self.spec.total_work
        boundary = curves.next_boundary(self.progress) if curves is not None else math.inf
        self.finishing = boundary >= total
        remaining = min(boundary, total) - self.progress
        if remaining <= 0:
            return max(self.progress_at, self.restart_until)
        return max(self.progress_at, self.restart_until) + remaining / self.rate if self.rate > 0 else math.inf

    # --- a forecast's start, a checkpoint, the outcome ------------------------------------------

    def resume_running(self, held: RunningJob, now: float) -> None:
        """Take up the progress, GPU-time and restarts of a job running when the simulation starts (its GPUs are
        the engine's to hold)."""
        self.progress, self.progress_at = min(held.progress, self.spec.total_work), now
        self.gpu_seconds, self.start_time, self.restarts = held.attained_gpu_seconds, held.started_at, held.restarts
        self.restart_until = held.restart_until

    def resume_waiting(self, progress: float, attained_gpu_seconds: float) -> None:
        """Take up the progress of a job that ran before the simulation began and waits now (a preempted one)."""
        self.progress = min(progress, self.spec.total_work)
        self.gpu_seconds = attained_gpu_seconds
        self.ran_before = progress > 0  # its next start reloads a checkpoint

    def running_job(self, now: float) -> RunningJob:
        """The running job as a forecast from ``now`` would start it."""
        return RunningJob(self.gpus, self.start_time if self.start_time is not None else now, self.progress_now(now),
                          self.attained_now(now), self.restart_until, self.restarts, self.policy_batch)

    def outcome(self, now: float, active_integral: float, static: ClusterSnapshot) -> JobOutcome:
        """The job's record at the end of the simulation (``now``; its progress and GPUs already banked).

        ``active_integral``: the engine's running sum of active jobs × seconds, which sets its fair share."""
        spec = self.spec
        return JobOutcome(
            id=spec.id, tenant=spec.tenant, submit_time=spec.submit_time, start_time=self.start_time,
            finish_time=self.finish_time, min_gpus=spec.min_gpus, max_gpus=spec.max_gpus, profile=spec.profile,
            gpu_seconds=self.gpu_seconds, restarts=self.restarts, rescales=self.rescales,
            preemptions=self.preemptions, fair_share_seconds=self._fair_share_seconds(now, active_integral, static),
            final_gpus_by_type=self.final_gpus,
        )

    def _fair_share_seconds(self, now: float, active_integral: float, static: ClusterSnapshot) -> float:
        """Time the job would take alone on 1/N of the cluster, N the average number of jobs active in its life."""
        end = self.finish_time if self.finish_time is not None else now
        lived = end - self.spec.submit_time
        contention = (active_integral - self.active_integral_at_submit) / lived if lived > 0 else 1.0
        info = self.job_info(now)
        return fair_share_seconds(self.spec.total_work, lambda gpus: job_speed(info, static, gpus),
                                  static.total_gpus, contention, self.spec.min_gpus, self.spec.max_gpus)


def checkpoint_of(now: float, active: Iterable[JobRun], done: Sequence[JobRun],
                  state: PolicyState | None) -> Checkpoint:
    """The simulation at ``now`` as a forecast would start from it: the running jobs on their GPUs, the waiting
    ones' progress, the policy's memory, and when each finished job started and finished."""
    active = list(active)
    running = {run.spec.id: run.running_job(now) for run in active if run.gpus}
    waiting = [run for run in active if not run.gpus]
    start = StartState(now, running, {run.spec.id: run.progress for run in waiting if run.progress > 0},
                       {run.spec.id: run.gpu_seconds for run in waiting if run.gpu_seconds > 0}, state)
    finished = {run.spec.id: (run.start_time or 0.0, run.finish_time or 0.0) for run in done}
    return Checkpoint(start, tuple(run.spec for run in active), finished)

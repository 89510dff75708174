"""A job's mutable state inside one simulation: progress, GPUs held, and how the policy sees it.

Shared by the engine (engine.py), which moves it through time, and the executor model
(execution.py), which sets how fast it progresses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from scheduler.core.types import JobInfo

from .grad_curves import GradCurves
from .records import WorkloadJob


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
            expected_seconds=spec.expected_seconds, restart_until=self.restart_until,
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

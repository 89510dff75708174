"""Where a simulation starts and what it hands out on the way: the records of forecasts and the backtest.

``simulate`` (engine.py) starts from a ``StartState`` instead of an idle cluster at 0, hands a ``Checkpoint`` to
its ``on_checkpoint`` callback as a replay passes each interval, and asks a ``RuntimeEstimator`` for the lengths
of arriving jobs without a profile. Plain frozen records and one protocol; no behaviour.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from scheduler.core.types import PolicyState

from .records import WorkloadJob


@dataclass(frozen=True)
class Checkpoint:
    """The simulation at one moment, as a forecast would start from it (``simulate``'s ``on_checkpoint``)."""

    start: StartState
    jobs: tuple[WorkloadJob, ...]  # the active jobs (submitted, unfinished)
    finished: Mapping[str, tuple[float, float]]  # job id → (first start, finish) of the jobs done by then


CheckpointCallback = Callable[[Checkpoint], None]


class RuntimeEstimator(Protocol):
    """Predicts the service seconds of jobs without a profile as they arrive, learning from those that finish
    (sim/runtimes.py ``OnlineEstimator``): what a policy without an oracle (qssf) knows of a job's length."""

    def estimate(self, spec: WorkloadJob, now: float) -> float: ...

    def finished(self, spec: WorkloadJob, service_seconds: float) -> None: ...


@dataclass(frozen=True)
class RunningJob:
    """A job already holding GPUs when a simulation starts (a forecast from a live or simulated state)."""

    gpus: tuple[str, ...]
    started_at: float  # its first start
    progress: float = 0.0  # work done, in its ``WorkloadJob.total_work`` units
    attained_gpu_seconds: float = 0.0
    restart_until: float = 0.0  # paying a restart delay until then: no progress
    restarts: int = 0
    batch_size: int | None = None  # the global batch it trains at, when a policy chose one


@dataclass(frozen=True)
class StartState:
    """Where a simulation starts: its clock, the jobs running then, the progress of those waiting, the policy's
    memory. Every job of the workload submitted by ``now`` is active from the first event; later ones arrive.

    A running job's outcome keeps its ``started_at``; a waiting one's ``start_time`` is when it (re)starts in
    this simulation, and one that ran before (``progress`` > 0) pays the restart delay then.
    """

    now: float
    running: Mapping[str, RunningJob] = field(default_factory=dict)
    progress: Mapping[str, float] = field(default_factory=dict)  # waiting jobs that ran before (preempted)
    attained_gpu_seconds: Mapping[str, float] = field(default_factory=dict)  # ... and the GPU-time they had
    policy_state: PolicyState | None = None

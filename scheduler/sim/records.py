"""What the simulator takes in and gives out: plain frozen records, shared by the engine,
the metrics, the trace loaders and every caller (commands, what-if tasks, reports).

Times are seconds from the start of the trace.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class WorkloadJob:
    """One job to simulate.

    ``total_work`` is in the profile's units (Pollux's scale-invariant iterations) when
    ``profile`` is set; otherwise it is seconds at ``min_gpus`` (a rigid trace job of
    duration D has ``total_work = D`` and ``min_gpus = max_gpus`` = its GPUs).
    """

    id: str
    submit_time: float
    tenant: str
    min_gpus: int
    max_gpus: int
    total_work: float
    profile: str | None = None
    batch_size: int | None = None
    gpu_type: str | None = None
    fixed_batch: bool = False  # it trains at ``batch_size`` whatever global batch the policy proposes
    # Predicted service seconds at min_gpus of a job without a profile (sim/runtimes.py); None: not predicted.
    expected_seconds: float | None = None
    priority: int = 0  # higher first, where a policy honours it (a mirrored Slurm job: Slurm's own priority)
    time_limit: float | None = None  # seconds its cluster manager lets it run (JobInfo.time_limit)

    def __post_init__(self) -> None:
        if self.fixed_batch and self.batch_size is None:
            raise ValueError(f"job {self.id}: a fixed batch needs a batch_size")
        if not 1 <= self.min_gpus <= self.max_gpus:
            raise ValueError(f"job {self.id}: need 1 ≤ min_gpus ≤ max_gpus, got {self.min_gpus}..{self.max_gpus}")
        if self.total_work < 0 or self.submit_time < 0:
            raise ValueError(f"job {self.id}: total_work and submit_time must be ≥ 0")


@dataclass(frozen=True)
class JobOutcome:
    """How one job fared. ``finish_time`` is None for a job still unfinished when the run stopped."""

    id: str
    tenant: str
    submit_time: float
    start_time: float | None
    finish_time: float | None
    min_gpus: int
    max_gpus: int
    profile: str | None
    gpu_seconds: float  # GPU-time held, restarts included
    restarts: int  # starts after a preemption, and rescales: each costs a restart delay
    rescales: int
    preemptions: int
    # Themis' finish-time fairness needs the time the job would take on its own 1/N share:
    fair_share_seconds: float  # total work ÷ speed at that share (N = average jobs active in its life)
    final_gpus_by_type: Mapping[str, int] = field(default_factory=dict)  # what it held when it finished

    @property
    def jct(self) -> float | None:
        return None if self.finish_time is None else self.finish_time - self.submit_time

    @property
    def queue_seconds(self) -> float | None:
        """Time from submission to first start."""
        return None if self.start_time is None else self.start_time - self.submit_time


@dataclass(frozen=True)
class UsageInterval:
    """Cluster usage, constant over [start, end): GPU counts by GPU type.

    ``busy`` GPUs train; ``restarting`` ones are allocated but paying a restart delay;
    ``idle`` are powered and unallocated; ``off`` are powered down (node power-down what-if).
    ``tenant_busy`` and ``tenant_restarting`` split the allocated GPUs by (tenant, GPU type).
    """

    start: float
    end: float
    busy: Mapping[str, int]
    restarting: Mapping[str, int]
    idle: Mapping[str, int]
    off: Mapping[str, int] = field(default_factory=dict)
    tenant_busy: Mapping[tuple[str, str], int] = field(default_factory=dict)
    tenant_restarting: Mapping[tuple[str, str], int] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return self.end - self.start

    @property
    def by_tenant(self) -> dict[str, int]:
        """GPUs allocated to each tenant, training or restarting, of any type."""
        totals: dict[str, int] = {}
        for (tenant, _), gpus in [*self.tenant_busy.items(), *self.tenant_restarting.items()]:
            totals[tenant] = totals.get(tenant, 0) + gpus
        return totals

    @property
    def allocated(self) -> int:
        return sum(self.busy.values()) + sum(self.restarting.values())


@dataclass(frozen=True)
class SimulationResult:
    policy: str
    jobs: tuple[JobOutcome, ...]
    usage: tuple[UsageInterval, ...]
    gpus_by_type: Mapping[str, int]  # the cluster
    tenant_quotas: Mapping[str, int]  # entitlement used by Jain's index (0: equal weights)
    rounds: int  # policy invocations
    wall_seconds: float
    power_cap_fraction: float = 1.0
    power_caps_by_type: Mapping[str, float] = field(default_factory=dict)  # GPU type → its own cap

    @property
    def total_gpus(self) -> int:
        return sum(self.gpus_by_type.values())

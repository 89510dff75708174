"""What a probe reads off a GPU, before it is a row: the contract between collection and storage.

Pure dataclasses (no Django): ``telemetry.probe`` (NVML, or the simulated source) produces
them and ``telemetry.storage`` writes them. A metric the GPU does not support is ``None``,
never 0: an operator must be able to tell "idle" from "unknown".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum


@dataclass(frozen=True)
class GpuReading:
    """One sample of one GPU, keyed by its NVML UUID."""

    uuid: str
    at: datetime
    simulated: bool = False  # derived from allocations and the power model, not measured
    gpu_util: float | None = None  # % of time a kernel ran
    mem_util: float | None = None  # % of time memory was read or written
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    power_w: float | None = None
    energy_j: float | None = None  # the driver's total-energy counter (since it loaded), in joules
    temperature_c: float | None = None
    sm_clock_mhz: float | None = None
    power_limit_w: float | None = None  # the enforced limit
    processes: int | None = None  # compute processes running on it
    # The cluster's id of the job running on it, where the source says (dcgm-exporter's ``hpc_job`` on Slurm hosts);
    # None: the job is the one the console's allocations put there.
    cluster_job_id: str | None = None
    # The Kubernetes pod running on it, "<namespace>/<pod>", where the source says (dcgm-exporter's ``namespace``
    # and ``pod`` on Kubernetes nodes): its job is the console's job of that Kubernetes Job or pod.
    cluster_pod: str | None = None


class EventKind(StrEnum):
    XID = "xid"  # an NVIDIA XID error reported by the driver
    LOST = "lost"  # the GPU fell off the bus or stopped answering
    RECOVERED = "recovered"  # a lost GPU answers again
    ERROR = "error"  # a collection error worth an operator's attention
    POWER_CAP = "power_cap"  # a power limit was applied or refused


@dataclass(frozen=True)
class GpuEventReading:
    uuid: str
    at: datetime
    kind: EventKind
    message: str
    code: int | None = None  # the XID number, for XID events

"""The simulated source: plausible GPU samples where there is no NVML (the demo cluster, a node without a driver).

Each GPU's reading follows from who holds it (open ``Allocation`` rows) and the power model
(``telemetry/power.py``): a free GPU idles; a GPU held by a job runs at 70–98 % utilisation, except that one job in
``IDLE_JOB_ONE_IN`` holds its GPUs and does nothing (so dashboards have an idle allocation to flag). Power is linear in
utilisation between the type's idle and busy draw under the GPU's current limit (a power cap lowers it); the energy
counter continues from the GPU's latest sample. Values are pseudo-random but deterministic: the same GPU, job and
second give the same reading. Every reading is ``simulated=True``.
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db.models import OuterRef, Subquery

from scheduler.core.gpu_types import gpu_type_key
from scheduler.core.power import DEFAULT_SPECS, GpuPowerSpec, PowerModel, spec_from_tdp, throughput_factor
from scheduler.models import Allocation, Gpu, GpuHealth

from .models import GpuSample
from .readings import GpuReading
from .storage import ingest

COLLECT_SIMULATED_TASK = "telemetry.collect_simulated"  # beat, on the demo cluster
IDLE_JOB_ONE_IN = 8
BUSY_UTIL = (70.0, 98.0)
IDLE_SM_CLOCK_MHZ = 210.0
# Boost clocks from NVIDIA's datasheets; other types get DEFAULT_SM_CLOCK_MHZ.
MAX_SM_CLOCK_MHZ = {"a100": 1410.0, "v100": 1530.0, "h100": 1980.0, "h200": 1980.0, "t4": 1590.0, "p100": 1480.0}
DEFAULT_SM_CLOCK_MHZ = 1500.0


@dataclass(frozen=True)
class SimulatedGpu:
    """What the simulation needs of one GPU: its type and limits, its holder, its last energy counter."""

    uuid: str
    model: str
    memory_mib: int
    power_limit_w: float
    power_default_w: float | None = None
    job_id: int | None = None
    last_at: datetime | None = None
    last_energy_j: float | None = None


def job_is_idle(job_id: int) -> bool:
    """One job in ``IDLE_JOB_ONE_IN`` holds its GPUs without using them (stable per job)."""
    return zlib.crc32(f"job:{job_id}".encode()) % IDLE_JOB_ONE_IN == 0


def power_spec(gpu: SimulatedGpu) -> GpuPowerSpec:
    """The power model's spec of the GPU's type; for a type it does not know, one built from the default limit."""
    spec = DEFAULT_SPECS.get(gpu_type_key(gpu.model))
    return spec or spec_from_tdp(gpu.power_default_w or gpu.power_limit_w)


def simulate(gpu: SimulatedGpu, now: datetime, max_gap_s: float) -> GpuReading:
    """The reading of ``gpu`` at ``now``; the energy counter adds at most ``max_gap_s`` since the last sample
    (a longer gap is the demo having been stopped, not a GPU burning power unseen)."""
    rng = random.Random(f"{gpu.uuid}:{gpu.job_id}:{int(now.timestamp())}")
    held = gpu.job_id is not None
    idle = not held or job_is_idle(gpu.job_id)  # type: ignore[arg-type]
    util = round(rng.uniform(*BUSY_UTIL) if not idle else rng.uniform(0.0, 3.0) if held else 0.0, 1)
    spec = power_spec(gpu)
    cap = min(1.0, max(gpu.power_limit_w / spec.tdp_w, 0.01))
    model = PowerModel(specs={"gpu": spec}, cap_fraction=cap)
    power = round(model.power_w("gpu", util / 100), 1)
    elapsed = (now - gpu.last_at).total_seconds() if gpu.last_at else 0.0
    energy = (gpu.last_energy_j or 0.0) + power * min(max(elapsed, 0.0), max_gap_s)
    max_clock = MAX_SM_CLOCK_MHZ.get(gpu_type_key(gpu.model), DEFAULT_SM_CLOCK_MHZ)
    return GpuReading(
        uuid=gpu.uuid, at=now, simulated=True, gpu_util=util, mem_util=round(util * rng.uniform(0.3, 0.6), 1),
        mem_used_mib=round(gpu.memory_mib * rng.uniform(0.2, 0.4) if idle and held else
                           gpu.memory_mib * rng.uniform(0.55, 0.9) if held else 0.0),
        mem_total_mib=float(gpu.memory_mib), power_w=power, energy_j=round(energy, 1),
        temperature_c=round(30 + 40 * power / spec.tdp_w + rng.uniform(-1.5, 1.5), 1),
        sm_clock_mhz=IDLE_SM_CLOCK_MHZ if idle else round(max_clock * throughput_factor(cap)),
        power_limit_w=float(gpu.power_limit_w), processes=1 if held else 0,
    )


def collect_simulated(now: datetime, hostname: str | None = None) -> int:
    """Simulate one sample of every GPU that is not lost (only ``hostname``'s when given); stores them via
    ``telemetry.storage.ingest`` and returns how many were stored."""
    gpus = [simulate(gpu, now, max_gap_s=3 * settings.TELEMETRY_SECONDS) for gpu in simulated_gpus(hostname)]
    return ingest(gpus)


def simulated_gpus(hostname: str | None = None) -> list[SimulatedGpu]:
    """The GPUs to simulate, each with its holder and its latest sample's energy counter."""
    latest = GpuSample.objects.filter(gpu=OuterRef("pk")).order_by("-at", "-id")
    holder = Allocation.objects.filter(gpu=OuterRef("pk"), ended_at__isnull=True)
    gpus = Gpu.objects.exclude(health=GpuHealth.LOST).order_by("node__hostname", "index")
    if hostname is not None:
        gpus = gpus.filter(node__hostname=hostname)
    rows = gpus.annotate(
        job_id=Subquery(holder.values("job_id")[:1]),
        last_at=Subquery(latest.values("at")[:1]),
        last_energy_j=Subquery(latest.values("energy_j")[:1]),
    ).values_list("uuid", "model", "memory_mib", "power_limit_w", "power_default_w", "job_id", "last_at",
                  "last_energy_j")
    return [SimulatedGpu(*row) for row in rows]

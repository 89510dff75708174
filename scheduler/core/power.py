"""GPU power and energy: watts per GPU type under a power cap, and what a kWh costs the planet and the budget.

Pure Python (numpy, scipy), in the pure core: the simulator and the telemetry both import it.

The model, and where each piece comes from:

* **Power is linear in utilisation** between the idle draw and the full-utilisation draw (Fan, Weber & Barroso,
  "Power provisioning for a warehouse-sized computer", ISCA'07).
* **A power cap** is a fraction ``c`` of the board's power limit (``tdp_w``, the datasheet default limit, which for
  the GPUs below is also the maximum settable limit). Its effect comes from Zeus (You, Chung & Chowdhury, "Zeus:
  Understanding and Optimizing GPU Energy Consumption of DNN Training", NSDI'23): at caps of 0.9 / 0.8 / 0.7 / 0.6 a
  V100 trained 1.3 / 3.7 / 6.3 / 11.2 % slower and used 4.6 / 10.3 / 15.5 / 19.4 % less energy. Between those points
  (and 1.0, no change) both curves are PCHIP-interpolated: monotone, through every point exactly. The same *relative*
  curves are applied to every GPU type: Zeus measured a V100 only, and we have no per-type data.
* **Busy power under a cap** is the full-utilisation draw × ``power_factor(c)`` = energy factor ÷ time factor, the
  average draw Zeus measured (72.5 % of the uncapped draw at c = 0.6). It is *not* ``c × max_w``: training's average
  draw sits below the limit, so a cap trims it less than in proportion. Because a job under the cap also runs
  ``time_factor(c)`` longer, busy watts × busy seconds reproduce Zeus' energy factor exactly. The draw is still never
  above the enforced limit ``c × tdp_w`` nor below the idle draw.
* **Below the lowest measured cap (0.6)** Zeus has no data. We assume the energy curve bottoms out at 0.5 — a parabola
  continuing the measured curve's value and slope at 0.6, with its minimum at 0.5 — and rises below it, because the
  GPU's static power is paid over an ever longer run. The average draw falls in proportion to the cap there (the cap
  binds throughout a step), so the slowdown is energy ÷ draw: 31 % at 0.5, 67 % at 0.4, ~9× at 0.1, and without bound
  as the cap goes to 0 (the slowdown steepens below 0.6 compared with the measured points).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from types import MappingProxyType

from scipy.interpolate import PchipInterpolator


@dataclass(frozen=True)
class GpuPowerSpec:
    """Board power of one GPU type, in watts.

    ``idle_w``: powered, no work. ``max_w``: average draw while training at full utilisation, uncapped.
    ``tdp_w``: the datasheet board power, i.e. the default (and maximum) power limit that a cap is a fraction of.
    """

    idle_w: float
    max_w: float
    tdp_w: float

    def __post_init__(self) -> None:
        if not 0 <= self.idle_w <= self.max_w <= self.tdp_w or self.tdp_w <= 0:
            raise ValueError(f"need 0 ≤ idle_w ≤ max_w ≤ tdp_w and tdp_w > 0, got {self}")


# Datasheet board power (TDP) per GPU, in watts: NVIDIA's product datasheets for T4 (70 W), V100-SXM2 (300 W),
# A100-SXM4 (400 W), H100-SXM5 (700 W), Quadro RTX 6000 (260 W), GeForce RTX 2080 Ti (250 W), Tesla P100 PCIe
# (250 W). A Tesla K80 board is rated 300 W but carries two GK210 GPUs that the driver (and this scheduler) counts as
# two devices, so one K80 "GPU" is 150 W.
DATASHEET_TDP_W: Mapping[str, float] = MappingProxyType(
    {"t4": 70, "v100": 300, "a100": 400, "h100": 700, "rtx6000": 260, "rtx2080ti": 250, "p100": 250, "k80": 150}
)

# Idle draw: 25 % of TDP for every type. A powered GPU with no work sits at roughly 15 % of TDP with no CUDA context
# (e.g. ~60 W on an A100), and a context (a job holding the GPU, as while restarting) adds 26–50 W on HBM parts
# (Vadari, "The Model Parking Tax", arXiv:2605.23918, 2026: A100/H100); 25 % sits between the two, since the simulator
# charges restarting and unallocated GPUs the same idle draw. It overstates consumer cards (2080 Ti), which idle
# lower; override per site with measured values.
IDLE_FRACTION_OF_TDP = 0.25

# Full-utilisation training draw: 80 % of TDP. An 8×H100 node training near full utilisation peaked at 82 % of its
# rated power (Latif et al., "Empirical Measurements of AI Training Power Demand on a GPU-Accelerated Node",
# arXiv:2412.08602, 2024), and Zeus' own points imply an uncapped V100 averaged at most 83 % of its limit (at c = 0.6
# it drew 72.5 % of its uncapped draw while held to 60 % of the limit). Below 83 % the Zeus curve never meets the cap.
TRAINING_FRACTION_OF_TDP = 0.8


def spec_from_tdp(tdp_w: float) -> GpuPowerSpec:
    """The default spec of a GPU rated ``tdp_w`` watts: idle and training draw as fixed fractions of it."""
    return GpuPowerSpec(idle_w=IDLE_FRACTION_OF_TDP * tdp_w, max_w=TRAINING_FRACTION_OF_TDP * tdp_w, tdp_w=tdp_w)


DEFAULT_SPECS: Mapping[str, GpuPowerSpec] = MappingProxyType(
    {gpu_type: spec_from_tdp(tdp) for gpu_type, tdp in DATASHEET_TDP_W.items()}
)

# Zeus (NSDI'23), V100: (cap as a fraction of the maximum power limit, time factor, energy factor).
ZEUS_V100_POINTS: tuple[tuple[float, float, float], ...] = (
    (0.6, 1.112, 0.806),
    (0.7, 1.063, 0.845),
    (0.8, 1.037, 0.897),
    (0.9, 1.013, 0.954),
    (1.0, 1.0, 1.0),
)
LOWEST_MEASURED_CAP = ZEUS_V100_POINTS[0][0]
ENERGY_MINIMUM_CAP = 0.5  # assumed: below this, a tighter cap costs energy (see the module docstring)

# Data-centre defaults, all configurable on PowerModel:
# PUE 1.58: the industry-average annual PUE in the Uptime Institute Global Data Center Survey 2023.
DEFAULT_PUE = 1.58
# 475 gCO2/kWh: the world-average carbon intensity of electricity generation (IEA, Global Energy & CO2 Status Report
# 2019, for 2018).
DEFAULT_GRID_G_CO2_PER_KWH = 475.0
# 0.10 per kWh, in whatever currency the site uses: a round figure near the US industrial average (EIA, ~8 ¢/kWh).
DEFAULT_PRICE_PER_KWH = 0.10


def checked_cap(cap_fraction: float) -> float:
    """``cap_fraction`` if it is in (0, 1]; a ValueError naming it otherwise (NaN included)."""
    if not 0 < cap_fraction <= 1:
        raise ValueError(f"power cap fraction must be in (0, 1] of the power limit, got {cap_fraction!r}")
    return float(cap_fraction)


@cache
def _measured_curves() -> tuple[PchipInterpolator, PchipInterpolator]:
    """PCHIP through Zeus' points: (time factor, energy factor) as functions of the cap, on [0.6, 1]."""
    caps, times, energies = zip(*ZEUS_V100_POINTS, strict=True)
    return PchipInterpolator(caps, times), PchipInterpolator(caps, energies)


@cache
def _low_cap_parabola() -> tuple[float, float]:
    """(curvature a, minimum e_min) of e(c) = e_min + a·(c − 0.5)², which meets the measured curve at 0.6 with the
    same value and slope."""
    energy = _measured_curves()[1]
    c0, c_min = LOWEST_MEASURED_CAP, ENERGY_MINIMUM_CAP
    curvature = float(energy.derivative()(c0)) / (2 * (c0 - c_min))
    return curvature, float(energy(c0)) - curvature * (c0 - c_min) ** 2


def energy_factor(cap_fraction: float) -> float:
    """Energy to do the same training work under the cap, relative to uncapped (Zeus, V100; extrapolated below 0.6)."""
    cap = checked_cap(cap_fraction)
    if cap >= LOWEST_MEASURED_CAP:
        return float(_measured_curves()[1](cap))
    curvature, minimum = _low_cap_parabola()
    return minimum + curvature * (cap - ENERGY_MINIMUM_CAP) ** 2


def time_factor(cap_fraction: float) -> float:
    """How many times longer the same training work takes under the cap (1.112 at 0.6: "11.2 % slower")."""
    cap = checked_cap(cap_fraction)
    if cap >= LOWEST_MEASURED_CAP:
        return float(_measured_curves()[0](cap))
    return energy_factor(cap) / power_factor(cap)


def throughput_factor(cap_fraction: float) -> float:
    """Training throughput under the cap relative to uncapped: 1 ÷ ``time_factor``. The simulator scales speed by it.

    Never above 1 (the interpolation returns 1 ± 1e-16 at the top: a cap never speeds training up).
    """
    return min(1.0, 1.0 / time_factor(cap_fraction))


def power_factor(cap_fraction: float) -> float:
    """Average training draw under the cap relative to uncapped: energy factor ÷ time factor; below 0.6 it falls in
    proportion to the cap from its value there."""
    cap = checked_cap(cap_fraction)
    if cap >= LOWEST_MEASURED_CAP:
        return energy_factor(cap) / time_factor(cap)
    return power_factor(LOWEST_MEASURED_CAP) * cap / LOWEST_MEASURED_CAP


@dataclass(frozen=True)
class PowerModel:
    """Watts per GPU type under a power cap, and the facility energy, CO₂ and cost of IT energy.

    ``cap_fraction`` caps every GPU type; ``type_caps`` overrides it for the types it names (an operator caps the
    power-hungry A100s harder than the T4s). Unknown GPU types are refused (a ValueError naming the type and the
    known ones) rather than given a generic guess: add a ``GpuPowerSpec`` for them to ``specs``.
    """

    specs: Mapping[str, GpuPowerSpec] = field(default_factory=lambda: DEFAULT_SPECS)
    cap_fraction: float = 1.0
    pue: float = DEFAULT_PUE
    grid_g_co2_per_kwh: float = DEFAULT_GRID_G_CO2_PER_KWH
    price_per_kwh: float = DEFAULT_PRICE_PER_KWH
    type_caps: Mapping[str, float] = field(default_factory=dict)  # GPU type → its cap, overriding cap_fraction

    def __post_init__(self) -> None:
        checked_cap(self.cap_fraction)
        for gpu_type, cap in self.type_caps.items():
            self.spec(gpu_type)  # a cap for a type without a spec is a typo, not a no-op
            try:
                checked_cap(cap)
            except ValueError as error:
                raise ValueError(f"GPU type {gpu_type!r}: {error}") from None
        if self.pue < 1:
            raise ValueError(f"PUE is facility ÷ IT energy, so at least 1; got {self.pue!r}")
        if self.grid_g_co2_per_kwh < 0 or self.price_per_kwh < 0:
            raise ValueError("grid intensity and price per kWh must be ≥ 0")

    def at_cap(self, cap_fraction: float, type_caps: Mapping[str, float] | None = None) -> PowerModel:
        """The same model under another cap (and, if given, other per-type caps; else it keeps its own)."""
        return replace(self, cap_fraction=cap_fraction,
                       type_caps=dict(self.type_caps if type_caps is None else type_caps))

    def cap_for(self, gpu_type: str) -> float:
        """The cap fraction that applies to ``gpu_type``: its own, or the model's for every type."""
        return self.type_caps.get(gpu_type, self.cap_fraction)

    @property
    def throughput_factor(self) -> float:
        """Training throughput under this model's all-types cap, relative to uncapped."""
        return throughput_factor(self.cap_fraction)

    @property
    def energy_factor(self) -> float:
        """Energy per unit of training work under this model's all-types cap, relative to uncapped."""
        return energy_factor(self.cap_fraction)

    def throughput_factors(self) -> dict[str, float]:
        """Training throughput relative to uncapped for each GPU type with a cap of its own."""
        return {gpu_type: throughput_factor(cap) for gpu_type, cap in self.type_caps.items()}

    def spec(self, gpu_type: str) -> GpuPowerSpec:
        """The spec of ``gpu_type``; a ValueError naming it and the known types if there is none."""
        try:
            return self.specs[gpu_type]
        except KeyError:
            known = ", ".join(sorted(self.specs))
            raise ValueError(f"no power spec for GPU type {gpu_type!r} (known: {known}); add one to specs") from None

    def limit_w(self, gpu_type: str) -> float:
        """The enforced power limit: the type's cap × board power."""
        return self.cap_for(gpu_type) * self.spec(gpu_type).tdp_w

    def idle_gpu_power_w(self, gpu_type: str) -> float:
        """Draw of a powered GPU doing no work (never above the enforced limit)."""
        return min(self.spec(gpu_type).idle_w, self.limit_w(gpu_type))

    def busy_gpu_power_w(self, gpu_type: str) -> float:
        """Average draw of a GPU training at full utilisation under the cap, between the idle draw and the limit."""
        capped = min(self.spec(gpu_type).max_w * power_factor(self.cap_for(gpu_type)), self.limit_w(gpu_type))
        return max(capped, self.idle_gpu_power_w(gpu_type))

    def power_w(self, gpu_type: str, utilisation: float) -> float:
        """Draw at ``utilisation`` in [0, 1], linear between idle and busy (Fan et al., ISCA'07)."""
        if not 0 <= utilisation <= 1:
            raise ValueError(f"utilisation must be in [0, 1], got {utilisation!r}")
        idle = self.idle_gpu_power_w(gpu_type)
        return idle + utilisation * (self.busy_gpu_power_w(gpu_type) - idle)

    def facility_kwh(self, it_kwh: float) -> float:
        """Energy the facility draws for ``it_kwh`` of IT (here: GPU) energy: IT energy × PUE."""
        return it_kwh * self.pue

    def co2_kg(self, it_kwh: float) -> float:
        """CO₂ emitted for ``it_kwh`` of IT energy: facility energy × grid intensity."""
        return self.facility_kwh(it_kwh) * self.grid_g_co2_per_kwh / 1000.0

    def cost(self, it_kwh: float) -> float:
        """What ``it_kwh`` of IT energy costs: facility energy × price per kWh."""
        return self.facility_kwh(it_kwh) * self.price_per_kwh

"""A simulation's settings: the scheduling ones (rounds, restart delays, the cycle's guards) and how jobs execute.

``SimConfig.of`` builds one from the ``SchedulingConfig`` the live rounds run under, so a what-if, a forecast and the
live cluster schedule alike; the rest (speed factors, slowdowns, power-down, a horizon) is the simulation's own.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.core.config import DEFAULT_RESTART_SECONDS, DEFAULT_ROUND_SECONDS, SchedulingConfig
from scheduler.core.cycle import CycleConfig

from .powerdown import PowerDownConfig


@dataclass(frozen=True)
class SimConfig:
    """A simulation's settings: the scheduling ones (``SchedulingConfig``: rounds, restart delays, the cycle's
    guards; ``SimConfig.of``) and how jobs execute."""

    round_seconds: float = DEFAULT_ROUND_SECONDS
    # Rounds fall at ``round_phase`` + k × ``round_seconds``: a forecast runs them when the live cluster does (beat
    # ticks from when it started, not from the epoch; their offset was a forecast's whole start error in the demo).
    round_phase: float = 0.0
    restart_seconds: float = DEFAULT_RESTART_SECONDS
    speed_factor: float = 1.0  # throughput multiplier, e.g. from a power cap (telemetry/power.py)
    speed_factor_by_type: Mapping[str, float] = field(default_factory=dict)  # GPU type → its own multiplier
    cycle: CycleConfig = field(default_factory=lambda: CycleConfig(explain_counts=False))  # it reads no reason
    horizon: float | None = None  # stop here even if jobs remain
    # Jobs that cannot finish by the horizon (a forecast's): once only they remain, all running, with no arrival
    # to come, the run stops there rather than simulate them to the horizon round by round.
    stop_once_only: frozenset[str] = frozenset()
    # A forecast's bound on work: while an elastic policy's rounds change nothing, the next comes twice as late, up
    # to this many seconds apart, until an arrival or a completion (None: every round_seconds, as live).
    quiet_rounds_up_to: float | None = None
    charge_first_start: bool = False  # also charge the restart delay on a job's first start (Pollux's simulator does)
    power_down: PowerDownConfig | None = None  # switch idle nodes off (powerdown.py)
    # A model's own restart delay (its checkpoint's size sets it), by profile, instead of ``restart_seconds``.
    restart_seconds_by_profile: Mapping[str, float] = field(default_factory=dict)
    # Progress divided by this, by profile: a calibration of measured speeds to real runs (Sia's SLOWDOWN).
    slowdown_by_profile: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.round_seconds <= 0 or self.restart_seconds < 0:
            raise ValueError("round_seconds must be > 0 and restart_seconds ≥ 0")
        if not 0 <= self.round_phase < self.round_seconds:
            raise ValueError("round_phase must be in [0, round_seconds)")
        for name, factor in [("all types", self.speed_factor), *self.speed_factor_by_type.items()]:
            if not 0 < factor <= 1:
                raise ValueError(f"speed factor ({name}) must be in (0, 1], got {factor}")
        if any(not 0 <= delay < math.inf for delay in self.restart_seconds_by_profile.values()):
            raise ValueError("every profile's restart delay must be finite and ≥ 0")
        if any(not 1 <= slowdown < math.inf for slowdown in self.slowdown_by_profile.values()):
            raise ValueError("every profile's slowdown must be finite and ≥ 1")

    @classmethod
    def of(cls, scheduling: SchedulingConfig, **execution: Any) -> SimConfig:
        """The simulation of rounds run under ``scheduling``, executing jobs as ``execution`` says."""
        return cls(round_seconds=scheduling.round_seconds, restart_seconds=scheduling.restart_seconds,
                   restart_seconds_by_profile=dict(scheduling.restart_seconds_by_profile), cycle=scheduling.cycle,
                   **execution)

    def restart_delay(self, profile: str | None) -> float:
        return self.restart_seconds_by_profile.get(profile or "", self.restart_seconds)

    def speed_factor_of(self, gpu_types: Iterable[str]) -> float:
        """The speed factor of a job holding GPUs of ``gpu_types``: the slowest type's, since a data-parallel step
        waits for every replica."""
        return min((self.speed_factor_by_type.get(t, self.speed_factor) for t in gpu_types),
                   default=self.speed_factor)

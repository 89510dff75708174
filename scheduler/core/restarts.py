"""What a restart costs a job: the delays a policy that prices restarts is given (``Capabilities.prices_restarts``).

Its own module below ``config`` and the policies, so that a policy inherits ``PricesRestarts`` without importing the
configuration that builds it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from .cycle import DEFAULT_RESTART_SECONDS
from .types import JobInfo


def check_restart_delays(seconds: float, by_profile: Mapping[str, float]) -> None:
    """``ValueError`` unless every restart delay is a finite number ≥ 0."""
    if any(not (isinstance(d, int | float) and math.isfinite(d) and d >= 0) for d in [seconds, *by_profile.values()]):
        raise ValueError("restart_seconds must be finite and ≥ 0")


@dataclass(frozen=True)
class PricesRestarts:
    """The restart delays of a policy that prices restarts (``Capabilities.prices_restarts``), which
    ``config.build_policy`` fills from the configuration; a policy dataclass inherits them."""

    restart_seconds: float = DEFAULT_RESTART_SECONDS
    restart_seconds_by_profile: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_restart_delays(self.restart_seconds, self.restart_seconds_by_profile)

    def restart_delay(self, job: JobInfo) -> float:
        """What one restart of ``job`` costs it."""
        return self.restart_seconds_by_profile.get(job.profile or "", self.restart_seconds)

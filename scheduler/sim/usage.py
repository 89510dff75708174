"""Cluster usage over simulated time, as piecewise-constant intervals (records.UsageInterval)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from scheduler.core.types import NodeInfo, TenantInfo

from .records import UsageInterval

# A running job as the recorder sees it: its GPUs by type, whether it is paying a restart, its tenant.
Holding = tuple[Mapping[str, int], bool, str]


class UsageRecorder:
    """Appends one interval per stretch of constant usage, merging stretches that look alike."""

    def __init__(self, nodes: tuple[NodeInfo, ...], tenants: tuple[TenantInfo, ...]) -> None:
        self.type_of = {gpu.id: node.gpu_type for node in nodes for gpu in node.gpus}
        self.gpus_by_type = Counter(self.type_of.values())
        self._intervals: list[UsageInterval] = []

    def record(self, start: float, end: float, holdings: Iterable[Holding]) -> None:
        """Usage over [start, end), constant by construction: the engine splits time at every change."""
        if end <= start:
            return
        busy: Counter[str] = Counter()
        restarting: Counter[str] = Counter()
        by_tenant: Counter[str] = Counter()
        for by_type, is_restarting, tenant in holdings:
            (restarting if is_restarting else busy).update(by_type)
            by_tenant[tenant] += sum(by_type.values())
        idle = self.gpus_by_type - busy - restarting
        self._append(UsageInterval(start, end, dict(busy), dict(restarting), dict(idle), {}, dict(by_tenant)))

    def _append(self, interval: UsageInterval) -> None:
        last = self._intervals[-1] if self._intervals else None
        if last and last.end == interval.start and _same_usage(last, interval):
            self._intervals[-1] = UsageInterval(last.start, interval.end, last.busy, last.restarting, last.idle,
                                                last.off, last.by_tenant)
        else:
            self._intervals.append(interval)

    def intervals(self) -> tuple[UsageInterval, ...]:
        return tuple(self._intervals)


def _same_usage(a: UsageInterval, b: UsageInterval) -> bool:
    return (a.busy, a.restarting, a.idle, a.off, a.by_tenant) == (b.busy, b.restarting, b.idle, b.off, b.by_tenant)

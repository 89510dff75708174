"""Cluster usage over simulated time, as piecewise-constant intervals (records.UsageInterval)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from scheduler.core.types import NodeInfo

from .records import UsageInterval


class UsageRecorder:
    """Appends one interval per stretch of constant usage, merging stretches that look alike.

    The engine keeps the counts current as jobs start, stop and finish restarting
    (``hold``/``release``/``restarted``), so recording an interval costs nothing per job;
    and a stretch after which nothing changed only extends the last interval.
    """

    def __init__(self, nodes: tuple[NodeInfo, ...]) -> None:
        self.gpus_by_type = Counter(node.gpu_type for node in nodes for _ in node.gpus)
        self.held: Counter[str] = Counter()
        self.restarting: Counter[str] = Counter()
        self.tenant_held: Counter[tuple[str, str]] = Counter()  # (tenant, GPU type) → GPUs
        self.tenant_restarting: Counter[tuple[str, str]] = Counter()
        self._off: Counter[str] = Counter()
        self._intervals: list[UsageInterval] = []
        self._changed = True  # since the last interval was recorded

    @property
    def off(self) -> Counter[str]:
        """GPUs on powered-down nodes (node power-down what-if). Set it whole: a change in place goes unseen."""
        return self._off

    @off.setter
    def off(self, by_type: Counter[str]) -> None:
        self._off, self._changed = by_type, True

    def hold(self, by_type: Mapping[str, int], tenant: str, restarting: bool) -> None:
        self._changed = True
        self.held.update(by_type)
        self.tenant_held.update({(tenant, gpu_type): gpus for gpu_type, gpus in by_type.items()})
        if restarting:
            self.restarting.update(by_type)
            self.tenant_restarting.update({(tenant, gpu_type): gpus for gpu_type, gpus in by_type.items()})

    def release(self, by_type: Mapping[str, int], tenant: str, restarting: bool) -> None:
        self._changed = True
        self.held.subtract(by_type)
        self.tenant_held.subtract({(tenant, gpu_type): gpus for gpu_type, gpus in by_type.items()})
        if restarting:
            self.restarting.subtract(by_type)
            self.tenant_restarting.subtract({(tenant, gpu_type): gpus for gpu_type, gpus in by_type.items()})

    def restarted(self, by_type: Mapping[str, int], tenant: str) -> None:
        """A job finished its restart delay: its GPUs now train."""
        self._changed = True
        self.restarting.subtract(by_type)
        self.tenant_restarting.subtract({(tenant, gpu_type): gpus for gpu_type, gpus in by_type.items()})

    def record(self, start: float, end: float) -> None:
        """Usage over [start, end), constant by construction: the engine splits time at every change."""
        if end <= start:
            return
        if not self._changed and self._intervals and self._intervals[-1].end == start:
            self._extend_last(end)  # the same usage: what _append would merge
            return
        self._changed = False
        busy = +(self.held - self.restarting)
        restarting = +self.restarting
        idle = self.gpus_by_type - self.held - self.off
        tenant_busy = +(self.tenant_held - self.tenant_restarting)
        self._append(UsageInterval(start, end, dict(busy), dict(restarting), dict(idle), dict(+self.off),
                                   dict(tenant_busy), dict(+self.tenant_restarting)))

    def _append(self, interval: UsageInterval) -> None:
        last = self._intervals[-1] if self._intervals else None
        if last and last.end == interval.start and _same_usage(last, interval):
            self._extend_last(interval.end)
        else:
            self._intervals.append(interval)

    def _extend_last(self, end: float) -> None:
        last = self._intervals[-1]
        self._intervals[-1] = UsageInterval(last.start, end, last.busy, last.restarting, last.idle, last.off,
                                            last.tenant_busy, last.tenant_restarting)

    def intervals(self) -> tuple[UsageInterval, ...]:
        return tuple(self._intervals)


def _same_usage(a: UsageInterval, b: UsageInterval) -> bool:
    return (a.busy, a.restarting, a.idle, a.off, a.tenant_busy, a.tenant_restarting) == (
        b.busy, b.restarting, b.idle, b.off, b.tenant_busy, b.tenant_restarting)

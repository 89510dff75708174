"""UsageRecorder: one interval per stretch of constant usage."""

from __future__ import annotations

from collections import Counter

from scheduler.core.types import GpuSlot, NodeInfo
from scheduler.sim.usage import UsageRecorder

NODES = (NodeInfo("n0", "v100", tuple(GpuSlot(f"n0-g{i}") for i in range(4))),)


def test_stretches_without_a_change_extend_one_interval() -> None:
    usage = UsageRecorder(NODES)
    usage.hold({"v100": 2}, "t", restarting=False)
    usage.record(0, 10)
    usage.record(10, 25)  # nothing changed in between
    usage.release({"v100": 2}, "t", restarting=False)
    usage.record(25, 30)
    (first, second) = usage.intervals()
    assert (first.start, first.end, first.busy, first.idle) == (0, 25, {"v100": 2}, {"v100": 2})
    assert (second.start, second.end, second.busy, second.idle) == (25, 30, {}, {"v100": 4})


def test_a_change_that_undoes_itself_still_merges_and_powering_down_splits() -> None:
    usage = UsageRecorder(NODES)
    usage.record(0, 10)
    usage.hold({"v100": 1}, "t", restarting=True)
    usage.release({"v100": 1}, "t", restarting=True)
    usage.record(10, 20)
    usage.off = Counter({"v100": 4})
    usage.record(20, 30)
    assert [(i.start, i.end, i.off) for i in usage.intervals()] == [(0, 20, {}), (20, 30, {"v100": 4})]


def test_tenant_usage_is_split_by_gpu_type_and_restart() -> None:
    usage = UsageRecorder(NODES)
    usage.hold({"v100": 2}, "a", restarting=True)
    usage.hold({"v100": 1}, "b", restarting=False)
    usage.record(0, 10)
    usage.restarted({"v100": 2}, "a")
    usage.record(10, 20)
    first, second = usage.intervals()
    assert (first.tenant_busy, first.tenant_restarting) == ({("b", "v100"): 1}, {("a", "v100"): 2})
    assert (second.tenant_busy, second.tenant_restarting) == ({("a", "v100"): 2, ("b", "v100"): 1}, {})
    assert second.by_tenant == {"a": 2, "b": 1}

"""The round: stages compose, guards hold, and every decision says why."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

import pytest

from scheduler.core.cycle import Action, CycleConfig, PolicyContractError, run_cycle
from scheduler.core.policy import Capabilities
from scheduler.core.types import ClusterSnapshot, GpuSlot, JobInfo, NodeInfo, PolicyResult, PolicyState, TenantInfo

from .strategies import PROFILES


@dataclass
class Fixed:
    """A stand-in policy that answers with the counts it was built with."""

    counts: Mapping[str, int]
    reasons: Mapping[str, str] = field(default_factory=dict)
    types: Mapping[str, str] = field(default_factory=dict)  # the GPU types it chooses, job id → type
    name: ClassVar[str] = "fixed"
    event_driven: ClassVar[bool] = True
    capabilities: ClassVar[Capabilities] = Capabilities()

    def allocate(self, snap: ClusterSnapshot, state: PolicyState | None) -> PolicyResult:
        seen = (state or {}).get("rounds", 0)
        return PolicyResult({j.id: self.counts.get(j.id, 0) for j in snap.jobs}, {"rounds": seen + 1}, self.reasons,
                            gpu_types=self.types)


def node(name: str, size: int = 8, gpu_type: str = "a100", lost: tuple[int, ...] = ()) -> NodeInfo:
    return NodeInfo(name, gpu_type, tuple(GpuSlot(f"{name}-{i}", i not in lost) for i in range(size)))


def job(jid: str, low: int, high: int | None = None, held: int = 0, tenant: str = "t", t: float = 0.0,
        first: int = 0, **kw) -> JobInfo:
    """A job holding GPUs n1-<first> … n1-<first + held - 1>."""
    placement = tuple(f"n1-{i}" for i in range(first, first + held))
    return JobInfo(jid, tenant, t, low, high or low, 1000.0, placement=placement, **kw)


def snap(*jobs: JobInfo, nodes=None, tenants=(), now: float = 100.0) -> ClusterSnapshot:  # type: ignore[no-untyped-def]
    return ClusterSnapshot(now, tuple(nodes or [node("n1"), node("n2")]), jobs, tuple(tenants), PROFILES)


def test_decisions_cover_every_job_with_actions_and_reasons() -> None:
    s = snap(job("start", 2), job("keep", 2, held=2), job("stop", 1, held=1, t=5, first=2), job("wait", 4))
    result = run_cycle(s, Fixed({"start": 2, "keep": 2, "stop": 0, "wait": 0}, {"wait": "behind others"}))
    actions = {jid: d.action for jid, d in result.decisions.items()}
    assert actions == {"start": Action.START, "keep": Action.KEEP, "stop": Action.PREEMPT, "wait": Action.WAIT}
    assert result.decisions["wait"].reason == "behind others"
    assert result.decisions["start"].reason == "started on 2 GPUs: its fixed size"
    assert [d.job_id for d in result.changes] == ["start", "stop"]


def test_unchanged_jobs_are_no_change_but_still_have_a_decision() -> None:
    s = snap(job("keep", 2, held=2), job("wait", 4), job("start", 1))
    result = run_cycle(s, Fixed({"keep": 2, "wait": 0, "start": 1}))
    assert [d.job_id for d in result.changes] == ["start"]
    assert result.decisions["keep"].action == Action.KEEP and result.decisions["keep"].reason == "keeps 2 GPUs"
    assert result.decisions["wait"].action == Action.WAIT and result.decisions["start"] is result.changes[0]


def test_state_round_trips_through_json_and_reaches_the_policy() -> None:
    s = snap(job("a", 1))
    first = run_cycle(s, Fixed({"a": 1}))
    second = run_cycle(s, Fixed({"a": 1}), json.loads(json.dumps(first.state)))
    assert second.state["policy"] == {"rounds": 2}


def test_a_policy_breaking_its_contract_is_refused() -> None:
    with pytest.raises(PolicyContractError, match="bounds 2..4"):
        run_cycle(snap(job("a", 2, 4)), Fixed({"a": 5}))
    with pytest.raises(PolicyContractError, match="over capacity"):
        run_cycle(snap(job("a", 16), job("b", 1)), Fixed({"a": 16, "b": 1}))


def test_jobs_that_can_never_fit_are_left_out_with_a_reason() -> None:
    result = run_cycle(snap(job("huge", 32)), Fixed({}))
    assert "needs 32 GPUs, the cluster has 16 usable" in result.decisions["huge"].reason


def test_hysteresis_holds_a_small_gain() -> None:
    # The synthetic "wide" profile gains little from 8 to 9 GPUs (a second node joins).
    running = job("e", 1, 16, held=8, profile="wide")
    result = run_cycle(snap(running), Fixed({"e": 9}), config=CycleConfig(min_rescale_gain=0.2))
    assert result.decisions["e"].action == Action.KEEP and "held at 8 GPUs" in result.decisions["e"].reason


def test_a_big_enough_gain_rescales_and_is_counted() -> None:
    running = job("e", 1, 16, held=1)  # no profile: linear speed, 1 → 4 GPUs is +300 %
    result = run_cycle(snap(running), Fixed({"e": 4}))
    assert result.decisions["e"].action == Action.RESCALE and len(result.decisions["e"].gpus) == 4
    assert result.state["rescales"] == {"e": [100.0]}


def test_rescale_limit_per_hour() -> None:
    running = job("e", 1, 16, held=1)
    history = {"policy": {}, "rescales": {"e": [10.0, 20.0, 30.0, 40.0]}}
    held = run_cycle(snap(running, now=100.0), Fixed({"e": 4}), history)
    assert held.decisions["e"].action == Action.KEEP and "4 rescales in the last hour" in held.decisions["e"].reason
    later = run_cycle(snap(running, now=10.0 + 3600), Fixed({"e": 4}), history)
    assert later.decisions["e"].action == Action.RESCALE


def test_shrinks_for_other_jobs_do_not_use_up_the_hourly_limit() -> None:
    """A job shrunk for four arrivals in a row may grow back once they are gone. Counted as its own rescales, the
    shrinks held the regrowth and left the GPUs idle ("held at 8 GPUs: 4 rescales in the last hour")."""
    nodes, state, held, now = [node("n1", 16)], dict[str, object](), 16, 100.0
    for arrival in range(4):  # each arrival takes 2 of its GPUs, 200 s apart
        newcomers = [job(f"new{k}", 2, first=14 - 2 * k, held=2 if k < arrival else 0, t=now - 1) for k in
                     range(arrival + 1)]
        counts = {"e": held - 2, **{f"new{k}": 2 for k in range(arrival + 1)}}
        result = run_cycle(snap(job("e", 1, 16, held=held), *newcomers, nodes=nodes, now=now), Fixed(counts), state)
        assert len(result.decisions["e"].gpus) == held - 2
        state, held, now = result.state, held - 2, now + 200
    regrown = run_cycle(snap(job("e", 1, 16, held=held), nodes=nodes, now=now), Fixed({"e": 16}), state)
    assert regrown.decisions["e"].action == Action.RESCALE and len(regrown.decisions["e"].gpus) == 16
    assert state["rescales"] == {} and state["yielded"] == {"e": 700.0}  # its last shrink, remembered apart
    assert regrown.state["rescales"] == {"e": [now]} and regrown.state["yielded"] == {"e": 700.0}


def test_a_shrink_for_another_job_counts_for_settling() -> None:
    """A job that gave GPUs up a round ago is not grown back at once: a bounce is a change of nothing."""
    history = {"rescales": {}, "yielded": {"e": 40.0}}
    held = run_cycle(snap(job("e", 1, 16, held=1), now=100.0), Fixed({"e": 4}), history)
    assert held.decisions["e"].reason == "held at 1 GPUs: it changed 60 s ago (settles for 120 s)"
    later = run_cycle(snap(job("e", 1, 16, held=1), now=200.0), Fixed({"e": 4}), history)
    assert later.decisions["e"].action == Action.RESCALE


def test_a_held_shrink_is_released_when_its_gpus_went_to_someone_else() -> None:
    big = job("big", 1, 16, held=16)
    s = snap(big, job("new", 8, t=50), nodes=[node("n1", 16)])
    history = {"rescales": {"big": [1.0, 2.0, 3.0, 4.0]}}
    result = run_cycle(s, Fixed({"big": 8, "new": 8}), history)
    assert len(result.decisions["big"].gpus) == 8 and result.decisions["new"].action == Action.START


def test_lost_gpus_force_a_move() -> None:
    s = snap(job("r", 2, held=2), nodes=[node("n1", lost=(1,)), node("n2")])
    result = run_cycle(s, Fixed({"r": 2}))
    decision = result.decisions["r"]
    assert decision.action == Action.RESCALE and "n1-1" not in decision.gpus and "n1-0" in decision.gpus


def test_a_tenant_under_quota_reclaims_gpus_from_a_borrower() -> None:
    tenants = [TenantInfo("owner", quota=8), TenantInfo("borrower", quota=0)]
    borrower = job("b", 4, 16, held=16, tenant="borrower")
    owner_job = job("o", 8, tenant="owner", t=50)
    result = run_cycle(snap(borrower, owner_job, nodes=[node("n1", 16)], tenants=tenants),
                       Fixed({"b": 16, "o": 0}))
    assert len(result.decisions["b"].gpus) == 8 and "reclaimed by tenant owner" in result.decisions["b"].reason
    assert result.decisions["o"].action == Action.START and "quota" in result.decisions["o"].reason


def test_a_rigid_borrower_is_stopped_when_shrinking_cannot_help() -> None:
    tenants = [TenantInfo("owner", quota=8)]
    rigid = job("b", 16, held=16, tenant="borrower")
    result = run_cycle(snap(rigid, job("o", 8, tenant="owner"), nodes=[node("n1", 16)], tenants=tenants),
                       Fixed({"b": 16}))
    assert result.decisions["b"].action == Action.PREEMPT and result.decisions["o"].action == Action.START


def test_quotas_can_be_switched_off() -> None:
    tenants = [TenantInfo("owner", quota=8)]
    s = snap(job("b", 16, held=16, tenant="borrower"), job("o", 8, tenant="owner"), nodes=[node("n1", 16)],
             tenants=tenants)
    result = run_cycle(s, Fixed({"b": 16}), config=CycleConfig(enforce_quotas=False))
    assert result.decisions["o"].action == Action.WAIT

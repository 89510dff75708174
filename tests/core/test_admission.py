"""Starts between rounds (admission.py): a waiting job starts on idle GPUs at once, and no running job is touched."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from hypothesis import given

from scheduler.core.admission import BETWEEN_ROUNDS, start_waiting_jobs
from scheduler.core.config import get_policy
from scheduler.core.cycle import Action, _default_restart_delay
from scheduler.core.policy import Capabilities
from scheduler.core.types import ClusterSnapshot, PolicyResult, PolicyState

from .strategies import snapshots
from .test_cycle import job, node, snap
from .test_policy_properties import POLICY_NAMES, PROPERTY_SETTINGS


@dataclass
class Greedy:
    """A stand-in policy: every job, earliest arrival first (latest first if ``newest_first``: it would preempt a
    running job for an arrival), as many GPUs as are left up to its max (0 below its min)."""

    newest_first: bool = False
    name: ClassVar[str] = "greedy"
    event_driven: ClassVar[bool] = False
    capabilities: ClassVar[Capabilities] = Capabilities()

    def allocate(self, snap: ClusterSnapshot, state: PolicyState | None) -> PolicyResult:
        left, counts = len(snap.index.usable), {}
        order = sorted(snap.jobs, key=lambda j: (j.submit_time, j.id), reverse=self.newest_first)
        for j in order:
            gpus = min(j.max_gpus, left)
            counts[j.id] = gpus if gpus >= j.min_gpus else 0
            left -= counts[j.id]
        return PolicyResult(counts, {"seen": len(snap.jobs)}, {j.id: "greedy's share" for j in snap.jobs})


def starts(result) -> Mapping[str, int]:  # type: ignore[no-untyped-def]
    return {d.job_id: len(d.gpus) for d in result.changes}


def test_an_arrival_starts_on_idle_gpus_and_no_running_job_changes() -> None:
    # 16 GPUs; "a" (1..8) holds 4. Greedy's answer for the whole cluster grows "a" to 8, starts "b" (2..8) on 8 and
    # leaves "c" (8) waiting. Between rounds "b" starts on 8 of the 12 idle GPUs; "a" keeps its 4 until the round.
    s = snap(job("a", 1, 8, held=4), job("b", 2, 8, t=50), job("c", 8, t=60))
    result = start_waiting_jobs(s, Greedy(), {"policy": {"seen": 1}, "rescales": {"a": [10.0]}}, _default_restart_delay)
    assert result is not None
    assert starts(result) == {"b": 8}
    (decision,) = result.changes
    assert decision.action is Action.START and not set(decision.gpus) & set(s.jobs[0].placement)
    assert decision.reason == f"{BETWEEN_ROUNDS}; greedy's share"
    # The round's memory is the round's: the policy's and the rescale history come back as they went in.
    assert result.state == {"policy": {"seen": 1}, "rescales": {"a": [10.0]}}


def test_only_starts_that_fit_beside_the_running_jobs_are_made() -> None:
    # Greedy gives "a" (1..16) all 16 GPUs: "b" gets none, so nothing starts between rounds.
    s = snap(job("a", 1, 16, held=4), job("b", 2, 8, t=50))
    assert start_waiting_jobs(s, Greedy(), None, _default_restart_delay) is None


def test_nothing_starts_between_rounds_without_an_idle_gpu_for_a_waiting_job() -> None:
    one_node = [node("n1", size=16)]
    full = snap(job("a", 8, held=8), job("b", 8, held=8, first=8), job("c", 1, t=50), nodes=one_node)
    assert start_waiting_jobs(full, Greedy(), None, _default_restart_delay) is None
    too_big = snap(job("a", 12, held=12), job("c", 8, t=50), nodes=one_node)  # 4 idle, c needs 8
    assert start_waiting_jobs(too_big, Greedy(), None, _default_restart_delay) is None
    nobody_waits = snap(job("a", 1, 4, held=4))
    assert start_waiting_jobs(nobody_waits, Greedy(), None, _default_restart_delay) is None


def test_a_job_that_needs_a_running_jobs_gpus_waits_for_the_round() -> None:
    # Newest-first preempts "a" for "c" (12 GPUs), more than the 8 idle: taking "a"'s GPUs is a round's to decide.
    s = snap(job("a", 8, held=8), job("c", 12, t=50))
    assert start_waiting_jobs(s, Greedy(newest_first=True), None, _default_restart_delay) is None


def test_a_cluster_mid_drain_is_left_to_the_round() -> None:
    # "a" holds n1-0, which is no longer usable: the round moves it; a start now could take the GPU it moves to.
    s = snap(job("a", 2, held=2), job("b", 2, t=50), nodes=[node("n1", lost=(0,)), node("n2")])
    assert start_waiting_jobs(s, Greedy(), None, _default_restart_delay) is None


def test_a_running_job_the_round_would_move_leaves_its_gpus_to_the_round() -> None:
    # "a" requires A100s but holds a V100 (its type was changed while it ran): a round moves it to an A100 and may give
    # the V100 to "b". Between rounds nothing moves, so "b" must not get the V100 "a" still holds (the property test
    # found this: "b" was placed on it).
    s = snap(job("a", 1, held=1, gpu_type="a100", first=0), job("b", 1, t=50),
             nodes=[node("n1", size=1, gpu_type="v100"), node("n2", size=1)])
    assert start_waiting_jobs(s, get_policy("afs"), None, _default_restart_delay) is None


def test_a_start_between_rounds_goes_where_sia_would_put_it_with_the_others_kept() -> None:
    # Two types; "a" holds 4 of n1's 8 A100s. Sia's answer for "b", with "a" as it is, is a configuration on the
    # idle GPUs: whatever it is, it is a start on GPUs no job held, of one type, within b's bounds.
    s = snap(job("a", 1, 8, held=4, profile="wide"), job("b", 1, 8, t=50, profile="wide"),
             nodes=[node("n1"), node("n2", gpu_type="v100")])
    result = start_waiting_jobs(s, get_policy("sia-hesrpt"), None, _default_restart_delay)
    assert result is not None and [d.job_id for d in result.changes] == ["b"]
    gpus = result.changes[0].gpus
    assert 1 <= len(gpus) <= 8 and not set(gpus) & {f"n1-{i}" for i in range(4)}
    assert len({s.index.type_of[g] for g in gpus}) == 1


@PROPERTY_SETTINGS
@given(snap=snapshots())
def test_every_policy_starts_between_rounds_only_on_idle_gpus(snap: ClusterSnapshot) -> None:
    held = {gpu for j in snap.jobs for gpu in j.placement}
    usable = {gpu.id: n.gpu_type for n in snap.nodes for gpu in n.usable_gpus}
    jobs = {j.id: j for j in snap.jobs}
    for name in POLICY_NAMES:
        result = start_waiting_jobs(snap, get_policy(name), None, _default_restart_delay)
        if result is None:
            continue
        given_out: list[str] = []
        for decision in result.changes:
            j = jobs[decision.job_id]
            assert decision.action is Action.START and not j.placement, (name, decision)
            assert j.min_gpus <= len(decision.gpus) <= j.max_gpus, (name, decision)
            assert set(decision.gpus) <= set(usable) and not set(decision.gpus) & held, (name, decision)
            if j.gpu_type:
                assert {usable[g] for g in decision.gpus} == {j.gpu_type}, (name, decision)
            assert decision.reason.startswith(BETWEEN_ROUNDS)
            given_out += decision.gpus
        assert len(given_out) == len(set(given_out)), (name, "a GPU given twice")

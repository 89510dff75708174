"""Reasons that explain the number: a start or resize says what set its count; a job that
cannot be placed says who holds the GPUs and what would free them."""

from __future__ import annotations

from scheduler.core.cycle import Action, CycleConfig, run_cycle
from scheduler.core.explain import count_reason
from scheduler.core.policies.tiresias import TiresiasPolicy
from scheduler.core.speed import job_speed
from scheduler.core.types import ClusterSnapshot, JobInfo

from .test_cycle import Fixed, job, node, snap


def test_an_elastic_job_started_at_its_minimum_says_the_policy_gives_minimums() -> None:
    s = snap(job("big", 24, 48), nodes=[node(f"n{i}") for i in range(1, 9)])
    decision = run_cycle(s, TiresiasPolicy()).decisions["big"]
    assert decision.action is Action.START
    assert decision.reason.startswith("started on 24 GPUs: its min_gpus (24), which tiresias gives every job")


def test_counts_at_the_max_or_where_no_gpu_is_left_say_so() -> None:
    s = snap(job("a", 2, 8), job("b", 2, 16, t=1))  # 16 GPUs: a gets its max, b the 8 left
    decisions = run_cycle(s, Fixed({"a": 8, "b": 8})).decisions
    assert decisions["a"].reason == "started on 8 GPUs: its max_gpus (8)"
    assert decisions["b"].reason.startswith("started on 8 GPUs:") and "no a100 GPU left free" in decisions["b"].reason


def test_a_count_at_the_goodput_optimum_names_the_gain_of_one_more() -> None:
    s = snap(job("e", 1, 64, profile="narrow"), nodes=[node(f"n{i}") for i in range(1, 9)])
    e = s.jobs[0]
    flat = next(n for n in range(1, 63) if job_speed(e, s, n + 1) / job_speed(e, s, n) - 1 < 0.01)
    why = count_reason(e, flat, s, "a100", left_free=64 - flat, rule=None)
    assert why.startswith(f"{flat} GPUs: its goodput optimum on a100 (on {flat + 1} it would run ")


def test_a_policy_reason_keeps_its_words_and_gains_the_count() -> None:
    s = snap(job("q", 2, 8))
    decision = run_cycle(s, Fixed({"q": 4}, {"q": "grown for its deadline"})).decisions["q"]
    assert decision.reason.startswith("grown for its deadline; 4 GPUs:")


def held_but_two(wide_tenant: str) -> tuple[ClusterSnapshot, dict[str, int]]:
    """16 a100 GPUs: four 1-GPU jobs and a 10-GPU one (min 8, of ``wide_tenant``) hold 14; a 4-GPU job waits."""
    small = [job(f"s{i}", 1, held=1, first=i) for i in range(4)]
    wide = JobInfo("w", wide_tenant, 0.0, 8, 10, 1000.0,
                   placement=tuple(f"n1-{i}" for i in range(4, 8)) + tuple(f"n2-{i}" for i in range(6)))
    return snap(*small, wide, job("late", 4, t=9)), {"s0": 1, "s1": 1, "s2": 1, "s3": 1, "w": 10, "late": 0}


def test_a_job_that_cannot_be_placed_is_told_who_holds_its_gpus() -> None:
    """A 4-GPU job waits for 2 more GPUs than are free."""
    s, counts = held_but_two("t")
    late = run_cycle(s, Fixed(counts, {"late": "cannot place: 4 more a100 GPUs needed, 2 free"})).decisions["late"]
    assert late.action is Action.WAIT and late.reason.startswith("cannot place: 4 more a100 GPUs needed, 2 free; ")
    assert "the 14 other a100 GPUs are held by 5 jobs (largest: job w with 10; 2 above their min_gpus)" in late.reason
    assert "it starts when 2 more are free: at least 1 of them finishing, shrinking or being preempted" in late.reason
    waiting = run_cycle(s, Fixed(counts, {"late": "waiting: 1 job ahead"})).decisions["late"]
    assert waiting.reason == "waiting: 1 job ahead"  # only a job placement failed is told who holds the GPUs


def test_who_holds_the_gpus_never_names_another_tenant_s_job() -> None:
    """The reason becomes the waiting job's pending_reason, read by its tenant."""
    s, counts = held_but_two("other-tenant")
    late = run_cycle(s, Fixed(counts, {"late": "cannot place: 4 more a100 GPUs needed, 2 free"})).decisions["late"]
    assert "(largest: another tenant's job with 10;" in late.reason and "job w " not in late.reason


def test_the_simulator_builds_no_explanations() -> None:
    s = snap(job("big", 24, 48), nodes=[node(f"n{i}") for i in range(1, 9)])
    quiet = run_cycle(s, TiresiasPolicy(), config=CycleConfig(explain_counts=False)).decisions["big"]
    assert quiet.reason == "started on 24 GPUs"

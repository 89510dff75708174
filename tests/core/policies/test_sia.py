"""Hand-worked tests of the Sia policy (scheduler/core/policies/sia.py)."""

from __future__ import annotations

import pytest

from scheduler.core.config import get_policy
from scheduler.core.cycle import Action, run_cycle
from scheduler.core.goodput import GoodputModel, PerfParams
from scheduler.core.policies.sia import (
    HesrptSiaPolicy,
    Problem,
    ProfiledSiaPolicy,
    SiaPolicy,
    configurations,
    restart_factor,
)
from scheduler.core.types import JobInfo

from . import cluster, job, snapshot

# One profile, measured on both types: a100 computes 4× as fast as t4, the same communication.
SLOW = GoodputModel(PerfParams(0.4, 0.004, 0.05, 0.005, 0.2, 0.02, 1.0), init_batch_size=64, max_batch_size=1024,
                    min_local_bsz=8, max_local_bsz=256, noise_scale=4000.0)
FAST = GoodputModel(PerfParams(0.1, 0.001, 0.05, 0.005, 0.2, 0.02, 1.0), init_batch_size=64, max_batch_size=1024,
                    min_local_bsz=8, max_local_bsz=256, noise_scale=4000.0)
PROFILES = {"model": {"t4": SLOW, "a100": FAST}}
MIXED = cluster(4, 4, gpu_type="t4", prefix="t") + cluster(8, gpu_type="a100", prefix="a")


def test_configurations_are_powers_of_two_within_a_node_then_whole_nodes() -> None:
    snap = snapshot(MIXED, profiles=PROFILES)
    by_type = {t: [(c.gpus, c.nodes) for c in configurations(snap) if c.gpu_type == t] for t in ("t4", "a100")}
    assert by_type == {"t4": [(1, 1), (2, 1), (4, 1), (8, 2)], "a100": [(1, 1), (2, 1), (4, 1), (8, 1)]}


def test_restart_factor_is_one_while_young_then_the_share_of_life_left() -> None:
    young = job("j", submit=0.0, restarts=3)
    assert restart_factor(young, now=20.0, seconds=30.0) == 1.0
    assert restart_factor(young, now=1000.0, seconds=30.0) == pytest.approx((1000 - 3 * 30) / (1000 + 30))
    assert restart_factor(job("k", submit=0.0, restarts=40), now=1000.0, seconds=30.0) == 0.0


def test_a_new_job_starts_on_one_gpu_of_the_type_where_it_is_fastest() -> None:
    snap = snapshot(MIXED, job("new", min_gpus=1, max_gpus=8, profile="model"), profiles=PROFILES)
    result = SiaPolicy().allocate(snap, None)
    assert result.allocations == {"new": 1} and result.gpu_types == {"new": "a100"}
    assert result.reasons["new"].startswith("sia: 1 a100 GPUs")
    assert result.state == {"largest": {}}  # it holds nothing yet


def test_a_running_job_at_most_doubles_per_round() -> None:
    running = job("run", min_gpus=1, max_gpus=8, profile="model", holds=2, on="a0", submit=-10_000)
    snap = snapshot(MIXED, running, profiles=PROFILES)
    result = SiaPolicy().allocate(snap, {"largest": {"run": 2}})
    assert result.allocations == {"run": 4} and result.gpu_types == {"run": "a100"}
    assert result.state == {"largest": {"run": 2}}


def test_lambda_n_runs_as_many_jobs_as_fit_before_growing_any() -> None:
    # 3 GPUs, 4 new jobs: each running job saves λ_n − A = 1.1 − 1 = 0.1, so three run at one GPU each.
    nodes = cluster(3, gpu_type="a100")
    jobs = [job(f"j{i}", min_gpus=1, max_gpus=4, profile="model", submit=float(i)) for i in range(4)]
    result = SiaPolicy().allocate(snapshot(nodes, *jobs, profiles=PROFILES), None)
    assert sorted(result.allocations.values()) == [0, 1, 1, 1]
    waiting = next(j for j, n in result.allocations.items() if n == 0)
    assert result.reasons[waiting].startswith("waiting:")


def test_a_typed_job_gets_only_its_type() -> None:
    typed = job("typed", min_gpus=1, max_gpus=8, profile="model", gpu_type="t4")
    result = SiaPolicy().allocate(snapshot(MIXED, typed, profiles=PROFILES), None)
    assert result.gpu_types == {"typed": "t4"}


def test_a_rigid_job_whose_size_is_no_configuration_gets_its_own() -> None:
    rigid = job("rigid", 6)  # 6 GPUs: on 4-GPU nodes neither a power of two within a node nor whole nodes
    result = SiaPolicy().allocate(snapshot(cluster(4, 4, gpu_type="t4"), rigid), None)
    assert result.allocations == {"rigid": 6} and result.gpu_types == {"rigid": "t4"}
    assert "on 2 nodes" in result.reasons["rigid"]


def test_the_round_moves_a_job_to_the_type_sia_chose() -> None:
    # The job holds one t4 GPU; a100 is 4× faster, and it is old enough that a restart costs little.
    on_t4 = job("j", min_gpus=1, max_gpus=2, profile="model", holds=1, on="t0", submit=-100_000)
    snap = snapshot(MIXED, on_t4, profiles=PROFILES, now=0.0)
    result = run_cycle(snap, get_policy("sia"))
    (decision,) = result.changes
    assert decision.action == Action.RESCALE and all(gpu.startswith("a0-") for gpu in decision.gpus)
    assert len(decision.gpus) == 2


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        SiaPolicy(p=0)
    with pytest.raises(ValueError):
        SiaPolicy(restart_seconds_by_profile={"bert": float("nan")})
    with pytest.raises(ValueError):
        SiaPolicy(restart_seconds=float("inf"))
    with pytest.raises(ValueError):
        SiaPolicy(lambda_a=-0.01)


def test_an_elastic_job_whose_range_holds_no_configuration_gets_its_minimum() -> None:
    odd = job("odd", min_gpus=5, max_gpus=7)  # on 4-GPU nodes: 1, 2, 4, 8 … none within 5..7
    result = SiaPolicy().allocate(snapshot(cluster(4, 4, gpu_type="t4"), odd), None)
    assert result.allocations == {"odd": 5}


def test_a_job_held_by_the_rescale_limit_keeps_its_gpus_instead_of_moving() -> None:
    # Sia would move it from t4 to a100, but it rescaled 4 times in the last hour: it is held where it is.
    on_t4 = job("j", min_gpus=1, max_gpus=2, profile="model", holds=1, on="t0", submit=-100_000)
    snap = snapshot(MIXED, on_t4, profiles=PROFILES, now=0.0)
    state = {"rescales": {"j": [-600.0, -500.0, -400.0, -300.0]}}
    result = run_cycle(snap, get_policy("sia"), state)
    assert result.changes == () and result.decisions["j"].gpus == ("t0-g0",)
    assert "rescales in the last hour" in result.decisions["j"].reason


@pytest.mark.parametrize("name", ["sia", "sia-profiled"])
def test_a_solver_without_an_answer_moves_nobody(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """HiGHS at its time limit (or on a model it cannot solve) returns no x: running jobs keep their GPUs."""
    from types import SimpleNamespace

    from scheduler.core.policies import sia

    monkeypatch.setattr(sia, "milp", lambda *args, **kwargs: SimpleNamespace(x=None, status=1))
    running = job("run", min_gpus=1, max_gpus=8, profile="model", holds=2, on="a0", submit=-10_000)
    other = job("t", min_gpus=1, max_gpus=4, profile="model", holds=4, on="t0", submit=-5_000)
    waiting = job("new", min_gpus=1, max_gpus=8, profile="model", submit=50.0)
    snap = snapshot(MIXED, running, other, waiting, profiles=PROFILES)
    result = run_cycle(snap, get_policy(name), {"policy": {"largest": {"run": 2, "t": 4}}})
    assert result.changes == ()
    assert {d.action for d in result.decisions.values()} == {Action.KEEP, Action.WAIT}
    assert "solver gave no answer" in result.note and "keep their GPUs" in result.note
    assert "solver gave no answer" in result.decisions["run"].reason
    assert result.state["policy"] == {"largest": {"run": 2, "t": 4}}  # its memory survives the round


def test_without_an_answer_a_job_holding_the_wrong_type_waits_and_one_spanning_types_books_none(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the round's property test: with no answer, a job an operator moved to t4 while it holds A100s kept
    them (a type it may not use), and a job spanning both types was booked whole on the type of most of its GPUs,
    overbooking that type; both broke the round's contract."""
    from types import SimpleNamespace

    from scheduler.core.policies import sia

    monkeypatch.setattr(sia, "milp", lambda *args, **kwargs: SimpleNamespace(x=None, status=1))
    moved = job("moved", min_gpus=1, max_gpus=2, profile="model", holds=2, on="a0", gpu_type="t4")
    spanning = JobInfo(id="both", tenant="t", submit_time=0.0, total_work=100.0, progress=0.0, min_gpus=6,
                       max_gpus=6, profile="model", placement=("t0-g0", "t0-g1", "a0-g2", "a0-g3", "a0-g4", "a0-g5"))
    result = run_cycle(snapshot(MIXED, moved, spanning, profiles=PROFILES), get_policy("sia"))
    assert result.decisions["moved"].action == Action.PREEMPT
    assert "not of the type it requires" in result.decisions["moved"].reason
    assert result.decisions["both"].action == Action.KEEP


# Scales poorly past 4 GPUs (communication-bound): 8 GPUs are worth little more than 4 in Sia's objective.
FLAT = GoodputModel(PerfParams(0.1, 0.001, 0.8, 0.005, 0.8, 0.02, 1.0), init_batch_size=64, max_batch_size=1024,
                    min_local_bsz=8, max_local_bsz=256, noise_scale=4000.0)


def test_the_change_penalty_makes_keeping_a_configuration_cheaper_and_any_other_dearer() -> None:
    running = job("run", min_gpus=1, max_gpus=8, profile="model", holds=4, on="a0", submit=-10_000)
    waiting = job("new", min_gpus=1, max_gpus=8, profile="model", submit=50.0)
    snap = snapshot(MIXED, running, waiting, profiles=PROFILES)
    largest = {"run": 4}
    plain = Problem(snap, [running, waiting], SiaPolicy(ramp="estimated"), largest)
    priced = Problem(snap, [running, waiting], ProfiledSiaPolicy(), largest)
    assert plain.pairs == priced.pairs
    for (each, config), before, after in zip(plain.pairs, plain.costs, priced.costs, strict=True):
        held = each.id == "run" and (config.gpu_type, config.gpus) == ("a100", 4)
        change = 0.0 if each.id == "new" else (-0.01 if held else 0.01)  # a waiting job holds nothing to change
        assert after == pytest.approx(before + change), (each.id, config)


def test_sia_profiled_keeps_a_configuration_another_beats_by_less_than_a_change_costs() -> None:
    # Held 350 s: after Sia's restart factor, 8 GPUs cost 0.87 in its objective against 0.88 for the 4 it holds.
    # Sia grows the job for that hundredth; ours keeps it, since a change costs 2·λ_a = 0.02.
    held = job("j", min_gpus=1, max_gpus=8, profile="flat", holds=4, on="a0", submit=-350.0)
    snap = snapshot(cluster(8, gpu_type="a100", prefix="a"), held, profiles={"flat": {"a100": FLAT}}, now=0.0)
    plain = Problem(snap, [held], SiaPolicy(restart_seconds=30.0), {"j": 4})
    costs = {config.gpus: cost for (_, config), cost in zip(plain.pairs, plain.costs, strict=True)}
    assert (costs[4], costs[8]) == (pytest.approx(0.88), pytest.approx(0.87))
    assert SiaPolicy(restart_seconds=30.0).allocate(snap, {"largest": {"j": 4}}).allocations == {"j": 8}
    assert ProfiledSiaPolicy(restart_seconds=30.0).allocate(snap, {"largest": {"j": 4}}).allocations == {"j": 4}


def test_hesrpt_weights_lean_toward_the_job_with_least_time_left() -> None:
    # Two new jobs for one 8-GPU a100 node, alike but for their work: heSRPT ranks the shorter first.
    short = job("short", min_gpus=1, max_gpus=8, profile="model", work=1e4)
    long = job("long", min_gpus=1, max_gpus=8, profile="model", work=1e7)
    snap = snapshot(cluster(8, gpu_type="a100", prefix="a"), short, long, profiles=PROFILES)
    policy = HesrptSiaPolicy()
    weights = Problem(snap, [short, long], policy, {}).weights
    # m = 2, p = 0.5 (c = 2): the shorter gets 1 − (1/2)² of the cluster, the longer (1/2)²; the weights are 2·θ.
    assert weights.of_job == {"short": pytest.approx(1.5), "long": pytest.approx(0.5)}
    assert weights.rank_of == {"short": 1, "long": 2}
    # Weighted, the shorter job runs on a larger configuration than the longer one.
    result = policy.allocate(snap, None)
    assert "heSRPT: its remaining time ranks 1 of 2" in result.reasons["short"]
    three = (job("a-long", min_gpus=1, max_gpus=8, profile="model", work=1e7),
             job("b-mid", min_gpus=1, max_gpus=8, profile="model", submit=1.0, work=1e6),
             job("c-short", min_gpus=1, max_gpus=8, profile="model", submit=2.0, work=1e4))
    crowded = snapshot(cluster(8, gpu_type="a100", prefix="a"), *three, profiles=PROFILES)
    # Unweighted (Sia), three alike jobs split the node 2/4/2 whatever their length; weighted, the shorter two
    # take it, and the longest waits (it runs as soon as a GPU is spare: running at all is not weighted).
    assert ProfiledSiaPolicy().allocate(crowded, None).allocations == {
        "a-long": 2, "b-mid": 4, "c-short": 2}
    assert policy.allocate(crowded, None).allocations == {"a-long": 0, "b-mid": 4, "c-short": 4}


def test_hesrpt_weighs_what_a_configuration_is_worth_but_not_what_a_restart_costs() -> None:
    # A long job beside a short one (heSRPT weight 0.5) has restarted 10 times in its 1,000 s: Sia's restart factor
    # r = (1000 − 10·30)/(1000 + 30) prices every configuration but the 2 GPUs it holds. Its weight scales the
    # configurations' worth and the change penalty; the restart's price stays Sia's, at full weight.
    long = job("long", min_gpus=1, max_gpus=8, profile="model", holds=2, on="a0", submit=-1000.0, work=1e7,
               restarts=10)
    short = job("short", min_gpus=1, max_gpus=8, profile="model", submit=-10.0, work=1e4)
    snap = snapshot(cluster(8, gpu_type="a100", prefix="a"), long, short, profiles=PROFILES, now=0.0)
    problem = Problem(snap, [long, short], HesrptSiaPolicy(restart_seconds=30.0), {"long": 2})
    weight, r = problem.weights.of_job["long"], restart_factor(long, now=0.0, seconds=30.0)
    assert (weight, r) == (pytest.approx(0.5), pytest.approx(700 / 1030))
    priced = 0
    for (each, config), cost in zip(problem.pairs, problem.costs, strict=True):
        if each.id != "long":
            continue
        goodput, held = problem.goodput[("long", config)], config.gpus == 2
        worth = goodput**-0.5
        after_restart = worth if held else (goodput * r) ** -0.5
        change = -0.01 if held else 0.01
        # Weighted as a whole, the restart's price would be half this: ≥ 0.05 apart for every configuration moved to.
        assert cost == pytest.approx(1 + weight * (worth + change - 1) + (after_restart - worth), abs=1e-3), config
        priced += not held
    assert priced == 3  # 1, 4 and 8 GPUs


def test_a_job_whose_remaining_time_is_unknown_weighs_one() -> None:
    rigid = job("rigid", 2, holds=2, on="a0", submit=-100.0)  # no profile, no prediction
    snap = snapshot(cluster(8, gpu_type="a100", prefix="a"), rigid, profiles=PROFILES)
    problem = Problem(snap, [rigid], HesrptSiaPolicy(), {"rigid": 2})
    assert problem.weights.of_job == {} and "weight" not in problem.reason(rigid, problem.pairs[0][1])


def test_equal_jobs_beyond_the_gpus_start_in_arrival_order() -> None:
    # 12 alike new jobs for 8 GPUs: each costs 1.00 on one GPU, a tie the solver may break any way. The earlier
    # arrivals run, whatever the order the jobs are given in.
    jobs = [job(f"j{i:02d}", min_gpus=1, max_gpus=1, profile="model", submit=float(i)) for i in range(12)]
    snap = snapshot(cluster(8, gpu_type="a100", prefix="a"), *reversed(jobs), profiles=PROFILES)
    result = SiaPolicy().allocate(snap, None)
    assert [j for j, n in sorted(result.allocations.items()) if n] == [f"j{i:02d}" for i in range(8)]


def test_a_loaded_round_leaves_equal_running_jobs_where_they_are() -> None:
    # 16 one-GPU jobs hold the 16 GPUs; 8 alike jobs that arrived later wait. Swapping any pair is a tie in Sia's
    # objective (young jobs: no restart factor yet); left to the solver, loaded rounds swapped jobs in and out.
    nodes = cluster(8, 8, gpu_type="a100", prefix="a")
    running = [job(f"r{i:02d}", min_gpus=1, max_gpus=1, profile="model", submit=float(i), holds=1,
                   on=f"a{i // 8}", first_gpu=i % 8) for i in range(16)]
    waiting = [job(f"w{i}", min_gpus=1, max_gpus=1, profile="model", submit=20.0 + i) for i in range(8)]
    snap = snapshot(nodes, *waiting, *running, profiles=PROFILES, now=25.0)
    for policy in (SiaPolicy(), ProfiledSiaPolicy()):
        result = policy.allocate(snap, None)
        assert {j: n for j, n in result.allocations.items() if n} == {j.id: 1 for j in running}, policy.name


@pytest.mark.parametrize("policy", [SiaPolicy(), ProfiledSiaPolicy(keep_restoring=True)], ids=lambda p: p.name)
def test_a_job_restoring_its_checkpoint_keeps_its_configuration(policy: SiaPolicy) -> None:
    # Sia would move the old job from t4 to a100 (test_the_round_moves_a_job_to_the_type_sia_chose); restoring a
    # checkpoint until t = 50, it stays on its t4 GPU (Sia's hard constraint, sia.py:763-785); once restored, it moves.
    def on_t4(restart_until: float) -> JobInfo:
        return job("j", min_gpus=1, max_gpus=2, profile="model", holds=1, on="t0", submit=-100_000, work=1e9,
                   restart_until=restart_until)

    restoring = policy.allocate(snapshot(MIXED, on_t4(50.0), profiles=PROFILES, now=0.0), None)
    assert (restoring.allocations, restoring.gpu_types) == ({"j": 1}, {"j": "t4"})
    assert "while it restores its checkpoint (50 s left)" in restoring.reasons["j"]
    restored = policy.allocate(snapshot(MIXED, on_t4(0.0), profiles=PROFILES, now=0.0), None)
    assert restored.gpu_types == {"j": "a100"}


def test_a_restoring_job_is_not_shrunk_for_new_arrivals() -> None:
    # A young job that scales poorly (1.35× its one-GPU goodput on 4) holds all 4 GPUs; three jobs arrive. Sia
    # would shrink it to one GPU and run all four (1 + 3·1 < 0.86 + 3·1.1), but not while it restores the
    # checkpoint of its last restart: shrinking it now would throw that restart away for another.
    poorly = GoodputModel(PerfParams(0.1, 0.001, 0.5, 0.05, 2.0, 0.2, 1.0), init_batch_size=64, max_batch_size=1024,
                          min_local_bsz=8, max_local_bsz=256, noise_scale=4000.0)
    profiles = PROFILES | {"poorly": {"a100": poorly}}
    nodes = cluster(4, gpu_type="a100", prefix="a")
    arrivals = [job(f"new{i}", min_gpus=1, max_gpus=4, profile="model", submit=90.0) for i in range(3)]

    def holder(restart_until: float) -> JobInfo:
        return job("held", min_gpus=1, max_gpus=4, profile="poorly", holds=4, on="a0", submit=80.0, work=1e9,
                   restart_until=restart_until)

    busy = SiaPolicy().allocate(snapshot(nodes, holder(130.0), *arrivals, profiles=profiles), {"largest": {"held": 4}})
    assert busy.allocations == {"held": 4, "new0": 0, "new1": 0, "new2": 0}
    free = SiaPolicy().allocate(snapshot(nodes, holder(60.0), *arrivals, profiles=profiles), {"largest": {"held": 4}})
    assert free.allocations == {"held": 1, "new0": 1, "new1": 1, "new2": 1}
    # Ours price the change instead of forbidding it (ProfiledSiaPolicy.keep_restoring): the arrivals run.
    for ours in (ProfiledSiaPolicy(), HesrptSiaPolicy()):
        priced = ours.allocate(snapshot(nodes, holder(130.0), *arrivals, profiles=profiles), {"largest": {"held": 4}})
        assert priced.allocations["held"] < 4 and sum(priced.allocations.values()) == 4, ours.name


def test_a_restoring_job_on_a_gpu_that_failed_is_not_pinned() -> None:
    # Its held GPU is no longer usable: pinning it could ask for more GPUs than the type has.
    nodes = cluster(2, gpu_type="a100", prefix="a", unhealthy=1)
    restoring = job("j", min_gpus=1, max_gpus=2, profile="model", holds=1, on="a0", first_gpu=1, submit=0.0,
                    restart_until=500.0)
    problem = Problem(snapshot(nodes, restoring, profiles=PROFILES), [restoring], SiaPolicy(), {"j": 1})
    assert problem.pinned == {}

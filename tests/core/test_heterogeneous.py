"""Every speed is priced on the GPU type a job holds (or would hold), and a job never spans types."""

from __future__ import annotations

import pytest

from scheduler.core import speed
from scheduler.core.config import get_policy
from scheduler.core.cycle import Action, run_cycle
from scheduler.core.fitted_profiles import FITTED_PROFILES
from scheduler.core.placement import place
from scheduler.core.speed import adaptive_grid, estimated_model, job_speed, model_for, priced_type, speed_table
from scheduler.sim.engine import simulate
from scheduler.sim.records import WorkloadJob

from .policies import cluster, job, snapshot
from .policies.test_sia import FAST, PROFILES, SLOW

MIXED = cluster(4, gpu_type="t4", prefix="t") + cluster(4, gpu_type="a100", prefix="a")


def test_a_job_is_priced_on_the_type_it_holds_else_where_it_is_fastest() -> None:
    on_t4 = job("t", min_gpus=1, max_gpus=4, profile="model", holds=2, on="t0")
    on_a100 = job("a", min_gpus=1, max_gpus=4, profile="model", holds=2, on="a0")
    waiting = job("w", min_gpus=1, max_gpus=4, profile="model")
    snap = snapshot(MIXED, on_t4, on_a100, waiting, profiles=PROFILES)
    assert [priced_type(j, snap) for j in (on_t4, on_a100, waiting)] == ["t4", "a100", "a100"]
    assert model_for(on_t4, snap) is SLOW and model_for(on_a100, snap) is FAST
    assert job_speed(on_a100, snap, 2) > 3 * job_speed(on_t4, snap, 2)


def test_a_type_never_measured_gets_an_estimate_marked_as_such() -> None:
    by_type = FITTED_PROFILES["cifar10"]
    h100 = estimated_model(by_type, "h100")
    assert h100.estimated_from is not None and h100.estimated_from.startswith("a100 ×")
    assert "datasheets" in h100.estimated_from
    snap = snapshot(cluster(4, gpu_type="h100", prefix="h") + cluster(4, gpu_type="a100"),
                    profiles={"cifar10": by_type})
    one = job("j", profile="cifar10", min_gpus=1, max_gpus=1)
    assert job_speed(one, snap, 1, gpu_type="h100") > job_speed(one, snap, 1, gpu_type="a100")
    assert by_type["a100"].estimated_from is None


@pytest.mark.parametrize("cells", [20_000, 6])  # 6: one job per numpy pass, as a large cluster's chunks
def test_a_type_grid_prices_every_job_as_one_at_a_time_would(cells: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(speed, "_GRID_CELLS", cells)
    profiles = {"model": PROFILES["model"], "cifar10": FITTED_PROFILES["cifar10"]}
    jobs = [job("noisy", min_gpus=1, max_gpus=16, profile="model", grad_noise_scale=50.0),
            job("default", min_gpus=1, max_gpus=16, profile="model"),
            job("estimated", min_gpus=2, max_gpus=16, profile="cifar10"),  # cifar10 was never measured on t4
            job("rigid", 3)]  # no profile: linear from its minimum
    snap = snapshot(MIXED, *jobs, profiles=profiles)
    counts = [1, 2, 3, 4, 8, 16]
    for gpu_type in ("t4", "a100"):
        grid = adaptive_grid(jobs, snap, gpu_type, counts)
        for one in jobs:
            table = speed_table(one, snap, up_to=16, adaptive=True, gpu_type=gpu_type)
            assert [grid.speed(one.id, n) for n in counts] == pytest.approx([table[n] for n in counts], rel=1e-12)
            model = model_for(one, snap, gpu_type)
            expected = [None] * len(counts) if model is None else [
                model.best_global_batch(-(-n // 4), n, one.grad_noise_scale) for n in counts]  # nodes of 4 GPUs
            assert [grid.batch(one.id, n) for n in counts] == expected


def test_a_new_job_goes_on_the_fastest_type_with_room_and_says_so() -> None:
    snap = snapshot(MIXED, job("new", min_gpus=1, max_gpus=4, profile="model"), profiles=PROFILES)
    result = run_cycle(snap, get_policy("fifo"))
    (decision,) = result.changes
    assert decision.action == Action.START and decision.gpus[0].startswith("a0-")
    assert decision.reason.endswith("on a100: 4.0× its t4 speed"), decision.reason


def test_when_the_fastest_type_is_full_it_goes_on_the_next() -> None:
    busy = job("busy", 4, profile="model", holds=4, on="a0")
    snap = snapshot(MIXED, busy, job("new", 2, profile="model"), profiles=PROFILES)
    placed = place(snap, {"busy": 4, "new": 2})
    assert all(gpu.startswith("t0-") for gpu in placed.placements["new"])


def test_a_job_never_spans_gpu_types() -> None:
    rigid, elastic = job("rigid", 6), job("elastic", min_gpus=2, max_gpus=6, submit=1)
    rigid_alone = place(snapshot(MIXED, rigid), {"rigid": 6})
    assert rigid_alone.unplaced == {"rigid": "cannot place: 6 more GPUs needed, 4 free on any one type"}
    elastic_alone = place(snapshot(MIXED, elastic), {"elastic": 6})
    assert len(elastic_alone.placements["elastic"]) == 4
    assert len({gpu[0] for gpu in elastic_alone.placements["elastic"]}) == 1
    assert elastic_alone.notes["elastic"].startswith("placed on 4 ")


def test_admission_counts_one_type_for_an_untyped_job() -> None:
    result = run_cycle(snapshot(MIXED, job("wide", 6)), get_policy("fifo"))
    assert result.decisions["wide"].reason.startswith("unschedulable: needs 6 GPUs")


@pytest.mark.parametrize("policy", ["fifo", "tiresias", "pollux", "sia"])
def test_a_simulated_mixed_cluster_is_as_fast_as_its_types(policy: str) -> None:
    jobs = [WorkloadJob(f"j{i}", 10.0 * i, "t", 2, 4, 2_000.0, profile="model") for i in range(12)]
    groups = {"t4": cluster(4, 4, gpu_type="t4", prefix="t"),
              "mixed": cluster(4, gpu_type="t4", prefix="t") + cluster(4, gpu_type="a100", prefix="a"),
              "a100": cluster(4, 4, gpu_type="a100", prefix="a")}
    jct = {}
    for name, nodes in groups.items():
        result = simulate(jobs, nodes, get_policy(policy), profiles=PROFILES)
        jct[name] = sum(r.finish_time - r.submit_time for r in result.jobs) / len(result.jobs)
    assert jct["t4"] > jct["mixed"] > jct["a100"], jct

"""Round-time benchmark: every policy through ``run_cycle`` on one seeded synthetic cluster."""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping
from typing import Any

from scheduler.core.config import get_policy
from scheduler.core.cycle import run_cycle
from scheduler.core.types import ClusterSnapshot, PolicyState
from scheduler.sim.synthetic import synthetic_snapshot


def time_rounds(snap: ClusterSnapshot, policy_name: str, rounds: int) -> list[float]:
    """Seconds per round, after one warm-up round; each round starts from the previous round's state."""
    policy = get_policy(policy_name)
    state: PolicyState | None = run_cycle(snap, policy).state
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        state = run_cycle(snap, policy, state).state
        times.append(time.perf_counter() - start)
    return times


def summarise(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"median_ms": round(statistics.median(ordered) * 1000, 2), "p95_ms": round(p95 * 1000, 2)}


def bench_policies(
    jobs: int, gpus: int, policies: list[str], profiles: Mapping[str, Mapping[str, Any]], rounds: int = 11,
    seed: int = 0,
) -> dict[str, dict[str, float]]:
    snap = synthetic_snapshot(jobs, gpus, profiles, seed=seed)
    return {name: summarise(time_rounds(snap, name, rounds)) for name in policies}

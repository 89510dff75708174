"""Fidelity against a published reference: the Pollux authors' own simulator results.

``pollux/results-jobload/<policy>-<load>/summary.json`` holds, for pollux, optimus and
tiresias at 0.5×–2.0× load, the average JCT of each of the 8 workloads on 16 nodes × 4
T4 GPUs (Pollux, OSDI'21, Fig. 8a). Each case here replays the same workload file on
the same cluster through our policies and simulator; or, given a seed, a new workload drawn
as the authors drew theirs (sampling.py: 160 × load jobs), which has no published figure.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path
from typing import TypeVar

from scheduler.sim.runner import Scenario, run_scenario
from scheduler.sim.sampling import JOBS_AT_LOAD_1, default_cache_dir, sampled_workload

C = TypeVar("C")
R = TypeVar("R")
POLICIES = ("pollux", "tiresias", "optimus", "sia-profiled", "sia-hesrpt")  # the authors' three, and ours
LOADS = ("0.5", "1.0", "1.5", "2.0")
WORKLOADS = tuple(range(1, 9))
REFERENCE_POLICY_CONFIG: dict[str, dict[str, object]] = {
    "tiresias": {"thresholds": (16 * 3600.0,), "starvation_factor": float("inf")},
}


@dataclass(frozen=True)
class Case:
    policy: str
    load: str
    workload: int  # the authors' file, or the seed of a sampled workload
    sampled: bool = False

    def scenario(self, traces_dir: Path) -> Scenario:
        """The case as the Pollux artifact ran it (REFERENCE-SETUP.md): every start costs 30 s, jobs run
        at the measured step times of their placement and with the measured gradient statistics of
        the current epoch at the batch trained at (the policies see the fitted models), and
        Tiresias has two queues split at 16 GPU-hours and no starvation guard."""
        if self.sampled:
            jobs = round(JOBS_AT_LOAD_1 * float(self.load))
            trace = sampled_workload(traces_dir, default_cache_dir(), jobs, self.workload)
        else:
            trace = traces_dir / "pollux" / f"workloads-{self.load}" / f"workload-{self.workload}.csv"
        config = REFERENCE_POLICY_CONFIG.get(self.policy, {})
        return Scenario(trace=str(trace), policy=self.policy, preset="pollux-t4", charge_first_start=True,
                        measured_profiles=True, policy_config=config)


@dataclass(frozen=True)
class CaseResult:
    case: Case
    ours_avg_jct_s: float | None
    theirs_avg_jct_s: float | None  # the same policy's published figure; None for a policy they did not run
    pollux_avg_jct_s: float | None  # Pollux's published figure: the target of a policy of ours
    wall_s: float


def cases(policies: tuple[str, ...] = POLICIES, loads: tuple[str, ...] = LOADS,
          workloads: tuple[int, ...] = WORKLOADS, sampled: bool = False) -> list[Case]:
    """Every (policy, load, workload) case; with ``sampled``, ``workloads`` are the seeds of sampled workloads."""
    return [Case(p, load, w, sampled) for p in policies for load in loads for w in workloads]


def replay(run: Callable[[C, Path], R], todo: Sequence[C], traces_dir: Path, workers: int) -> tuple[list[R], float]:
    """``run(case, traces_dir)`` for every case on ``workers`` processes; (results in order, wall seconds).

    The one way the validation commands (``validate_pollux``, ``validate_sia``) replay their cases.
    """
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=max(1, workers)) as pool:
        results = list(pool.map(run, todo, repeat(traces_dir)))
    return results, time.perf_counter() - started


def published_avg_jct(traces_dir: Path, case: Case) -> float | None:
    if case.sampled:
        return None
    summary = traces_dir / "pollux" / "results-jobload" / f"{case.policy}-{case.load}" / "summary.json"
    if not summary.exists():
        return None
    return json.loads(summary.read_text())["avgs"].get(f"workload-{case.workload}")


def run_case(case: Case, traces_dir: Path) -> CaseResult:
    """Our average JCT for one case (None if any job did not finish), beside the published one."""
    _, summary = run_scenario(case.scenario(traces_dir), traces_dir)
    finished_all = summary["completed"] == summary["jobs"]
    ours = summary["avg_jct_s"] if finished_all else None
    pollux = published_avg_jct(traces_dir, dataclasses.replace(case, policy="pollux"))
    return CaseResult(case, ours, published_avg_jct(traces_dir, case), pollux, summary["wall_s"])


def grid_table(results: list[CaseResult]) -> list[dict[str, object]]:
    """One row per (policy, load): mean over workloads of the average JCT, ours and theirs, and beside our
    ``pollux`` on the same workloads when it ran too (``vs_our_pollux``: the only yardstick on sampled workloads)."""
    rows = []
    for policy in dict.fromkeys(r.case.policy for r in results):
        for load in dict.fromkeys(r.case.load for r in results if r.case.policy == policy):
            group = [r for r in results if (r.case.policy, r.case.load) == (policy, load)]
            rows.append(_row(policy, load, group))
    our_pollux = {row["load"]: row["ours_avg_jct_s"] for row in rows if row["policy"] == "pollux"}
    for row in rows:
        pollux, mine = our_pollux.get(row["load"]), row["ours_avg_jct_s"]
        row["vs_our_pollux"] = round(mine / pollux - 1, 3) if isinstance(mine, float) and isinstance(pollux, float) \
            else None
    return rows


def _row(policy: str, load: str, group: list[CaseResult]) -> dict[str, object]:
    ours = [r.ours_avg_jct_s for r in group]
    theirs = [r.theirs_avg_jct_s for r in group]
    ours_mean = sum(ours) / len(ours) if None not in ours else None  # type: ignore[arg-type]
    theirs_mean = sum(theirs) / len(theirs) if None not in theirs else None  # type: ignore[arg-type]
    pollux = [r.pollux_avg_jct_s for r in group]
    pollux_mean = sum(pollux) / len(pollux) if None not in pollux else None  # type: ignore[arg-type]
    diff = (ours_mean / theirs_mean - 1) if ours_mean and theirs_mean else None
    return {
        "policy": policy, "load": load, "workloads": len(group), "ours_avg_jct_s": ours_mean,
        "published_avg_jct_s": theirs_mean, "difference": diff, "published_pollux_avg_jct_s": pollux_mean,
        "wall_s": sum(r.wall_s for r in group),
    }

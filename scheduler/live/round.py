"""One live round: the settings' ``SchedulingConfig`` → the snapshot → ``run_cycle`` → one transaction → the
executor. And, between rounds, the starts of arrivals on idle GPUs (``start_between_rounds``): the same steps with
``admission.start_waiting_jobs`` in place of ``run_cycle``, sent when a job is submitted or a cancel frees GPUs
(``start_requests``).

A round runs under a lease, so only one runs at a time across all workers; a worker killed mid-round leaves
the lease to expire. Starts between rounds take the same lease: one that finds a round running leaves the arrival to
it. A policy that raises (a broken contract) records a failed round and touches nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from scheduler.backends import ClusterUnavailable, Executor, get_executor
from scheduler.live.forecast_requests import request_forecast

from ..core.admission import start_waiting_jobs
from ..core.config import SchedulingConfig, build_policy
from ..core.cycle import CycleResult, run_cycle
from ..models import RoundStatus, SchedulerSettings, SchedulingRound
from . import restarts
from .config import live_settings, scheduling_config
from .launches import unlaunched
from .lease import lease_holder, release_lease, take_lease
from .memory import load_round_state
from .snapshot import LiveSnapshot, build_snapshot
from .writer import Timings, apply_round

logger = logging.getLogger(__name__)

ROUND_LEASE = "scheduling-round"


def run_round(now: datetime | None = None, holder: str | None = None) -> SchedulingRound | None:
    """Run one round; None when rounds are paused or another worker holds the round's lease."""
    return _under_lease("round", _run_round, now, holder)


def start_between_rounds(now: datetime | None = None, holder: str | None = None) -> SchedulingRound | None:
    """Start waiting jobs on idle GPUs now, every running job kept as it is (``admission.start_waiting_jobs``); the
    row of those starts, or None when nothing started: rounds paused or starts between them turned off, a round
    running (it places the arrivals), an observed cluster (its own scheduler starts them), the cluster unreadable,
    or no waiting job that fits the idle GPUs. A policy that fails here is logged; the next round records it."""
    return _under_lease("start between rounds", _start_between_rounds, now, holder)


def _under_lease(what: str, run: Callable[[SchedulerSettings, SchedulingConfig, datetime], SchedulingRound | None],
                 now: datetime | None, holder: str | None) -> SchedulingRound | None:
    row, _ = live_settings()  # a refused stored value is never run (and is alerted on)
    if row.paused:
        return None
    holder = holder or lease_holder()
    if not take_lease(ROUND_LEASE, holder, settings.ROUND_LEASE_SECONDS):
        logger.info("%s skipped: another worker holds the round's lease", what)
        return None
    try:
        return run(row, scheduling_config(row), now or timezone.now())
    finally:
        release_lease(ROUND_LEASE, holder)


def _read_cluster(executor: Executor, row: SchedulerSettings, now: datetime) -> tuple[LiveSnapshot, int]:
    """The cluster as the executor sees it now, and how many jobs it saw finish; raises ``ClusterUnavailable``."""
    executor.refresh_inventory(now)
    live = build_snapshot(now)
    before = {job.id for job in live.snap.jobs}
    observed = executor.observe(live.snap, now)
    priced = restarts.record(executor.measured_restarts, row)
    if priced is not None:
        executor.notes.append(f"restart delay measured on this cluster: {priced:g} s (median of the last restarts)")
    finished = len(before - {job.id for job in observed.jobs})
    return LiveSnapshot(observed, live.gpu_pk, live.gpu_place, live.pending_reasons), finished


def _run_round(row: SchedulerSettings, config: SchedulingConfig, now: datetime) -> SchedulingRound:
    timings = Timings()
    executor = get_executor(row)
    try:
        live, finished = _read_cluster(executor, row, now)
    except ClusterUnavailable as exc:  # nothing read, nothing written: the next round tries again
        logger.warning("round skipped: %s", exc)
        return SchedulingRound.objects.create(
            policy=config.policy, started_at=now, finished_at=timezone.now(), status=RoundStatus.SKIPPED,
            executor=executor.name, error=f"the cluster could not be read: {exc}"[:2000],
        )
    timings.mark("snapshot")
    if not executor.decides:  # an observer: the cluster's own scheduler decided; the round only mirrored it
        return SchedulingRound.objects.create(
            policy=config.policy, started_at=now, finished_at=timezone.now(), status=RoundStatus.OK,
            jobs_considered=len(live.snap.jobs), finished=finished, executor=executor.name,
            snapshot_ms=timings.ms(None, "snapshot"), note=round_note(executor.notes, None),
        )
    try:  # a configuration the policy refuses, or a broken policy, must not touch the cluster: the round says why
        policy = build_policy(config)
        result = run_cycle(live.snap, policy, load_round_state(policy.name), config.cycle, config.restart_delay)
    except Exception as exc:
        logger.exception("policy %s failed", config.policy)
        return SchedulingRound.objects.create(
            policy=config.policy, started_at=now, finished_at=timezone.now(), status=RoundStatus.FAILED,
            jobs_considered=len(live.snap.jobs), finished=finished, executor=executor.name,
            error=f"{type(exc).__name__}: {exc}",
        )
    timings.mark("policy")
    if result.note:
        logger.warning("round under %s: %s", policy.name, result.note)
    return _carry_out(live, result, policy.name, now, executor, finished, timings)


def _start_between_rounds(row: SchedulerSettings, config: SchedulingConfig, now: datetime) -> SchedulingRound | None:
    if not config.cycle.start_between_rounds:
        return None
    timings = Timings()
    executor = get_executor(row)
    if not executor.decides:
        return None
    try:
        live, finished = _read_cluster(executor, row, now)
    except ClusterUnavailable as exc:
        logger.info("no start between rounds: %s", exc)
        return None
    timings.mark("snapshot")
    try:
        policy = build_policy(config)
        result = start_waiting_jobs(live.snap, policy, load_round_state(policy.name), config.restart_delay,
                                    config.cycle.even_spread)
    except Exception:
        logger.exception("policy %s failed between rounds; the next round records it", config.policy)
        return None
    if result is None:
        return None
    timings.mark("policy")
    return _carry_out(live, result, policy.name, now, executor, finished, timings, between_rounds=True)


def _carry_out(live: LiveSnapshot, result: CycleResult, policy: str, now: datetime, executor: Executor,
               finished: int, timings: Timings, between_rounds: bool = False) -> SchedulingRound:
    """The decisions written in one transaction, then carried out by the executor."""
    round_row = apply_round(live, result, policy, now, executor.name, finished, timings, between_rounds)
    executor.launch(unlaunched(live.gpu_place), now)
    timings.mark("launch")
    round_row.note = round_note(executor.notes, result.note)
    round_row.launch_ms = timings.ms("write", "launch")
    round_row.save(update_fields=["note", "launch_ms"])
    if round_row.starts or round_row.finished or round_row.preemptions or round_row.rescales:
        request_forecast("a round that changed the queue")
    return round_row


def round_note(cluster_notes: list[str], policy_note: str | None) -> str:
    """The policy's word and the cluster's, as one note that fits its column."""
    note = "; ".join([*([policy_note] if policy_note else []), *cluster_notes])
    return note if len(note) <= 2000 else note[:1999] + "…"

"""The elasticity guards over a policy's answer (the round's "stabilise" stage, ``cycle.run_cycle``): whether a
running job's change is held, and why — too often, too soon, too little gain, no payback within its horizon, or
slower with no other job taking its GPUs — and the holds that give way where the policy gave their GPUs away."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .speed import held_type, job_speed, remaining_seconds
from .types import ClusterSnapshot, JobInfo

if TYPE_CHECKING:
    from .cycle import CycleConfig, RestartDelay


def speeds_across(
    job: JobInfo, snap: ClusterSnapshot, before: tuple[int, str | None], after: tuple[int, str | None],
    batch: int | None,
) -> tuple[float, float]:
    """``job``'s speed before and after a change from ``before`` to ``after`` (GPU count, type). A job whose batch
    the policy chose (``batch``) adapts it to its GPUs: it runs at its best batch where it is and at the policy's
    after the change, not at the batch it first asked for."""
    now = job_speed(job, snap, before[0], gpu_type=before[1], adapts=batch is not None)
    return now, job_speed(job, snap, after[0], gpu_type=after[1], batch_size=batch)


ANY_TYPE = "*"  # Guards: a job that may take GPUs of any type
HOUR = 3600.0


@dataclass(frozen=True)
class RescaleHistory:
    """What the guards remember of each job's changes in the last hour, kept in the cycle's state.

    ``own``: when the job changed for its own sake — it grew, or moved without slowing down. These are what
    ``max_rescales_per_hour`` counts. ``yielded``: when it last gave GPUs up for other jobs — a shrink or a move to
    slower GPUs that the policy made for their sake. These count for settling (``settle_seconds``) but not towards
    the hourly limit. The hourly limit holds a job that keeps changing for itself; a job that others shrank has not.
    Counted, each forced shrink used up the job's allowance, so its regrowth into GPUs that had since gone idle was
    held: on Pollux's ``workloads-0.5/workload-2`` an ImageNet job sat on 8 of 64 GPUs for 50 minutes with 32–56
    idle ("held at 8 GPUs: 6 rescales in the last hour"), after six shrinks for arrivals in an hour.
    """

    own: Mapping[str, Sequence[float]] = field(default_factory=dict)
    yielded: Mapping[str, float] = field(default_factory=dict)

    @staticmethod
    def of(state: Mapping[str, Any], now: float) -> RescaleHistory:
        """The last hour's from a cycle state (``"rescales"``: own changes, ``"yielded"``: last yield by job)."""
        own = {job: [t for t in times if now - t < HOUR] for job, times in (state.get("rescales") or {}).items()}
        yielded = {job: t for job, t in (state.get("yielded") or {}).items() if now - t < HOUR}
        return RescaleHistory({job: times for job, times in own.items() if times}, yielded)

    def own_changes(self, job_id: str) -> int:
        return len(self.own.get(job_id, ()))

    def last_change(self, job_id: str) -> float:
        """When the job last changed, for whichever sake (−∞: not in the last hour)."""
        return max(max(self.own.get(job_id, ()), default=float("-inf")), self.yielded.get(job_id, float("-inf")))

    def after(self, changed: Mapping[str, bool], jobs: Sequence[JobInfo], now: float) -> RescaleHistory:
        """This history, for the snapshot's ``jobs`` (others are gone), with this round's changes added (job id →
        whether it yielded)."""
        own: dict[str, list[float]] = {}
        yielded: dict[str, float] = {}
        if self.own or self.yielded:  # empty unless a job changed in the last hour: never under a rigid policy
            present = {job.id for job in jobs}
            own = {job: list(times) for job, times in self.own.items() if job in present}
            yielded = {job: t for job, t in self.yielded.items() if job in present}
        for job_id, gave_way in changed.items():
            if gave_way:
                yielded[job_id] = now
            else:
                own.setdefault(job_id, []).append(now)
        return RescaleHistory(own, yielded)

    def state(self) -> dict[str, Any]:
        """The JSON the cycle keeps: ``"rescales"`` always (the shape rounds kept before yields were kept apart),
        ``"yielded"`` only where a job yielded in the last hour."""
        out: dict[str, Any] = {"rescales": {job: list(times) for job, times in self.own.items()}}
        if self.yielded:
            out["yielded"] = dict(self.yielded)
        return out


@dataclass(frozen=True)
class Guards:
    """The elasticity guards over a policy's answer: a running job is held as it is when the change it would
    make comes too often (``max_rescales_per_hour``) or too soon after the last (``settle_seconds``), gains too
    little (``min_rescale_gain``), or would not repay its restart within ``payback_seconds``. A change that slows
    the job down (a shrink, or a move to slower GPUs) is made for other jobs' sake and is never held for its own
    payback — but it is held where no other job, after the other holds, takes its GPUs; any hold gives way where
    the policy gave the GPUs it would keep to another job."""

    snap: ClusterSnapshot
    gpu_types: Mapping[str, str]  # the policy's choice of type, job id → type
    history: RescaleHistory
    config: CycleConfig
    restart_delay: RestartDelay
    batch_sizes: Mapping[str, int] = field(default_factory=dict)  # the policy's, job id → global batch

    def stabilise(self, counts: Mapping[str, int]) -> tuple[dict[str, int], dict[str, str], set[str]]:
        """(counts after the guards, why each held job was held, the held jobs: they keep their GPUs' type)."""
        result, reasons = dict(counts), dict[str, str]()
        # Twice: a slower change is held where no other job takes its GPUs, which the first pass's holds decide.
        for judge_slower in (False, True):
            taking = self._gainers_by_type(result, held=set(reasons)) if judge_slower else None
            for job in self.snap.jobs:
                held, target = len(job.placement), counts[job.id]
                if job.id in reasons or not held or not target or not job.min_gpus <= held <= job.max_gpus:
                    continue  # held already, not a change of a running job, or one from outside the bounds
                now_type = held_type(job, self.snap)
                then_type = self.gpu_types.get(job.id, now_type)
                if target == held and then_type == now_type:
                    continue  # the common case: it keeps its configuration
                hold = self._hold_reason(job, target, now_type, then_type, taking)
                if hold:
                    result[job.id], reasons[job.id] = held, hold
        if reasons:
            result, reasons = self._undo_holds_over_capacity(counts, result, reasons)
        return result, reasons, set(reasons)

    def _hold_reason(self, job: JobInfo, target: int, now_type: str | None, then_type: str | None,
                     gainers: Mapping[str, list[str]] | None) -> str | None:
        """Why the change is held, or None; a slower change is judged only with ``gainers`` (the jobs that take
        GPUs of each type)."""
        config, own = self.config, self.history.own_changes(job.id)
        if own >= config.max_rescales_per_hour:
            return (f"held at {job.gpus} GPUs: {own} rescales in the last hour "
                    f"(limit {config.max_rescales_per_hour})")
        since = self.snap.now - self.history.last_change(job.id)
        if since < config.settle_seconds:
            return f"held at {job.gpus} GPUs: it changed {since:.0f} s ago (settles for {config.settle_seconds:g} s)"
        now, then = speeds_across(job, self.snap, (job.gpus, now_type), (target, then_type),
                                  self.batch_sizes.get(job.id))
        gain = then / now - 1 if now > 0 else float("inf")
        change = f"{target} {then_type} GPUs" if then_type != now_type else f"{target} GPUs"
        if target > job.gpus and gain < config.min_rescale_gain:
            return f"held at {job.gpus} GPUs: {change} would be only {gain:+.0%} faster"
        if then <= now:
            if config.payback_seconds > 0 and self._no_other_takes(job, now_type, gainers):
                # Slower, and no other job takes its GPUs: the policy had no cause (a near-tie in its objective).
                return f"held at {job.gpus} GPUs: {change} would be slower, and no other job needs its {now_type} GPUs"
            return None  # it slows down for others' sake: their gain is the policy's cause
        return self._payback_hold(job, now, then, change)

    @staticmethod
    def _no_other_takes(job: JobInfo, gpu_type: str | None, gainers: Mapping[str, list[str]] | None) -> bool:
        """True where ``gainers`` are known and none but ``job`` takes GPUs of ``gpu_type`` (or of any type)."""
        if gainers is None or gpu_type is None:
            return False
        takers = {*gainers.get(gpu_type, ()), *gainers.get(ANY_TYPE, ())}
        return not takers - {job.id}

    def _gainers_by_type(self, counts: Mapping[str, int], held: set[str]) -> dict[str, list[str]]:
        """GPU type → the jobs given more GPUs of that type than they hold (a ``held`` job stays on its type)."""
        type_of = self.snap.index.type_of
        gainers: dict[str, list[str]] = {}
        for job in self.snap.jobs:
            if not counts.get(job.id):
                continue
            chosen = None if job.id in held else self.gpu_types.get(job.id)
            kind = chosen or held_type(job, self.snap) or ANY_TYPE  # a new job of no type: placement picks one
            if counts[job.id] > sum(1 for gpu in job.placement if type_of.get(gpu) == kind):
                gainers.setdefault(kind, []).append(job.id)
        return gainers

    def _payback_hold(self, job: JobInfo, now: float, then: float, change: str) -> str | None:
        """Why the change does not repay its restart within the horizon; None if it does."""
        if now <= 0 or self.config.payback_seconds <= 0:
            return None  # it makes no progress where it is (any speed repays), or the guard is off
        delay = self.restart_delay(job.profile)
        left = remaining_seconds(job, now)
        lasted = self.horizon(job)
        horizon = lasted if left is None else min(lasted, left)
        if then * max(horizon - delay, 0.0) > now * horizon:
            return None
        # It repays when then·(t − delay) = now·t: t = then·delay / (then − now).
        repaid = then * delay / (then - now)
        if left is not None and left < lasted:
            until = "before it ends"
        elif lasted > self.config.payback_seconds:
            until = f"within {lasted / 60:.0f} min, as long as its configurations have lasted"
        else:
            until = f"within {lasted / 60:g} min"
        return (f"held at {job.gpus} GPUs: {change} ({then / now - 1:+.0%} speed) would repay its {delay:.0f} s "
                f"restart only after {repaid / 60:.1f} min, not {until}")

    def horizon(self, job: JobInfo) -> float:
        """Seconds a new configuration of ``job`` can be expected to last, before the job ends or is changed again:
        as long as its configurations have lasted so far — the seconds it has run (attained GPU-seconds over the
        GPUs it holds) over its configurations (restarts + 1) — and at least ``payback_seconds``.

        Why the past: how long a job has run is the best predictor of how long it will run on when lengths are
        heavy-tailed (Harchol-Balter & Downey, "Exploiting process lifetime distributions for dynamic load
        balancing", SIGMETRICS 1996, who migrate a process only once its age repays the move), as deep-learning
        jobs' are (Philly: Jeon et al., ATC'19; Tiresias, NSDI'19, schedules by attained service for it). A fixed
        horizon is myopic for a job with a day left: an ImageNet job's 250 s restart would need 1.7× its speed to
        repay in 10 minutes."""
        ran = job.attained_gpu_seconds / max(len(job.placement), 1)
        return max(self.config.payback_seconds, ran / (job.restarts + 1))

    def _undo_holds_over_capacity(
        self, wanted: Mapping[str, int], held: dict[str, int], reasons: dict[str, str]
    ) -> tuple[dict[str, int], dict[str, str]]:
        """A held job keeps GPUs the policy gave to someone else: release holds, newest job first, until all
        fit (on each GPU type, where the policy chose types)."""
        # Releasing a held growth on its own type would only take more; a held shrink, or a held job the policy
        # moved to another type, gives GPUs of its type back.
        holds = sorted((j for j in self.snap.jobs if j.id in reasons and self._gives_back(j, held, wanted)),
                       key=lambda j: (-j.submit_time, j.id))
        demand: Counter[tuple[str, str | None]] = Counter()
        for job in self.snap.jobs:
            demand.update(self._demand_of(job, held[job.id], job.id in reasons))
        for job in holds:  # the demand kept up to date release by release: no pass over every job per hold
            if self._within(demand):
                break
            demand.subtract(self._demand_of(job, held[job.id], True))
            held[job.id] = wanted[job.id]
            reasons.pop(job.id, None)
            demand.update(self._demand_of(job, held[job.id], False))
        return held, reasons

    def _gives_back(self, job: JobInfo, held: Mapping[str, int], wanted: Mapping[str, int]) -> bool:
        kind = held_type(job, self.snap)
        return held[job.id] > wanted[job.id] or self.gpu_types.get(job.id, kind) != kind

    def _demand_of(self, job: JobInfo, gpus: int, is_held: bool) -> dict[tuple[str, str | None], int]:
        """What ``gpus`` GPUs for ``job`` ask of the cluster: in all, of the type it requires, and of the type it
        runs on where the policy chose types (a held job keeps its own)."""
        if not gpus:
            return {}
        demand: dict[tuple[str, str | None], int] = {("all", None): gpus}
        if job.gpu_type is not None:
            demand[("required", job.gpu_type)] = gpus
        if self.gpu_types:
            if not job.running:
                kind = self.gpu_types.get(job.id, job.gpu_type)
            elif is_held or job.id not in self.gpu_types:
                kind = held_type(job, self.snap)
            else:
                kind = self.gpu_types[job.id]
            if kind in self.snap.usable_by_type:
                demand[("on", kind)] = gpus
        return demand

    def _within(self, demand: Mapping[tuple[str, str | None], int]) -> bool:
        """Whether ``demand`` (``_demand_of`` summed) fits the usable GPUs: all of them, and each type."""
        usable = self.snap.usable_by_type
        total = sum(usable.values())
        return all(gpus <= (total if kind == "all" else usable.get(gpu_type or "", 0))
                   for (kind, gpu_type), gpus in demand.items())

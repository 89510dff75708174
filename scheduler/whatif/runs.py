"""What-if runs and sweeps: store a scenario, replay it through the simulator, compare.

The only place that writes what-if rows. A ``Scenario`` checks its own fields; here its trace is resolved inside
its root (``traces.resolve``). Bad input raises ``ValidationError`` naming the field and writes nothing.
``execute_run`` claims its run with a conditional update, so a redelivered task returns early; it never raises for
a failing simulation but stores the error on the run. ``launch_run`` and ``launch_sweep`` enqueue the Celery tasks
of ``scheduler/tasks.py`` by name after the transaction commits, through the Celery app given (the project's by
default).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from itertools import product
from operator import itemgetter
from pathlib import Path
from typing import Any

from celery import Celery, current_app
from celery.exceptions import SoftTimeLimitExceeded
from celery.utils import uuid
from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from cluster_ops.common.dispatch import send_after_commit
from cluster_ops.common.liveness import stopped_beating
from scheduler.models import WhatIfRun, WhatIfStatus, WhatIfSweep
from scheduler.sim import scenario as scenario_rules
from scheduler.sim.catalogue import COMPARED
from scheduler.sim.limits import WorkloadTooLong
from scheduler.sim.runner import Scenario, ScenarioError, run_scenario

from . import traces
from .liveness import ProgressWriter, run_heartbeat

logger = logging.getLogger(__name__)

Actor = User | AnonymousUser | None
RUN_TASK = "scheduler.run_whatif"
FINISH_SWEEP_TASK = "scheduler.finish_sweep"
SWEEP_AXES = {"policy": "policies", "power_cap_fraction": "power_caps", "load_factor": "load_factors"}
# Metrics a sweep compares, and which way is better (the catalogue's).
METRICS: Mapping[str, str] = {metric.key: str(metric.better) for metric in COMPARED}
PARAMETERS = ("policy", "power_cap_fraction", "load_factor")


# --- scenarios ------------------------------------------------------------------------


def caps_label(scenario: Mapping[str, Any]) -> str:
    """"cap 0.8", or "caps a100 0.7, t4 0.9" for a scenario (``Scenario.as_dict``) with per-type caps."""
    by_type = scenario.get("power_caps_by_type") or {}
    if by_type:
        return "caps " + ", ".join(f"{gpu_type} {cap:g}" for gpu_type, cap in sorted(by_type.items()))
    return f"cap {scenario.get('power_cap_fraction', 1.0):g}"


def validate_scenario(scenario: Scenario) -> None:
    """``ValidationError`` on ``trace`` unless the scenario's trace is a file inside its root (``traces.resolve``);
    the scenario checked its other fields when it was made."""
    traces.resolve(scenario.trace)


def scenario_from_dict(data: Mapping[str, Any]) -> Scenario:
    """The ``Scenario`` stored as ``data`` (``Scenario.as_dict()``); ``ValidationError`` naming the field if bad."""
    try:
        return scenario_rules.scenario_from_dict(data)
    except ScenarioError as error:
        raise ValidationError(error.errors) from None


# --- runs -----------------------------------------------------------------------------


def create_run(scenario: Scenario, user: Actor = None) -> WhatIfRun:
    """A queued run of ``scenario``, validated first; launch it with ``launch_run``."""
    validate_scenario(scenario)
    return WhatIfRun.objects.create(scenario=scenario.as_dict(), created_by=_user(user))


def rerun(run: WhatIfRun, user: Actor = None, app: Celery | None = None) -> WhatIfRun:
    """A new run of ``run``'s scenario (outside any sweep), launched after commit."""
    again = create_run(scenario_from_dict(run.scenario), user)
    launch_run(again, app)
    return again


def execute_run(run_id: int) -> bool:
    """Simulate the queued run ``run_id`` and store its summary or its error; False if it was not queued.

    While it runs, a heartbeat moves every ``WORK_HEARTBEAT_SECONDS`` (cluster_ops/liveness.py), so that a run
    whose worker died is told from a live one within ``WORK_LEASE_SECONDS`` and run again (``recover_runs``).
    """
    attempt = _claim(run_id)
    if attempt is None:
        return False
    try:
        with run_heartbeat(run_id, attempt):
            stored = scenario_from_dict(WhatIfRun.objects.values_list("scenario", flat=True).get(pk=run_id))
            scenario = dataclasses.replace(stored, trace=str(traces.resolve(stored.trace)))
            progress = ProgressWriter(run_id, attempt=attempt)
            _, summary = run_scenario(scenario, Path(settings.TRACES_DIR), on_progress=progress)
    except Exception as error:  # any failure of the simulation belongs on the run, not in the worker's log only
        logger.exception("what-if run %s failed", run_id)
        _finish(run_id, attempt, status=WhatIfStatus.FAILED, error=failure_text(error))
    else:
        _finish(run_id, attempt, status=WhatIfStatus.SUCCEEDED, summary=summary, progress=1.0)
    _compare_its_sweep(run_id)
    return True


def _compare_its_sweep(run_id: int) -> None:
    """The last run of a sweep to finish fills the sweep's comparison (a run cancelled last leaves it to
    ``recover_runs``). No chord: that needed the result backend, whose absence held a request for 19 s."""
    sweep_id = WhatIfRun.objects.filter(pk=run_id).values_list("sweep_id", flat=True).first()
    if sweep_id is not None:
        compare_sweep(sweep_id)


def failure_text(error: Exception) -> str:
    """What a failed run says (to staff only: ``views.shown_error``): the fields and problems, or the exception."""
    if isinstance(error, SoftTimeLimitExceeded):
        limit = settings.WHATIF_TIME_LIMIT_SECONDS
        return f"Stopped: ran past its time limit of {limit} s (WHATIF_TIME_LIMIT_SECONDS)."
    if isinstance(error, WorkloadTooLong):
        return f"Refused: {error}."
    if isinstance(error, ValidationError) and hasattr(error, "error_dict"):
        return "; ".join(f"{field}: {' '.join(messages)}" for field, messages in error.message_dict.items())
    return f"{type(error).__name__}: {error}"


def _claim(run_id: int) -> int | None:
    """Take the run if it is queued, or running under a worker that stopped beating (killed mid-run); returns the
    attempt it is now, or None if another worker has it (or it has no attempts left).

    The task is acknowledged late, so a killed worker's task may be delivered again; the heartbeat
    (``WORK_LEASE_SECONDS``) tells a dead worker's run from a live one's.
    """
    now = timezone.now()
    claimable = WhatIfRun.objects.filter(Q(status=WhatIfStatus.QUEUED) | _stopped_beating(now), pk=run_id,
                                         attempts__lt=settings.MAX_ATTEMPTS)
    with transaction.atomic():
        if not claimable.update(status=WhatIfStatus.RUNNING, started_at=now, heartbeat_at=now, progress=0.0,
                                attempts=F("attempts") + 1):
            return None
        return WhatIfRun.objects.values_list("attempts", flat=True).get(pk=run_id)


def _stopped_beating(now: datetime) -> Q:
    return stopped_beating(now, WhatIfStatus.RUNNING)


def _finish(run_id: int, attempt: int, **fields: Any) -> None:
    """Store the outcome of ``attempt``, unless the run was cancelled, or taken over by a later attempt meanwhile."""
    WhatIfRun.objects.filter(pk=run_id, status=WhatIfStatus.RUNNING, attempts=attempt).update(
        finished_at=timezone.now(), **fields)


def launch_run(run: WhatIfRun, app: Celery | None = None) -> str:
    """Enqueue ``run`` on ``app`` once the current transaction commits; returns the Celery task id."""
    run.celery_task_id = uuid()
    WhatIfRun.objects.filter(pk=run.pk).update(celery_task_id=run.celery_task_id, sent_at=timezone.now())
    # No result is kept (the row holds it): a send then needs the broker only, and fails at once when it is away.
    signature = _app(app).signature(RUN_TASK, args=(run.pk,), task_id=run.celery_task_id, ignore_result=True)
    send_after_commit(signature.apply_async, f"what-if run {run.pk}",
                      unsent=lambda: WhatIfRun.objects.filter(pk=run.pk).update(sent_at=None))
    return run.celery_task_id


def cancel_run(run: WhatIfRun, user: Actor = None, app: Celery | None = None) -> WhatIfRun:
    """Cancel a queued or running run: it is marked cancelled at once, a running simulation's result is dropped
    (``_finish`` writes only over a running row) and its task revoked (a queued message is skipped, a running one
    stopped); a finished run is returned as it is."""
    updated = WhatIfRun.objects.filter(pk=run.pk, status__in=[WhatIfStatus.QUEUED, WhatIfStatus.RUNNING]).update(
        status=WhatIfStatus.CANCELLED, finished_at=timezone.now(), cancelled_by=_user(user))
    run.refresh_from_db()
    if updated and run.celery_task_id:
        task_id = run.celery_task_id
        transaction.on_commit(lambda: _revoke(task_id, app))
    return run


def _revoke(task_id: str, app: Celery | None) -> None:
    try:
        _app(app).control.revoke(task_id, terminate=True)
    except Exception:  # the broker is down: the row says cancelled, and the result will be dropped anyway
        logger.warning("could not revoke what-if task %s", task_id, exc_info=True)


def recover_runs(now: datetime, app: Celery | None = None) -> dict[str, int]:
    """Beat's repair of work lost outside the database (``RECOVER_SECONDS``); returns what it did, by kind.

    * A run still queued ``RESEND_AFTER_SECONDS`` after it was sent is sent again: the broker lost it (a restarted
      embedded Redis keeps nothing); one the broker never took (it was away) is sent at once. A duplicate is
      harmless: only one claim succeeds.
    * A running run whose heartbeat stopped (``WORK_LEASE_SECONDS``) lost its worker (killed, out of memory, or
      killed at its hard time limit): queued and sent again at once while it has attempts left (``MAX_ATTEMPTS``),
      else failed with the reason. Never running forever, and re-run within a lease and a recovery interval.
    * A sweep whose runs have all finished but has no comparison (its last run was cancelled, or its worker died
      between the run and the comparison) is compared.
    """
    lost = now - timedelta(seconds=settings.WHATIF_TIME_LIMIT_SECONDS + settings.HARD_LIMIT_GRACE_SECONDS)
    running = WhatIfRun.objects.filter(_stopped_beating(now) | Q(started_at__lt=lost), status=WhatIfStatus.RUNNING)
    failed = running.filter(attempts__gte=settings.MAX_ATTEMPTS).update(
        status=WhatIfStatus.FAILED, finished_at=now,
        error=f"Stopped: its worker was lost or killed at the time limit {settings.MAX_ATTEMPTS} times.")
    requeued = running.update(status=WhatIfStatus.QUEUED, progress=0.0, sent_at=None)
    stale = now - timedelta(seconds=settings.RESEND_AFTER_SECONDS)
    resend = list(WhatIfRun.objects.filter(Q(sent_at__lt=stale) | Q(sent_at__isnull=True), status=WhatIfStatus.QUEUED)
                  .order_by("pk")[:RESEND_BATCH])
    for run in resend:
        launch_run(run, app)
    compared = sum(compare_sweep(pk) is not None for pk in WhatIfSweep.objects.filter(
        comparison__isnull=True, runs__isnull=False).exclude(runs__status__in=[WhatIfStatus.QUEUED,
                                                                               WhatIfStatus.RUNNING])
                   .values_list("pk", flat=True).distinct()[:RESEND_BATCH])
    return {"failed": failed, "requeued": requeued, "resent": len(resend), "compared": compared}


RESEND_BATCH = 100  # at most this many rows per kind and recovery, so one pass stays short


# --- sweeps ---------------------------------------------------------------------------


def create_sweep(
    base: Scenario, policies: Iterable[str], power_caps: Iterable[float], load_factors: Iterable[float],
    user: Actor = None, name: str = "",
) -> WhatIfSweep:
    """A sweep with one queued run per policy × power cap × load factor on ``base``; all or nothing."""
    return _store_sweep(sweep_scenarios(base, policies, power_caps, load_factors), user, name)


def create_sweep_of(scenarios: Iterable[Scenario], user: Actor = None, name: str = "") -> WhatIfSweep:
    """A sweep of the ``scenarios`` given (e.g. a baseline and one what-if), one queued run each, in order;
    validated first (``ValidationError`` naming the field), all or nothing. Launch it with ``launch_sweep``."""
    scenarios = list(scenarios)
    if not scenarios:
        raise ValidationError({"scenarios": "Give at least one scenario."})
    for scenario in scenarios:
        validate_scenario(scenario)
    return _store_sweep(scenarios, user, name)


def _store_sweep(scenarios: list[Scenario], user: Actor, name: str) -> WhatIfSweep:
    with transaction.atomic():
        sweep = WhatIfSweep.objects.create(
            name=name or f"sweep of {traces.display_name(scenarios[0].trace)}", created_by=_user(user)
        )
        WhatIfRun.objects.bulk_create(
            WhatIfRun(scenario=scenario.as_dict(), sweep=sweep, created_by=sweep.created_by) for scenario in scenarios
        )
    return sweep


def sweep_scenarios(
    base: Scenario, policies: Iterable[str], power_caps: Iterable[float], load_factors: Iterable[float]
) -> list[Scenario]:
    """Every combination, validated; errors on a varied field are named by its sweep argument (``policies``...)."""
    axes: dict[str, list[Any]] = {
        "policies": list(dict.fromkeys(policies)), "power_caps": list(dict.fromkeys(power_caps)),
        "load_factors": list(dict.fromkeys(load_factors)),
    }
    errors = {axis: "Give at least one value." for axis, values in axes.items() if not values}
    scenarios = []
    for policy, cap, load in product(*axes.values()):
        try:
            scenario = dataclasses.replace(base, policy=policy, power_cap_fraction=cap, load_factor=load)
            validate_scenario(scenario)
            scenarios.append(scenario)
        except ScenarioError as error:
            errors |= {SWEEP_AXES.get(field, field): problem for field, problem in error.errors.items()}
        except ValidationError as error:
            errors |= {SWEEP_AXES.get(field, field): "; ".join(msgs) for field, msgs in error.message_dict.items()}
    if errors:
        raise ValidationError(errors)
    return scenarios


def launch_sweep(sweep: WhatIfSweep, app: Celery | None = None) -> None:
    """After commit, run the sweep's queued runs; the last to finish fills the comparison (``execute_run``)."""
    runs = list(sweep.runs.filter(status=WhatIfStatus.QUEUED).order_by("pk"))
    for run in runs:
        launch_run(run, app)
    if not runs:  # nothing left to run: compare straight away
        transaction.on_commit(lambda: compare_sweep(sweep.pk) and None)


def compare_sweep(sweep_id: int) -> dict[str, Any] | None:
    """Fill the sweep's comparison once all its runs have finished; None (nothing written) before that."""
    runs = list(WhatIfRun.objects.filter(sweep_id=sweep_id).order_by("pk"))
    if not runs or not all(run.finished for run in runs):
        return None
    comparison = build_comparison(runs)
    WhatIfSweep.objects.filter(pk=sweep_id).update(comparison=comparison)
    return comparison


def build_comparison(runs: Iterable[WhatIfRun]) -> dict[str, Any]:
    """One row per run (parameters, status, metrics), the best run per metric overall and per setting.

    A setting is one power cap × load factor: there the policies compete on equal terms.
    """
    rows = [_comparison_row(run) for run in runs]
    settings_ = sorted({(row["power_cap_fraction"], row["load_factor"]) for row in rows})
    return {
        "parameters": list(PARAMETERS), "metrics": dict(METRICS), "rows": rows, "best": _best(rows),
        "best_by_setting": [
            {"power_cap_fraction": cap, "load_factor": load, "best": _best_policies(rows, cap, load)}
            for cap, load in settings_
        ],
    }


def _comparison_row(run: WhatIfRun) -> dict[str, Any]:
    summary = run.summary or {}
    return {
        "run": run.pk, "status": run.status, **{name: run.scenario.get(name) for name in PARAMETERS},
        **{metric: summary.get(metric) for metric in METRICS}, "error": run.error,
    }


def _best(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any] | None]:
    """Per metric, the succeeded run with the best value (the earliest run on a tie); None if none has one."""
    best: dict[str, dict[str, Any] | None] = {}
    for metric, direction in METRICS.items():
        scored = [row for row in rows if row["status"] == WhatIfStatus.SUCCEEDED and row[metric] is not None]
        pick = min if direction == "min" else max
        winner = pick(scored, key=itemgetter(metric), default=None)
        best[metric] = winner and {"run": winner["run"], "value": winner[metric],
                                   **{name: winner[name] for name in PARAMETERS}}
    return best


def _best_policies(rows: list[dict[str, Any]], cap: float, load: float) -> dict[str, str | None]:
    same_setting = [row for row in rows if (row["power_cap_fraction"], row["load_factor"]) == (cap, load)]
    return {metric: winner["policy"] if winner else None for metric, winner in _best(same_setting).items()}


def _app(app: Celery | None) -> Celery:
    # The project's app, as shared_task binds to it: an app never imports the project's Celery module.
    return current_app if app is None else app


def _user(actor: Actor) -> User | None:
    return actor if isinstance(actor, User) else None

"""Soak a running `make run` as a long day of use would (crashes, what-ifs beside rounds), and print what happened
(a measurement, not a test).

Run beside a `make run` started with the same environment (VAR_DIR, EMBEDDED_REDIS_PORT or REDIS_URL):

    VAR_DIR=/tmp/soak .venv/bin/python scripts/soak_live.py --minutes 30

It submits a job with 1e9 work (inside the accepted bounds), queues two what-ifs that run for longer than the soak,
then watches the forecasts: how many were made, the longest gap between two, and how long after each change of the
queue the next one came. After ``--kill-after`` minutes it SIGKILLs the `background` worker's process group (found
through supervisorctl) and times how long until both what-ifs run again. Finally it cancels what it queued.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cluster_ops.settings")

import django  # noqa: E402

django.setup()

from django.utils import timezone  # noqa: E402

from scheduler import whatif  # noqa: E402
from scheduler.jobs import verbs  # noqa: E402
from scheduler.live.config import scheduler_settings  # noqa: E402
from scheduler.models import Forecast, Job, JobForecast, Tenant, WhatIfRun, WhatIfStatus  # noqa: E402
from scheduler.sim.runner import Scenario  # noqa: E402

LONG_TRACE = "philly/philly_jobs_sia_pollux.csv"  # every Philly job: hours of simulation under pollux


def background_pid(var_dir: Path) -> int | None:
    status = subprocess.run([str(REPO / ".venv/bin/supervisorctl"), "-c", str(var_dir / "supervisord.conf"),
                             "status", "background"], capture_output=True, text=True)
    found = re.search(r"RUNNING\s+pid (\d+)", status.stdout)
    return int(found.group(1)) if found else None


def queue_work() -> tuple[Job, list[WhatIfRun]]:
    tenant = Tenant.objects.order_by("name").first()
    assert tenant is not None, "no tenant: start `make run` (it seeds the demo) first"
    huge = verbs.submit_job(tenant=tenant, name="soak-huge", workload_profile="cifar10", total_work=1e9,
                               min_gpus=8, max_gpus=8)
    runs = []
    for seed in (1, 2):
        scenario = Scenario(trace=LONG_TRACE, policy="pollux", preset="pollux-t4", seed=seed)
        run = whatif.create_run(scenario)
        whatif.launch_run(run)
        runs.append(run)
    return huge, runs


def watch(minutes: float, kill_after: float, var_dir: Path, runs: list[WhatIfRun]) -> dict[str, object]:
    start, made, killed_at, rerun_at = timezone.now(), {}, None, None
    ids = [run.pk for run in runs]
    while timezone.now() < start + timedelta(minutes=minutes):
        for at in Forecast.objects.filter(made_at__gte=start).values_list("made_at", flat=True):
            made[at] = True
        if killed_at is None and timezone.now() >= start + timedelta(minutes=kill_after):
            pid = background_pid(var_dir)
            if pid is not None and WhatIfRun.objects.filter(pk__in=ids, status=WhatIfStatus.RUNNING).count() == 2:
                os.killpg(pid, signal.SIGKILL)
                killed_at = timezone.now()
        if killed_at is not None and rerun_at is None:
            again = WhatIfRun.objects.filter(pk__in=ids, status=WhatIfStatus.RUNNING, attempts__gte=2,
                                             started_at__gt=killed_at)
            if again.count() == 2:
                rerun_at = max(again.values_list("started_at", flat=True))
        time.sleep(2)
    times = sorted(made)
    gaps = [(b - a).total_seconds() for a, b in zip(times, times[1:], strict=False)]
    rerun_after = (rerun_at - killed_at).total_seconds() if rerun_at and killed_at else None
    return {"forecasts": len(times), "longest_gap_s": max(gaps, default=None),
            "round_s": scheduler_settings().round_seconds, "killed_at": killed_at, "rerun_after_s": rerun_after}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--kill-after", type=float, default=5.0, help="minutes before the background worker dies")
    args = parser.parse_args()
    var_dir = Path(os.environ.get("VAR_DIR", REPO / "var"))
    huge, runs = queue_work()
    try:
        result = watch(args.minutes, args.kill_after, var_dir, runs)
        last = JobForecast.objects.filter(job=huge).order_by("-forecast__made_at").first()
        result["huge_job_estimate"] = "none" if last is None else (
            f"start {last.estimated_start}, finish {last.estimated_finish or 'not within the forecast'}")
        for key, value in result.items():
            print(f"{key}: {value}")
    finally:
        for run in runs:
            whatif.cancel_run(run)
        verbs.cancel_job(huge)


if __name__ == "__main__":
    main()

"""Measure, on a running console, what its pages say of waiting jobs: the share with an estimate, and how far the first
estimate of each job that then started was from its actual start.

    VAR_DIR=<the running console's> .venv/bin/python scripts/measure_estimates.py [--minutes 20] [--every 10]

Every ``--every`` seconds it reads what the Overview and Jobs pages would show an operator ("Next to start":
``cluster_ops.dashboards.forecast_data.waiting_forecast``), as a page load would, and counts the waiting jobs whose
row says "starts in ~…" or "not within …" (an estimate) rather than "no forecast yet". Jobs submitted less than
``--grace`` seconds before a load (default 10: a forecast is asked for two seconds after a submission) are counted
apart. At the end: the share per load after the first minute, and for each job that waited and then started, its
first estimated start against its actual start.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cluster_ops.settings")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--every", type=float, default=10.0)
    parser.add_argument("--grace", type=float, default=10.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.utils import timezone

    from cluster_ops.dashboards.forecast_data import waiting_forecast
    from scheduler.forecasting.forecasts import latest_for
    from scheduler.models import QUEUED_STATES, Job

    viewer = User(username="measure", is_staff=True)
    began = timezone.now()
    loads: list[dict[str, object]] = []
    first_estimate: dict[int, tuple[datetime, datetime, int]] = {}  # job → (seen at, estimated start, samples)
    while timezone.now() - began < timedelta(minutes=args.minutes):
        now = timezone.now()
        shown = waiting_forecast(viewer, now, limit=100_000)
        waiting = dict(Job.objects.filter(state__in=QUEUED_STATES).values_list("pk", "submitted_at"))
        fresh = {pk for pk, at in waiting.items() if (now - at).total_seconds() < args.grace}
        with_estimate = [row for row in shown.jobs if row.starts != "no forecast yet"]
        loads.append({"at": now.isoformat(), "waiting": len(shown.jobs), "with_estimate": len(with_estimate),
                      "submitted_within_grace": len(fresh),
                      "without_estimate_older": sum(1 for row in shown.jobs if row.starts == "no forecast yet"
                                                    and int(row.job.rsplit("#", 1)[1]) not in fresh)})
        for pk, row in latest_for(waiting).items():
            if row.estimated_start is not None and pk not in first_estimate:
                first_estimate[pk] = (now, row.estimated_start, row.forecast.samples)
        time.sleep(args.every)
    after_first_minute = [load for load in loads
                          if datetime.fromisoformat(str(load["at"])) - began >= timedelta(minutes=1)]
    shares = [(int(str(load["with_estimate"])) / int(str(load["waiting"]))) for load in after_first_minute
              if int(str(load["waiting"])) > 0]
    started = dict(Job.objects.filter(pk__in=first_estimate, started_at__isnull=False).values_list("pk",
                                                                                                   "started_at"))
    errors = [(first_estimate[pk][1] - at).total_seconds() for pk, at in started.items()
              if first_estimate[pk][0] < at]
    below = [load for load in after_first_minute
             if int(str(load["waiting"])) and int(str(load["with_estimate"])) / int(str(load["waiting"])) < 0.95]
    report = {
        "loads": len(loads), "loads_after_first_minute": len(after_first_minute), "loads_below_95": below,
        "share_with_estimate": {"min": min(shares, default=None), "median": statistics.median(shares) if shares
                                else None, "loads_at_or_above_95": sum(s >= 0.95 for s in shares)},
        "waiting_per_load_median": statistics.median([int(str(load["waiting"])) for load in loads]) if loads else 0,
        "jobs_estimated_then_started": len(errors),
        "start_error_s": {"median_abs": statistics.median(abs(e) for e in errors) if errors else None,
                          "p90_abs": sorted(abs(e) for e in errors)[int(0.9 * (len(errors) - 1))] if errors else None,
                          "median_signed": statistics.median(errors) if errors else None},
    }
    print(json.dumps(report, indent=None if args.json else 2))


if __name__ == "__main__":
    main()

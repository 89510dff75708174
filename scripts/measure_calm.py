"""Measure, on a console's database, how calm its rounds were: changes per job per hour of running, jobs changed in
two rounds running, moves between GPU types, and changes of nothing ("4 → 4" on the same type).

    VAR_DIR=<the console's> .venv/bin/python scripts/measure_calm.py [--json]

A change is a scheduler ``rescale`` event (each is a checkpoint-restart). Hours are wall-clock hours held by the
jobs that held GPUs (their allocations' intervals, the open ones up to the last round); under the demo's simulated
speed-up each wall hour is ``simulated_speedup`` hours of the trace, which it prints.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cluster_ops.settings")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    import django

    django.setup()
    print(json.dumps(measure()) if args.json else "\n".join(f"{k}: {v}" for k, v in measure().items()))


def measure() -> dict[str, object]:
    from django.db.models import Max, Min

    from scheduler.models import Allocation, RescaleEvent, RescaleKind, SchedulerSettings, SchedulingRound

    # Rounds only: a start between rounds changes no running job, and must not break two rounds running apart.
    rounds = list(SchedulingRound.objects.rounds_only().order_by("started_at").values_list("pk", "started_at"))
    if not rounds:
        return {"rounds": 0}
    last = rounds[-1][1]
    order = {pk: n for n, (pk, _) in enumerate(rounds)}
    # Allocations are one row per GPU; a job's GPUs of one start share its start: one interval per (job, start).
    intervals = {(job_id, began): ended or last for job_id, began, ended in
                 Allocation.objects.order_by("ended_at").values_list("job_id", "started_at", "ended_at")}
    held_seconds: dict[int, float] = defaultdict(float)
    for (job_id, began), ended in intervals.items():
        held_seconds[job_id] += max((ended - began).total_seconds(), 0.0)
    job_hours = sum(held_seconds.values()) / 3600.0
    changes = list(RescaleEvent.objects.filter(kind=RescaleKind.RESCALE, actor__isnull=True).values_list(
        "job_id", "round_id", "from_gpus", "to_gpus", "from_type", "to_type"))
    by_job: dict[int, list[int]] = defaultdict(list)
    for job_id, round_id, *_ in changes:
        if round_id in order:
            by_job[job_id].append(order[round_id])
    running_twice = sum(any(b - a == 1 for a, b in zip(sorted(r), sorted(r)[1:], strict=False))
                        for r in by_job.values())
    type_moves = sum(1 for *_, before, after in changes if before and after and before != after)
    nothing = sum(1 for _, _, n, m, before, after in changes if n == m and before == after)
    span = RescaleEvent.objects.aggregate(first=Min("at"), last=Max("at"))
    speedup = SchedulerSettings.objects.values_list("simulated_speedup", flat=True).first()
    return {
        "rounds": len(rounds), "wall_minutes": round((last - rounds[0][1]).total_seconds() / 60, 1),
        "jobs_that_ran": len(held_seconds), "job_hours_running": round(job_hours, 2),
        "changes": len(changes), "changes_per_job_hour": round(len(changes) / job_hours, 2) if job_hours else None,
        "jobs_changed_two_rounds_running": running_twice, "type_moves": type_moves,
        "changes_of_nothing": nothing, "simulated_speedup": speedup,
        "starts_between_rounds": RescaleEvent.objects.filter(round__between_rounds=True).count(),
        "events_from": str(span["first"]), "events_to": str(span["last"]),
    }


if __name__ == "__main__":
    main()

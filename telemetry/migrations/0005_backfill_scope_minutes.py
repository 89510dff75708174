"""Scope minutes for the minute rollups that existed before them: the cluster's and each node's last 48 hours
(what the Utilisation line reads minute by minute), summed from ``GpuMinute`` as ``rollups.write_scope_minutes``
does. A tenant's minutes cannot be rebuilt from per-GPU rows (they do not say whose job held the GPU): its line
starts with the first minutes rolled up after this migration, its hours come from job hours as before."""

from datetime import timedelta

from django.db import migrations
from django.db.models import Avg, Count, F, Max, Sum

WINDOW = timedelta(hours=48)


def backfill(apps, schema_editor):  # type: ignore[no-untyped-def]
    GpuMinute = apps.get_model("telemetry", "GpuMinute")
    ScopeMinute = apps.get_model("telemetry", "ScopeMinute")
    last = GpuMinute.objects.aggregate(at=Max("start"))["at"]
    if last is None:
        return
    minutes = GpuMinute.objects.filter(start__gt=last - WINDOW).order_by()
    done = set(ScopeMinute.objects.filter(start__gt=last - WINDOW).values_list("scope", "start"))
    sums = {"gpus": Count("id"), "gpu_util_avg": Avg("gpu_util_avg"), "power_w": Sum("power_w_avg"),
            "energy_j": Sum("energy_j"), "allocated_seconds": Sum("allocated_seconds"),
            "idle_allocated_seconds": Sum("idle_allocated_seconds")}
    rows = [ScopeMinute(scope="cluster", **row) for row in minutes.values("start").annotate(**sums)]
    for row in minutes.values("start", node=F("gpu__node_id")).annotate(**sums):
        values = dict(row)
        rows.append(ScopeMinute(scope=f"node:{values.pop('node')}", **values))
    ScopeMinute.objects.bulk_create([row for row in rows if (row.scope, row.start) not in done], batch_size=2000)


class Migration(migrations.Migration):

    dependencies = [
        ("telemetry", "0004_scope_minute"),
    ]

    operations = [
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]

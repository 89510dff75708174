"""The data migration that gives minute rollups from before scope minutes their cluster and node rows."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from scheduler.models import Node
from telemetry.models import ScopeMinute

from .readings_helpers import T0

pytestmark = pytest.mark.django_db(transaction=True)
BEFORE, AFTER = [("telemetry", "0004_scope_minute")], [("telemetry", "0005_backfill_scope_minutes")]


def test_the_last_48_hours_of_gpu_minutes_become_cluster_and_node_minutes(node: Node) -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    GpuMinute = executor.loader.project_state(BEFORE).apps.get_model("telemetry", "GpuMinute")
    gpus = list(node.gpus.order_by("index").values_list("pk", flat=True))
    for minute in (0, 1, 60 * 49):  # the last two within 48 h of the newest, the first 49 h before it
        for pk in gpus[:2]:
            GpuMinute.objects.create(gpu_id=pk, start=T0 - timedelta(minutes=minute), gpu_util_avg=50.0,
                                     allocated_seconds=60.0, energy_j=100.0)
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(AFTER)
    rows = {(row.scope, row.start): row for row in ScopeMinute.objects.all()}
    assert set(rows) == {(scope, T0 - timedelta(minutes=m)) for scope in ("cluster", f"node:{node.pk}")
                         for m in (0, 1)}
    cluster = rows[("cluster", T0)]
    assert (cluster.gpus, cluster.allocated_seconds, cluster.energy_j, cluster.gpu_util_avg) == (2, 120, 200, 50)

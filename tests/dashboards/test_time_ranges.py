"""Pages open on the data there is: a young cluster's default range starts at its first data, and every range
offered says how much history exists."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from cluster_ops.dashboards import common
from scheduler.models import Allocation, Job, Node
from telemetry.models import GpuMinute

pytestmark = pytest.mark.django_db


def test_a_cluster_without_data_opens_on_the_default_day() -> None:
    options, default = common.range_choices(timezone.now())
    assert default == common.DEFAULT_RANGE
    assert common.SINCE_FIRST_DATA not in [option["value"] for option in options]


def test_a_cluster_an_hour_old_opens_on_all_its_data(job: Job, node: Node) -> None:
    now = timezone.now()
    Allocation.objects.create(job=job, gpu=node.gpus.first(), started_at=now - timedelta(minutes=47))

    options, default = common.range_choices(now)

    assert default == common.SINCE_FIRST_DATA
    labels = {option["value"]: option["label"] for option in options}
    assert labels[common.SINCE_FIRST_DATA] == "since the first data (47 min)"
    assert labels["24h"] == "last 24 hours (data for 47 min)" and labels["1h"] == "last hour (data for 47 min)"
    assert common.time_range(default, now) == timedelta(minutes=47)  # the page's window: its data, no empty day


def test_a_cluster_with_days_of_history_opens_on_the_last_day(node: Node) -> None:
    now = timezone.now()
    GpuMinute.objects.create(gpu=node.gpus.first(), start=now - timedelta(days=3))

    options, default = common.range_choices(now)

    assert default == "24h"
    assert {option["value"]: option["label"] for option in options}["7d"] == "last 7 days (data for 3 days)"


def test_a_crafted_range_is_the_default() -> None:
    assert common.time_range("'; drop table", timezone.now()) == timedelta(hours=24)

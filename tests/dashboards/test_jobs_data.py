"""Jobs page data: completion and queueing times, the allocation timeline, goodput vs GPUs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User

from cluster_ops.dashboards.jobs_data import (
    Segment,
    completion_times,
    goodput,
    gpu_segments,
    job_choices,
    timeline,
)
from scheduler.core.fitted_profiles import FITTED_PROFILES
from scheduler.live.refit import model_as_json
from scheduler.models import Job

from .history import History

pytestmark = pytest.mark.django_db
DAY = timedelta(days=1)


def test_completion_and_queueing_times_of_recent_jobs(history: History, staff: User) -> None:
    times = completion_times(staff, history.now - DAY, history.now)
    expected = sorted((j.finished_at - j.submitted_at).total_seconds() for j in history.finished)  # type: ignore[operator]
    assert times.jct.values == expected
    assert times.jct.p50 is not None and times.jct.p99 is not None and times.jct.mean is not None
    # Queueing: every job first started in the day, finished and running alike.
    assert len(times.queueing.values) == len(history.finished) + len(history.running)
    assert times.queueing.values[0] == pytest.approx(300)  # the running jobs waited 5 minutes


def test_completion_times_filter_by_tenant_and_scope_by_user(history: History, staff: User,
                                                              vision_user: User) -> None:
    assert len(completion_times(staff, history.now - DAY, history.now, "language").jct.values) == 6
    assert len(completion_times(vision_user, history.now - DAY, history.now).jct.values) == 6
    assert completion_times(vision_user, history.now - DAY, history.now, "language").jct.values == []
    assert completion_times(staff, history.now - timedelta(minutes=1), history.now).jct.mean is None


def test_gpu_segments_turn_per_gpu_holdings_into_counts() -> None:
    t = [datetime(2026, 1, 1, h, tzinfo=UTC) for h in range(5)]
    segments = gpu_segments(7, [(t[0], t[2]), (t[1], t[2]), (t[2], t[4]), (t[2], t[4]), (t[3], t[3])])
    assert segments == [Segment(7, t[0], t[1], 1), Segment(7, t[1], t[4], 2)]


def test_timeline_has_segments_and_events_with_reasons(history: History, staff: User, vision_user: User) -> None:
    line = timeline(staff, history.now - DAY, history.now)
    assert set(line.rows) == {j.pk for j in history.finished + history.running}
    # Each row names the GPU types the job held in the range (this history has one that held both).
    assert {label.rsplit(" on ", 1)[1].split(" (")[0] for label in line.rows.values()} == {"a100", "v100",
                                                                                          "a100/v100"}
    first = history.finished[0]
    mine = [s for s in line.segments if s.job_id == first.pk]
    assert [s.gpus for s in mine] == [1, 2]
    reasons = [m.reason for m in line.markers if m.job_id == first.pk]
    assert reasons == ["started: first in arrival order", "resized 1→2 GPUs: spare GPUs", "finished: all work done"]
    running = [s for s in line.segments if s.job_id == history.running[0].pk]
    assert running[-1].end == history.now and running[-1].gpus == 6
    assert {j.tenant.name for j in Job.objects.filter(pk__in=timeline(vision_user, history.now - DAY,
                                                                     history.now).rows)} == {"vision"}
    assert timeline(staff, history.now - DAY, history.now, limit=3).left_out == len(line.rows) - 3


def test_goodput_from_the_profile_and_from_the_refitted_model(history: History, staff: User,
                                                               language_user: User) -> None:
    job = history.running[0]
    curves = goodput(staff, job.pk, history.now)
    assert curves is not None and curves.unit == "iterations/s"
    # One curve per GPU type of the cluster, fastest first: speed is priced on the type a job would hold.
    assert [c.label for c in curves.curves] == ["profile cifar10 on a100", "profile cifar10 on v100"]
    speeds, on_v100 = curves.curves[0].speeds, curves.curves[1].speeds
    assert len(speeds) == 9 and speeds[0] == 0 and speeds[1] > 0 and speeds[6] > speeds[1]
    assert speeds[1] > on_v100[1] > 0
    assert curves.gpus_now == 6
    slower = FITTED_PROFILES["cifar10"]["a100"]
    job.fitted_model = model_as_json("a100", slower, reports=5)
    job.save()
    refitted = goodput(staff, job.pk, history.now)
    assert refitted is not None and [c.label for c in refitted.curves][2] == "refitted from 5 reports"
    assert goodput(language_user, job.pk, history.now) is None  # another tenant's job


def test_a_rigid_job_without_a_profile_gets_a_linear_curve(history: History, staff: User) -> None:
    rigid = Job.objects.create(tenant=history.vision, name="trace-job", workload_profile="", total_work=600,
                               min_gpus=2, max_gpus=2, submitted_at=history.now)
    curves = goodput(staff, rigid.pk, history.now)
    assert curves is not None and curves.unit == "× speed at min GPUs"
    assert curves.curves[0].speeds[:5] == [0, 0, 1, 1.5, 2]


def test_job_choices_put_running_jobs_first(history: History, vision_user: User) -> None:
    choices = job_choices(vision_user)
    assert choices[0][0] == history.running[0].pk
    assert all("(vision," in label for _, label in choices)


def test_the_gantt_colours_each_bar_itself_by_its_gpus(history: History, staff: User) -> None:
    """plotly.js 4 logged "Invalid color specifier" once per bar (~130 a load) for bars coloured by number."""
    from cluster_ops.dashboards.jobs import gantt_figure

    line = timeline(staff, history.now - DAY, history.now)
    bars = gantt_figure(line).data[0]
    assert all(isinstance(colour, str) and colour.startswith("rgb(") for colour in bars.marker.color)
    darkest = max(range(len(line.segments)), key=lambda i: line.segments[i].gpus)
    assert bars.marker.color[darkest] == "rgb(8, 48, 107)" and bars.marker.showscale  # the scale's top, drawn

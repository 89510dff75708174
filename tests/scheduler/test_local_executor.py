"""The local executor without a broker: what it sends where, what it acknowledges, what it counts."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from celery import Celery

from scheduler import inventory
from scheduler.backends import GpuPlace, Launch, files
from scheduler.backends.local.executor import APPLY_TASK, POLL_TASK, LocalExecutor, from_message, to_message
from scheduler.jobs import verbs
from scheduler.live import round as rounds
from scheduler.models import Allocation, Gpu, Job, JobState, Node

pytestmark = pytest.mark.django_db


class FakeApp:
    """Stands in for the Celery app: records what would be published."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, list[Any], str]] = []

    def send_task(self, name: str, args: list[Any], queue: str, **_: Any) -> None:
        self.sent.append((name, args, queue))


@pytest.fixture
def app_with_broker_down() -> Iterator[Celery]:
    """A real Celery app whose Redis refuses connections (nothing listens on port 1)."""
    app = Celery("broker_down", set_as_current=False)
    app.conf.update(broker_url="redis://127.0.0.1:1/0", result_backend="redis://127.0.0.1:1/0")
    yield app
    app.close()


@pytest.fixture
def node2(db: None) -> Node:
    specs = [inventory.GpuSpec(i, f"GPU-node2-{i}", "NVIDIA A100-SXM4-80GB", 81920, 400) for i in range(4)]
    return inventory.register_node("node2", specs)


def hold(job: Job, gpus: list[Gpu], since, ended=None) -> None:
    for gpu in gpus:
        Allocation.objects.create(job=job, gpu=gpu, started_at=since, ended_at=ended)


def test_a_launch_travels_as_json_and_back() -> None:
    launch = Launch(3, 5, (GpuPlace("a", 0, "u0"), GpuPlace("b", 2, "u2")), restart=True)
    assert from_message(to_message(launch)) == launch


def test_a_launch_goes_to_its_new_nodes_and_the_nodes_it_left_then_is_acknowledged(job, node, node2, now) -> None:
    hold(job, list(node.gpus.all()[:2]), now - timedelta(hours=1), ended=now)  # it ran on node1
    hold(job, list(node2.gpus.all()[:1]), now)  # it moves to node2
    Job.objects.filter(pk=job.pk).update(generation=2, launched_generation=1, state=JobState.RESCALING)
    launch = rounds.unlaunched()[0]
    app = FakeApp()
    LocalExecutor(app=app).launch([launch], now)  # type: ignore[arg-type]
    message = [to_message(launch)]
    assert app.sent == [(APPLY_TASK, message, "node.node1"), (APPLY_TASK, message, "node.node2")]
    assert launch.hosts == ["node2"] and Job.objects.get(pk=job.pk).launched_generation == 2
    assert rounds.unlaunched() == []


def test_with_the_broker_down_nothing_is_acknowledged_and_the_next_round_resends(
    job, node, now, caplog, app_with_broker_down: Celery
) -> None:
    hold(job, list(node.gpus.all()[:1]), now)
    Job.objects.filter(pk=job.pk).update(generation=1, state=JobState.RUNNING)
    began = time.monotonic()
    LocalExecutor(app=app_with_broker_down).launch(rounds.unlaunched(), now)
    assert time.monotonic() - began < 10  # a few quick retries, not the result backend's 20 s
    assert Job.objects.get(pk=job.pk).launched_generation == 0
    assert "cannot send scheduler.node_apply to node.node1" in caplog.text
    assert [launch.job_id for launch in rounds.unlaunched()] == [job.pk]


def test_observe_counts_gpu_time_polls_busy_nodes_and_drops_jobs_that_ended(tenant, job, node, node2, now) -> None:
    hold(job, list(node.gpus.all()[:2]), now - timedelta(seconds=30))
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, accounted_at=now - timedelta(seconds=30),
                                         progress=250.0)
    done = verbs.submit_job(tenant=tenant, name="done", workload_profile="cifar10", total_work=10.0)
    hold(done, list(node2.gpus.all()[:1]), now - timedelta(seconds=30))
    Job.objects.filter(pk=done.pk).update(state=JobState.RUNNING, accounted_at=now - timedelta(seconds=30))
    waiting = verbs.submit_job(tenant=tenant, name="waiting", workload_profile="cifar10", total_work=10.0)
    snap = rounds.build_snapshot(now).snap
    Job.objects.filter(pk=done.pk).update(state=JobState.SUCCEEDED)  # an agent recorded it meanwhile

    app = FakeApp()
    observed = LocalExecutor(app=app).observe(snap, now)  # type: ignore[arg-type]

    assert sorted(info.id for info in observed.jobs) == sorted([str(job.pk), str(waiting.pk)])
    ours = next(info for info in observed.jobs if info.id == str(job.pk))
    assert (ours.progress, ours.attained_gpu_seconds) == (250.0, pytest.approx(60.0))
    job.refresh_from_db()
    assert (job.attained_gpu_seconds, job.accounted_at) == (pytest.approx(60.0), now)
    assert app.sent == [(POLL_TASK, [], "node.node1")]


def test_the_job_admin_page_shows_the_end_of_each_rank_log(settings, tmp_path, job, operator_client) -> None:
    settings.JOB_DIR = tmp_path
    for generation, rank, text in [(1, 0, "first try"), (2, 0, "step=10 loss=0.5\n<oops>"), (2, 1, "rank one")]:
        path = files.log_path(job.pk, generation, rank)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    page = operator_client.get(f"/admin/scheduler/job/{job.pk}/change/")
    html = page.content.decode()
    assert page.status_code == 200
    assert html.index("gen2-rank0.log") < html.index("gen2-rank1.log") < html.index("gen1-rank0.log")
    assert "step=10 loss=0.5\n&lt;oops&gt;" in html and "first try" in html  # escaped, newest first

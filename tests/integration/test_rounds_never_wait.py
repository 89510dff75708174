"""What-ifs that never end filled the worker's two slots and live rounds stopped.

Here a real Redis, the Procfile's round worker (``-Q rounds``), its background worker (``-Q background``, two
processes) and beat run two what-ifs that would take hours (a large elastic workload, 1 s rounds) beside live rounds
every 2 s. Rounds keep their interval throughout; the what-ifs end at their soft time limit, failed with the
reason, never "running" for ever.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from django.utils import timezone

from scheduler import inventory, whatif
from scheduler.jobs import verbs
from scheduler.live.config import sync_round_schedule, update_settings
from scheduler.models import RoundStatus, SchedulingRound, Tenant, WhatIfRun, WhatIfStatus
from scheduler.sim.runner import Scenario

from .conftest import free_port, wait_until
from .processes import RedisServer, celery_beat, celery_worker, service_env

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

ROUND_SECONDS = 2
TIME_LIMIT = 25  # WHATIF_TIME_LIMIT_SECONDS of the workers
WATCH_SECONDS = 20


def endless_trace(path: Path, jobs: int = 20_000) -> None:
    """Far more simulation than the time limit allows: 20,000 elastic BERT jobs, one a second."""
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "submit_time", "min_gpus", "max_gpus", "profile", "total_work"])
        writer.writerows([f"j{n}", n, 1, 8, "bert", 5e5] for n in range(jobs))


def test_live_rounds_keep_their_interval_while_what_ifs_fill_the_background_worker(tmp_path: Path, settings) -> None:
    traces = tmp_path / "traces"
    traces.mkdir()
    endless_trace(traces / "endless.csv")
    settings.TRACES_DIR = traces
    inventory.register_node("a100-00", [inventory.GpuSpec(i, f"GPU-a-{i}", "NVIDIA A100-SXM4-80GB", 81920, 400)
                                       for i in range(8)])
    tenant = Tenant.objects.create(name="vision", gpu_quota=8)
    verbs.submit_job(tenant=tenant, name="live", workload_profile="bert", total_work=1e9, min_gpus=1, max_gpus=4)
    update_settings(policy="tiresias", round_seconds=ROUND_SECONDS, executor="simulated")
    sync_round_schedule()
    scenario = Scenario(trace="endless.csv", policy="pollux", round_seconds=1.0, nodes=16, gpus_per_node=4)
    runs = [whatif.create_run(scenario) for _ in range(2)]

    redis = RedisServer(free_port(), tmp_path)
    redis.start()
    env = service_env(tmp_path, redis.url, TRACES_DIR=str(traces), WHATIF_TIME_LIMIT_SECONDS=str(TIME_LIMIT))
    stack = [celery_worker("rounds", env, tmp_path, queues="rounds", concurrency=1, pool="prefork"),
             celery_worker("background", env, tmp_path, queues="background", pool="prefork"),
             celery_beat(env, tmp_path)]
    try:
        from celery import Celery

        app = Celery("sender", set_as_current=False)
        app.config_from_object("django.conf:settings", namespace="CELERY")
        app.conf.update(broker_url=redis.url, result_backend=redis.url)
        for run in runs:  # as a web process with the workers' WHATIF_TIME_LIMIT_SECONDS sends them (the sender's
            # registered task puts its limits in the message, and this test process's are the default 1,800 s)
            app.send_task(whatif.RUN_TASK, args=(run.pk,), soft_time_limit=TIME_LIMIT, time_limit=TIME_LIMIT + 30)
        tails = "\n".join(service.tail(2000) for service in stack)
        assert wait_until(lambda: WhatIfRun.objects.filter(status=WhatIfStatus.RUNNING).count() == 2, 60), tails
        busy_since = timezone.now()
        assert wait_until(lambda: (timezone.now() - busy_since).total_seconds() > WATCH_SECONDS, WATCH_SECONDS + 5)
        assert WhatIfRun.objects.filter(status=WhatIfStatus.RUNNING).count() == 2  # both slots still busy
        starts = sorted(SchedulingRound.objects.filter(status=RoundStatus.OK, started_at__gte=busy_since)
                        .values_list("started_at", flat=True))
        gaps = [(later - earlier).total_seconds() for earlier, later in zip(starts, starts[1:], strict=False)]
        assert len(starts) >= WATCH_SECONDS / ROUND_SECONDS - 3, (len(starts), tails)
        assert max(gaps) < 3 * ROUND_SECONDS, gaps

        assert wait_until(lambda: not WhatIfRun.objects.exclude(status=WhatIfStatus.FAILED).exists(),
                          seconds=TIME_LIMIT + 30), "\n".join(service.tail(2000) for service in stack)
        assert all("time limit" in run.error for run in WhatIfRun.objects.all())
    finally:
        for service in stack:
            service.stop()
        redis.stop()

"""`make run` on a Kubernetes cluster: the console set up from the cluster (``seed_demo`` with
``CLUSTER_BACKEND=kubernetes``) — against the lab's real API server."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django_celery_beat.models import PeriodicTask

from scheduler import lab_examples
from scheduler.live.config import scheduler_settings
from scheduler.models import ExecutorKind, Gpu, Job, Tenant

from .conftest import RunningLab

pytestmark = [pytest.mark.needs("kubernetes"), pytest.mark.timeout(120)]


def test_the_console_is_set_up_from_the_cluster_with_the_labs_example_jobs(
        kubernetes: RunningLab, settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.CLUSTER_BACKEND, settings.KUBERNETES_DEMO_JOBS, settings.KUBERNETES_MODE = "kubernetes", 6, "schedule"
    monkeypatch.setattr(lab_examples, "have_torch", lambda: True)  # the jobs only wait here: no round runs
    out = StringIO()

    call_command("seed_demo", stdout=out)

    assert "Kubernetes cluster: 4 node(s), 3 tenant(s) added, 6 example job(s)" in out.getvalue()
    assert sorted(Tenant.objects.values_list("name", flat=True)) == ["nlp", "research", "vision"]  # no system one
    assert Gpu.objects.filter(uuid__startswith="k8s-").count() == 16
    assert scheduler_settings().executor == ExecutorKind.KUBERNETES
    assert sorted(Job.objects.values_list("min_gpus", flat=True)) == [4, 4, 4, 4]  # a node each, filling them
    held = json.loads(PeriodicTask.objects.get(name=lab_examples.LATE_SCHEDULE_NAME).kwargs)["examples"]
    assert [example["min_gpus"] for example in held] == [1, 1]  # a minute later
    call_command("seed_demo", stdout=StringIO())
    assert Job.objects.count() == 4  # once


def test_a_cluster_that_does_not_answer_stops_make_run_naming_the_backend(
        kubernetes: RunningLab, settings: Any, tmp_path: Path) -> None:
    config = json.loads(Path(settings.KUBECONFIG).read_text())
    config["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:9"  # nothing listens there
    settings.KUBECONFIG = str(tmp_path / "away.kubeconfig")
    Path(settings.KUBECONFIG).write_text(json.dumps(config))
    settings.CLUSTER_BACKEND = "kubernetes"

    with pytest.raises(CommandError, match="CLUSTER_BACKEND=kubernetes: .*no answer to list nodes"):
        call_command("seed_demo", stdout=StringIO())
    assert not Tenant.objects.exists() and not Gpu.objects.exists()

"""The Prometheus reader against hostile or broken answers (an HTTP server of the test's making plays Prometheus's
API here; the real Prometheus is in tests/integration/test_prometheus_source.py): every failure is a
``PrometheusUnavailable`` that names what failed and never echoes the answer, and no value that is not a reading
is stored."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from scheduler import inventory
from scheduler.jobs import verbs
from scheduler.models import Job
from telemetry import prometheus
from telemetry.models import GpuSample, TelemetrySource

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


class Answer:
    status = 200
    body = b""
    seen_headers: dict[str, str] = {}


@pytest.fixture
def fake_api(settings: Any) -> Iterator[type[Answer]]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            Answer.seen_headers = dict(self.headers)
            self.send_response(Answer.status)
            self.send_header("Content-Length", str(len(Answer.body)))
            self.end_headers()
            self.wfile.write(Answer.body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    settings.PROMETHEUS_URL = f"http://127.0.0.1:{server.server_address[1]}"
    settings.PROMETHEUS_TOKEN = "s3cret-token"
    try:
        yield Answer
    finally:
        server.shutdown()
        server.server_close()


def matrix(*series: dict[str, Any]) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": list(series)}}).encode()


def series(name: str, values: list[list[Any]], **labels: str) -> dict[str, Any]:
    return {"metric": {"__name__": name, "Hostname": "n1", "gpu": "0", "UUID": "GPU-n1-0", **labels},
            "values": values}


@pytest.mark.parametrize(("status", "body", "says"), [
    (200, b"<html>not json, with a secret: hunter2</html>", "not a query result"),
    (200, json.dumps({"status": "error", "error": "bad_data"}).encode(), "not a query result"),
    (200, json.dumps({"status": "success", "data": {"result": "x"}}).encode(), "not a query result"),
    (401, b"hunter2", "refused the credentials"),
    (503, b"hunter2", "HTTP 503"),
])
def test_a_broken_answer_is_named_and_never_echoed(fake_api: type[Answer], status: int, body: bytes,
                                                   says: str) -> None:
    fake_api.status, fake_api.body = status, body
    with pytest.raises(prometheus.PrometheusUnavailable) as failure:
        prometheus.read_pass(NOW)
    assert says in str(failure.value) and "hunter2" not in str(failure.value)
    assert fake_api.seen_headers.get("Authorization") == "Bearer s3cret-token"


def test_values_that_are_no_readings_are_dropped(fake_api: type[Answer]) -> None:
    inventory.register_node("n1", [inventory.GpuSpec(0, "GPU-n1-0", "NVIDIA A100-SXM4-80GB", 81920, 400)])
    stamp = NOW.timestamp() - 5
    fake_api.status, fake_api.body = 200, matrix(
        series("DCGM_FI_DEV_GPU_UTIL",
               [[stamp - 2, "NaN"], [stamp - 1, "-3"], [stamp, "250"], ["x", "1"], [stamp + 1, "40"]]),
        series("DCGM_FI_DEV_POWER_USAGE", [[stamp + 1, "+Inf"]]),
        series("DCGM_FI_DEV_FB_USED", [[1e300, "5"]]),
        series("NOT_A_DCGM_SERIES", [[stamp + 1, "1"]]),
    )

    found = prometheus.collect(NOW)

    assert found.ok
    samples = list(GpuSample.objects.values_list("gpu_util", "power_w", "mem_used_mib"))
    assert samples == [(40.0, None, None)]  # NaN, negative, over 100 %, a bad time, Inf and year 10^292: no readings


def test_an_unset_url_is_a_failure_not_a_crash(settings: Any) -> None:
    settings.PROMETHEUS_URL = ""
    status = prometheus.collect(NOW)
    assert not status.ok and status.error == "PROMETHEUS_URL is not set"
    assert TelemetrySource.objects.get().failing_since == NOW


def test_a_sample_labelled_with_a_slurm_job_belongs_to_that_job(fake_api: type[Answer], tenant: Any) -> None:
    inventory.register_node("n1", [inventory.GpuSpec(0, "GPU-n1-0", "NVIDIA A100-SXM4-80GB", 81920, 400)])
    job = verbs.submit_job(tenant=tenant, name="sbatch", workload_profile="cifar10", total_work=1)
    Job.objects.filter(pk=job.pk).update(cluster_job_id="4242")  # no allocation of the console's: Slurm's own job
    fake_api.status, fake_api.body = 200, matrix(
        series("DCGM_FI_DEV_GPU_UTIL", [[NOW.timestamp() - 5, "90"]], hpc_job="4242"))

    prometheus.collect(NOW)

    assert list(GpuSample.objects.values_list("job_id", "gpu_util")) == [(job.pk, 90.0)]


def on_gpu(index: int) -> dict[str, str]:
    return {"Hostname": "gpu01", "gpu": str(index), "UUID": f"k8s-gpu01-{index}"}


def test_a_sample_labelled_with_a_kubernetes_pod_belongs_to_the_job_of_that_pod(fake_api: type[Answer],
                                                                                 tenant: Any) -> None:
    inventory.register_node("gpu01", [inventory.GpuSpec(i, f"k8s-gpu01-{i}", "NVIDIA-A100-SXM4-40GB", 40960, 400)
                                      for i in range(3)])
    mirrored = {}
    for name in ("train", "train-big", "lone-pod"):  # as the Kubernetes observer mirrors them: a Job's uid each
        job = verbs.submit_job(tenant=tenant, name=name, workload_profile="cifar10", total_work=1)
        Job.objects.filter(pk=job.pk).update(cluster_job_id=f"uid-{name}")
        mirrored[name] = job.pk
    namespace = tenant.name
    fake_api.status, fake_api.body = 200, matrix(
        series("DCGM_FI_DEV_GPU_UTIL", [[NOW.timestamp() - 5, "91"]], **on_gpu(0), namespace=namespace,
               pod="train-big-0-x7k2p"),  # an Indexed Job's pod: the longest Job name that prefixes it
        series("DCGM_FI_DEV_GPU_UTIL", [[NOW.timestamp() - 5, "92"]], **on_gpu(1), namespace=namespace,
               pod="lone-pod"),
        series("DCGM_FI_DEV_GPU_UTIL", [[NOW.timestamp() - 5, "93"]], **on_gpu(2), namespace="elsewhere",
               pod="train-abcde"))  # another namespace: not this tenant's job

    prometheus.collect(NOW)

    assert sorted(GpuSample.objects.values_list("gpu_util", "job_id")) == [
        (91.0, mirrored["train-big"]), (92.0, mirrored["lone-pod"]), (93.0, None)]

"""Telemetry from a real Prometheus (Debian's) scraping fixture exporters in dcgm-exporter's format: GPUs matched by
UUID or by hostname and index (either label spelling), the engine-active fraction and the utilisation fallback,
a counter reset, a lost GPU, an XID, an unknown GPU, a stale node and a Prometheus outage — and minute rollups equal
to the exporters' values."""

from __future__ import annotations

import io
import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone

from cluster_ops.dashboards.overview_data import source_alerts
from scheduler import inventory
from scheduler.models import Gpu, GpuHealth
from telemetry import prometheus
from telemetry.exporter import render
from telemetry.models import GpuEvent, GpuMinute, GpuSample, TelemetrySource
from telemetry.readings import EventKind
from telemetry.rollups import roll_up_minutes
from tests.dcgm_exporter import FixtureExporter, FixtureGpu, prometheus_config

from .conftest import free_port, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.needs("alerting"), pytest.mark.timeout(180)]


@dataclass
class Lab:
    url: str
    server: subprocess.Popen  # type: ignore[type-arg]
    one: FixtureExporter  # gpu01: labels "Hostname", UUIDs the inventory knows
    two: FixtureExporter  # gpu02.cluster.local: labels "hostname", UUIDs the inventory does not know (Slurm's rows)


@pytest.fixture
def lab(tmp_path: Path, settings: Any, db: None) -> Iterator[Lab]:
    for host in ("gpu01", "gpu02"):
        inventory.register_node(host, [inventory.GpuSpec(i, f"{'GPU-aaaa' if host == 'gpu01' else 'slurm-gpu02'}-{i}",
                                                       "NVIDIA A100-SXM4-80GB", 81920, 400) for i in range(2)])
    one = FixtureExporter("gpu01", [FixtureGpu(0, "GPU-aaaa-0", engine_active=0.5),
                                    FixtureGpu(1, "GPU-aaaa-1", engine_active=0.25, power_w=300.0)])
    two = FixtureExporter("gpu02.cluster.local", [FixtureGpu(0, "GPU-beef-0", engine_active=None, gpu_util=80.0),
                                                  FixtureGpu(1, "GPU-beef-1", engine_active=None, gpu_util=0.0),
                                                  FixtureGpu(7, "GPU-beef-7")], label="hostname")
    config = tmp_path / "prometheus.yml"
    config.write_text(json.dumps(prometheus_config([one.target, two.target])))
    port = free_port()
    server = subprocess.Popen(
        ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=(tmp_path / "prometheus.log").open("w"))
    settings.PROMETHEUS_URL, settings.TELEMETRY_SOURCE = f"http://127.0.0.1:{port}", "prometheus"
    try:
        yield Lab(f"http://127.0.0.1:{port}", server, one, two)
    finally:
        server.terminate()
        server.wait(timeout=20)
        one.stop()
        for exporter in (two,):
            try:
                exporter.stop()
            except OSError:
                pass


def scraped(lab: Lab, seconds: float = 4.0) -> None:
    """Wait until Prometheus holds ``seconds`` of both exporters' samples."""
    def enough() -> bool:
        try:
            found = prometheus.read_pass(timezone.now())
        except prometheus.PrometheusUnavailable:
            return False
        times = [r.at for r in found.readings]
        return len(found.matched) == 4 and bool(times) and (max(times) - min(times)).total_seconds() >= seconds
    assert wait_until(enough, 60), (Path(lab.url).name, "no samples scraped")


def gpu(host: str, index: int) -> Gpu:
    return Gpu.objects.get(node__hostname=host, index=index)


def test_a_pass_matches_stores_and_rolls_up_the_exporters_values(lab: Lab) -> None:
    scraped(lab)

    status = prometheus.collect()

    assert status.ok and status.gpus_matched == 4
    assert status.unmatched == ["gpu02.cluster.local/gpu7"]  # an unknown GPU: listed, never stored
    utils = {(s.gpu.node.hostname, s.gpu.index): s.gpu_util for s in GpuSample.objects.select_related("gpu__node")}
    # engine-active fraction as %, and DCGM_FI_DEV_GPU_UTIL where the exporter has no profiling series
    assert utils == {("gpu01", 0): 50.0, ("gpu01", 1): 25.0, ("gpu02", 0): 80.0, ("gpu02", 1): 0.0}
    sample = GpuSample.objects.filter(gpu=gpu("gpu01", 1)).first()
    assert sample is not None and (sample.power_w, sample.mem_used_mib, sample.mem_total_mib) == (300, 1000, 80000)
    again = prometheus.collect()
    assert again.samples < status.samples  # only what is new since: nothing stored twice
    assert GpuSample.objects.values("gpu", "at").distinct().count() == GpuSample.objects.count()

    first = GpuSample.objects.order_by("at").first()
    assert first is not None
    roll_up_minutes(timezone.now() + timedelta(minutes=2))
    minutes = GpuMinute.objects.filter(gpu=gpu("gpu01", 1))
    assert minutes and all(m.gpu_util_avg == 25.0 and m.power_w_avg == 300.0 for m in minutes)
    assert all(m.gpu_util_avg == 80.0 for m in GpuMinute.objects.filter(gpu=gpu("gpu02", 0)))
    energy = sum(m.energy_j for m in minutes)
    covered = (GpuSample.objects.filter(gpu=gpu("gpu01", 1)).order_by("-at").first().at  # type: ignore[union-attr]
               - GpuSample.objects.filter(gpu=gpu("gpu01", 1)).order_by("at").first().at).total_seconds()  # type: ignore[union-attr]
    assert energy == pytest.approx(300.0 * covered, rel=0.05)  # the counter's deltas: 300 W over the time covered


def test_a_counter_reset_a_lost_gpu_an_xid_and_a_stale_node(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    scraped(lab)
    prometheus.collect()
    lab.one.gpus[1].restart_counter()
    lab.one.gpus[0].present = False  # gpu01/0 falls off the bus; gpu01/1 goes on
    lab.two.gpus[1].xid = 79
    monkeypatch.setattr(prometheus, "STALE_SECONDS", 3.0)
    wait_until(lambda: False, 5)  # five scrapes

    prometheus.collect()

    assert gpu("gpu01", 0).health == GpuHealth.LOST
    assert GpuEvent.objects.filter(gpu=gpu("gpu01", 0), kind=EventKind.LOST).exists()
    assert list(GpuEvent.objects.filter(kind=EventKind.XID).values_list("code", flat=True)) == [79]
    roll_up_minutes(timezone.now() + timedelta(minutes=2))
    assert all(m.energy_j >= 0 for m in GpuMinute.objects.filter(gpu=gpu("gpu01", 1)))  # a reset is no negative energy

    lab.one.gpus[0].present = True  # it answers again
    lab.two.stop()  # gpu02's exporter goes away: its node is stale, its GPUs are not lost
    wait_until(lambda: False, 5)
    status = prometheus.collect()

    assert status.stale == ["gpu02"]
    assert gpu("gpu02", 0).health == GpuHealth.OK
    assert gpu("gpu01", 0).health == GpuHealth.DEGRADED  # back, suspect until an operator says otherwise
    assert list(GpuEvent.objects.filter(kind=EventKind.XID).values_list("code", flat=True)) == [79]  # once


def test_a_prometheus_outage_is_shown_and_stores_nothing(lab: Lab) -> None:
    scraped(lab, seconds=1.0)
    lab.server.terminate()
    lab.server.wait(timeout=20)
    before = GpuSample.objects.count()

    status = prometheus.collect()

    assert not status.ok and "cannot reach Prometheus" in status.error and status.failing_since is not None
    assert GpuSample.objects.count() == before
    assert TelemetrySource.objects.get(source="prometheus").error == status.error
    [alert] = source_alerts(timezone.now())  # shown on the Overview page, never read as idle GPUs
    assert alert.severity == "danger" and "cannot reach Prometheus" in alert.text
    assert 'cluster_ops_telemetry_source_up{source="prometheus"} 0.0' in render(timezone.now()).decode()


def test_telemetry_check_prints_the_wiring(lab: Lab) -> None:
    scraped(lab, seconds=1.0)
    out = io.StringIO()

    call_command("telemetry_check", "--json", stdout=out)

    found = json.loads(out.getvalue())
    assert found["source"] == "prometheus" and found["gpus_matched"] == 4
    assert found["gpus_unmatched"] == ["gpu02.cluster.local/gpu7"]
    by_gpu = {(s["hostname"], s["gpu_index"]): s for s in found["samples"]}
    assert by_gpu[("gpu01", 0)]["utilisation"] == 0.5 and by_gpu[("gpu02", 0)]["utilisation"] == 0.8
    assert by_gpu[("gpu01", 1)]["power_w"] == 300.0 and by_gpu[("gpu01", 1)]["memory_used_mib"] == 1000.0
    assert not GpuSample.objects.exists()  # a check stores nothing

"""Benchmark of the Prometheus telemetry source: how fast one pass reads, matches and stores dcgm-exporter series.

    .venv/bin/python scripts/bench_prometheus_source.py [--gpus 256] [--seconds 20] [--json]

Starts fixture exporters (``tests/dcgm_exporter.py``, 8 GPUs a node) and Debian's Prometheus scraping them every
second, waits ``--seconds`` of samples, then times ``telemetry.prometheus.collect`` in a throwaway database: the
first pass (everything in the window is new) and a steady pass right after (the window read again, only what is new
stored). Prints series × GPU samples per second. Needs ``prometheus`` on the PATH (``make test`` installs it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cluster_ops.settings")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus", type=int, default=256, help="in nodes of 8 (default 256)")
    parser.add_argument("--seconds", type=int, default=20, help="seconds of samples before the first pass")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if shutil.which("prometheus") is None:
        sys.exit("prometheus is not installed: sudo apt-get install prometheus (or make test, which installs it)")
    import django

    django.setup()
    from django.conf import settings
    from django.utils import timezone

    from cluster_ops.common.benchdb import throwaway_database
    from scheduler import inventory
    from telemetry import prometheus
    from tests.dcgm_exporter import FixtureExporter, FixtureGpu, prometheus_config

    nodes = max(1, args.gpus // 8)
    exporters = [FixtureExporter(f"node-{n:04d}", [FixtureGpu(i, f"GPU-{n:04d}-{i}") for i in range(8)])
                 for n in range(nodes)]
    work = Path(tempfile.mkdtemp(prefix="bench-prometheus-"))
    (work / "prometheus.yml").write_text(json.dumps(prometheus_config([e.target for e in exporters])))
    port = free_port()
    server = subprocess.Popen(["prometheus", f"--config.file={work / 'prometheus.yml'}",
                               f"--storage.tsdb.path={work / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    settings.PROMETHEUS_URL = f"http://127.0.0.1:{port}"
    try:
        time.sleep(args.seconds + 2)
        with throwaway_database("bench_prometheus"):
            for exporter in exporters:
                inventory.register_node(exporter.hostname, [
                    inventory.GpuSpec(g.index, g.uuid, "NVIDIA A100-SXM4-80GB", 81920, 400) for g in exporter.gpus])
            report = {"gpus": nodes * 8, "series_per_gpu": len(prometheus.SERIES) - 1, "database": settings.DATABASES[
                "default"]["ENGINE"].rsplit(".", 1)[-1]}
            for name in ("first_pass", "steady_pass"):
                began = time.perf_counter()
                status = prometheus.collect(timezone.now())
                seconds = time.perf_counter() - began
                series_samples = status.samples * report["series_per_gpu"]
                report[name] = {"seconds": round(seconds, 3), "samples_stored": status.samples,
                                "series_samples_per_s": round(series_samples / seconds) if seconds else None,
                                "gpus_matched": status.gpus_matched, "ok": status.ok}
    finally:
        server.terminate()
        server.wait(timeout=20)
        for exporter in exporters:
            exporter.stop()
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(report))
        return
    print(f"Prometheus source, {report['gpus']} GPUs × {report['series_per_gpu']} series, {report['database']}:")
    for name in ("first_pass", "steady_pass"):
        row = report[name]
        print(f"  {name:12s} {row['seconds']:.2f} s, {row['samples_stored']:,} GPU samples stored, "
              f"{row['series_samples_per_s'] or 0:,} series × GPU samples/s")


if __name__ == "__main__":
    main()

"""The device check's Python half: collect telemetry on this machine's GPUs under a small load, then report.

Run by ``scripts/device_check.sh`` (which makes the venv and a throw-away SQLite database); on its own:
``VAR_DIR=$(mktemp -d) .venv/bin/python manage.py migrate && .venv/bin/python scripts/device_check.py``.
It changes no power limit unless ``--set-cap W`` is given, and then restores the limit it found.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# One matmul loop per visible CUDA device until the deadline (argv[1] seconds); fp16 keeps the tensor cores busy.
LOAD = """
import sys, time, torch
if not torch.cuda.is_available():
    sys.exit("torch sees no CUDA device")
xs = [torch.randn(8192, 8192, device=f"cuda:{i}", dtype=torch.float16) for i in range(torch.cuda.device_count())]
end = time.time() + float(sys.argv[1])
while time.time() < end:
    for x in xs:
        x @ x
    for i in range(len(xs)):
        torch.cuda.synchronize(i)
"""


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to collect (default 60)")
    parser.add_argument("--every", type=float, default=2.0, help="seconds between samples (default 2)")
    parser.add_argument("--set-cap", type=int, metavar="W", help="also apply a W-watt cap to every GPU, then restore")
    parser.add_argument("--no-load", action="store_true", help="collect without starting a GPU load")
    return parser.parse_args(argv)


def start_load(seconds: float) -> subprocess.Popen[bytes] | None:
    """The load, if torch is installed; None (and a note) otherwise."""
    try:
        import torch  # noqa: F401
    except ImportError:
        print("load: torch is not installed (pip install -r requirements-node.txt); collecting an idle machine")
        return None
    print(f"load: fp16 matmul loop on every CUDA device for {seconds:g} s")
    return subprocess.Popen([sys.executable, "-c", LOAD, str(seconds)])


def main(argv: list[str]) -> int:
    from django.conf import settings

    from telemetry import collector
    from telemetry.probe import NvmlUnavailable

    args, host = parse(argv), settings.NODE_HOSTNAME
    probe = collector.node_probe()
    try:
        probe.start()
    except NvmlUnavailable as why:
        print(f"device check: {why}", file=sys.stderr)
        return 2
    print(f"node {host}: {len(probe.devices)} device(s)")
    for device in probe.devices:
        mig = f", MIG instance of {device.mig_parent_uuid}" if device.mig_parent_uuid else ""
        print(f"  [{device.index}] {device.name} {device.uuid} {device.memory_mib} MiB{mig}")
    load = None if args.no_load else start_load(args.seconds)
    collected = collect(host, args.seconds, args.every)
    if load is not None:
        load.wait()
        print(f"load: exited {load.returncode}")
    ok = report(host, collected)
    if args.set_cap is not None:
        ok = set_cap(host, args.set_cap) and ok
    probe.close()
    print("device check: OK" if ok else "device check: PROBLEMS (see above)")
    return 0 if ok else 1


def collect(host: str, seconds: float, every: float) -> int:
    """Run the collector every ``every`` s for ``seconds`` s; returns how many samples ran."""
    from telemetry import collector

    runs, started = 0, time.monotonic()
    while time.monotonic() - started < seconds:
        began = time.monotonic()
        result = collector.collect(host)
        runs += 1
        if result is not None and (result.lost or result.recovered):
            print(f"  sample {runs}: lost {list(result.lost)}, recovered {list(result.recovered)}")
        time.sleep(max(0.0, every - (time.monotonic() - began)))
    print(f"collector: {runs} samples in {time.monotonic() - started:.1f} s")
    return runs


def report(host: str, runs: int) -> bool:
    """Per GPU: samples, utilisation and power (min/avg/max), energy from the counter, limits; then events."""
    from django.db.models import Avg, Max, Min

    from scheduler.models import Gpu
    from telemetry import collector
    from telemetry.models import GpuEvent

    ok = True
    for gpu in Gpu.objects.filter(node__hostname=host).order_by("index"):
        samples = gpu.samples.order_by("at")
        stats = samples.aggregate(u0=Min("gpu_util"), u=Avg("gpu_util"),
                                  u1=Max("gpu_util"), p0=Min("power_w"), p=Avg("power_w"), p1=Max("power_w"))
        count = samples.count()
        ok = ok and count > 0
        first, last = samples.first(), samples.last()
        print(f"{gpu} {gpu.model} {gpu.uuid} health={gpu.health}"
              + (f" MIG of {gpu.mig_parent_uuid}" if gpu.mig_parent_uuid else ""))
        print(f"  samples: {count} of {runs}")
        print(f"  utilisation %: {_triple(stats['u0'], stats['u'], stats['u1'])}")
        print(f"  power W: {_triple(stats['p0'], stats['p'], stats['p1'])}")
        print(f"  energy: {_energy(first, last)}")
        read_back = _read_back(collector.node_probe(), gpu.uuid) if not gpu.mig_parent_uuid else "per physical GPU"
        print(f"  power limit: {gpu.power_limit_w} W (range {gpu.power_min_w}–{gpu.power_max_w} W, default "
              f"{gpu.power_default_w} W); enforced read back: {read_back}")
    events = GpuEvent.objects.filter(gpu__node__hostname=host).order_by("at")
    print(f"events: {events.count()}")
    for event in events:
        print(f"  {event.at:%H:%M:%S} {event.gpu} {event.kind} {event.severity}: {event.message}")
    return ok


def _triple(low: float | None, mean: float | None, high: float | None) -> str:
    if mean is None:
        return "not reported (None)"
    return f"min {low:.1f} / avg {mean:.1f} / max {high:.1f}"


def _energy(first: object, last: object) -> str:
    start, end = getattr(first, "energy_j", None), getattr(last, "energy_j", None)
    if start is None or end is None:
        return "counter not reported (None)"
    seconds = (last.at - first.at).total_seconds()  # type: ignore[attr-defined]
    if end < start:
        return f"counter went back ({start:.0f} → {end:.0f} J): reset"
    average = f", {(end - start) / seconds:.1f} W on average" if seconds > 0 else ""
    return f"{end - start:.1f} J over {seconds:.1f} s from the counter{average}"


def _read_back(probe: object, uuid: str) -> str:
    try:
        return f"{probe.power_limit(uuid):g} W"  # type: ignore[attr-defined]
    except Exception as error:  # noqa: BLE001 - a report line, whatever NVML says
        return f"unavailable ({type(error).__name__}: {error})"


def set_cap(host: str, watts: int) -> bool:
    """Cap every physical GPU at ``watts`` through the product's path, print the outcome, restore the old limit."""
    from django.core.exceptions import ValidationError

    from scheduler.models import Node
    from telemetry import collector
    from telemetry.models import PowerCap
    from telemetry.power_caps import apply_power_caps, create_power_caps, node_gpus

    probe, gpus = collector.node_probe(), node_gpus([Node.objects.get(hostname=host)])
    before = {gpu.uuid: probe.power_limit(gpu.uuid) for gpu in gpus}
    try:
        caps = create_power_caps(gpus, watts)
    except ValidationError as error:
        print(f"set cap {watts} W refused: {'; '.join(error.messages)}")
        return False
    apply_power_caps([cap.pk for cap in caps], probe, host)
    for cap in PowerCap.objects.filter(pk__in=[cap.pk for cap in caps]).select_related("gpu").order_by("gpu__index"):
        print(f"set cap {watts} W on {cap.gpu}: {cap.status}, enforced {cap.enforced_w} W ({cap.message})")
        if cap.status == "applied":
            restored = probe.set_power_limit(cap.gpu.uuid, before[cap.gpu.uuid])
            print(f"  restored to {restored:g} W")
    return all(cap.status == "applied" for cap in PowerCap.objects.filter(pk__in=[cap.pk for cap in caps]))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cluster_ops.settings")
    import django

    django.setup()
    sys.exit(main(sys.argv[1:]))

"""``make bench``: run the product's benchmarks and rewrite the manual's performance page with their results.

    .venv/bin/python scripts/bench.py [--output docs/performance.md] [--results var/bench]

Each benchmark is a management command that prints JSON (``bench_policies``, ``bench_round``, ``bench_forecast``,
``bench_telemetry``, ``validate_pollux`` for the simulator); this runs them one after another, as separate
processes, against throwaway databases (the commands make their own) and an embedded Redis started here, so that a
round's after-commit messages reach a broker as in production rather than time out. The page gets one table, the
machine it ran on and the date: it is the current figure, never a history (git keeps that). Every result is also
kept as JSON under ``--results``. Takes about three minutes on two cores.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "performance.md"
MANAGE = [sys.executable, str(REPO / "manage.py")]
ROUND_JOBS, ROUND_GPUS = 1000, 1024
POLICY_ORDER = ["fifo", "tiresias", "qssf", "srtf", "optimus", "themis", "afs", "hesrpt", "gavel", "pollux",
                "pollux-unaware", "sia", "sia-hesrpt", "sia-profiled"]


@dataclass(frozen=True)
class Bench:
    name: str
    args: list[str]
    rows: Callable[[dict[str, Any]], list[tuple[str, str]]]  # its JSON → (what, figure) rows of the table


def _ms(value: float) -> str:
    return f"{value:,.0f} ms" if value >= 100 else f"{value:.1f} ms"


def policy_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    names = sorted(result, key=lambda n: (POLICY_ORDER.index(n) if n in POLICY_ORDER else len(POLICY_ORDER), n))
    return [(f"one scheduling round, `{name}` ({ROUND_JOBS:,} jobs, {ROUND_GPUS:,} GPUs): policy, guards, quotas, "
             "placement", f"{_ms(result[name]['median_ms'])} median, {_ms(result[name]['p95_ms'])} p95")
            for name in names]


def round_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    return [(f"a full live round, `{name}` ({result['jobs']:,} jobs, {result['gpus']:,} GPUs, {result['database']}): "
             "lease, snapshot, observe, policy, one transaction, executor",
             f"{_ms(r['median_ms'])} median, {_ms(r['max_ms'])} max (snapshot {_ms(r['snapshot_ms'])}, policy "
             f"{_ms(r['policy_ms'])}, write {_ms(r['write_ms'])})")
            for name, r in result["policies"].items()]


def forecast_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    return [(f"a forecast of the queue, `{name}` ({result['jobs']:,} jobs, {result['gpus']:,} GPUs)",
             f"point {r['point_s']['median']:.2f} s median; with {result['samples']} arrival samples "
             f"{r['ranged_s']['median']:.2f} s")
            for name, r in result["policies"].items()]


def telemetry_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    ingest, roll_up, queries = result["ingest"], result["roll_up_s"], result["queries_ms"]
    where = f"{result['gpus']:,} GPUs, {result['database']}"
    return [
        (f"telemetry ingest ({where}, the whole cluster per call)",
         f"{ingest['samples_per_s']:,} samples/s ({ingest['samples']:,} in {ingest['seconds']:.1f} s)"),
        (f"telemetry: one more minute rolled up ({where}), as beat does every minute",
         f"{roll_up['live_minute']:.2f} s"),
        *((f"telemetry query: {name.replace('_', ' ')} ({where})", _ms(ms)) for name, ms in queries.items()),
    ]


def simulator_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    row = result["rows"][0]
    return [("the simulator: Pollux's workload 6 at load 1.0 (160 jobs, 16 × 4 T4) under `pollux`, one process",
             f"{row['wall_s']:.1f} s wall; average JCT {row['ours_avg_jct_s'] / 3600:.3f} h against the authors' "
             f"{row['published_avg_jct_s'] / 3600:.3f} h")]


BENCHES = [
    Bench("policies", ["bench_policies", "--jobs", str(ROUND_JOBS), "--gpus", str(ROUND_GPUS)], policy_rows),
    Bench("round", ["bench_round", "--jobs", str(ROUND_JOBS), "--gpus", str(ROUND_GPUS)], round_rows),
    Bench("forecast", ["bench_forecast"], forecast_rows),
    Bench("telemetry", ["bench_telemetry"], telemetry_rows),
    Bench("simulator", ["validate_pollux", "--policy", "pollux", "--load", "1.0", "--workload", "6",
                        "--workers", "1"], simulator_rows),
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def embedded_redis(env: dict[str, str]) -> Iterator[dict[str, str]]:
    """A throwaway Redis for the benchmarks' processes (``manage.py embedded_redis``); its environment."""
    port = free_port()
    with TemporaryDirectory(prefix="cluster-ops-bench-") as var_dir:
        env = {**env, "EMBEDDED_REDIS_PORT": str(port), "VAR_DIR": var_dir,
               "REDIS_URL": f"redis://127.0.0.1:{port}/0"}
        server = subprocess.Popen([*MANAGE, "embedded_redis"], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline or server.poll() is not None:
                        raise SystemExit("the benchmarks' Redis did not start") from None
                    time.sleep(0.2)
            yield env
        finally:
            server.terminate()
            server.wait(timeout=30)


def run(bench: Bench, env: dict[str, str], results: Path) -> dict[str, Any] | str:
    """The benchmark's JSON result, or why there is none (its last line of error output)."""
    output = results / f"{bench.name}.json"
    started = time.monotonic()
    done = subprocess.run([*MANAGE, *bench.args, "--json"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=1800)
    print(f"{bench.name}: {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        return lines[-1] if lines else f"exit {done.returncode}"
    result = json.loads(done.stdout)
    output.write_text(json.dumps(result, indent=2) + "\n")
    return result


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                 if line.startswith("model name")]
        cpu = names[0] if names else cpu
    memory = ""
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        total_kib = int(meminfo.read_text().split("MemTotal:", 1)[1].split()[0])
        memory = f", {total_kib / 2**20:.0f} GiB"
    return f"{cpu}, {os.cpu_count()} cores{memory}; Python {platform.python_version()} on {platform.system()}"


def page(rows: list[tuple[str, str]], missing: list[tuple[str, str]], when: datetime) -> str:
    lines = [
        "# Performance",
        "",
        f"Measured by `make bench` on {when:%Y-%m-%d %H:%M} UTC, on {machine()}. The command reruns every "
        "benchmark and rewrites this page; earlier figures are in the repository's history. Each benchmark is a "
        "command of its own (`manage.py bench_policies`, `bench_round`, `bench_forecast`, `bench_telemetry`, "
        "`validate_pollux`), run on a seeded synthetic cluster and a throwaway database, so figures compare "
        "across machines and versions.",
        "",
        "| what | figure |",
        "|---|---|",
        *(f"| {what} | {figure} |" for what, figure in rows),
    ]
    if missing:
        lines += ["", "Not measured this time:", ""]
        lines += [f"- {name}: {why}" for name, why in missing]
    lines += [
        "",
        "Targets: a scheduling round of 1,000 jobs well under the round interval (a minute by default), a full "
        "live round ≤ 2 s, a point forecast in about a second.",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=PAGE, help="the page to rewrite (default: %(default)s)")
    parser.add_argument("--results", type=Path, default=REPO / "var" / "bench", help="where the JSON results go")
    options = parser.parse_args()
    options.results.mkdir(parents=True, exist_ok=True)
    env = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}  # the throwaway SQLite
    rows: list[tuple[str, str]] = []
    missing: list[tuple[str, str]] = []
    with embedded_redis(env) as bench_env:
        for bench in BENCHES:
            result = run(bench, bench_env, options.results)
            if isinstance(result, str):
                missing.append((bench.name, result))
            else:
                rows += bench.rows(result)
    text = page(rows, missing, datetime.now(UTC))
    temporary = options.output.with_suffix(".tmp")
    temporary.write_text(text)
    temporary.replace(options.output)  # never half a page
    print(text)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())

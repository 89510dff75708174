"""Telemetry from the operator's Prometheus: dcgm-exporter's series, matched to the inventory, stored as samples.

With ``TELEMETRY_SOURCE=prometheus``, beat runs ``telemetry.collect_prometheus`` every ``TELEMETRY_SECONDS`` instead
of asking node agents to collect. One pass (``collect``) reads the raw samples of the last few minutes of the DCGM
series (``SERIES``) in **one** range-vector query, so each sample keeps the time it was scraped at, and gaps,
counter resets and staleness are what Prometheus recorded, not what the console guesses:

* **Matching GPUs**: by the ``UUID`` label where the inventory knows the GPU's UUID (NVML-registered nodes), else by
  hostname (``Hostname``, or ``hostname`` in dcgm-exporter's newest release; a fully qualified name matches its
  short form) and GPU index (``gpu``). A MIG instance (``GPU_I_ID``/``GPU_I_PROFILE``) matches the inventory's MIG
  child of that parent whose model names the profile, the k-th by index for the k-th instance id. Series that match
  nothing are listed (``unmatched``), never stored.
* **Metrics**: utilisation from ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (a fraction, the share of time the graphics
  engine was busy), falling back to ``DCGM_FI_DEV_GPU_UTIL`` (%); power (W); the energy counter (mJ → J; a counter
  that went backwards restarted, which the rollups count as such); memory used and total (used + free, MiB);
  temperature; SM clock. A value that is not a finite, non-negative number within ``LIMITS`` is dropped, not
  stored: it is no reading.
* **Jobs**: a sample carrying ``hpc_job`` (dcgm-exporter on a Slurm host) belongs to the console job with that
  Slurm id; one carrying ``namespace`` and ``pod`` (dcgm-exporter on a Kubernetes node) to the console job of that
  Kubernetes Job or pod; otherwise to the job the console's allocations put on the GPU at that time
  (``storage.ingest``).
* **Events**: an XID series that turns to a new non-zero code is an XID event. A GPU whose series stopped while
  other GPUs of its node still report is **lost** (``collector.update_health``, as the NVML collector marks it),
  and marked degraded when its series come back. A node none of whose series arrived for ``STALE_SECONDS`` is
  **stale**: shown, not lost (its exporter or scrape stopped, not necessarily its GPUs).
* **Outages**: Prometheus unreachable, refusing, or answering with something else is a ``PrometheusUnavailable``;
  the pass stores nothing and the status row (``TelemetrySource``) says what failed and since when, for the
  Overview page and ``/metrics``. Never a silent zero.

Why plain HTTP (urllib3, already the Slurm client's) rather than ``prometheus-api-client``: the reader needs one
endpoint, ``/api/v1/query``, with a timeout, a bound on the response's size and the operator's auth; the client
library adds pandas-shaped results and its own session handling for nothing this pass uses.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import urllib3
from django.conf import settings
from django.utils import timezone

from scheduler.models import Gpu

from .collector import update_health
from .models import TelemetrySource
from .readings import EventKind, GpuEventReading, GpuReading
from .storage import ingest, latest_per_gpu, record_events

logger = logging.getLogger(__name__)

COLLECT_PROMETHEUS_TASK = "telemetry.collect_prometheus"
ENGINE_ACTIVE, GPU_UTIL, XID = "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_XID_ERRORS"
FB_USED, FB_FREE = "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE"
# series → (GpuReading field, scale to the reading's unit)
SERIES: dict[str, tuple[str, float]] = {
    ENGINE_ACTIVE: ("gpu_util", 100.0),  # fraction → %
    GPU_UTIL: ("gpu_util", 1.0),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("mem_util", 1.0),
    FB_USED: ("mem_used_mib", 1.0),
    FB_FREE: ("mem_free_mib", 1.0),
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", 1.0),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("energy_j", 0.001),  # mJ → J
    "DCGM_FI_DEV_GPU_TEMP": ("temperature_c", 1.0),
    "DCGM_FI_DEV_SM_CLOCK": ("sm_clock_mhz", 1.0),
    XID: ("xid", 1.0),
}
# The largest value each field can hold: anything above is not a reading (a unit mix-up or a corrupt exporter).
LIMITS = {"gpu_util": 100.0, "mem_util": 100.0, "mem_used_mib": 4.0e6, "mem_free_mib": 4.0e6, "power_w": 5000.0,
          "energy_j": 1.0e15, "temperature_c": 200.0, "sm_clock_mhz": 10_000.0, "xid": 1.0e6}
WINDOW_SECONDS = 300  # how far back a pass reads (the rollups' longest observed gap): a missed pass loses nothing
STALE_SECONDS = 60.0  # a node with no sample for this long is stale
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
MAX_LISTED = 100  # unmatched and stale GPUs listed in the status row
PROFILE = re.compile(r"^\d+g\.\d+gb$")


class PrometheusUnavailable(Exception):
    """Prometheus could not be read: unreachable, refused, or not answering with a query result."""


# --- reading -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Connection:
    url: str
    headers: Mapping[str, str]
    timeout: float


def connection() -> Connection:
    """The configured Prometheus (``PROMETHEUS_URL`` and a bearer token or basic auth, from the environment)."""
    headers = {"Accept": "application/json"}
    if settings.PROMETHEUS_TOKEN:
        headers["Authorization"] = f"Bearer {settings.PROMETHEUS_TOKEN}"
    elif settings.PROMETHEUS_USER:
        pair = f"{settings.PROMETHEUS_USER}:{settings.PROMETHEUS_PASSWORD}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
    return Connection(settings.PROMETHEUS_URL.rstrip("/"), headers, float(settings.PROMETHEUS_TIMEOUT_SECONDS))


_pool = urllib3.PoolManager(retries=urllib3.Retry(total=1, backoff_factor=0.2, status_forcelist=(502, 503, 504),
                                                  raise_on_status=False))


def query(conn: Connection, promql: str, at: datetime) -> list[dict[str, Any]]:
    """The result of an instant query at ``at`` (a vector, or a matrix for a range selector)."""
    if not conn.url:
        raise PrometheusUnavailable("PROMETHEUS_URL is not set")
    try:
        reply = _pool.request("GET", f"{conn.url}/api/v1/query",
                              fields={"query": promql, "time": f"{at.timestamp():.3f}"},
                              headers=dict(conn.headers), timeout=conn.timeout, preload_content=False)
    except urllib3.exceptions.HTTPError as error:
        raise PrometheusUnavailable(f"cannot reach Prometheus at {conn.url}: {type(error).__name__}") from None
    try:
        body = reply.read(MAX_RESPONSE_BYTES + 1)
    finally:
        reply.release_conn()
    if reply.status in (401, 403):
        raise PrometheusUnavailable(f"Prometheus refused the credentials (HTTP {reply.status})")
    if reply.status != 200:
        raise PrometheusUnavailable(f"Prometheus answered HTTP {reply.status}")
    if len(body) > MAX_RESPONSE_BYTES:
        raise PrometheusUnavailable(f"Prometheus's answer is over {MAX_RESPONSE_BYTES // 2**20} MiB")
    try:
        document = json.loads(body)
        result = document["data"]["result"]
    except (ValueError, KeyError, TypeError):
        raise PrometheusUnavailable("Prometheus's answer is not a query result") from None
    if document.get("status") != "success" or not isinstance(result, list):
        raise PrometheusUnavailable("Prometheus's answer is not a query result")
    return result


def raw_samples(conn: Connection, now: datetime, seconds: int = WINDOW_SECONDS) -> list[dict[str, Any]]:
    """Every DCGM series' raw samples of the last ``seconds`` (one range-vector query)."""
    names = "|".join(sorted(SERIES))
    return query(conn, f'{{__name__=~"{names}"}}[{int(seconds)}s]', now)


# --- matching series to the inventory -----------------------------------------------------------


@dataclass(frozen=True)
class SeriesKey:
    hostname: str
    gpu: str
    uuid: str
    mig_profile: str
    mig_id: str

    @property
    def label(self) -> str:
        mig = f" MIG {self.mig_profile}#{self.mig_id}" if self.mig_id else ""
        return f"{self.hostname or '?'}/gpu{self.gpu or '?'}{mig}"


def series_key(labels: Mapping[str, str]) -> SeriesKey:
    host = labels.get("Hostname") or labels.get("hostname") or ""
    return SeriesKey(host[:255], labels.get("gpu", "")[:10], labels.get("UUID", "")[:64],
                     labels.get("GPU_I_PROFILE", "")[:20], labels.get("GPU_I_ID", "")[:10])


def short(hostname: str) -> str:
    return hostname.split(".", 1)[0].lower()


class Inventory:
    """The console's GPUs, looked up as dcgm-exporter labels them (module docstring)."""

    def __init__(self) -> None:
        rows = list(Gpu.objects.values_list("pk", "uuid", "node__hostname", "index", "model", "mig_parent_uuid"))
        self.uuid = {pk: uuid for pk, uuid, *_ in rows}
        self.host = {pk: short(host) for pk, _, host, *_ in rows}
        self.by_uuid = {uuid: pk for pk, uuid, _, _, _, parent in rows if not parent}
        self.by_place = {(short(host), str(index)): pk for pk, _, host, index, _, parent in rows if not parent}
        self.children: dict[str, list[tuple[int, str]]] = {}
        for pk, _, _, _, model, parent in sorted(rows, key=lambda row: row[3]):  # by index
            if parent:
                self.children.setdefault(parent, []).append((pk, model.lower()))

    def match(self, key: SeriesKey, instance_rank: int) -> int | None:
        gpu = self.by_uuid.get(key.uuid) if key.uuid else None
        if gpu is None:
            gpu = self.by_place.get((short(key.hostname), key.gpu))
        if gpu is None or not key.mig_id:
            return gpu
        if not PROFILE.match(key.mig_profile.lower()):
            return None
        instances = [pk for pk, model in self.children.get(self.uuid[gpu], []) if key.mig_profile.lower() in model]
        return instances[instance_rank] if instance_rank < len(instances) else None


def _instance_ranks(keys: Iterable[SeriesKey]) -> dict[SeriesKey, int]:
    """Each MIG series' rank among its parent's instances of its profile, by instance id."""
    ids: dict[tuple[str, str, str, str], set[int]] = {}
    for key in keys:
        if key.mig_id.isdigit():
            ids.setdefault((key.hostname, key.gpu, key.uuid, key.mig_profile), set()).add(int(key.mig_id))
    ranks = {}
    for key in keys:
        if key.mig_id.isdigit():
            ranks[key] = sorted(ids[(key.hostname, key.gpu, key.uuid, key.mig_profile)]).index(int(key.mig_id))
    return ranks


# --- one pass ------------------------------------------------------------------------------------


@dataclass
class Pass:
    """What one pass read: readings to store (newer than what each GPU has), events, and what it could not use."""

    read_at: datetime
    readings: list[GpuReading] = field(default_factory=list)
    events: list[GpuEventReading] = field(default_factory=list)
    matched: set[int] = field(default_factory=set)  # GPU ids with any series
    fresh: set[int] = field(default_factory=set)  # ... with a sample in the last STALE_SECONDS
    answered: set[str] = field(default_factory=set)  # the UUIDs of those
    unmatched: list[str] = field(default_factory=list)
    stale_nodes: list[str] = field(default_factory=list)
    lost: dict[str, str] = field(default_factory=dict)  # uuid → why
    latest: dict[int, GpuReading] = field(default_factory=dict)  # GPU id → its newest reading in the window


def read_pass(now: datetime, conn: Connection | None = None, seconds: int = WINDOW_SECONDS) -> Pass:
    """Read and match one pass over the last ``seconds`` (nothing stored): ``collect`` stores it, ``telemetry_check``
    prints it."""
    result = raw_samples(conn or connection(), now, seconds)
    inventory = Inventory()
    done = dict(latest_per_gpu(now - timedelta(days=1), now + timedelta(seconds=1)).values_list("gpu_id", "at"))
    found = Pass(now)
    points, xids = _gather(result, inventory, found)
    _readings(found, points, inventory, done)
    _xid_events(found, xids, inventory, done)
    _health(found, inventory)
    return found


Points = dict[tuple[int, float], dict[str, Any]]  # (GPU id, epoch seconds) → reading fields


def _gather(result: list[dict[str, Any]], inventory: Inventory,
            found: Pass) -> tuple[Points, dict[int, list[tuple[float, float]]]]:
    """The series' samples as readings' fields per GPU and scrape time, and the XID samples per GPU; the GPUs
    matched and the series matching none go into ``found``."""
    keys = {id(series): series_key(series.get("metric") or {}) for series in result}
    ranks = _instance_ranks(keys.values())
    points: Points = {}
    xids: dict[int, list[tuple[float, float]]] = {}
    unmatched: set[str] = set()
    for series in result:
        labels, key = series.get("metric") or {}, keys[id(series)]
        name = labels.get("__name__", "")
        gpu = inventory.match(key, ranks.get(key, 0))
        if gpu is None or name not in SERIES:
            unmatched.add(key.label)
            continue
        found.matched.add(gpu)
        field_name, scale = SERIES[name]
        job = str(labels.get("hpc_job", ""))[:64] or None
        pod = pod_of(labels)
        for stamp, value in _values(series.get("values") or []):
            scaled = value * scale
            if field_name == "xid":
                xids.setdefault(gpu, []).append((stamp, scaled))
            elif scaled <= LIMITS[field_name]:  # above: no reading (a unit mix-up, a corrupt exporter)
                _put(points.setdefault((gpu, stamp), {"job": job, "pod": pod}), name, field_name, scaled)
    found.unmatched = sorted(unmatched)[:MAX_LISTED]
    return points, xids


def pod_of(labels: Mapping[str, str]) -> str | None:
    """``"<namespace>/<pod>"`` of dcgm-exporter's Kubernetes labels; None without both (or names no API allows)."""
    namespace, pod = str(labels.get("namespace", "")), str(labels.get("pod", ""))
    if not namespace or not pod or len(namespace) > 63 or len(pod) > 253 or "/" in namespace + pod:
        return None
    return f"{namespace}/{pod}"


def _put(reading: dict[str, Any], name: str, field_name: str, value: float) -> None:
    """Set one field of a reading; the engine-active fraction wins over ``DCGM_FI_DEV_GPU_UTIL``, whichever came
    first (it says how busy the GPU was, not only that a kernel ran)."""
    if name == GPU_UTIL and reading.get("engine"):
        return
    reading[field_name] = value
    if name == ENGINE_ACTIVE:
        reading["engine"] = True


def _values(values: Sequence[Any]) -> Iterable[tuple[float, float]]:
    """(epoch seconds, value) of a series' samples, leaving out anything that is not a finite, non-negative number."""
    for pair in values[:100_000]:
        try:
            stamp, value = float(pair[0]), float(pair[1])
        except (TypeError, ValueError, IndexError):
            continue
        if math.isfinite(stamp) and math.isfinite(value) and value >= 0 and 946_684_800 <= stamp <= 32_503_680_000:
            yield stamp, value


def _readings(found: Pass, points: Points, inventory: Inventory, done: Mapping[int, datetime]) -> None:
    """The readings newer than what each GPU has stored; each GPU's newest, and whether it reported lately."""
    for (gpu, stamp), values in sorted(points.items()):
        at = datetime.fromtimestamp(stamp, tz=UTC)
        used, free = values.get("mem_used_mib"), values.get("mem_free_mib")
        reading = GpuReading(
            uuid=inventory.uuid[gpu], at=at, gpu_util=values.get("gpu_util"), mem_util=values.get("mem_util"),
            mem_used_mib=used, mem_total_mib=used + free if used is not None and free is not None else None,
            power_w=values.get("power_w"), energy_j=values.get("energy_j"), temperature_c=values.get("temperature_c"),
            sm_clock_mhz=values.get("sm_clock_mhz"), cluster_job_id=values.get("job"), cluster_pod=values.get("pod"),
        )
        found.latest[gpu] = reading
        if (found.read_at - at).total_seconds() <= STALE_SECONDS:
            found.fresh.add(gpu)
            found.answered.add(reading.uuid)
        if gpu not in done or at > done[gpu]:
            found.readings.append(reading)


def _xid_events(found: Pass, xids: Mapping[int, list[tuple[float, float]]], inventory: Inventory,
                done: Mapping[int, datetime]) -> None:
    """An XID event where a GPU's XID series turns to a new non-zero code, after what was stored already."""
    for gpu, samples in xids.items():
        previous = 0.0
        for stamp, code in sorted(samples):
            at = datetime.fromtimestamp(stamp, tz=UTC)
            if code > 0 and code != previous and (gpu not in done or at > done[gpu]):
                found.events.append(GpuEventReading(inventory.uuid[gpu], at, EventKind.XID,
                                                    f"XID {int(code)} (from dcgm-exporter)", code=int(code)))
            previous = code


def _health(found: Pass, inventory: Inventory) -> None:
    """Lost: a GPU that reported in the window but not lately while its node's other GPUs do; stale: a node none of
    whose GPUs reported lately."""
    fresh_hosts = {inventory.host[gpu] for gpu in found.fresh}
    for gpu in sorted(found.matched - found.fresh):
        if inventory.host[gpu] in fresh_hosts:
            found.lost[inventory.uuid[gpu]] = "its dcgm-exporter series stopped while its node's others go on"
    stale = {inventory.host[gpu] for gpu in found.matched} - fresh_hosts
    found.stale_nodes = sorted(stale)[:MAX_LISTED]


def collect(now: datetime | None = None) -> TelemetrySource:
    """One pass, stored: samples, events, health; the source's status row says how it went."""
    now = now or timezone.now()
    try:
        found = read_pass(now, seconds=window_since(now))
    except PrometheusUnavailable as error:
        logger.warning("telemetry from Prometheus: %s", error)
        return TelemetrySource.record_failure("prometheus", now, str(error))
    health_events, _, _ = update_health(found.answered, found.lost, now)
    stored = ingest(found.readings)
    record_events([*found.events, *health_events])
    return TelemetrySource.record_success("prometheus", now, matched=len(found.matched), samples=stored,
                                          unmatched=found.unmatched, stale=found.stale_nodes)


def window_since(now: datetime) -> int:
    """How far back a pass reads: since the last good pass, with ``2 × STALE_SECONDS`` at least (a lost GPU is one
    seen in the window but not lately) and ``WINDOW_SECONDS`` at most (after an outage, what Prometheus still has
    of the gap)."""
    last = TelemetrySource.objects.filter(source="prometheus").values_list("last_ok_at", flat=True).first()
    since = WINDOW_SECONDS if last is None else (now - last).total_seconds() + STALE_SECONDS
    return int(min(WINDOW_SECONDS, max(2 * STALE_SECONDS, since)))


# --- the operator's check ------------------------------------------------------------------------


def check(now: datetime | None = None) -> dict[str, Any]:
    """One pass read, nothing stored, in ``manage.py telemetry_check --json``'s shape (utilisation as 0–1)."""
    found = read_pass(now or timezone.now())
    place = {pk: (host, index) for pk, host, index in
             Gpu.objects.filter(pk__in=list(found.latest)).values_list("pk", "node__hostname", "index")}
    samples = [{"hostname": place[gpu][0], "gpu_index": place[gpu][1],
                "utilisation": None if r.gpu_util is None else round(r.gpu_util / 100, 4),
                "power_w": r.power_w, "memory_used_mib": r.mem_used_mib}
               for gpu, r in sorted(found.latest.items(), key=lambda item: place[item[0]])]
    return {"source": "prometheus", "gpus_matched": len(found.matched), "gpus_unmatched": found.unmatched,
            "stale_nodes": found.stale_nodes, "samples": samples}

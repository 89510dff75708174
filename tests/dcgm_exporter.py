"""A fixture exporter in dcgm-exporter's text format, for a real Prometheus to scrape (tests and the benchmark).

No GPU exists here, so this stands in for dcgm-exporter at the hardware seam: one HTTP server per node serving
``/metrics`` with dcgm-exporter's series names, units and labels (``gpu``, ``UUID``, ``pci_bus_id``, ``device``,
``modelName``, ``Hostname`` or the newer ``hostname``, ``GPU_I_PROFILE``/``GPU_I_ID`` for MIG, ``hpc_job``), whose
values a test changes as time goes: a GPU's series removed (lost), its energy counter restarted, an XID, the whole
exporter stopped (a stale node).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class FixtureGpu:
    index: int
    uuid: str
    engine_active: float | None = 0.5  # DCGM_FI_PROF_GR_ENGINE_ACTIVE (fraction); None: not exported (older releases)
    gpu_util: float = 50.0  # DCGM_FI_DEV_GPU_UTIL (%)
    power_w: float = 200.0
    fb_used_mib: float = 1000.0
    fb_free_mib: float = 79_000.0
    temperature_c: float = 55.0
    xid: int = 0
    hpc_job: str = ""
    present: bool = True  # False: its series are gone (the GPU fell off the bus)
    energy_base_mj: float = 0.0  # the counter: base + power × seconds since ``counting_since``
    counting_since: float = field(default_factory=time.time)

    def energy_mj(self) -> float:
        return self.energy_base_mj + self.power_w * 1000.0 * (time.time() - self.counting_since)

    def restart_counter(self) -> None:
        """The driver reloaded: the energy counter starts again from 0."""
        self.energy_base_mj, self.counting_since = 0.0, time.time()


class FixtureExporter:
    """One node's exporter on 127.0.0.1:``port`` (0: any free port)."""

    def __init__(self, hostname: str, gpus: list[FixtureGpu], *, label: str = "Hostname", port: int = 0,
                 model: str = "NVIDIA A100-SXM4-80GB") -> None:
        self.hostname, self.gpus, self.label, self.model = hostname, gpus, label, model
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                body = exporter.exposition().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def exposition(self) -> str:
        families: dict[str, tuple[str, str, list[str]]] = {
            "DCGM_FI_DEV_GPU_UTIL": ("gauge", "GPU utilization (in %).", []),
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("gauge", "Ratio of time the graphics engine is active.", []),
            "DCGM_FI_DEV_POWER_USAGE": ("gauge", "Power draw (in W).", []),
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": (
                "counter", "Total energy consumption since boot (in mJ).", []),
            "DCGM_FI_DEV_FB_USED": ("gauge", "Framebuffer memory used (in MiB).", []),
            "DCGM_FI_DEV_FB_FREE": ("gauge", "Framebuffer memory free (in MiB).", []),
            "DCGM_FI_DEV_GPU_TEMP": ("gauge", "GPU temperature (in C).", []),
            "DCGM_FI_DEV_XID_ERRORS": ("gauge", "Value of the last XID error encountered.", []),
        }
        for gpu in self.gpus:
            if not gpu.present:
                continue
            labels = (f'gpu="{gpu.index}",UUID="{gpu.uuid}",pci_bus_id="00000000:{gpu.index + 7:02X}:00.0",'
                      f'device="nvidia{gpu.index}",modelName="{self.model}",{self.label}="{self.hostname}"'
                      + (f',hpc_job="{gpu.hpc_job}"' if gpu.hpc_job else ""))
            values = {"DCGM_FI_DEV_GPU_UTIL": gpu.gpu_util, "DCGM_FI_DEV_POWER_USAGE": gpu.power_w,
                      "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": gpu.energy_mj(), "DCGM_FI_DEV_FB_USED": gpu.fb_used_mib,
                      "DCGM_FI_DEV_FB_FREE": gpu.fb_free_mib, "DCGM_FI_DEV_GPU_TEMP": gpu.temperature_c,
                      "DCGM_FI_DEV_XID_ERRORS": gpu.xid}
            if gpu.engine_active is not None:
                values["DCGM_FI_PROF_GR_ENGINE_ACTIVE"] = gpu.engine_active
            for name, value in values.items():
                families[name][2].append(f"{name}{{{labels}}} {value:g}")
        lines = []
        for name, (kind, documentation, samples) in families.items():
            if samples:
                lines += [f"# HELP {name} {documentation}", f"# TYPE {name} {kind}", *samples]
        return "\n".join(lines) + "\n"


def prometheus_config(targets: list[str], interval: str = "1s") -> dict[str, object]:
    """A Prometheus configuration scraping the fixture exporters every ``interval`` (JSON is YAML)."""
    return {"global": {"scrape_interval": interval, "evaluation_interval": interval},
            "scrape_configs": [{"job_name": "dcgm", "static_configs": [{"targets": targets}]}]}

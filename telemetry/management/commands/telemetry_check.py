"""``manage.py telemetry_check [--json]``: read one pass from the configured telemetry source, store nothing, and
say what matched — so an operator can check the wiring before switching the source on."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from telemetry import prometheus


class Command(BaseCommand):
    help = "Read one pass from the telemetry source (TELEMETRY_SOURCE, or --source) and print what matched."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="print one JSON document")
        parser.add_argument("--source", choices=["prometheus"], default=None,
                            help="check this source instead of TELEMETRY_SOURCE")

    def handle(self, *args: Any, **options: Any) -> None:
        source = options["source"] or settings.TELEMETRY_SOURCE
        if source != "prometheus":
            raise CommandError("TELEMETRY_SOURCE is nvml: node agents collect on their nodes (manage.py "
                               "device_check there); set TELEMETRY_SOURCE=prometheus and PROMETHEUS_URL to check a "
                               "Prometheus")
        try:
            found = prometheus.check()
        except prometheus.PrometheusUnavailable as error:
            raise CommandError(str(error)) from None
        if options["json"]:
            self.stdout.write(json.dumps(found, indent=2))
            return
        self.stdout.write(f"{found['gpus_matched']} GPUs matched, {len(found['gpus_unmatched'])} series unmatched")
        for name in found["gpus_unmatched"]:
            self.stdout.write(f"  unmatched: {name}")
        for node in found["stale_nodes"]:
            self.stdout.write(f"  stale: {node} (no sample lately)")
        for sample in found["samples"]:
            util = "–" if sample["utilisation"] is None else f"{sample['utilisation']:.0%}"
            self.stdout.write(f"  {sample['hostname']}/gpu{sample['gpu_index']}: {util} busy, "
                              f"{sample['power_w']} W, {sample['memory_used_mib']} MiB used")

"""The elastic example jobs a cluster lab's ``make run`` submits (``make slurm-lab``, ``make k8s-lab``), so that an
operator sees them start, resize and finish on the real cluster within minutes; a real cluster gets none."""

from __future__ import annotations

import importlib.util
import random
import sys
from datetime import datetime
from pathlib import Path

from django.contrib.auth.models import User
from django.db import transaction

from scheduler.jobs import verbs
from scheduler.models import Job, Tenant

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "elastic_train.py"
GLOBAL_BATCH = 64  # the example's default: its progress reports count samples, steps × this


class MissingTorch(Exception):
    """The example jobs need PyTorch in the console's Python."""


def submit_examples(count: int, now: datetime, seed: int = 0, owners: dict[str, list[User]] | None = None) -> int:
    """``count`` elastic example jobs (1–4 GPUs, 40 s to 2 min of steps), once: none when jobs exist. Each is
    owned by one of ``owners[tenant]`` in turn (none: no owner; on Slurm, the console's own user)."""
    if count <= 0 or Job.objects.exists():
        return 0
    if importlib.util.find_spec("torch") is None:
        raise MissingTorch("the example jobs need PyTorch in this Python: .venv/bin/pip install -r "
                           "requirements-node.txt (make run does it when a lab asks for example jobs)")
    tenants = list(Tenant.objects.order_by("name").values_list("name", flat=True))
    chance = random.Random(seed)
    with transaction.atomic():
        for number in range(count):
            steps = chance.randrange(400, 1200, 100)
            tenant = tenants[number % len(tenants)]
            candidates: list[User | None] = [*(owners or {}).get(tenant, [])] or [None]
            verbs.submit_job(
                tenant=tenant, owner=candidates[number // len(tenants) % len(candidates)],
                name=f"example-{number + 1}", workload_profile="cifar10",
                total_work=steps * GLOBAL_BATCH, min_gpus=1, max_gpus=4, submitted_at=now,
                command=f"{sys.executable} {EXAMPLE} --steps {steps} --step-seconds 0.1 --report-every 20",
            )
    return count

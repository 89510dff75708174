"""``make run`` on a Slurm cluster (``CLUSTER_BACKEND=slurm``): the console set up from what Slurm has.

Instead of the simulated demo: the inventory and the tenants (one per Slurm account) are read from Slurm, the
scheduler's executor is ``slurm`` (or ``slurm-observer`` with ``SLURM_MODE=observe``) and rounds come every
``SLURM_ROUND_SECONDS``. On the lab of ``make slurm-lab`` (``SLURM_DEMO_JOBS`` > 0, which the lab prints) a few
elastic example jobs are submitted through the console, so that an operator sees them start, resize and
finish on Slurm within minutes; a real cluster gets none. They are owned by the console users of
``SLURM_DEMO_OWNERS`` (made when missing, members of the tenants Slurm lets them submit to), so they run in Slurm
as those users.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction

from scheduler.backends.cluster_nodes import sync_inventory
from scheduler.backends.slurm.client import SlurmClient, SlurmRefused, connect
from scheduler.jobs import verbs
from scheduler.live.config import update_settings
from scheduler.models import ExecutorKind, Job, Tenant

POLICY = "sia-profiled"  # two GPU types, elastic jobs: what Sia is for
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "elastic_train.py"
GLOBAL_BATCH = 64  # the example's default: its progress reports count samples, steps × this


def seed_slurm(now: datetime) -> dict[str, int]:
    """Inventory, tenants and settings from Slurm; the lab's example jobs when asked for. Idempotent."""
    client = connect()
    nodes = client.rest.nodes()
    sync_inventory("slurm", nodes)
    tenants = 0
    for account in sorted(client.rest.accounts() - {"root"}):  # "root": the top of Slurm's account tree
        tenants += Tenant.objects.get_or_create(name=account)[1]
    observing = settings.SLURM_MODE == "observe"
    update_settings(executor=ExecutorKind.SLURM_OBSERVER if observing else ExecutorKind.SLURM,
                    policy=POLICY, round_seconds=settings.SLURM_ROUND_SECONDS)
    jobs = 0 if observing else submit_examples(settings.SLURM_DEMO_JOBS, now, owners=demo_owners(client))
    return {"nodes": sum(1 for node in nodes if node.gpus), "tenants": tenants, "jobs": jobs}


def demo_owners(client: SlurmClient) -> dict[str, list[User]]:
    """Tenant → the console users of ``SLURM_DEMO_OWNERS`` that Slurm lets submit to it (made when missing, as
    members of those tenants; their username is their Slurm user)."""
    owners: dict[str, list[User]] = {}
    for name in settings.SLURM_DEMO_OWNERS:
        user, made = User.objects.get_or_create(username=name)
        if made:
            user.set_unusable_password()
            user.save(update_fields=["password"])
        for account, _ in sorted(client.rest.associations(name)):
            tenant = Tenant.objects.filter(name=account).first()
            if tenant is not None:
                tenant.members.add(user)
                owners.setdefault(account, []).append(user)
    return owners


def submit_examples(count: int, now: datetime, seed: int = 0, owners: dict[str, list[User]] | None = None) -> int:
    """``count`` elastic example jobs (1–4 GPUs, 40 s to 2 min of steps), once: none when jobs exist. Each is
    owned by one of ``owners[tenant]`` in turn (none: the console's own Slurm user)."""
    if count <= 0 or Job.objects.exists():
        return 0
    if importlib.util.find_spec("torch") is None:
        raise SlurmRefused("the example jobs need PyTorch in this Python: .venv/bin/pip install -r "
                           "requirements-node.txt (make run does it when SLURM_DEMO_JOBS is set)")
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

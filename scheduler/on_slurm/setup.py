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

from datetime import datetime

from django.conf import settings
from django.contrib.auth.models import User

from scheduler.backends.cluster_nodes import sync_inventory
from scheduler.backends.slurm.client import SlurmClient, SlurmRefused, connect
from scheduler.lab_examples import MissingTorch, submit_examples
from scheduler.live.config import update_settings
from scheduler.models import ExecutorKind, Tenant

POLICY = "sia-profiled"  # two GPU types, elastic jobs: what Sia is for


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
    try:
        jobs = 0 if observing else submit_examples(settings.SLURM_DEMO_JOBS, now, owners=demo_owners(client))
    except MissingTorch as missing:
        raise SlurmRefused(str(missing)) from None
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

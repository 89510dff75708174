"""The elastic example jobs a cluster lab's ``make run`` submits (``make slurm-lab``, ``make k8s-lab``), so that an
operator sees them start, resize, be preempted and finish on the real cluster within minutes; a real cluster gets
none.

Two plans. ``spread``: every job at once, 1–4 GPUs, tenants in turn. ``contended``: first jobs that each ask a whole
node (up to two) until the nodes are full; a minute later smaller ones (1 GPU up to two nodes). Every running job is
then at its minimum, so starting the late ones means preempting one: Sia runs as many jobs as it can, and does.
The preempted job resumes from its checkpoint when nodes free up, and jobs grow as others finish. The late jobs
wait in beat's ``LATE_SCHEDULE_NAME`` entry, which holds their specifications and is removed once it has submitted
them.
"""

from __future__ import annotations

import importlib.util
import json
import random
import sys
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path

from django.contrib.auth.models import User
from django.db import transaction
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from scheduler.jobs import verbs
from scheduler.models import Job, Tenant

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "elastic_train.py"
GLOBAL_BATCH = 64  # the example's default: its progress reports count samples, steps × this
LATE_ARRIVAL_SECONDS = 60  # long enough for the first jobs to be running, short next to their 1.5–2 min of steps
LATE_TASK = "scheduler.submit_late_examples"
LATE_SCHEDULE_NAME = "lab-examples-arriving"
LATE_POLL_SECONDS = 5


class MissingTorch(Exception):
    """The example jobs need PyTorch in the console's Python."""


@dataclass(frozen=True)
class Example:
    """One example job: who submits it, its GPU bounds, its length, and when it arrives."""

    name: str
    tenant: str
    owner: str | None  # a console user's name; None: no owner
    min_gpus: int
    max_gpus: int
    steps: int
    arrives_at: str  # ISO 8601, with its offset

    def due(self, now: datetime) -> bool:
        return datetime.fromisoformat(self.arrives_at) <= now


@dataclass(frozen=True)
class Nodes:
    """What the contended plan fills: the usual node's GPUs, and how many nodes."""

    gpus: int
    count: int


def submit_examples(count: int, now: datetime, seed: int = 0, owners: dict[str, list[User]] | None = None,
                    crowd: Nodes | None = None) -> int:
    """``count`` example jobs, once (none when jobs exist): those due now submitted, the later ones left to beat.
    Each is owned by one of ``owners[tenant]`` in turn (none: no owner; on Slurm, the console's own user)."""
    if count <= 0 or Job.objects.exists():
        return 0
    if not have_torch():
        raise MissingTorch("the example jobs need PyTorch in this Python: .venv/bin/pip install -r "
                           "requirements-node.txt (make run does it when a lab asks for example jobs)")
    tenants = list(Tenant.objects.order_by("name").values_list("name", flat=True))
    chance = random.Random(seed)
    examples = contended(count, tenants, crowd, now, chance) if crowd else spread(count, tenants, now, chance)
    examples = _owned(examples, owners or {})
    due = [example for example in examples if example.due(now)]
    with transaction.atomic():
        _submit(due, now)
        _leave_to_beat([example for example in examples if example not in due])
    return len(examples)


def have_torch() -> bool:
    return importlib.util.find_spec("torch") is not None


def spread(count: int, tenants: list[str], now: datetime, chance: random.Random) -> list[Example]:
    """Every job now, 1–4 GPUs, 40 s to 2 min of steps, tenants in turn."""
    return [Example(f"example-{number + 1}", tenants[number % len(tenants)], None, 1, 4,
                    chance.randrange(400, 1200, 100), now.isoformat()) for number in range(count)]


def contended(count: int, tenants: list[str], nodes: Nodes, now: datetime, chance: random.Random) -> list[Example]:
    """Whole-node jobs filling the nodes now (up to two nodes each, 1.5–2 min of steps), smaller ones a minute
    later (40–80 s); tenants in turn."""
    first = min(count - 1, nodes.count) if count > 1 else count
    later = (now + timedelta(seconds=LATE_ARRIVAL_SECONDS)).isoformat()
    return [Example(f"example-{number + 1}", tenants[number % len(tenants)], None,
                    nodes.gpus if number < first else 1, 2 * nodes.gpus,
                    chance.randrange(900, 1200, 100) if number < first else chance.randrange(400, 800, 100),
                    now.isoformat() if number < first else later) for number in range(count)]


def submit_late_examples(now: datetime) -> int:
    """Submit the examples beat holds whose time has come; the entry goes once none is left. Idempotent."""
    with transaction.atomic():
        entry = PeriodicTask.objects.select_for_update().filter(name=LATE_SCHEDULE_NAME).first()
        if entry is None:
            return 0
        waiting = [Example(**fields) for fields in json.loads(entry.kwargs or "{}").get("examples", [])]
        due = [example for example in waiting if example.due(now)]
        if not due:
            return 0  # the entry left as it is: beat reloads its schedule only when one changes
        submitted = _submit(due, now)
        _leave_to_beat([example for example in waiting if example not in due])
    return submitted


def _owned(examples: list[Example], owners: dict[str, list[User]]) -> list[Example]:
    seen: dict[str, int] = {}
    owned = []
    for example in examples:
        turn = seen[example.tenant] = seen.get(example.tenant, -1) + 1
        candidates = owners.get(example.tenant, [])
        owner = candidates[turn % len(candidates)].username if candidates else None
        owned.append(Example(**{**asdict(example), "owner": owner}))
    return owned


def _submit(examples: list[Example], now: datetime) -> int:
    submitted = 0
    for example in examples:
        if Job.objects.filter(name=example.name, tenant__name=example.tenant).exists():
            continue  # a retried task
        verbs.submit_job(
            tenant=example.tenant, owner=User.objects.filter(username=example.owner).first() if example.owner else None,
            name=example.name, workload_profile="cifar10", total_work=example.steps * GLOBAL_BATCH,
            min_gpus=example.min_gpus, max_gpus=example.max_gpus, submitted_at=now,
            command=f"{sys.executable} {EXAMPLE} --steps {example.steps} --step-seconds 0.1 --report-every 20",
        )
        submitted += 1
    return submitted


def _leave_to_beat(waiting: list[Example]) -> None:
    """Beat's entry holds exactly ``waiting``: made, rewritten, or removed when empty."""
    if not waiting:
        PeriodicTask.objects.filter(name=LATE_SCHEDULE_NAME).delete()
        return
    every, _ = IntervalSchedule.objects.get_or_create(every=LATE_POLL_SECONDS, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.update_or_create(name=LATE_SCHEDULE_NAME, defaults={
        "task": LATE_TASK, "interval": every, "args": "[]",
        "kwargs": json.dumps({"examples": [asdict(example) for example in waiting]}),
        "expire_seconds": LATE_POLL_SECONDS})

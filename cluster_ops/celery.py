"""The Celery app: Redis as broker and result backend, beat schedules in the database."""

import os

from celery import Celery
from celery.signals import worker_init, worker_process_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cluster_ops.settings")

app = Celery("cluster_ops")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
def refuse_to_start_misconfigured(**_: object) -> None:
    """Run Django's system checks before a worker takes work, as runserver does.

    A worker on a misconfigured DATABASE_URL or REDIS_URL must say so and stop,
    not fail task by task.
    """
    import django
    from django.core.management import call_command

    django.setup()
    call_command("check", fail_level="ERROR")


@worker_process_init.connect
def limit_memory(**_: object) -> None:
    """Bound each pool process's address space (``WORKER_MEMORY_LIMIT_MIB``): an unbounded report or what-if then
    fails with ``MemoryError``, recorded on its row, instead of growing until the machine swaps."""
    import resource

    from django.conf import settings

    limit = settings.WORKER_MEMORY_LIMIT_MIB
    if limit:
        resource.setrlimit(resource.RLIMIT_AS, (limit * 2**20, limit * 2**20))

"""Named leases: a lock with an expiry in the database, held by at most one worker.

A worker killed while it holds one leaves it to expire; one conditional UPDATE decides who holds it.
"""

from __future__ import annotations

import os
import socket
import uuid
from datetime import datetime, timedelta

from django.db import IntegrityError
from django.db.models import Q
from django.utils import timezone

from ..models import Lease


def lease_holder() -> str:
    """A holder name unique to this call in this process on this host."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def take_lease(name: str, holder: str, seconds: float, now: datetime | None = None) -> bool:
    """Hold ``name`` for ``seconds`` unless someone else holds it unexpired; one UPDATE decides."""
    now = now or timezone.now()
    try:
        Lease.objects.get_or_create(name=name)
    except IntegrityError:  # created concurrently by another worker: fine, it exists now
        pass
    free = Q(expires_at__isnull=True) | Q(expires_at__lt=now) | Q(holder=holder)
    return bool(
        Lease.objects.filter(free, name=name).update(holder=holder, expires_at=now + timedelta(seconds=seconds))
    )


def release_lease(name: str, holder: str) -> None:
    Lease.objects.filter(name=name, holder=holder).update(holder="", expires_at=None)

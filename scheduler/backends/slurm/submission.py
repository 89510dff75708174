"""What a job submitted for a Slurm cluster must satisfy before it is queued: checked at submission, so that
bad input is refused by name and nothing is half-written (Slurm would refuse it only at its first start).

A job runs in Slurm as its owner (``slurm_user``): their cluster login, which Slurm must let submit to the job's
tenant's account (an association, and the partition of ``SLURM_PARTITION`` when one is set)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError

from scheduler.backends.slurm.client import SlurmError, connect
from scheduler.models import Job, cluster_login
from scheduler.models.queue import LOGIN_NAME

logger = logging.getLogger(__name__)


def checked_script_path(path: str) -> str:
    """``path`` (relative to ``SLURM_SCRIPT_DIR``, or absolute inside it) resolved, or ``ValidationError`` naming
    ``script_path``. Links are resolved first, so a link out of the folder is refused too."""
    if not path:
        return ""
    if not settings.SLURM_SCRIPT_DIR:
        raise ValidationError({"script_path": "Batch scripts are not accepted here: SLURM_SCRIPT_DIR is not set."})
    if "\x00" in path or len(path) > 500:
        raise ValidationError({"script_path": "Not a usable path."})
    root = Path(settings.SLURM_SCRIPT_DIR).resolve()
    resolved = (root / path).resolve()
    if not resolved.is_relative_to(root):
        raise ValidationError({"script_path": "The script must lie under the folder of allowed scripts "
                                              "(SLURM_SCRIPT_DIR)."})
    if not resolved.is_file() or not os.access(resolved, os.X_OK):
        raise ValidationError({"script_path": "No executable script by that name in the folder of allowed scripts."})
    return str(resolved)


def check_account(tenant: str) -> None:
    """The tenant must be a Slurm account. Slurm away or unreadable: accepted (its first start then fails with
    Slurm's reason)."""
    try:
        accounts = connect().rest.accounts()
    except SlurmError as error:
        logger.warning("cannot check Slurm accounts: %s", error)
        return
    if tenant not in accounts:
        raise ValidationError({"tenant": f"Tenant {tenant!r} is not an account in Slurm; jobs run under their "
                                         "tenant's Slurm account (sacctmgr add account)."})


def slurm_user(job: Job) -> str:
    """The Slurm user ``job`` runs as: its owner's cluster login; the console's own (``SLURM_USER``) for a job
    the service submitted (no owner)."""
    return cluster_login(job.owner) if job.owner is not None else settings.SLURM_USER


def check_owner(job: Job) -> None:
    """The job's Slurm user must be a Unix user name with an association to the tenant's account (and partition).
    Slurm away or unreadable: accepted (its first start then fails with Slurm's reason)."""
    user, account, partition = slurm_user(job), job.tenant.name, settings.SLURM_PARTITION
    try:
        LOGIN_NAME(user)
    except ValidationError:
        raise ValidationError({"owner": f"{job.owner}'s cluster login {user!r} is not a Unix user name; an "
                                        "operator sets it in admin (Cluster logins)."}) from None
    try:
        allowed = connect().rest.associations(user)
    except SlurmError as error:
        logger.warning("cannot check Slurm associations: %s", error)
        return
    if not any(own == account and part in {"", partition} for own, part in allowed):
        where = f" in partition {partition!r}" if partition else ""
        raise ValidationError({"tenant": f"Slurm user {user!r} may not submit to account {account!r}{where}: Slurm "
                                         f"has no such association (sacctmgr add user {user} account={account})."})


def check_script(job: Job) -> None:
    """The observer's check of a new job: a batch script from the allowed folder (resolved in place)."""
    job.script_path = checked_script_path(job.script_path)


def check_job(job: Job) -> None:
    """The Slurm back-end's check of a new job: a script from the allowed folder, a tenant that is an account, and
    an owner Slurm lets submit to it."""
    check_script(job)
    check_account(job.tenant.name)
    check_owner(job)

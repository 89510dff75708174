"""The product's version: the one in pyproject.toml, shown in every page's footer, at ``/api/`` and in the API's
schema."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # settings import this module: nothing of Django's at import time
    from django.http import HttpRequest

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
VERSION: str = tomllib.loads(PYPROJECT.read_text())["project"]["version"]


def version(request: HttpRequest) -> dict[str, str]:
    """Context processor: ``cluster_ops_version`` in every template."""
    return {"cluster_ops_version": VERSION}

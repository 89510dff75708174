"""The manual (docs/, built by MkDocs in `make test`) and the README speak to users: every setting the product reads
is documented, and no words of how it was built (a work session's or a tracker issue's number) appear in them or in
the code."""

from __future__ import annotations

import re
from pathlib import Path

from django.contrib.auth.models import User
from django.test import Client

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
PRODUCT = ("cluster_ops", "scheduler", "telemetry")
# Set by `make run` for its own processes, or Django's own: not an operator's settings.
INTERNAL = {"CLUSTER_OPS_BIN", "EMBEDDED_REDIS", "DJANGO_SETTINGS_MODULE"}
PROCESS_WORDS = re.compile(r"\b(?:stops? \d+|this[ ]stop|issues? \d+)\b", re.IGNORECASE)


def settings_read() -> set[str]:
    """The environment variables the product reads: through settings.py's readers, or os.environ directly."""
    names = set(re.findall(r'\b\w+\(\s*"([A-Z][A-Z0-9_]{2,})"', (REPO / "cluster_ops" / "settings.py").read_text()))
    direct = re.compile(r'os\.(?:environ\.get|getenv|environ\.setdefault)\(\s*"([A-Z][A-Z0-9_]{2,})"'
                        r'|os\.environ\["([A-Z][A-Z0-9_]{2,})"\]')
    for package in PRODUCT:
        for path in (REPO / package).rglob("*.py"):
            names |= {a or b for a, b in direct.findall(path.read_text())}
    return names


def test_every_setting_the_product_reads_is_in_the_manual() -> None:
    manual = "\n".join(path.read_text() for path in DOCS.rglob("*.md"))
    read = settings_read()
    assert len(read) > 50  # the readers were found
    assert sorted(name for name in read - INTERNAL if f"`{name}`" not in manual) == []


def texts() -> list[Path]:
    patterns = ("*.py", "*.md", "*.html", "*.sh", "*.yml", "*.yaml", "*.toml", "Makefile", "Procfile")
    skip = {".venv", "var", ".git", "node_modules"}
    return [path for pattern in patterns for path in REPO.rglob(pattern)
            if not skip & set(path.relative_to(REPO).parts)]


def test_no_words_of_how_it_was_built_in_the_readme_the_manual_or_the_code() -> None:
    found = [f"{path.relative_to(REPO)}:{number}: {match.group(0)}"
             for path in texts() for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
             for match in [PROCESS_WORDS.search(line)] if match]
    assert len(texts()) > 300 and found == []


def test_the_readme_is_a_page_or_two() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 80 and "docs/index.md" in readme and "make run" in readme


def test_the_version_is_pyprojects_in_the_footer_the_api_and_its_schema(client: Client, operator: User) -> None:
    import tomllib

    from rest_framework.test import APIClient

    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    client.force_login(operator)
    assert f"Cluster Ops {version}</footer>" in client.get("/reports/").content.decode()
    api = APIClient()
    assert api.get("/api/").status_code in (401, 403)  # behind authentication like the rest
    api.force_authenticate(operator)
    root = api.get("/api/").json()
    assert root["version"] == version and root["resources"]["jobs"].endswith("/api/jobs/")
    assert f"version: {version}" in api.get("/api/schema/").content.decode()

"""What the suite needs from outside the virtual environment: the one list of it.

``make test`` runs ``python -m tests.prerequisites`` first: as root it installs whatever is
missing (Debian packages with apt-get, PyTorch into the venv); otherwise it names what to install
and fails. Inside pytest, a test marked ``@pytest.mark.needs("browser")`` (or a module with that
``pytestmark``) fails saying what to install when its prerequisite is absent.

The public traces are one such group (``traces``), found under ``TRACES_DIR``; nothing installs them, so without
them ``make test`` goes on and each test that reads them fails, named in pytest's summary, saying where to set
``TRACES_DIR``.

The only way to skip such tests is to name their group in ``CLUSTER_OPS_TEST_WITHOUT``
(e.g. ``CLUSTER_OPS_TEST_WITHOUT=browser,torch``), an explicit opt-out that CI never sets.
"""

from __future__ import annotations

import ctypes.util
import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

OPT_OUT_VARIABLE = "CLUSTER_OPS_TEST_WITHOUT"
CHROMIUM = Path("/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Prerequisite:
    group: str
    what: str  # for people: what the tests use it for
    present: Callable[[], bool]
    debian_packages: tuple[str, ...] = ()
    pip_requirements: str = ""  # a requirements file, relative to the repository
    recommends: bool = False  # install Debian's recommended packages too (Chromium's fonts and sandbox)
    hint: str = ""  # what to do, for a prerequisite nothing here installs

    @property
    def installable(self) -> bool:
        return bool(self.debian_packages or self.pip_requirements)

    def install_hint(self) -> str:
        if self.hint:
            return self.hint
        if self.debian_packages:
            lean = "" if self.recommends else "--no-install-recommends "
            return f"apt-get install -y {lean}" + " ".join(self.debian_packages)
        return f".venv/bin/pip install -r {self.pip_requirements}"


def _commands(*names: str) -> Callable[[], bool]:
    return lambda: all(shutil.which(name) for name in names)


def _go_at_least(major: int, minor: int) -> bool:
    """``go version`` says go<major>.<minor> or later."""
    if shutil.which("go") is None:
        return False
    words = subprocess.run(["go", "version"], capture_output=True, text=True, check=False).stdout.split()
    version = next((word.removeprefix("go") for word in words if word.startswith("go1.")), "")
    parts = version.split(".")
    return len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit() and (int(parts[0]), int(parts[1])) >= (
        major, minor)


def _libraries(*names: str) -> Callable[[], bool]:
    return lambda: all(ctypes.util.find_library(name) for name in names)


# The public traces and profiles the trace tests read (docs/validation.md names their sources), under TRACES_DIR:
# by default the folder ``shared/traces`` beside the repository's own, as in cluster_ops/settings.py.
TRACE_FOLDERS = ("pollux", "sia", "philly", "alibaba-pai-2020", "elasticflow-itp")


def traces_dir() -> Path:
    return Path(os.environ.get("TRACES_DIR") or REPO.parent / "shared" / "traces")


def _traces() -> bool:
    return all((traces_dir() / folder).is_dir() for folder in TRACE_FOLDERS)


PREREQUISITES = {p.group: p for p in (
    # Debian's Chromium, driven by Playwright (never `playwright install`, which downloads a browser).
    Prerequisite("browser", "the browser tests (tests/browser/)", CHROMIUM.exists, ("chromium",), recommends=True),
    Prerequisite("pdf", "report PDFs: WeasyPrint's pango/harfbuzz and a font; pdftotext reads them back",
                 lambda: _commands("pdftotext")() and _libraries("pango-1.0", "pangoft2-1.0", "harfbuzz-subset")(),
                 ("poppler-utils", "libpango-1.0-0", "libpangoft2-1.0-0", "libharfbuzz-subset0", "fonts-dejavu-core")),
    # Debian's prometheus package ships promtool too.
    Prerequisite("alerting", "`promtool test rules` and a real Prometheus scraping /metrics",
                 _commands("promtool", "prometheus"), ("prometheus",)),
    Prerequisite("make", "the `make run` end-to-end test", _commands("make"), ("make",)),
    # A real single-host Slurm (scripts/slurm_lab.py starts it as root): each release is Debian's packages in a
    # root the lab makes with debootstrap; the database is this host's MariaDB.
    Prerequisite("slurm", "the Slurm back-end tests (tests/slurm/): MariaDB, and debootstrap for the roots of "
                 "Slurm 22.05 and 24.11 (made from Debian's mirror on the first run)",
                 _commands("mariadbd", "mariadb-install-db", "debootstrap", "chroot", "mount"),
                 ("mariadb-server", "debootstrap")),
    # A real Kubernetes (scripts/k8s_lab.py): its programs built from the Go module proxy once per machine, its
    # certificates made with openssl.
    Prerequisite("kubernetes", "the Kubernetes back-end tests (tests/kubernetes/): Go ≥ 1.26 to build "
                 "Kubernetes v1.37.2 and etcd v3.7.3 from the Go module proxy (once per machine), and openssl",
                 lambda: _commands("openssl")() and _go_at_least(1, 26),
                 hint="Go 1.26 or later on PATH (https://go.dev/dl/; Debian 12's golang is too old) and "
                      "`apt-get install openssl`"),
    Prerequisite("traces", f"the tests that read the public traces ({', '.join(TRACE_FOLDERS)})", _traces,
                 hint=f"TRACES_DIR set to a folder holding them (now {traces_dir()}, which lacks some; "
                      "`manage.py fetch_traces` downloads them)"),
    Prerequisite("torch", "the example training job (tests/integration/test_local_executor.py, tests/slurm/)",
                 lambda: importlib.util.find_spec("torch") is not None, pip_requirements="requirements-node.txt"),
)}


def opted_out() -> set[str]:
    return {name.strip() for name in os.environ.get(OPT_OUT_VARIABLE, "").split(",") if name.strip()}


def missing() -> list[Prerequisite]:
    return [p for p in PREREQUISITES.values() if not p.present()]


def require(group: str) -> None:
    """Inside a test: return if ``group`` is present; skip if opted out; else fail naming what to install."""
    import pytest

    prerequisite = PREREQUISITES[group]
    if prerequisite.present():
        return
    if group in opted_out():
        pytest.skip(f"{group} opted out by {OPT_OUT_VARIABLE}")
    pytest.fail(f"{prerequisite.what} need(s) {prerequisite.install_hint()} "
                f"(or opt out explicitly: {OPT_OUT_VARIABLE}={group})", pytrace=False)


def install(prerequisites: list[Prerequisite]) -> None:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if any(p.debian_packages for p in prerequisites):
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    for recommends in (False, True):
        packages = sorted({package for p in prerequisites if p.recommends is recommends
                           for package in p.debian_packages})
        if packages:
            lean = [] if recommends else ["--no-install-recommends"]
            subprocess.run(["apt-get", "install", "-y", "-qq", *lean, *packages], check=True, env=env,
                           stdout=subprocess.DEVNULL)
    for requirements in sorted({p.pip_requirements for p in prerequisites if p.pip_requirements}):
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "-r", str(REPO / requirements)], check=True)


def main() -> int:
    """Install what is missing (as root), or name it and fail; groups opted out are left alone. What nothing here
    installs (the traces) is named, and the tests that need it then fail by name."""
    for prerequisite in [p for p in missing() if not p.installable and p.group not in opted_out()]:
        print(f"missing for {prerequisite.what}: {prerequisite.install_hint()}; those tests will fail "
              f"(or opt out explicitly: {OPT_OUT_VARIABLE}={prerequisite.group})", file=sys.stderr)
    wanted = [p for p in missing() if p.installable and p.group not in opted_out()]
    if wanted and os.geteuid() == 0 and shutil.which("apt-get"):
        print("installing the test prerequisites: " + ", ".join(p.group for p in wanted), flush=True)
        install(wanted)
        wanted = [p for p in wanted if not p.present()]
    for prerequisite in wanted:
        print(f"missing for {prerequisite.what}: {prerequisite.install_hint()}", file=sys.stderr)
    if wanted:
        print(f"install them (as root `make test` does it), or skip those tests explicitly: "
              f"{OPT_OUT_VARIABLE}={','.join(p.group for p in wanted)}", file=sys.stderr)
        return 1
    for group in sorted(opted_out()):
        print(f"warning: tests needing {group!r} are skipped ({OPT_OUT_VARIABLE})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

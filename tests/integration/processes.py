"""The product's own processes (Redis, Celery worker and beat, gunicorn) started for a test, on the test's database.

Each process runs in its own session, so a test can SIGKILL a whole process group the way
an OOM killer or a lost machine would, and a ``finally`` can always stop what it started.
Output goes to a log file under the test's tmp_path; ``tail`` puts its end in a failure message.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest
from django.db import connection

from cluster_ops.management.commands.embedded_redis import redis_server_binary

from .conftest import wait_for_redis

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]


def database_url() -> str:
    """A DATABASE_URL for the test database itself, so that other processes share the test's rows."""
    db = connection.settings_dict
    if db["ENGINE"] == "django.db.backends.sqlite3":
        return f"sqlite:///{Path(db['NAME']).resolve()}"
    if db["ENGINE"] == "django.db.backends.postgresql":
        user = f"{quote(db['USER'] or '', safe='')}:{quote(db['PASSWORD'] or '', safe='')}@"
        return f"postgres://{user}{quote(db['HOST'] or '', safe='')}:{db['PORT'] or 5432}/{quote(db['NAME'])}"
    pytest.skip(f"no URL for a {db['ENGINE']} test database")


def service_env(var_dir: Path, redis_url: str, **extra: str) -> dict[str, str]:
    """The environment of a production process, pointed at the test database and ``redis_url``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO") and k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(VAR_DIR=str(var_dir), DATABASE_URL=database_url(), REDIS_URL=redis_url, PYTHONUNBUFFERED="1",
               SECRET_KEY="reliability-tests-only-" + "x" * 40, LOG_LEVEL="INFO", **extra)
    return env


class Service:
    """One started process (and its children), its log file, and how to end it."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log_dir: Path) -> None:
        self.name, self.log = name, log_dir / f"{name}.log"
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self, sig: int = signal.SIGKILL, wait: float = 30.0) -> None:
        """Send ``sig`` to the whole process group and wait for the leader to exit."""
        if self.alive():
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=wait)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it lingers; always leaves nothing of the group running."""
        try:
            self.kill(signal.SIGTERM, wait=15)
        except subprocess.TimeoutExpired:
            self.kill(signal.SIGKILL)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # children that outlived their leader
        except ProcessLookupError:
            pass

    def tail(self, chars: int = 3000) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return f"--- last of {self.log} ---\n{text[-chars:]}"


ALL_QUEUES = "rounds,background,celery"


def celery_worker(name: str, env: dict[str, str], log_dir: Path, pool: str = "solo", queues: str = ALL_QUEUES,
                  concurrency: int = 2) -> Service:
    """A worker as the Procfile starts one (prefork), or one process (solo) whose pid holds leases; by default on
    every queue of the product (the Procfile splits them over three workers)."""
    argv = [str(BIN / "celery"), "-A", "cluster_ops", "worker", f"--pool={pool}", f"--concurrency={concurrency}",
            "-Q", queues, "--loglevel=INFO", "--without-mingle", "--without-gossip", f"--hostname={name}@%h"]
    return Service(name, argv, env, log_dir)


def celery_beat(env: dict[str, str], log_dir: Path) -> Service:
    schedule = log_dir / "celerybeat-schedule"
    return Service("beat", [str(BIN / "celery"), "-A", "cluster_ops", "beat", "--loglevel=INFO",
                            f"--schedule={schedule}"], env, log_dir)


def gunicorn(address: str, env: dict[str, str], log_dir: Path) -> Service:
    argv = [str(BIN / "gunicorn"), "cluster_ops.wsgi", "--bind", address, "--workers", "2", "--timeout", "30",
            "--no-control-socket", "--access-logfile", "-"]
    return Service("web", argv, env, log_dir)


class RedisServer:
    """A redis-server of the test's own on a fixed port: stopped and started again on the same port."""

    def __init__(self, port: int, workdir: Path) -> None:
        self.port, self.workdir = port, workdir
        self.service: Service | None = None
        self.url = f"redis://127.0.0.1:{port}/0"

    def start(self) -> None:
        argv = [redis_server_binary(), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", str(self.workdir)]
        self.service = Service(f"redis-{self.port}", argv, {**os.environ}, self.workdir)
        wait_for_redis(self.url)

    def stop(self) -> None:
        if self.service:
            self.service.kill(signal.SIGKILL)  # as a crash: nothing flushed, every connection reset
            self.service = None

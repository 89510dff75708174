"""Fixtures of the telemetry tests: a fake NVML node, a fresh collector, the messages sent to a node's queue."""

from __future__ import annotations

import queue
from collections.abc import Iterator
from typing import Any

import pytest

from cluster_ops.celery import app
from telemetry import collector

from .fake_nvml import FakeGpu, FakeNvml, install

HOST = "gpu01"


@pytest.fixture(autouse=True)
def fresh_collector() -> Iterator[None]:
    """Each test starts with no probe and nothing registered in this process."""
    collector.reset()
    yield
    collector.reset()


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch, settings: Any) -> Iterator[FakeNvml]:
    """Four H100s behind a fake NVML, on a node agent for ``HOST``."""
    settings.NODE_HOSTNAME = HOST
    fake = install(monkeypatch, [FakeGpu(f"GPU-h{i}") for i in range(4)])
    yield fake
    fake.release()


@pytest.fixture
def no_nvml(monkeypatch: pytest.MonkeyPatch, settings: Any) -> FakeNvml:
    """A node agent for ``HOST`` on a machine without an NVIDIA driver."""
    import pynvml

    settings.NODE_HOSTNAME = HOST
    fake = install(monkeypatch, [])
    fake.init_error = pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    return fake


def sent_to(queue_name: str) -> list[tuple[str, str]]:
    """(task name, args repr) of every message waiting in ``queue_name`` of the in-memory broker, consumed."""
    found = []
    with app.connection_for_read() as connection:
        waiting = connection.SimpleQueue(queue_name)
        try:
            while True:
                message = waiting.get(timeout=0.05)
                found.append((message.headers["task"], message.headers["argsrepr"]))
                message.ack()
        except queue.Empty:
            pass
        finally:
            waiting.close()
    return found

"""A fake ``pynvml`` for the one seam (``telemetry/probe.py``): GPUs in memory, faults on demand.

Errors and constants are the real ``pynvml`` ones (pure Python), so the probe catches exactly
the classes it would on a GPU machine; only the functions that would call ``libnvidia-ml`` are
replaced. ``install(monkeypatch)`` puts the fake in ``sys.modules["pynvml"]``.

A ``FakeGpu`` answers every query from its fields; ``fail[function] = exception`` makes that
function raise for it, ``hang`` makes functions block until ``release()``.
"""

from __future__ import annotations

import threading
import types
from dataclasses import dataclass, field
from typing import Any

import pynvml as real

GIB = 1 << 30


@dataclass
class FakeGpu:
    uuid: str
    name: str = "NVIDIA H100 80GB HBM3"
    memory_total: int = 80 * GIB
    memory_used: int = 20 * GIB
    gpu_util: int = 87
    mem_util: int = 41
    power_mw: int = 512_345
    energy_mj: int = 9_000_000
    temperature: int = 64
    sm_clock: int = 1980
    limit_mw: int = 700_000
    constraints_mw: tuple[int, int] = (200_000, 700_000)
    default_mw: int = 700_000
    processes: int = 2
    migs: list[FakeGpu | None] = field(default_factory=list)  # slots; None is an empty one
    fail: dict[str, BaseException] = field(default_factory=dict)
    hang: set[str] = field(default_factory=set)


@dataclass
class Memory:
    total: int
    used: int
    free: int


@dataclass
class Utilization:
    gpu: int
    memory: int


@dataclass
class EventData:
    device: FakeGpu
    eventType: int  # noqa: N815 - pynvml's field name
    eventData: int  # noqa: N815


class FakeNvml:
    """The fake's state: the GPUs on the bus, the init error to raise, calls counted by name."""

    def __init__(self, gpus: list[FakeGpu]) -> None:
        self.gpus = gpus
        self.init_error: BaseException | None = None
        self.calls: dict[str, int] = {}
        self.xids: list[tuple[FakeGpu, int]] = []
        self.events_supported = True
        self.unhang = threading.Event()
        self.module = self._build()

    def release(self) -> None:
        """Let every hung call return (tests call it at the end, so no thread stays blocked)."""
        self.unhang.set()

    def gpu(self, uuid: str) -> FakeGpu:
        return next(g for g in self.all_gpus() if g.uuid == uuid)

    def all_gpus(self) -> list[FakeGpu]:
        return [g for gpu in self.gpus for g in (gpu, *(m for m in gpu.migs if m))]

    # --- the module -----------------------------------------------------------------------

    def _build(self) -> types.ModuleType:
        module = types.ModuleType("pynvml")
        for name in dir(real):
            if name.startswith(("NVMLError", "NVML_", "nvmlEventType")):
                setattr(module, name, getattr(real, name))
        for name in dir(self):
            if name.startswith("nvml"):
                setattr(module, name, getattr(self, name))
        return module

    def _enter(self, function: str, gpu: FakeGpu | None = None) -> None:
        self.calls[function] = self.calls.get(function, 0) + 1
        if gpu is None:
            return
        if function in gpu.hang:
            self.unhang.wait(30)
        if function in gpu.fail:
            raise gpu.fail[function]

    def nvmlInit(self) -> None:
        self._enter("nvmlInit")
        if self.init_error is not None:
            raise self.init_error

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:
        gpu = self.gpus[index]
        self._enter("nvmlDeviceGetHandleByIndex", gpu)
        return gpu

    def nvmlDeviceGetUUID(self, gpu: FakeGpu) -> str:
        self._enter("nvmlDeviceGetUUID", gpu)
        return gpu.uuid

    def nvmlDeviceGetName(self, gpu: FakeGpu) -> str:
        self._enter("nvmlDeviceGetName", gpu)
        return gpu.name

    def nvmlDeviceGetMemoryInfo(self, gpu: FakeGpu) -> Memory:
        self._enter("nvmlDeviceGetMemoryInfo", gpu)
        return Memory(gpu.memory_total, gpu.memory_used, gpu.memory_total - gpu.memory_used)

    def nvmlDeviceGetUtilizationRates(self, gpu: FakeGpu) -> Utilization:
        self._enter("nvmlDeviceGetUtilizationRates", gpu)
        return Utilization(gpu.gpu_util, gpu.mem_util)

    def nvmlDeviceGetPowerUsage(self, gpu: FakeGpu) -> int:
        self._enter("nvmlDeviceGetPowerUsage", gpu)
        return gpu.power_mw

    def nvmlDeviceGetTotalEnergyConsumption(self, gpu: FakeGpu) -> int:
        self._enter("nvmlDeviceGetTotalEnergyConsumption", gpu)
        return gpu.energy_mj

    def nvmlDeviceGetTemperature(self, gpu: FakeGpu, sensor: int) -> int:
        self._enter("nvmlDeviceGetTemperature", gpu)
        assert sensor == real.NVML_TEMPERATURE_GPU
        return gpu.temperature

    def nvmlDeviceGetClockInfo(self, gpu: FakeGpu, clock: int) -> int:
        self._enter("nvmlDeviceGetClockInfo", gpu)
        assert clock == real.NVML_CLOCK_SM
        return gpu.sm_clock

    def nvmlDeviceGetEnforcedPowerLimit(self, gpu: FakeGpu) -> int:
        self._enter("nvmlDeviceGetEnforcedPowerLimit", gpu)
        return gpu.limit_mw

    def nvmlDeviceGetPowerManagementLimitConstraints(self, gpu: FakeGpu) -> list[int]:
        self._enter("nvmlDeviceGetPowerManagementLimitConstraints", gpu)
        return list(gpu.constraints_mw)

    def nvmlDeviceGetPowerManagementDefaultLimit(self, gpu: FakeGpu) -> int:
        self._enter("nvmlDeviceGetPowerManagementDefaultLimit", gpu)
        return gpu.default_mw

    def nvmlDeviceSetPowerManagementLimit(self, gpu: FakeGpu, limit_mw: int) -> None:
        self._enter("nvmlDeviceSetPowerManagementLimit", gpu)
        low, high = gpu.constraints_mw
        if not low <= limit_mw <= high:
            raise real.NVMLError(real.NVML_ERROR_INVALID_ARGUMENT)
        gpu.limit_mw = limit_mw

    def nvmlDeviceGetComputeRunningProcesses(self, gpu: FakeGpu) -> list[object]:
        self._enter("nvmlDeviceGetComputeRunningProcesses", gpu)
        return [object() for _ in range(gpu.processes)]

    def nvmlDeviceGetMigMode(self, gpu: FakeGpu) -> list[int]:
        self._enter("nvmlDeviceGetMigMode", gpu)
        if not gpu.migs:
            raise real.NVMLError(real.NVML_ERROR_NOT_SUPPORTED)
        return [real.NVML_DEVICE_MIG_ENABLE, real.NVML_DEVICE_MIG_ENABLE]

    def nvmlDeviceGetMaxMigDeviceCount(self, gpu: FakeGpu) -> int:
        self._enter("nvmlDeviceGetMaxMigDeviceCount", gpu)
        return len(gpu.migs)

    def nvmlDeviceGetMigDeviceHandleByIndex(self, gpu: FakeGpu, slot: int) -> FakeGpu:
        self._enter("nvmlDeviceGetMigDeviceHandleByIndex", gpu)
        mig = gpu.migs[slot]
        if mig is None:
            raise real.NVMLError(real.NVML_ERROR_NOT_FOUND)
        return mig

    def nvmlEventSetCreate(self) -> str:
        self._enter("nvmlEventSetCreate")
        if not self.events_supported:
            raise real.NVMLError(real.NVML_ERROR_NOT_SUPPORTED)
        return "event-set"

    def nvmlDeviceRegisterEvents(self, gpu: FakeGpu, types_: int, event_set: Any) -> None:
        self._enter("nvmlDeviceRegisterEvents", gpu)

    def nvmlEventSetWait(self, event_set: Any, timeout_ms: int) -> EventData:
        self._enter("nvmlEventSetWait")
        if not self.xids:
            raise real.NVMLError(real.NVML_ERROR_TIMEOUT)
        gpu, code = self.xids.pop(0)
        return EventData(gpu, real.nvmlEventTypeXidCriticalError, code)

    def nvmlEventSetFree(self, event_set: Any) -> None:
        self._enter("nvmlEventSetFree")


def lost() -> BaseException:
    return real.NVMLError(real.NVML_ERROR_GPU_IS_LOST)


def not_supported() -> BaseException:
    return real.NVMLError(real.NVML_ERROR_NOT_SUPPORTED)


def no_permission() -> BaseException:
    return real.NVMLError(real.NVML_ERROR_NO_PERMISSION)


def install(monkeypatch: Any, gpus: list[FakeGpu]) -> FakeNvml:
    """A fake NVML with ``gpus`` on the bus, as ``sys.modules["pynvml"]`` for the test."""
    fake = FakeNvml(gpus)
    monkeypatch.setitem(__import__("sys").modules, "pynvml", fake.module)
    return fake

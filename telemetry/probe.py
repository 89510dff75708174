"""The one seam over NVML: every call to the ``pynvml`` module (package ``nvidia-ml-py``) is made here.

A ``Probe`` lives as long as its process (a node agent keeps one): ``start()`` initialises NVML and
discovers the devices; ``sample()`` reads every device once; ``set_power_limit()`` applies a cap.
Tests replace ``sys.modules["pynvml"]`` with a fake (``tests/telemetry/fake_nvml.py``) and nothing else.

Contract of ``sample()``, for one sick GPU among healthy ones:

* a metric NVML does not support (``NotSupported``, ``NoPermission``, ``FunctionNotFound``) is ``None``,
  never 0; a MIG instance reads only its own memory and processes (the rest is per physical GPU);
* ``GpuIsLost`` / ``Unknown`` on any call: that physical GPU and its MIG instances are in ``lost``, yield
  no reading this time, and NVML is shut down and initialised again at the next sample;
* every call runs in a worker thread with a deadline (NVML can hang on a sick GPU): a call that times out
  gives ``None`` and an ERROR event; ``LOST_AFTER_TIMEOUTS`` timeouts with no clean sample of that GPU in
  between and it is lost;
* XID critical errors the driver reported since the last sample are events (where NVML supports them).

Initialising raises ``NvmlUnavailable`` only where there is no NVML at all (no library, no driver): the
caller then falls back to the simulated source. Any other NVML error at start-up is raised as is, so a
broken driver on a real GPU node is reported, not hidden behind simulated numbers.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .readings import EventKind, GpuEventReading, GpuReading

CALL_TIMEOUT_S = 2.0  # a healthy NVML call takes milliseconds; the process list can take a few hundred
LOST_AFTER_TIMEOUTS = 3  # timed-out calls, with no clean sample between, before a GPU counts as lost
XID_WAIT_MS = 20  # how long a sample waits for the driver's event queue
MAX_XIDS_PER_SAMPLE = 32
MIG_INDEX_BASE = 100  # MIG instance i of GPU n gets inventory index 100·(n+1)+i: unique on its node
MIB = 1 << 20

# Descriptions of the XIDs an operator meets most (NVIDIA's "XID Errors" table).
XID_MEANINGS = {
    13: "graphics engine exception", 31: "GPU memory page fault", 43: "GPU stopped processing",
    45: "preemptive cleanup", 48: "double-bit ECC error", 63: "ECC page retirement or row remapping",
    64: "ECC page retirement or row remapping failure", 74: "NVLink error", 79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate", 94: "contained ECC error", 95: "uncontained ECC error",
    119: "GSP RPC timeout", 120: "GSP error",
}


class NvmlUnavailable(RuntimeError):
    """No NVML on this machine (no library or no driver): use the simulated source."""


class CallTimedOut(Exception):
    """An NVML call did not return within its deadline; its thread is abandoned."""


class _Lost(Exception):
    """The GPU being read fell off the bus or stopped answering."""


@dataclass(frozen=True)
class Device:
    """A GPU or MIG instance as discovery found it; watts are None where NVML does not say."""

    uuid: str
    index: int
    name: str
    memory_mib: int
    power_limit_w: float | None  # enforced now
    power_min_w: float | None = None
    power_max_w: float | None = None
    power_default_w: float | None = None
    mig_parent_uuid: str = ""


@dataclass(frozen=True)
class Sample:
    """One pass over the node: readings of the GPUs that answered, events, and the GPUs lost (uuid → why)."""

    at: datetime
    readings: tuple[GpuReading, ...]
    events: tuple[GpuEventReading, ...]
    lost: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _Read:
    """One NVML call and the reading fields it fills (via ``convert``)."""

    fields: tuple[str, ...]
    function: str
    convert: Callable[[Any], tuple[float | int, ...]]
    args: tuple[str, ...] = ()  # names of pynvml constants passed after the handle
    per_mig: bool = False  # also meaningful on a MIG instance


_READS = (
    _Read(("gpu_util", "mem_util"), "nvmlDeviceGetUtilizationRates", lambda u: (float(u.gpu), float(u.memory))),
    _Read(("mem_used_mib", "mem_total_mib"), "nvmlDeviceGetMemoryInfo",
          lambda m: (m.used / MIB, m.total / MIB), per_mig=True),
    _Read(("power_w",), "nvmlDeviceGetPowerUsage", lambda mw: (mw / 1000.0,)),
    _Read(("energy_j",), "nvmlDeviceGetTotalEnergyConsumption", lambda mj: (mj / 1000.0,)),
    _Read(("temperature_c",), "nvmlDeviceGetTemperature", lambda c: (float(c),), args=("NVML_TEMPERATURE_GPU",)),
    _Read(("sm_clock_mhz",), "nvmlDeviceGetClockInfo", lambda mhz: (float(mhz),), args=("NVML_CLOCK_SM",)),
    _Read(("power_limit_w",), "nvmlDeviceGetEnforcedPowerLimit", lambda mw: (mw / 1000.0,)),
    _Read(("processes",), "nvmlDeviceGetComputeRunningProcesses", lambda procs: (len(procs),), per_mig=True),
)


def call_with_deadline(function: Callable[..., Any], args: tuple[Any, ...], timeout: float) -> Any:
    """``function(*args)`` in a daemon thread; ``CallTimedOut`` if it has not returned after ``timeout`` s.

    Not a ThreadPoolExecutor: its workers are joined at interpreter exit, so one NVML call hung for ever
    would keep the worker process from ever exiting. A daemon thread is simply abandoned.
    """
    future: Future[Any] = Future()

    def run() -> None:
        try:
            future.set_result(function(*args))
        except BaseException as error:  # noqa: BLE001 - handed to the caller through the future
            future.set_exception(error)

    threading.Thread(target=run, name="nvml-call", daemon=True).start()
    try:
        return future.result(timeout)
    except FutureTimeout:
        raise CallTimedOut(f"{getattr(function, '__name__', function)} did not return within {timeout:g} s") from None


class Probe:
    """NVML on this machine, kept initialised between samples; not thread-safe (the collector holds a lock)."""

    def __init__(self, nvml: Any = None, call_timeout: float = CALL_TIMEOUT_S) -> None:
        self._nvml = nvml
        self.call_timeout = call_timeout
        self.devices: tuple[Device, ...] = ()
        self._handles: dict[str, Any] = {}
        self._known: dict[str, Device] = {}  # every device ever discovered: a vanished one is lost
        self._timeouts: dict[str, int] = {}
        self._reported: set[tuple[str, str, str]] = set()  # (uuid, function, error) already told
        self._event_log: list[GpuEventReading] = []  # collection errors of the sample under way
        self._events: Any = None  # NVML event set for XIDs; None where unsupported
        self._started = False
        self._restart = False

    # --- life cycle ---------------------------------------------------------------------

    @property
    def nvml(self) -> Any:
        """The ``pynvml`` module, imported on first use; ``NvmlUnavailable`` if it is not installed."""
        if self._nvml is None:
            try:
                self._nvml = importlib.import_module("pynvml")
            except ImportError as error:
                raise NvmlUnavailable(f"pynvml is not installed: {error}") from None
        return self._nvml

    def start(self) -> None:
        """Initialise NVML and discover the devices, unless already done; ``NvmlUnavailable`` if no NVML."""
        if self._restart:
            self.close()
        if self._started:
            return
        nvml = self.nvml
        try:
            self._call(nvml.nvmlInit)
        except (nvml.NVMLError_LibraryNotFound, nvml.NVMLError_DriverNotLoaded) as error:
            raise NvmlUnavailable(f"no NVML here: {error}") from None
        self._started, self._restart = True, False
        self._discover()
        self._watch_xids()

    def close(self) -> None:
        """Free the event set and shut NVML down (errors ignored: the GPU may be gone)."""
        if self._started:
            if self._events is not None:
                self._quietly("nvmlEventSetFree", self._events)
            self._quietly("nvmlShutdown")
        self._started, self._restart, self._events = False, False, None
        self._handles, self.devices = {}, ()

    # --- discovery ----------------------------------------------------------------------

    def _discover(self) -> None:
        found: list[Device] = []
        for index in range(self._call(self.nvml.nvmlDeviceGetCount)):
            try:
                found.extend(self._discover_gpu(index))
            except (_Lost, CallTimedOut, self.nvml.NVMLError):
                continue  # not discovered: lost if it was known (see sample())
        self.devices = tuple(found)
        self._known.update({device.uuid: device for device in found})

    def _discover_gpu(self, index: int) -> Iterator[Device]:
        handle = self._device_call("", "nvmlDeviceGetHandleByIndex", index)
        uuid = _text(self._device_call("", "nvmlDeviceGetUUID", handle))
        self._handles[uuid] = handle
        limits = self._power_limits(uuid, handle)
        memory = self._optional(uuid, "nvmlDeviceGetMemoryInfo", handle)
        name = _text(self._device_call(uuid, "nvmlDeviceGetName", handle))
        yield Device(uuid, index, name, int(memory.total // MIB) if memory else 0, *limits)
        if self._mig_enabled(uuid, handle):
            yield from self._discover_mig(Device(uuid, index, name, 0, limits[0]), handle)

    def _power_limits(self, uuid: str, handle: Any) -> tuple[float | None, float | None, float | None, float | None]:
        """(enforced, min, max, default) in watts; None where unsupported."""
        enforced = self._optional(uuid, "nvmlDeviceGetEnforcedPowerLimit", handle)
        constraints = self._optional(uuid, "nvmlDeviceGetPowerManagementLimitConstraints", handle)
        default = self._optional(uuid, "nvmlDeviceGetPowerManagementDefaultLimit", handle)
        low, high = constraints if constraints else (None, None)
        return _watts(enforced), _watts(low), _watts(high), _watts(default)

    def _mig_enabled(self, uuid: str, handle: Any) -> bool:
        mode = self._optional(uuid, "nvmlDeviceGetMigMode", handle)
        return bool(mode) and mode[0] == self.nvml.NVML_DEVICE_MIG_ENABLE

    def _discover_mig(self, parent: Device, handle: Any) -> Iterator[Device]:
        """The MIG instances of ``parent``: own UUIDs and memory, the parent's limit, no constraints (cap the
        parent: NVML sets power limits per physical GPU)."""
        for slot in range(self._device_call(parent.uuid, "nvmlDeviceGetMaxMigDeviceCount", handle)):
            try:
                mig = self._device_call(parent.uuid, "nvmlDeviceGetMigDeviceHandleByIndex", handle, slot)
            except self.nvml.NVMLError_NotFound:
                continue  # an empty slot
            uuid = _text(self._device_call(parent.uuid, "nvmlDeviceGetUUID", mig))
            self._handles[uuid] = mig
            memory = self._optional(uuid, "nvmlDeviceGetMemoryInfo", mig)
            yield Device(uuid, MIG_INDEX_BASE * (parent.index + 1) + slot, f"{parent.name} MIG {slot}",
                         int(memory.total // MIB) if memory else 0, parent.power_limit_w,
                         mig_parent_uuid=parent.uuid)

    def _watch_xids(self) -> None:
        """Register every physical GPU for XID critical errors; skip quietly where unsupported."""
        nvml = self.nvml
        try:
            self._events = self._call(nvml.nvmlEventSetCreate)
        except (nvml.NVMLError, CallTimedOut):
            self._events = None
            return
        for device in self.devices:
            if not device.mig_parent_uuid:
                self._quietly("nvmlDeviceRegisterEvents", self._handles[device.uuid],
                              nvml.nvmlEventTypeXidCriticalError, self._events)

    # --- sampling -----------------------------------------------------------------------

    def sample(self) -> Sample:
        """Read every device once (see the module docstring for what a failure yields)."""
        self.start()
        at, readings, lost = datetime.now(UTC), [], {}
        self._event_log = []
        for group in self._groups():
            try:
                readings.extend([self._read(device, at) for device in group])
            except _Lost as why:
                lost.update({device.uuid: str(why) for device in group})
        present = {device.uuid for device in self.devices}
        lost.update({uuid: "no longer found by NVML" for uuid in self._known if uuid not in present})
        self._restart = bool(lost)  # NVML is shut down and initialised again before the next sample
        events = [*self._event_log, *self._xids(at)]
        return Sample(at, tuple(readings), tuple(events), lost)

    def _groups(self) -> Iterator[list[Device]]:
        """Each physical GPU with its MIG instances: they are lost together."""
        for device in self.devices:
            if not device.mig_parent_uuid:
                yield [device, *(mig for mig in self.devices if mig.mig_parent_uuid == device.uuid)]

    def _read(self, device: Device, at: datetime) -> GpuReading:
        values: dict[str, float | int | None] = {}
        handle, timeouts = self._handles[device.uuid], self._timeouts.get(device.uuid, 0)
        for read in _READS:
            if device.mig_parent_uuid and not read.per_mig:
                continue  # NVML measures this per physical GPU: None here, the parent has it
            args = tuple(getattr(self.nvml, name) for name in read.args)
            raw = self._metric(device.uuid, read.function, handle, *args)
            values.update(zip(read.fields, read.convert(raw) if raw is not None else (None,) * len(read.fields),
                              strict=True))
        if self._timeouts.get(device.uuid, 0) == timeouts:
            self._timeouts.pop(device.uuid, None)  # a whole sample without a timeout: the count starts again
        return GpuReading(uuid=device.uuid, at=at, **values)  # type: ignore[arg-type]

    def _metric(self, uuid: str, function: str, *args: Any) -> Any:
        """One metric: None when unsupported, timed out (plus an ERROR event) or failing otherwise."""
        nvml = self.nvml
        try:
            value = self._device_call(uuid, function, *args)
        except CallTimedOut as error:
            self._event(uuid, EventKind.ERROR, f"{function}: {error}")
            return None
        except (nvml.NVMLError_NotSupported, nvml.NVMLError_NoPermission, nvml.NVMLError_FunctionNotFound):
            return None
        except nvml.NVMLError as error:  # told once until it works again, not every sample
            if (uuid, function, str(error)) not in self._reported:
                self._reported.add((uuid, function, str(error)))
                self._event(uuid, EventKind.ERROR, f"{function}: {error}")
            return None
        self._reported -= {key for key in self._reported if key[:2] == (uuid, function)}
        return value

    def _xids(self, at: datetime) -> Iterator[GpuEventReading]:
        """XID critical errors waiting in the event set (at most ``MAX_XIDS_PER_SAMPLE``)."""
        nvml = self.nvml
        for _ in range(MAX_XIDS_PER_SAMPLE if self._events is not None else 0):
            try:
                data = call_with_deadline(nvml.nvmlEventSetWait, (self._events, XID_WAIT_MS),
                                          self.call_timeout + XID_WAIT_MS / 1000)
                uuid = _text(self._call(nvml.nvmlDeviceGetUUID, data.device))
            except (nvml.NVMLError, CallTimedOut):
                return  # NVML_ERROR_TIMEOUT: the queue is empty
            if data.eventType & nvml.nvmlEventTypeXidCriticalError:
                code = int(data.eventData)
                meaning = XID_MEANINGS.get(code, "see NVIDIA's XID table")
                yield GpuEventReading(uuid, at, EventKind.XID, f"XID {code}: {meaning}", code=code)

    # --- power limits -------------------------------------------------------------------

    def set_power_limit(self, uuid: str, watts: float) -> float:
        """Set the GPU's power limit and return the limit NVML enforces afterwards, in watts.

        Raises the NVML error (``NVMLError_NoPermission``: not root; ``NVMLError_InvalidArgument``: out of
        range; ``NVMLError_NotSupported``) or ``CallTimedOut``; ``KeyError`` for a GPU not on this node.
        The v1 setter: in nvidia-ml-py 13.615.71 the v2 setter ignores NVML's return code.
        """
        self.start()
        handle, nvml = self._handles[uuid], self.nvml
        self._call(nvml.nvmlDeviceSetPowerManagementLimit, handle, round(watts * 1000))
        return float(self._call(nvml.nvmlDeviceGetEnforcedPowerLimit, handle)) / 1000.0

    def power_limit(self, uuid: str) -> float:
        """The limit NVML enforces on the GPU now, in watts (read-only)."""
        self.start()
        return float(self._call(self.nvml.nvmlDeviceGetEnforcedPowerLimit, self._handles[uuid])) / 1000.0

    # --- calls --------------------------------------------------------------------------

    def _call(self, function: Callable[..., Any], *args: Any) -> Any:
        return call_with_deadline(function, args, self.call_timeout)

    def _device_call(self, uuid: str, function: str, *args: Any) -> Any:
        """Call ``pynvml.<function>`` for GPU ``uuid``: ``_Lost`` when NVML says it is gone or it keeps hanging."""
        nvml = self.nvml
        try:
            value = self._call(getattr(nvml, function), *args)
        except CallTimedOut:
            self._timeouts[uuid] = self._timeouts.get(uuid, 0) + 1
            if self._timeouts[uuid] >= LOST_AFTER_TIMEOUTS:
                self._timeouts[uuid] = 0
                raise _Lost(f"stopped answering: {LOST_AFTER_TIMEOUTS} NVML calls timed out") from None
            raise
        except (nvml.NVMLError_GpuIsLost, nvml.NVMLError_Unknown) as error:
            raise _Lost(f"{function}: {error}") from None
        return value

    def _optional(self, uuid: str, function: str, *args: Any) -> Any:
        """A discovery detail: None where NVML does not support it (a lost GPU still raises ``_Lost``)."""
        try:
            return self._device_call(uuid, function, *args)
        except (self.nvml.NVMLError, CallTimedOut):
            return None

    def _quietly(self, function: str, *args: Any) -> None:
        try:
            self._call(getattr(self.nvml, function), *args)
        except (self.nvml.NVMLError, CallTimedOut):
            pass

    def _event(self, uuid: str, kind: EventKind, message: str) -> None:
        self._event_log.append(GpuEventReading(uuid, datetime.now(UTC), kind, message))



def _text(value: Any) -> str:
    """pynvml returns str since 11.x, bytes before."""
    return value.decode() if isinstance(value, bytes) else str(value)


def _watts(milliwatts: Any) -> float | None:
    return None if milliwatts is None else float(milliwatts) / 1000.0

"""The NVML seam against a fake ``pynvml``: units, unsupported metrics, lost and hung GPUs, MIG, XIDs."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from telemetry.probe import NvmlUnavailable, Probe
from telemetry.readings import EventKind

from .fake_nvml import FakeGpu, FakeNvml, install, lost, no_permission, not_supported


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeNvml]:
    fake = install(monkeypatch, [FakeGpu(f"GPU-{i}") for i in range(3)])
    yield fake
    fake.release()


def by_uuid(sample):  # type: ignore[no-untyped-def]
    return {reading.uuid: reading for reading in sample.readings}


def test_reads_every_metric_in_product_units(nvml: FakeNvml) -> None:
    reading = by_uuid(Probe().sample())["GPU-0"]
    assert (reading.gpu_util, reading.mem_util) == (87.0, 41.0)
    assert (reading.mem_used_mib, reading.mem_total_mib) == (20 * 1024, 80 * 1024)
    assert reading.power_w == pytest.approx(512.345)  # mW → W
    assert reading.energy_j == pytest.approx(9000.0)  # mJ → J
    assert (reading.temperature_c, reading.sm_clock_mhz, reading.power_limit_w, reading.processes) == (
        64.0, 1980.0, 700.0, 2
    )
    assert reading.simulated is False


def test_discovery_reads_power_constraints(nvml: FakeNvml) -> None:
    probe = Probe()
    probe.start()
    device = probe.devices[1]
    assert (device.uuid, device.index, device.name, device.memory_mib) == ("GPU-1", 1, "NVIDIA H100 80GB HBM3", 81920)
    assert (device.power_limit_w, device.power_min_w, device.power_max_w, device.power_default_w) == (
        700.0, 200.0, 700.0, 700.0
    )


def test_unsupported_or_forbidden_metrics_are_none_not_zero(nvml: FakeNvml) -> None:
    gpu = nvml.gpu("GPU-0")
    gpu.fail.update(nvmlDeviceGetTotalEnergyConsumption=not_supported(), nvmlDeviceGetPowerUsage=not_supported(),
                    nvmlDeviceGetComputeRunningProcesses=no_permission())
    sample = Probe().sample()
    reading = by_uuid(sample)["GPU-0"]
    assert (reading.energy_j, reading.power_w, reading.processes) == (None, None, None)
    assert reading.temperature_c == 64.0
    assert not sample.events and not sample.lost


def test_a_gpu_lost_mid_sample_is_skipped_and_nvml_restarted(nvml: FakeNvml) -> None:
    probe = Probe()
    probe.sample()
    nvml.gpu("GPU-1").fail["nvmlDeviceGetTemperature"] = lost()
    sample = probe.sample()
    assert set(by_uuid(sample)) == {"GPU-0", "GPU-2"}  # the others are still read
    assert "GPU is lost" in sample.lost["GPU-1"]
    assert nvml.calls.get("nvmlShutdown", 0) == 0

    del nvml.gpu("GPU-1").fail["nvmlDeviceGetTemperature"]
    again = probe.sample()
    assert nvml.calls["nvmlShutdown"] == 1 and nvml.calls["nvmlInit"] == 2  # re-initialised
    assert set(by_uuid(again)) == {"GPU-0", "GPU-1", "GPU-2"} and not again.lost


def test_a_gpu_gone_from_the_bus_stays_lost(nvml: FakeNvml) -> None:
    probe = Probe()
    probe.sample()
    nvml.gpus.pop(2)
    nvml.gpu("GPU-1").fail["nvmlDeviceGetUtilizationRates"] = lost()
    assert set(probe.sample().lost) == {"GPU-1"}  # GPU-2's handle still answers until NVML restarts…
    nvml.gpu("GPU-1").fail.clear()
    assert set(probe.sample().lost) == {"GPU-2"}  # …then it is missing


def test_a_hung_call_times_out_with_an_event_and_repeated_hangs_mean_lost(nvml: FakeNvml) -> None:
    probe = Probe(call_timeout=0.05)
    probe.start()
    nvml.gpu("GPU-0").hang.add("nvmlDeviceGetTemperature")
    started = time.monotonic()
    first = probe.sample()
    reading = by_uuid(first)["GPU-0"]
    assert reading.temperature_c is None and reading.power_w == pytest.approx(512.345)
    assert [(e.uuid, e.kind) for e in first.events] == [("GPU-0", EventKind.ERROR)]
    assert "did not return" in first.events[0].message
    probe.sample()
    third = probe.sample()
    assert "timed out" in third.lost["GPU-0"] and "GPU-1" in by_uuid(third)
    assert time.monotonic() - started < 2


def test_energy_counter_reset_flows_through_as_read(nvml: FakeNvml) -> None:
    probe = Probe()
    before = by_uuid(probe.sample())["GPU-0"].energy_j
    nvml.gpu("GPU-0").energy_mj = 1_500  # driver reloaded: the counter starts again
    after = by_uuid(probe.sample())["GPU-0"].energy_j
    assert (before, after) == (9000.0, 1.5)


def test_mig_instances_have_own_uuids_and_only_per_instance_metrics(monkeypatch: pytest.MonkeyPatch) -> None:
    migs = [FakeGpu("MIG-a", memory_total=10 * 1 << 30, memory_used=1 << 30, processes=1), None,
            FakeGpu("MIG-b", memory_total=20 * 1 << 30, memory_used=0, processes=0)]
    parent = FakeGpu("GPU-p", name="NVIDIA A100-SXM4-80GB", migs=migs)
    install(monkeypatch, [parent])
    probe = Probe()
    sample = probe.sample()
    devices = {device.uuid: device for device in probe.devices}
    assert set(devices) == {"GPU-p", "MIG-a", "MIG-b"}
    assert (devices["MIG-a"].mig_parent_uuid, devices["MIG-a"].index, devices["MIG-a"].memory_mib) == (
        "GPU-p", 100, 10240
    )
    assert devices["MIG-b"].index == 102 and devices["MIG-b"].power_min_w is None
    mig = by_uuid(sample)["MIG-a"]
    assert (mig.mem_used_mib, mig.processes) == (1024, 1)
    assert (mig.gpu_util, mig.power_w, mig.energy_j, mig.temperature_c) == (None, None, None, None)
    assert by_uuid(sample)["GPU-p"].power_w == pytest.approx(512.345)


def test_a_lost_parent_takes_its_mig_instances_with_it(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = install(monkeypatch, [FakeGpu("GPU-p", migs=[FakeGpu("MIG-a")]), FakeGpu("GPU-q")])
    probe = Probe()
    probe.sample()
    fake.gpu("GPU-p").fail["nvmlDeviceGetPowerUsage"] = lost()
    sample = probe.sample()
    assert set(sample.lost) == {"GPU-p", "MIG-a"} and set(by_uuid(sample)) == {"GPU-q"}


def test_xid_errors_become_events(nvml: FakeNvml) -> None:
    probe = Probe()
    probe.start()
    nvml.xids.append((nvml.gpu("GPU-2"), 79))
    events = probe.sample().events
    assert [(e.uuid, e.kind, e.code) for e in events] == [("GPU-2", EventKind.XID, 79)]
    assert "fallen off the bus" in events[0].message
    assert not probe.sample().events


def test_no_event_support_is_skipped(nvml: FakeNvml) -> None:
    nvml.events_supported = False
    assert len(Probe().sample().readings) == 3


@pytest.mark.parametrize("code", ["NVML_ERROR_LIBRARY_NOT_FOUND", "NVML_ERROR_DRIVER_NOT_LOADED"])
def test_no_nvml_here(nvml: FakeNvml, code: str) -> None:
    import pynvml

    nvml.init_error = pynvml.NVMLError(getattr(pynvml, code))
    with pytest.raises(NvmlUnavailable, match="no NVML here"):
        Probe().start()


def test_other_init_errors_are_not_hidden(nvml: FakeNvml) -> None:
    import pynvml

    nvml.init_error = pynvml.NVMLError(pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH)
    with pytest.raises(pynvml.NVMLError):
        Probe().start()


def test_set_power_limit_reads_back_the_enforced_limit(nvml: FakeNvml) -> None:
    probe = Probe()
    assert probe.set_power_limit("GPU-0", 450) == 450.0
    assert nvml.gpu("GPU-0").limit_mw == 450_000
    nvml.gpu("GPU-1").fail["nvmlDeviceSetPowerManagementLimit"] = no_permission()
    import pynvml

    with pytest.raises(pynvml.NVMLError_NoPermission):
        probe.set_power_limit("GPU-1", 450)

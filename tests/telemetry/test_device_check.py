"""The device check's Python half, run against the fake NVML: it is run once, by someone else, on a GPU machine."""

from __future__ import annotations

from types import ModuleType

import pytest

from tests.scripts import load_script

from .fake_nvml import FakeNvml


def device_check() -> ModuleType:
    return load_script("device_check")


@pytest.mark.django_db
def test_device_check_reports_every_gpu_and_restores_a_cap(nvml: FakeNvml, capsys: pytest.CaptureFixture) -> None:
    nvml.xids.append((nvml.gpus[1], 79))
    assert device_check().main(["--seconds", "0.3", "--every", "0.1", "--no-load", "--set-cap", "300"]) == 0
    out = capsys.readouterr().out
    assert "node gpu01: 4 device(s)" in out and "GPU-h3" in out
    assert "utilisation %: min 87.0 / avg 87.0 / max 87.0" in out
    assert "energy: 0.0 J over" in out and "enforced read back: 700 W" in out
    assert "XID 79" in out
    assert out.count("set cap 300 W on gpu01/gpu") == 4 and "restored to 700 W" in out
    assert nvml.gpus[0].limit_mw == 700_000
    assert out.rstrip().endswith("device check: OK")


@pytest.mark.django_db
def test_device_check_without_nvml_says_so(no_nvml: FakeNvml, capsys: pytest.CaptureFixture) -> None:
    assert device_check().main(["--no-load"]) == 2
    assert "no NVML here" in capsys.readouterr().err

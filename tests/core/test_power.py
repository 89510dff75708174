"""The power model: datasheet defaults, Zeus' cap curve reproduced exactly, a documented rise below 0.5, refusals."""

import math

import pytest

from scheduler.core.power import (
    DEFAULT_SPECS,
    GpuPowerSpec,
    PowerModel,
    energy_factor,
    power_factor,
    throughput_factor,
    time_factor,
)

# Zeus (NSDI'23), V100 at 0.9 / 0.8 / 0.7 / 0.6 of the maximum power limit: 1.3 / 3.7 / 6.3 / 11.2 % slower,
# 4.6 / 10.3 / 15.5 / 19.4 % less energy.
ZEUS = [(0.9, 1.013, 0.954), (0.8, 1.037, 0.897), (0.7, 1.063, 0.845), (0.6, 1.112, 0.806)]


def test_default_specs_follow_the_datasheets() -> None:
    tdp = {gpu_type: spec.tdp_w for gpu_type, spec in DEFAULT_SPECS.items()}
    assert tdp == {"t4": 70, "v100": 300, "a100": 400, "h100": 700, "rtx6000": 260, "rtx2080ti": 250, "p100": 250,
                   "k80": 150}  # K80: 300 W per board, two GPUs per board
    # idle 25 % and training draw 80 % of TDP: a V100 idles at 75 W and trains at 240 W.
    assert DEFAULT_SPECS["v100"] == GpuPowerSpec(idle_w=75.0, max_w=240.0, tdp_w=300)


@pytest.mark.parametrize("cap, slower, energy", ZEUS)
def test_zeus_points_are_reproduced_exactly(cap: float, slower: float, energy: float) -> None:
    assert time_factor(cap) == pytest.approx(slower, abs=1e-12)
    assert throughput_factor(cap) == pytest.approx(1 / slower, abs=1e-12)
    assert energy_factor(cap) == pytest.approx(energy, abs=1e-12)
    assert power_factor(cap) == pytest.approx(energy / slower, abs=1e-12)


def test_no_cap_changes_nothing() -> None:
    assert (time_factor(1.0), energy_factor(1.0), power_factor(1.0)) == pytest.approx((1.0, 1.0, 1.0), abs=1e-12)


def test_curves_are_monotone_between_the_points() -> None:
    caps = [0.6 + i * 0.004 for i in range(101)]  # 0.6 … 1.0
    times = [time_factor(c) for c in caps]
    energies = [energy_factor(c) for c in caps]
    assert all(a >= b for a, b in zip(times, times[1:], strict=False))  # a tighter cap is never faster
    assert all(a <= b for a, b in zip(energies, energies[1:], strict=False))  # …and, down to 0.6, never costlier


def test_energy_bottoms_out_at_half_power_and_rises_below() -> None:
    # PCHIP's end slope at 0.6 (three-point formula): ((2·0.1 + 0.1)·0.39 − 0.1·0.52) / 0.2 = 0.325 per unit cap.
    # Parabola with its minimum at 0.5: a = 0.325 / (2·0.1) = 1.625, e_min = 0.806 − 1.625·0.1² = 0.78975.
    assert energy_factor(0.5) == pytest.approx(0.78975, abs=1e-12)
    assert energy_factor(0.4) == pytest.approx(0.806, abs=1e-12)  # symmetric about 0.5
    assert energy_factor(0.3) == pytest.approx(0.78975 + 1.625 * 0.04, abs=1e-12)
    assert energy_factor(0.6) > energy_factor(0.5) < energy_factor(0.4) < energy_factor(0.3) < energy_factor(0.1)


def test_slowdown_below_the_data_is_energy_over_a_draw_that_falls_with_the_cap() -> None:
    # draw at 0.5 = (0.806 / 1.112)·(0.5 / 0.6); slowdown = 0.78975 / that = 0.78975·1.112·1.2 / 0.806 = 1.30750
    assert power_factor(0.5) == pytest.approx(0.806 / 1.112 * 0.5 / 0.6, abs=1e-12)
    assert time_factor(0.5) == pytest.approx(0.78975 * 1.112 * 1.2 / 0.806, abs=1e-12)
    assert time_factor(0.59) > time_factor(0.6)  # continuous at 0.6, and steeper below it
    assert time_factor(0.6) == pytest.approx(1.112, abs=1e-12)
    assert time_factor(0.01) > 50  # unbounded as the cap goes to 0


@pytest.mark.parametrize("bad", [0.0, -0.2, 1.01, 2.0, math.nan])
def test_a_cap_outside_zero_to_one_is_refused_by_name(bad: float) -> None:
    for function in (time_factor, throughput_factor, energy_factor, power_factor):
        with pytest.raises(ValueError, match=r"power cap fraction must be in \(0, 1\].*" + str(bad)):
            function(bad)
    with pytest.raises(ValueError, match=str(bad)):
        PowerModel(cap_fraction=bad)


def test_busy_and_idle_watts_under_a_cap() -> None:
    model = PowerModel()
    assert model.busy_gpu_power_w("v100") == pytest.approx(240.0)
    assert model.idle_gpu_power_w("v100") == pytest.approx(75.0)
    # at 0.6: 240 W × (0.806 / 1.112) = 173.96 W, under the 180 W limit
    capped = model.at_cap(0.6)
    assert capped.busy_gpu_power_w("v100") == pytest.approx(240 * 0.806 / 1.112)
    assert capped.limit_w("v100") == pytest.approx(180.0)
    assert capped.throughput_factor == pytest.approx(1 / 1.112) and capped.energy_factor == pytest.approx(0.806)


def test_a_type_cap_overrides_the_all_types_cap_for_that_type_only() -> None:
    model = PowerModel(cap_fraction=0.9, type_caps={"a100": 0.6})
    assert (model.cap_for("a100"), model.cap_for("t4")) == (0.6, 0.9)
    assert model.limit_w("a100") == pytest.approx(240.0) and model.limit_w("t4") == pytest.approx(63.0)
    assert model.busy_gpu_power_w("a100") == pytest.approx(PowerModel(cap_fraction=0.6).busy_gpu_power_w("a100"))
    assert model.throughput_factors() == pytest.approx({"a100": 1 / 1.112})
    assert model.at_cap(1.0).type_caps == {"a100": 0.6} and model.at_cap(1.0, {}).type_caps == {}
    with pytest.raises(ValueError, match="GPU type 'a100'"):
        PowerModel(type_caps={"a100": 1.2})
    with pytest.raises(ValueError, match="no power spec for GPU type 'b200'"):
        PowerModel(type_caps={"b200": 0.8})


@pytest.mark.parametrize("gpu_type", sorted(DEFAULT_SPECS))
@pytest.mark.parametrize("cap, slower, energy", ZEUS)
def test_watts_times_slowdown_is_zeus_energy_for_every_type(gpu_type: str, cap: float, slower: float,
                                                            energy: float) -> None:
    # The same relative curve on every type: busy watts × run time (×slowdown) ÷ uncapped watts = Zeus' energy.
    uncapped = PowerModel().busy_gpu_power_w(gpu_type)
    assert PowerModel(cap_fraction=cap).busy_gpu_power_w(gpu_type) * slower / uncapped == pytest.approx(energy)


@pytest.mark.parametrize("cap", [0.05, 0.2, 0.3, 0.55, 0.75, 1.0])
def test_draw_stays_between_idle_and_the_enforced_limit(cap: float) -> None:
    model = PowerModel(cap_fraction=cap)
    for gpu_type in DEFAULT_SPECS:
        assert model.idle_gpu_power_w(gpu_type) <= model.busy_gpu_power_w(gpu_type) <= model.limit_w(gpu_type) + 1e-9


def test_power_is_linear_in_utilisation() -> None:
    model = PowerModel()
    assert model.power_w("v100", 0.5) == pytest.approx((75 + 240) / 2)  # 157.5 W
    assert model.power_w("t4", 0.0) == model.idle_gpu_power_w("t4")
    with pytest.raises(ValueError, match="1.5"):
        model.power_w("v100", 1.5)


def test_an_unknown_gpu_type_is_refused_naming_it_and_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"'m60'.*known: a100, h100, k80"):
        PowerModel().busy_gpu_power_w("m60")
    custom = PowerModel(specs={**DEFAULT_SPECS, "m60": GpuPowerSpec(idle_w=30, max_w=120, tdp_w=150)})
    assert custom.busy_gpu_power_w("m60") == 120


def test_facility_energy_co2_and_cost() -> None:
    model = PowerModel(pue=1.5, grid_g_co2_per_kwh=400, price_per_kwh=0.2)
    # 10 kWh of GPUs → 15 kWh at the meter → 15 × 400 g = 6 kg CO₂, 15 × 0.2 = 3.0
    assert (model.facility_kwh(10), model.co2_kg(10), model.cost(10)) == pytest.approx((15.0, 6.0, 3.0))
    default = PowerModel()
    assert (default.pue, default.grid_g_co2_per_kwh, default.price_per_kwh) == (1.58, 475.0, 0.10)


@pytest.mark.parametrize("kwargs", [{"pue": 0.9}, {"grid_g_co2_per_kwh": -1}, {"price_per_kwh": -0.1}])
def test_impossible_site_figures_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        PowerModel(**kwargs)  # type: ignore[arg-type]


def test_an_inconsistent_spec_is_refused() -> None:
    with pytest.raises(ValueError, match="idle_w ≤ max_w ≤ tdp_w"):
        GpuPowerSpec(idle_w=100, max_w=50, tdp_w=300)

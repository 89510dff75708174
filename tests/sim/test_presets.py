"""Cluster presets: the right GPUs by type, nodes with stable ids, bad machine lists named."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from django.conf import settings

from scheduler.sim.presets import (
    DEMO,
    POLLUX_T4,
    PRESET_LOADERS,
    ClusterPreset,
    NodeGroup,
    alibaba_pai_preset,
    build_nodes,
    get_preset,
    philly_preset,
)
from scheduler.sim.traces import TraceError

REAL = settings.TRACES_DIR


@pytest.fixture
def traces(fixtures_dir: Path) -> Path:
    return fixtures_dir / "traces"


def test_fixed_presets() -> None:
    assert (POLLUX_T4.total_gpus, POLLUX_T4.gpus_by_type) == (64, {"t4": 64})
    assert (DEMO.total_gpus, DEMO.gpus_by_type) == (128, {"a100": 64, "v100": 64})


def test_philly_is_its_vcs_at_eight_gpus_a_node(traces: Path) -> None:
    preset = philly_preset(traces)
    assert preset.nodes == (NodeGroup("v100", 8, 6),)
    assert dict(preset.tenant_quotas) == {"6214e9": 32, "11cb48": 16}


def test_pai_groups_gpu_machines_by_type_and_size(traces: Path) -> None:
    preset = alibaba_pai_preset(traces)
    # CPU machine m1 left out; V100M32 counts as v100; K80 and MISC keep their own keys.
    assert preset.nodes == (
        NodeGroup("v100", 8, 2), NodeGroup("misc", 8, 1), NodeGroup("k80", 4, 1),
        NodeGroup("t4", 2, 2), NodeGroup("p100", 2, 1),
    )
    assert preset.gpus_by_type == {"v100": 16, "misc": 8, "k80": 4, "t4": 4, "p100": 2}


def test_a_pai_header_row_is_skipped_and_a_bad_cell_named(traces: Path, tmp_path: Path) -> None:
    spec = tmp_path / "alibaba-pai-2020" / "pai_machine_spec.csv"
    spec.parent.mkdir()
    rows = (traces / "alibaba-pai-2020" / "pai_machine_spec.csv").read_text()
    spec.write_text("machine,gpu_type,cap_cpu,cap_mem,cap_gpu\n" + rows)
    assert alibaba_pai_preset(tmp_path) == alibaba_pai_preset(traces)
    spec.write_text(rows + "m9,T4,64,256,two\n")
    with pytest.raises(TraceError) as error:
        alibaba_pai_preset(tmp_path)
    assert str(error.value).startswith(f"{spec}, line 9, column 'cap_gpu': expected an integer")


def test_a_bad_philly_vc_list_is_named(tmp_path: Path, traces: Path) -> None:
    shutil.copytree(traces / "philly", tmp_path / "philly")
    path = tmp_path / "philly" / "philly_vc_nodes.csv"
    path.write_text("vc,node num\n6214e9,0\n")
    with pytest.raises(TraceError, match=r"line 2, column 'node num': expected a value ≥ 1"):
        philly_preset(tmp_path)


def test_build_nodes_names_nodes_and_gpus_stably() -> None:
    nodes = build_nodes(DEMO)
    assert [node.name for node in nodes[:2]] == ["n0000", "n0001"]
    assert [node.gpu_type for node in nodes] == ["a100"] * 8 + ["v100"] * 8
    assert nodes[3].gpus[5].id == "n0003-g5"
    assert nodes == build_nodes(DEMO)
    assert sum(len(node.gpus) for node in nodes) == DEMO.total_gpus


def test_presets_by_name_and_invalid_ones(traces: Path) -> None:
    assert {name: get_preset(name, traces).name for name in PRESET_LOADERS} == {name: name for name in PRESET_LOADERS}
    with pytest.raises(ValueError, match="unknown cluster preset 'tpu'.*alibaba-pai"):
        get_preset("tpu", traces)
    with pytest.raises(ValueError, match="at least one node group"):
        ClusterPreset("empty", ())
    with pytest.raises(ValueError, match="≥ 1 node"):
        NodeGroup("t4", 4, 0)


@pytest.mark.needs("traces")
def test_the_real_pai_cluster_matches_its_provenance() -> None:
    preset = alibaba_pai_preset(REAL)
    # PROVENANCE.md: MISC 2,240, P100 1,596, V100M32 1,080, T4 994, V100 832 (6,742 total).
    assert preset.gpus_by_type == {"misc": 2240, "v100": 1080 + 832, "p100": 1596, "t4": 994}
    assert preset.total_gpus == 6742
    nodes = build_nodes(preset)
    assert len({gpu.id for node in nodes for gpu in node.gpus}) == 6742


@pytest.mark.needs("traces")
def test_the_real_philly_cluster() -> None:
    preset = philly_preset(REAL)
    assert (len(preset.tenant_quotas), preset.total_gpus) == (11, 352 * 8)
    assert sum(preset.tenant_quotas.values()) == preset.total_gpus

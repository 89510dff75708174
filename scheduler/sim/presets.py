"""Cluster presets: the clusters a what-if can replay a trace on, as data.

* ``pollux-t4``: the Pollux paper's testbed, 16 nodes × 4 T4 (AWS g4dn.12xlarge).
* ``demo``: the cluster of ``make run``, 8 nodes × 8 A100 and 8 × 8 V100.
* ``sia-hetero``, ``sia-homogeneous``: Sia's (SOSP'23) simulated clusters, 6×4 T4 + 2×8 A100 + 3×8
  RTX 2080 Ti, and 16×4 T4.
* ``philly``: read from ``philly/philly_vc_nodes.csv`` (HeliosArtifact's Philly VCs, 11
  VCs, 352 nodes). Assumptions: 8 GPUs per node, HeliosArtifact's own default for this
  file (``--num_gpus_per_node 8``); GPU type ``v100``, because Philly's machine list
  (its GPU models) is in the unavailable raw trace and Gavel's Philly-derived cluster
  spec simulates V100s; a type with fitted profiles lets elastic replays run. Each VC's
  GPUs are its tenant quota (the job list's ``cluster`` column names the same VCs; 4 of
  its 15 VCs, 18 jobs, have no nodes and so no quota).
* ``alibaba-pai``: read from ``alibaba-pai-2020/pai_machine_spec.csv`` (headerless,
  ``machine,gpu_type,cap_cpu,cap_mem,cap_gpu``): machines without GPUs left out, the rest
  grouped by GPU type and GPUs per machine. Types map by ``PAI_GPU_TYPES`` (V100M32, a
  32 GB V100, is ``v100`` like Sia's ND40rs_v2 profile); others keep their own lowercase key.

``build_nodes`` turns a preset into the scheduling core's nodes, named ``n0000``… in the
preset's order, with GPU ids ``n0003-g5``.
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from scheduler.core.types import GpuSlot, NodeInfo

from .traces import TraceError, _number, _require_columns, _text


@dataclass(frozen=True)
class NodeGroup:
    """``count`` identical nodes, each with ``gpus_per_node`` GPUs of ``gpu_type``."""

    gpu_type: str
    gpus_per_node: int
    count: int

    def __post_init__(self) -> None:
        if self.gpus_per_node < 1 or self.count < 1:
            raise ValueError(f"node group {self}: needs ≥ 1 node with ≥ 1 GPU")


@dataclass(frozen=True)
class ClusterPreset:
    name: str
    nodes: tuple[NodeGroup, ...]
    tenant_quotas: Mapping[str, int] = field(default_factory=dict)  # GPUs guaranteed, where the source says
    source: str = ""  # where the numbers come from

    def __post_init__(self) -> None:
        if not self.nodes:
            raise ValueError(f"preset {self.name}: needs at least one node group")

    @property
    def total_gpus(self) -> int:
        return sum(group.gpus_per_node * group.count for group in self.nodes)

    @property
    def gpus_by_type(self) -> dict[str, int]:
        totals: Counter[str] = Counter()
        for group in self.nodes:
            totals[group.gpu_type] += group.gpus_per_node * group.count
        return dict(totals)


POLLUX_T4 = ClusterPreset("pollux-t4", (NodeGroup("t4", 4, 16),), source="Pollux (OSDI'21) testbed")
DEMO = ClusterPreset("demo", (NodeGroup("a100", 8, 8), NodeGroup("v100", 8, 8)), source="scheduler/demo.py")
# Sia (SOSP'23) §4.2-4.3, the artifact's simulator_config.py:11-12 (TRACES_DIR/sia/REFERENCE-SETUP.md §1):
# its 64-GPU heterogeneous cluster, in its order (aws, dgx-ext, rtx), and the homogeneous one of Table 4.
SIA_HETERO = ClusterPreset("sia-hetero", (NodeGroup("t4", 4, 6), NodeGroup("a100", 8, 2), NodeGroup("rtx2080ti", 8, 3)),
                           source="Sia (SOSP'23) heterogeneous cluster: 6×4 T4 + 2×8 A100 + 3×8 RTX 2080 Ti")
SIA_HOMOGENEOUS = ClusterPreset("sia-homogeneous", (NodeGroup("t4", 4, 16),),
                                source="Sia (SOSP'23) Table 4 homogeneous cluster: 16×4 T4")
PHILLY_VC_FILE = Path("philly") / "philly_vc_nodes.csv"
PHILLY_GPUS_PER_NODE, PHILLY_GPU_TYPE = 8, "v100"
PAI_MACHINE_FILE = Path("alibaba-pai-2020") / "pai_machine_spec.csv"
PAI_MACHINE_COLUMNS = ("machine", "gpu_type", "cap_cpu", "cap_mem", "cap_gpu")
PAI_GPU_TYPES = {"T4": "t4", "V100": "v100", "V100M32": "v100", "P100": "p100"}


def philly_preset(traces_dir: Path) -> ClusterPreset:
    """Philly's VCs × 8 GPUs per node (see the module docstring for the assumptions)."""
    path = traces_dir / PHILLY_VC_FILE
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        _require_columns(path, reader.fieldnames, ("vc", "node num"))
        vcs = {
            _text(path, line, row, "vc"): _number(path, line, row, "node num", int, minimum=1)
            for line, row in enumerate(reader, start=2)
        }
    if not vcs:
        raise TraceError(path, 2, "vc", "expected at least one VC")
    group = NodeGroup(PHILLY_GPU_TYPE, PHILLY_GPUS_PER_NODE, sum(vcs.values()))
    quotas = {vc: nodes * PHILLY_GPUS_PER_NODE for vc, nodes in vcs.items()}
    return ClusterPreset("philly", (group,), quotas, source=str(PHILLY_VC_FILE))


def alibaba_pai_preset(traces_dir: Path) -> ClusterPreset:
    """Alibaba PAI's GPU machines, grouped by (GPU type, GPUs per machine), largest groups first."""
    path = traces_dir / PAI_MACHINE_FILE
    groups: Counter[tuple[str, int]] = Counter()
    with path.open(newline="") as handle:
        for line, row in enumerate(csv.DictReader(handle, fieldnames=PAI_MACHINE_COLUMNS), start=1):
            if line == 1 and row["machine"] == "machine":
                continue  # a header row, as schema/pai_machine_spec.header.csv would add
            gpus = _number(path, line, row, "cap_gpu", int, minimum=0)
            if gpus:
                groups[_pai_gpu_type(_text(path, line, row, "gpu_type")), gpus] += 1
    if not groups:
        raise TraceError(path, 1, "cap_gpu", "expected at least one machine with GPUs")
    nodes = tuple(NodeGroup(kind, gpus, count) for (kind, gpus), count in sorted(groups.items(), key=_largest_first))
    return ClusterPreset("alibaba-pai", nodes, source=str(PAI_MACHINE_FILE))


def _pai_gpu_type(name: str) -> str:
    return PAI_GPU_TYPES.get(name, name.lower())


def _largest_first(item: tuple[tuple[str, int], int]) -> tuple[int, str, int]:
    (kind, gpus), count = item
    return (-gpus * count, kind, gpus)


PRESET_LOADERS: Mapping[str, Callable[[Path], ClusterPreset]] = {
    "pollux-t4": lambda _: POLLUX_T4, "demo": lambda _: DEMO,
    "philly": philly_preset, "alibaba-pai": alibaba_pai_preset,
    "sia-hetero": lambda _: SIA_HETERO, "sia-homogeneous": lambda _: SIA_HOMOGENEOUS,
}


def get_preset(name: str, traces_dir: Path) -> ClusterPreset:
    """A preset by name (``PRESET_LOADERS``); those read from files look under ``traces_dir``."""
    if name not in PRESET_LOADERS:
        raise ValueError(f"unknown cluster preset {name!r}; expected one of {sorted(PRESET_LOADERS)}")
    return PRESET_LOADERS[name](traces_dir)


def build_nodes(preset: ClusterPreset) -> tuple[NodeInfo, ...]:
    """The preset's nodes ``n0000``, ``n0001``… in group order, GPUs ``<node>-g<index>``."""
    nodes: list[NodeInfo] = []
    for group in preset.nodes:
        for _ in range(group.count):
            name = f"n{len(nodes):04d}"
            gpus = tuple(GpuSlot(f"{name}-g{index}") for index in range(group.gpus_per_node))
            nodes.append(NodeInfo(name, group.gpu_type, gpus))
    return tuple(nodes)

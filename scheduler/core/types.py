"""Data crossing the core boundary: one snapshot type in, one result type out.

Everything here is a frozen dataclass that checks its own invariants. Time is a float in
seconds on the caller's clock (``ClusterSnapshot.now``): wall-clock epoch seconds in the
live round, simulated seconds in the simulator. The core never reads a clock.

Work units: a job with a workload profile measures work as the profile defines it
(Pollux's scale-invariant iterations); a job without one measures work in seconds at its
``min_gpus`` (a rigid trace job of duration D has ``total_work = D``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import InitVar, dataclass, field
from functools import cached_property
from itertools import chain
from operator import attrgetter
from typing import Any

# JSON-serialisable memory a policy carries between rounds (dicts, lists, str, numbers).
PolicyState = Mapping[str, Any]


@dataclass(frozen=True)
class GpuSlot:
    """One GPU of a node, named by an id stable across rounds (its UUID)."""

    id: str
    healthy: bool = True


@dataclass(frozen=True)
class NodeInfo:
    """A node: its GPUs, all of one type (a canonical key such as ``"a100"``)."""

    name: str
    gpu_type: str
    gpus: tuple[GpuSlot, ...]
    schedulable: bool = True

    def __post_init__(self) -> None:
        ids = [gpu.id for gpu in self.gpus]
        if len(set(ids)) != len(ids):
            raise ValueError(f"node {self.name}: a GPU id appears twice")

    @cached_property
    def usable_gpus(self) -> tuple[GpuSlot, ...]:
        """GPUs a new or resized job may get: healthy, on a schedulable node."""
        return tuple(gpu for gpu in self.gpus if gpu.healthy) if self.schedulable else ()


@dataclass(frozen=True)
class TenantInfo:
    name: str
    quota: int = 0  # GPUs guaranteed
    weight: float = 1.0  # fair-share weight

    def __post_init__(self) -> None:
        if self.quota < 0 or self.weight <= 0:
            raise ValueError(f"tenant {self.name}: quota must be ≥ 0 and weight > 0")


@dataclass(frozen=True)
class JobInfo:
    """A job as a policy sees it. ``placement`` lists the GPU ids it holds now."""

    id: str
    tenant: str
    submit_time: float
    min_gpus: int
    max_gpus: int
    total_work: float
    progress: float = 0.0
    priority: int = 0
    profile: str | None = None  # workload profile; None: rigid trace job, speed known only at min_gpus
    gpu_type: str | None = None  # required GPU type, None for any
    placement: tuple[str, ...] = ()
    attained_gpu_seconds: float = 0.0
    restarts: int = 0
    batch_size: int | None = None  # global batch the user asked for
    throughput: float | None = None  # last reported samples/s
    grad_noise_scale: float | None = None  # last reported gradient noise scale φ
    # Predicted seconds of service at min_gpus, for a job without a profile: the user's estimate or the runtime
    # predictor's (sim/runtimes.py). None: unknown. Policies that need a length without an oracle use it (qssf).
    expected_seconds: float | None = None
    # Until then the job is restoring its checkpoint after a restart (its restart delay: GPUs held, no progress);
    # 0 when it is not. Sia keeps a restoring job where it is (policies/sia.py).
    restart_until: float = 0.0
    # The seconds its cluster manager lets it run before killing it (Slurm's time limit), which such a scheduler
    # plans with (policies/slurm_backfill.py); None: none known.
    time_limit: float | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.min_gpus <= self.max_gpus:
            raise ValueError(f"job {self.id}: need 1 ≤ min_gpus ≤ max_gpus, got {self.min_gpus}..{self.max_gpus}")
        if self.time_limit is not None and not 0 < self.time_limit < float("inf"):
            raise ValueError(f"job {self.id}: time_limit must be a finite number > 0")
        if self.total_work < 0 or self.progress < 0 or self.attained_gpu_seconds < 0:
            raise ValueError(f"job {self.id}: work, progress and attained GPU-time must be ≥ 0")
        if len(set(self.placement)) != len(self.placement):
            raise ValueError(f"job {self.id}: a GPU appears twice in its placement")
        if self.expected_seconds is not None and not 0 < self.expected_seconds < float("inf"):
            raise ValueError(f"job {self.id}: expected_seconds must be a finite number > 0")
        if not 0 <= self.restart_until < float("inf"):
            raise ValueError(f"job {self.id}: restart_until must be a finite time ≥ 0")

    @property
    def elastic(self) -> bool:
        return self.min_gpus < self.max_gpus

    def progressed(self, progress: float, attained_gpu_seconds: float) -> JobInfo:
        """This job later on, with more progress and GPU-time and nothing else changed.

        For drivers that rebuild thousands of jobs a round: it checks only what changes,
        instead of re-running every invariant of the constructor.
        """
        if progress < 0 or attained_gpu_seconds < 0:
            raise ValueError(f"job {self.id}: progress and attained GPU-time must be ≥ 0")
        fields = self.__dict__.copy()
        fields["progress"], fields["attained_gpu_seconds"] = progress, attained_gpu_seconds
        later = object.__new__(JobInfo)
        object.__setattr__(later, "__dict__", fields)  # frozen: past the dataclass' own __setattr__
        return later

    @property
    def gpus(self) -> int:
        """GPUs held now."""
        return len(self.placement)

    @property
    def running(self) -> bool:
        return bool(self.placement)

    @property
    def remaining_work(self) -> float:
        return max(self.total_work - self.progress, 0.0)

    def restoring(self, now: float) -> bool:
        """Whether the job holds GPUs and is still restoring its checkpoint at ``now`` (paying a restart)."""
        return self.running and self.restart_until > now


@dataclass(frozen=True)
class NodeIndex:
    """Lookups over one tuple of nodes (``NodeIndex.of``), built once by a driver and passed to every snapshot
    of those nodes (``ClusterSnapshot.node_index``).

    A live round or a simulation builds many snapshots over the same nodes; indexing
    (and validating) 10,000 GPUs once instead of every round is what keeps rounds cheap.
    """

    node_of: Mapping[str, str]  # GPU id → node name
    type_of: Mapping[str, str]  # GPU id → GPU type
    usable: frozenset[str]  # healthy GPUs on schedulable nodes
    usable_by_node: Mapping[str, tuple[str, ...]]  # node name → its usable GPU ids, in order
    node_type: Mapping[str, str]  # node name → GPU type
    free_buckets: Mapping[str, Mapping[int, Mapping[str, None]]]  # type → usable count → nodes, all GPUs free
    gpus_by_type: Mapping[str, int]
    usable_by_type: Mapping[str, int]
    largest_node_by_type: Mapping[str | None, int]  # under None: the largest node of any type

    @staticmethod
    def of(nodes: tuple[NodeInfo, ...]) -> NodeIndex:
        return _build_index(nodes)


def _build_index(nodes: tuple[NodeInfo, ...]) -> NodeIndex:
    node_of = {gpu.id: node.name for node in nodes for gpu in node.gpus}
    if len(node_of) != sum(len(node.gpus) for node in nodes):
        raise ValueError("a GPU id appears on two nodes")
    gpus_by_type: dict[str, int] = {}
    usable_by_type: dict[str, int] = {}
    largest: dict[str | None, int] = {None: 0}
    for node in nodes:
        gpus_by_type[node.gpu_type] = gpus_by_type.get(node.gpu_type, 0) + len(node.gpus)
        usable_by_type[node.gpu_type] = usable_by_type.get(node.gpu_type, 0) + len(node.usable_gpus)
        largest[node.gpu_type] = max(largest.get(node.gpu_type, 0), len(node.gpus))
        largest[None] = max(largest[None], len(node.gpus))
    type_of = {gpu.id: node.gpu_type for node in nodes for gpu in node.gpus}
    usable_by_node = {node.name: tuple(gpu.id for gpu in node.usable_gpus) for node in nodes}
    usable = frozenset(gpu for ids in usable_by_node.values() for gpu in ids)
    node_type = {node.name: node.gpu_type for node in nodes}
    buckets: dict[str, dict[int, dict[str, None]]] = {}
    for node in nodes:
        buckets.setdefault(node.gpu_type, {}).setdefault(len(usable_by_node[node.name]), {})[node.name] = None
    return NodeIndex(
        node_of, type_of, usable, usable_by_node, node_type, buckets, gpus_by_type, usable_by_type, largest
    )


_placement, _id = attrgetter("placement"), attrgetter("id")


@dataclass(frozen=True)
class ClusterSnapshot:
    """Everything a policy may look at for one round.

    ``node_index`` is the index of ``nodes`` when the driver already has it (``NodeIndex.of(nodes)``, kept for as
    long as its nodes are); without it the snapshot indexes its nodes on first use.
    Construction checks that no GPU is held twice or unknown and that job ids are unique.
    ``check=False`` skips that, for a driver that upholds it by construction and builds
    a snapshot every round: the simulator, whose ids are checked once and whose jobs hold
    only GPUs that ``run_cycle`` placed.
    """

    now: float
    nodes: tuple[NodeInfo, ...]
    jobs: tuple[JobInfo, ...]
    tenants: tuple[TenantInfo, ...] = ()
    # Speed models by workload profile, then by GPU type (see goodput.py).
    profiles: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    node_index: NodeIndex | None = field(default=None, repr=False, compare=False)
    check: InitVar[bool] = True

    def __post_init__(self, check: bool) -> None:
        if not check:
            return
        # Set operations and C-level getters rather than Python loops per job and GPU.
        held = list(chain.from_iterable(map(_placement, self.jobs)))
        distinct = set(held)
        if len(distinct) != len(held):
            raise ValueError("a GPU is held by two jobs")
        unknown = distinct.difference(self.index.node_of)
        if unknown:
            raise ValueError(f"jobs hold GPUs not in the cluster: {sorted(unknown)[:5]}")
        if len(set(map(_id, self.jobs))) != len(self.jobs):
            raise ValueError("a job id appears twice")

    @cached_property
    def index(self) -> NodeIndex:
        return self.node_index if self.node_index is not None else NodeIndex.of(self.nodes)

    @property
    def total_gpus(self) -> int:
        return len(self.index.node_of)

    @property
    def gpus_by_type(self) -> Mapping[str, int]:
        return self.index.gpus_by_type

    @property
    def usable_by_type(self) -> Mapping[str, int]:
        return self.index.usable_by_type

    @property
    def largest_node_by_type(self) -> Mapping[str | None, int]:
        return self.index.largest_node_by_type

    @property
    def usable_gpus(self) -> int:
        return len(self.index.usable)


@dataclass(frozen=True)
class PolicyResult:
    """A policy's answer: a configuration per job — a GPU count (0 or within its bounds), optionally its GPU
    type — and why.

    ``allocations`` names every job of the snapshot. ``gpu_types`` is set by policies that choose the type
    of a job's GPUs (Sia): job id → one of the cluster's types (the job's own if it requires one); placement
    puts the job there, moving it off another type. A job it does not name goes where the round chooses
    (placement: the type it holds, else the fastest with room). A job never spans types.
    ``batch_sizes`` is set by policies that choose a job's global batch (Pollux). ``wake_at`` is the earliest
    time at which the policy would decide differently with no arrival or completion (a queue promotion, a
    starvation guard): the simulator runs event-driven policies again then.
    """

    allocations: Mapping[str, int]
    state: PolicyState = field(default_factory=dict)
    reasons: Mapping[str, str] = field(default_factory=dict)
    batch_sizes: Mapping[str, int] = field(default_factory=dict)
    wake_at: float | None = None
    gpu_types: Mapping[str, str] = field(default_factory=dict)
    note: str = ""  # about the round as a whole, e.g. a solver that gave no answer (stored on the round)

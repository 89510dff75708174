"""Node power-down what-if, in the style of Helios' CES service (Hu et al., SC'21).

Keep every busy node and ``spare_nodes`` idle ones powered; switch the other idle nodes
off. A node stays off at least ``min_off_seconds`` (no flapping) and needs
``power_on_seconds`` after it is switched on before a job can use it. Nodes are switched
on when waiting jobs need more GPUs than the powered nodes have free.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from scheduler.core.types import NodeInfo


@dataclass(frozen=True)
class PowerDownConfig:
    spare_nodes: int = 2
    min_off_seconds: float = 600.0
    power_on_seconds: float = 300.0

    def __post_init__(self) -> None:
        if self.spare_nodes < 0 or self.min_off_seconds < 0 or self.power_on_seconds < 0:
            raise ValueError("spare_nodes, min_off_seconds and power_on_seconds must be ≥ 0")


class NodePower:
    """Which nodes are on, off or booting; the nodes policies see (off and booting ones cordoned)."""

    def __init__(self, nodes: tuple[NodeInfo, ...], config: PowerDownConfig) -> None:
        self.config, self.nodes = config, nodes
        self.off_since: dict[str, float] = {}
        self.booting_until: dict[str, float] = {}
        self._view = nodes

    @property
    def view(self) -> tuple[NodeInfo, ...]:
        """The same tuple object until power states change, so per-tuple indexes stay cached."""
        return self._view

    def unavailable(self) -> set[str]:
        return set(self.off_since) | set(self.booting_until)

    def plan(self, now: float, busy_nodes: set[str], waiting_gpus: int, held_gpus: int) -> list[float]:
        """Finish boots; switch nodes on while waiting jobs need more GPUs than are free on powered
        nodes; switch off idle nodes beyond the spares and beyond what the waiting jobs need.

        Returns the times at which to plan again: when booting nodes become usable, or when a
        resting node may be switched on.
        """
        self.booting_until = {n: t for n, t in self.booting_until.items() if t > now}
        shortfall = waiting_gpus - (self.powered_gpus() - held_gpus)
        ready = self._switch_on(now, shortfall)
        self._switch_off(now, busy_nodes, max(0, waiting_gpus))
        self._refresh_view()
        return ready

    def powered_gpus(self) -> int:
        """Usable GPUs on nodes that are on and ready (jobs only ever hold these)."""
        down = self.unavailable()
        return sum(len(n.usable_gpus) for n in self.nodes if n.name not in down)

    def _switch_on(self, now: float, needed: int) -> list[float]:
        """Boot rested nodes for ``needed`` GPUs. Returns when they are ready and, if that is not
        enough, when the next node will have been off long enough to boot (a time to plan again)."""
        rested = [n for n in self.nodes if n.name in self.off_since
                  and now - self.off_since[n.name] >= self.config.min_off_seconds]
        times = []
        for node in rested:
            if needed <= 0:
                break
            del self.off_since[node.name]
            self.booting_until[node.name] = now + self.config.power_on_seconds
            times.append(self.booting_until[node.name])
            needed -= len(node.usable_gpus)
        if needed > 0 and self.off_since:
            times.append(min(self.off_since.values()) + self.config.min_off_seconds)
        return times

    def _switch_off(self, now: float, busy_nodes: set[str], waiting_gpus: int) -> None:
        """Idle powered nodes stay on for the spares and the waiting jobs; the rest go down."""
        down = self.unavailable()
        idle = [n for n in self.nodes if n.name not in busy_nodes and n.name not in down]
        kept, kept_gpus = 0, 0
        for node in idle:
            if kept < self.config.spare_nodes or kept_gpus < waiting_gpus:
                kept, kept_gpus = kept + 1, kept_gpus + len(node.usable_gpus)
            else:
                self.off_since[node.name] = now

    def _refresh_view(self) -> None:
        down = self.unavailable()
        view = tuple(dataclasses.replace(n, schedulable=False) if n.name in down else n for n in self.nodes)
        if [n.schedulable for n in view] != [n.schedulable for n in self._view]:
            self._view = view

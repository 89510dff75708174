"""How fast a job progresses on k GPUs: the one speed function every policy and the simulator use.

A job with a workload profile goes as its fitted goodput model (goodput.py) *on the GPU type it holds*
says, or would hold (``priced_type``: its GPUs' type, else its required type, else the type where it goes
fastest); a type its profile never measured gets an estimate (``estimated_model``). It goes at the best
batch size when the batch is tuned (``adaptive``, Pollux tunes it; so does a job that asked for no
particular batch), else at the global batch the job asked for. A job without a profile (a rigid trace job)
progresses one work unit per second at ``min_gpus`` on any type and, if a policy gives it more, linearly
faster."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from .goodput import GoodputModel
from .gpu_types import PEAK_FP32_SOURCE, relative_speed
from .types import ClusterSnapshot, JobInfo


def model_for(job: JobInfo, snap: ClusterSnapshot, gpu_type: str | None = None) -> GoodputModel | None:
    """The job's goodput model on ``gpu_type``, by default the type it is priced on (``priced_type``).

    A type its profile has no measurement for gets an estimate (``estimated_model``); None for a job
    without a profile.
    """
    by_type = snap.profiles.get(job.profile) if job.profile else None
    if not by_type:
        return None
    wanted = gpu_type or priced_type(job, snap)
    if wanted is None:  # a cluster without GPUs: any model ranks nothing
        return by_type[sorted(by_type)[0]]
    return by_type.get(wanted) or estimated_model(by_type, wanted)


def priced_type(job: JobInfo, snap: ClusterSnapshot) -> str | None:
    """The GPU type a job's speed is priced on: that of the GPUs it holds; else the type it requires; else the
    type where it would go fastest (``fastest_type``, where the round's placement puts it)."""
    if job.placement:
        return held_type(job, snap)
    return job.gpu_type or fastest_type(job, snap)


def held_type(job: JobInfo, snap: ClusterSnapshot) -> str | None:
    """The type of the GPUs ``job`` holds (of most of them, should a policy ever span types)."""
    type_of = snap.index.type_of
    types = [type_of[gpu] for gpu in job.placement if gpu in type_of]
    if not types:
        return job.gpu_type
    if types.count(types[0]) == len(types):
        return types[0]
    return max(sorted(set(types)), key=types.count)


def fastest_type(job: JobInfo, snap: ClusterSnapshot) -> str | None:
    """The GPU type where ``job`` goes fastest at ``min_gpus``, among the types with that many usable GPUs."""
    usable = snap.usable_by_type
    preferred = type_preference(job, snap)
    return next((t for t in preferred if usable.get(t, 0) >= job.min_gpus), preferred[0] if preferred else None)


def type_preference(job: JobInfo, snap: ClusterSnapshot) -> tuple[str, ...]:
    """The cluster's GPU types, fastest for ``job`` (at ``min_gpus``) first.

    Ties (a job without a profile goes equally fast everywhere) go to the type with the most usable GPUs, then
    by name.
    """
    speeds, usable = type_speeds(job, snap), snap.usable_by_type
    return tuple(sorted(speeds, key=lambda t: (-speeds[t], -usable.get(t, 0), t)))


_SPEEDS: dict[tuple, tuple[object, object, Mapping[str, float]]] = {}


def type_speeds(job: JobInfo, snap: ClusterSnapshot) -> Mapping[str, float]:
    """``job``'s speed at ``min_gpus`` on each GPU type of the cluster (all 0.0 when one type or no profile).

    Remembered per kind of job and cluster, across rounds: jobs of one profile, size, batch and noise scale share
    the answer, and a waiting job asks every round.
    """
    by_type = snap.profiles.get(job.profile) if job.profile else None
    index = snap.index
    key = (id(by_type), id(index), job.min_gpus, job.batch_size, job.grad_noise_scale)
    cached = _SPEEDS.get(key)
    if cached is not None and cached[0] is by_type and cached[1] is index:
        return cached[2]
    types = sorted(snap.gpus_by_type)
    speeds = dict.fromkeys(types, 0.0)
    if len(types) > 1 and by_type:
        speeds = {t: job_speed(job, snap, job.min_gpus, gpu_type=t) for t in types}
    if len(_SPEEDS) >= 16_384:
        _SPEEDS.clear()
    _SPEEDS[key] = (by_type, index, speeds)
    return speeds


_ESTIMATES: dict[tuple[int, str], tuple[object, GoodputModel]] = {}


def estimated_model(by_type: Mapping[str, GoodputModel], gpu_type: str) -> GoodputModel:
    """A profile's model on a type it was never measured on, marked ``estimated_from``.

    As Sia bootstraps an unseen type (Jayaram Subramanya et al., SOSP'23, §3.1: a known type's throughput
    times the ratio of the two types' speeds): the measured type nearest in peak FP32 throughput
    (``gpu_types.PEAK_FP32_TFLOPS``), its compute time divided by the ratio of the two peaks, its
    communication and batch limits kept. A type without a published figure gets the nearest model unscaled.
    A job's own reports replace the estimate once it has run there (``scheduler.live.refit``).
    """
    key = (id(by_type), gpu_type)
    cached = _ESTIMATES.get(key)
    if cached is not None and cached[0] is by_type:
        return cached[1]
    measured = sorted(by_type)
    known = [t for t in measured if relative_speed(gpu_type, t) is not None]
    if not known:
        reference = measured[0]
        model = replace(by_type[reference], estimated_from=f"{reference}, unscaled (no speed figure for {gpu_type})")
    else:
        reference = min(known, key=lambda t: abs(math.log(relative_speed(gpu_type, t) or 1.0)))
        ratio = relative_speed(gpu_type, reference) or 1.0
        base = by_type[reference]
        model = replace(base, perf=base.perf.scaled(1 / ratio, 1.0),
                        estimated_from=f"{reference} × {ratio:.2f} by {PEAK_FP32_SOURCE}")
    if len(_ESTIMATES) >= 1024:
        _ESTIMATES.clear()
    _ESTIMATES[key] = (by_type, model)
    return model


def gpus_per_node(snap: ClusterSnapshot, gpu_type: str | None = None) -> int:
    """The largest node size (of ``gpu_type`` if given): the fewest-nodes packing unit."""
    return snap.largest_node_by_type.get(gpu_type, 0) or 1


def fewest_nodes(gpus: int, node_size: int) -> int:
    return math.ceil(gpus / node_size) if gpus > 0 else 0


def speed_table(
    job: JobInfo, snap: ClusterSnapshot, up_to: int | None = None, adaptive: bool = False, gpu_type: str | None = None
) -> NDArray:
    """Speed (work units/s) at 0, 1, …, ``up_to`` GPUs (default ``max_gpus``), packed on fewest nodes of
    ``gpu_type`` (default: the type the job is priced on, ``priced_type``)."""
    top = job.max_gpus if up_to is None else up_to
    counts = np.arange(top + 1)
    kind = gpu_type or priced_type(job, snap)
    model = model_for(job, snap, kind)
    if model is None:
        return np.where(counts >= job.min_gpus, counts / job.min_gpus, 0.0)
    nodes = np.ceil(counts / gpus_per_node(snap, kind))
    if job.batch_size and not adaptive:
        return model.speed_at_batch(nodes, counts, job.batch_size, _noise(job, model))[0]
    return model.speed(nodes, counts, job.grad_noise_scale)


def _noise(job: JobInfo, model: GoodputModel) -> float:
    return model.noise_scale if job.grad_noise_scale is None else job.grad_noise_scale


def speed_tables(jobs: Iterable[JobInfo], snap: ClusterSnapshot, adaptive: bool = False) -> dict[str, NDArray]:
    """``speed_table`` for many jobs at once: jobs sharing a model, node size and batch are priced in one numpy
    pass."""
    tables: dict[str, NDArray] = {}
    groups: dict[tuple[int, int, int | None], list[JobInfo]] = {}
    models: dict[int, GoodputModel] = {}
    for job in jobs:
        kind = priced_type(job, snap)
        model = model_for(job, snap, kind)
        if model is None:
            tables[job.id] = speed_table(job, snap)
            continue
        models[id(model)] = model
        batch = None if adaptive else job.batch_size
        groups.setdefault((id(model), gpus_per_node(snap, kind), batch), []).append(job)
    for (model_id, node_size, batch), members in groups.items():
        model = models[model_id]
        counts = np.arange(max(job.max_gpus for job in members) + 1)
        nodes, phis = np.ceil(counts / node_size), [_noise(job, model) for job in members]
        grid = model.speed_at_batch(nodes, counts, batch, phis) if batch else model.speed_grid(nodes, counts, phis)
        tables.update({job.id: grid[row, : job.max_gpus + 1] for row, job in enumerate(members)})
    return tables


@dataclass(frozen=True)
class TypeGrid:
    """Jobs' speeds at chosen GPU counts of one type, at the best batch (see ``adaptive_grid``)."""

    columns: Mapping[int, int]  # GPU count → its column
    speeds: Mapping[str, NDArray]  # job id → speed in each column
    batches: Mapping[str, NDArray]  # job id → the best global batch there (jobs with a goodput model only)

    def speed(self, job_id: str, gpus: int) -> float:
        return float(self.speeds[job_id][self.columns[gpus]])

    def batch(self, job_id: str, gpus: int) -> int | None:
        row = self.batches.get(job_id)
        return None if row is None else int(row[self.columns[gpus]])


_GRID_CELLS = 20_000  # noise scales × counts per numpy pass: × 50 batch candidates × 8 bytes, 8 MB an array


def adaptive_grid(jobs: Iterable[JobInfo], snap: ClusterSnapshot, gpu_type: str, counts: Iterable[int]) -> TypeGrid:
    """Each job's speed at each of ``counts`` GPUs of ``gpu_type`` packed on fewest nodes, at its best batch, and
    that batch. Equal, job by job, to ``speed_table(job, snap, adaptive=True, gpu_type=gpu_type)`` at those counts
    and to ``best_global_batch``; jobs sharing a model are priced in one numpy pass (a policy prices every job on
    every type each round)."""
    wanted = tuple(sorted(set(counts)))
    gpus = np.asarray(wanted, dtype=float)
    nodes = np.ceil(gpus / gpus_per_node(snap, gpu_type))
    speeds: dict[str, NDArray] = {}
    batches: dict[str, NDArray] = {}
    groups: dict[int, tuple[GoodputModel, list[JobInfo]]] = {}
    for job in jobs:
        model = model_for(job, snap, gpu_type)
        if model is None:  # linear from its minimum
            speeds[job.id] = np.where(gpus >= job.min_gpus, gpus / job.min_gpus, 0.0)
        else:
            groups.setdefault(id(model), (model, []))[1].append(job)
    chunk = max(1, _GRID_CELLS // max(len(wanted), 1))
    for model, members in groups.values():
        for start in range(0, len(members), chunk):
            part = members[start:start + chunk]
            speed, batch = model.best_grid(nodes, gpus, [_noise(job, model) for job in part])
            for row, job in enumerate(part):
                speeds[job.id], batches[job.id] = speed[row], batch[row]
    return TypeGrid({count: column for column, count in enumerate(wanted)}, speeds, batches)


def job_speed(
    job: JobInfo, snap: ClusterSnapshot, gpus: int, nodes: int | None = None, batch_size: int | None = None,
    gpu_type: str | None = None, adapts: bool = False,
) -> float:
    """Work units per second for ``job`` on ``gpus`` GPUs of ``gpu_type`` over ``nodes`` nodes.

    By default on the type it is priced on (``priced_type``) and on fewest nodes. At ``batch_size`` if given
    (a policy chose it), else at the best batch if the job ``adapts`` its batch to its GPUs (a policy that
    chooses batches sets it there), else at the job's own batch if it asked for one, else at the best batch.
    """
    if gpus <= 0:
        return 0.0
    kind = gpu_type or priced_type(job, snap)
    model = model_for(job, snap, kind)
    if model is None:
        return gpus / job.min_gpus if gpus >= job.min_gpus else 0.0
    node_count = nodes if nodes is not None else fewest_nodes(gpus, gpus_per_node(snap, kind))
    batch = batch_size or (None if adapts else job.batch_size)
    if batch:
        return float(model.speed_at_batch(node_count, gpus, batch, _noise(job, model))[0, 0])
    return float(model.speed(node_count, gpus, job.grad_noise_scale)[0])


def remaining_seconds(job: JobInfo, speed: float) -> float | None:
    """Seconds ``job`` needs to finish at ``speed`` (work units/s): its remaining work at that speed; for a job
    without a profile, whose work is an oracle's length, its expected length (``expected_seconds``) less the
    time it has been served at ``min_gpus``, scaled by that speed. None where that is not known."""
    if speed <= 0:
        return None
    if job.profile is not None:
        return job.remaining_work / speed
    if job.expected_seconds is not None:
        return max(job.expected_seconds - job.attained_gpu_seconds / job.min_gpus, 0.0) / speed
    return None

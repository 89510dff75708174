"""How fast a job progresses on k GPUs: the one speed function every policy and the simulator use.

A job with a workload profile goes as its fitted goodput model says (goodput.py): at the
best batch size when the batch is tuned (``adaptive``, Pollux tunes it; so does a job
that asked for no particular batch), else at the global batch the job asked for. A job
without a profile (a rigid trace job) progresses one work unit per second at
``min_gpus`` and, if a policy gives it more, linearly faster.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
from numpy.typing import NDArray

from .goodput import GoodputModel
from .types import ClusterSnapshot, JobInfo


def model_for(job: JobInfo, snap: ClusterSnapshot, gpu_type: str | None = None) -> GoodputModel | None:
    """The job's goodput model on ``gpu_type`` (its required type, else the cluster's most common)."""
    by_type = snap.profiles.get(job.profile) if job.profile else None
    if not by_type:
        return None
    wanted = gpu_type or job.gpu_type or dominant_gpu_type(snap)
    # A profile measured on other hardware still ranks allocations sensibly: use its first type.
    return (by_type.get(wanted) if wanted else None) or by_type[sorted(by_type)[0]]


def dominant_gpu_type(snap: ClusterSnapshot) -> str | None:
    counts = snap.gpus_by_type
    return max(sorted(counts), key=counts.__getitem__) if counts else None


def gpus_per_node(snap: ClusterSnapshot, gpu_type: str | None = None) -> int:
    """The largest node size (of ``gpu_type`` if given): the fewest-nodes packing unit."""
    return snap.largest_node_by_type.get(gpu_type, 0) or 1


def fewest_nodes(gpus: int, node_size: int) -> int:
    return math.ceil(gpus / node_size) if gpus > 0 else 0


def speed_table(job: JobInfo, snap: ClusterSnapshot, up_to: int | None = None, adaptive: bool = False) -> NDArray:
    """Speed (work units/s) at 0, 1, …, ``up_to`` GPUs (default ``max_gpus``), packed on fewest nodes."""
    top = job.max_gpus if up_to is None else up_to
    counts = np.arange(top + 1)
    model = model_for(job, snap)
    if model is None:
        return np.where(counts >= job.min_gpus, counts / job.min_gpus, 0.0)
    nodes = np.ceil(counts / gpus_per_node(snap, job.gpu_type))
    if job.batch_size and not adaptive:
        return model.speed_at_batch(nodes, counts, job.batch_size, _noise(job, model))[0]
    return model.speed(nodes, counts, job.grad_noise_scale)


def _noise(job: JobInfo, model: GoodputModel) -> float:
    return model.noise_scale if job.grad_noise_scale is None else job.grad_noise_scale


def speed_tables(jobs: Iterable[JobInfo], snap: ClusterSnapshot, adaptive: bool = False) -> dict[str, NDArray]:
    """``speed_table`` for many jobs at once: jobs sharing a model and batch are priced in one numpy pass."""
    tables: dict[str, NDArray] = {}
    groups: dict[tuple[int, int, int | None], list[JobInfo]] = {}
    models: dict[int, GoodputModel] = {}
    for job in jobs:
        model = model_for(job, snap)
        if model is None:
            tables[job.id] = speed_table(job, snap)
            continue
        models[id(model)] = model
        batch = None if adaptive else job.batch_size
        groups.setdefault((id(model), gpus_per_node(snap, job.gpu_type), batch), []).append(job)
    for (model_id, node_size, batch), members in groups.items():
        model = models[model_id]
        counts = np.arange(max(job.max_gpus for job in members) + 1)
        nodes, phis = np.ceil(counts / node_size), [_noise(job, model) for job in members]
        grid = model.speed_at_batch(nodes, counts, batch, phis) if batch else model.speed_grid(nodes, counts, phis)
        tables.update({job.id: grid[row, : job.max_gpus + 1] for row, job in enumerate(members)})
    return tables


def job_speed(
    job: JobInfo, snap: ClusterSnapshot, gpus: int, nodes: int | None = None, batch_size: int | None = None
) -> float:
    """Work units per second for ``job`` on ``gpus`` GPUs over ``nodes`` nodes (default: fewest).

    At ``batch_size`` if given (a policy chose it), else at the job's own batch if it asked
    for one, else at the best batch.
    """
    if gpus <= 0:
        return 0.0
    model = model_for(job, snap)
    if model is None:
        return gpus / job.min_gpus if gpus >= job.min_gpus else 0.0
    node_count = nodes if nodes is not None else fewest_nodes(gpus, gpus_per_node(snap, job.gpu_type))
    batch = batch_size or job.batch_size
    if batch:
        return float(model.speed_at_batch(node_count, gpus, batch, _noise(job, model))[0, 0])
    return float(model.speed(node_count, gpus, job.grad_noise_scale)[0])

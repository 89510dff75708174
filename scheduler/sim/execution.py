"""The executor model: how fast a running job progresses in the simulator.

By default a job progresses at ``job_speed``: its fitted goodput model at its allocation
and batch size. Given the Pollux artifact's measurements, it runs as the artifact's
simulator runs it instead.

Measured gradient statistics (``grad_curves``, optional, by profile): a job's efficiency
then follows its validation curves as in the Pollux artifact's simulator (grad_curves.py).
Its φ is the one measured at the batch it trains at in its current epoch; the rate is
recomputed at every epoch's end (an event) and the job reports that φ to the policy
(``JobInfo.grad_noise_scale``). A job that tunes its own batch (the policy chose one, or
the job asked for none: Pollux's jobs) re-picks the goodput-optimal batch for the φ it
last measured at every epoch's end and every round, without a restart, as AdaptDL's
trainer does (``Job.update_local_bsz``); before it has measured anything it starts at
max(M0, smallest per-GPU batch × GPUs).

Measured step times (``step_times``, optional, by profile and GPU type): a job then runs
at the step times measured for its placement (GPUs on each node) and micro-batch, as
the artifact's ``Job.step`` does (step_times.py), instead of its fitted model's. Only
the executor: policies still rank allocations with the fitted models, as the artifact's
scheduler only knows the jobs' fitted models. A job that tunes its batch picks it with
its fitted model, as the artifact's jobs do (``GoodputFunction.optimize``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from scheduler.core.goodput import GoodputModel
from scheduler.core.speed import job_speed, model_for
from scheduler.core.types import ClusterSnapshot

from .grad_curves import GradCurves
from .job_run import JobRun
from .step_times import StepTimes


class Execution:
    """Progress rates of running jobs, from their fitted models or the measurements given."""

    def __init__(self, curves: Mapping[str, GradCurves], step_times: Mapping[str, Mapping[str, StepTimes]]) -> None:
        self.curves = curves
        self.step_times = step_times
        self.best_batches: dict[tuple[int, int, int, float], int] = {}  # (model, nodes, GPUs, φ) → batch

    def rate(self, run: JobRun, static: ClusterSnapshot, now: float) -> tuple[float, GradCurves | None]:
        """(progress per second before any power cap, the curves whose epoch ends are its events) of a running
        job; sets the batch it trains at and the φ it measures there."""
        profile = run.spec.profile
        curves = self.curves.get(profile) if profile else None
        table = self._step_table(run)
        batch = run.policy_batch
        model = model_for(run.job_info(now), static) if curves is not None or table is not None else None
        if model is None:
            curves = table = None
        if model is not None and (curves is not None or run.adaptive):
            batch = run.batch = self.batch(run, model, curves is not None)
        if table is not None and model is not None:
            trained = batch or run.spec.batch_size or model.init_batch_size
            return self._measured_rate(run, model, table, trained, curves), curves
        if curves is not None:
            run.phi = curves.noise_scale(batch, curves.epoch(run.progress))  # type: ignore[arg-type]
            run.waiting_info = run.running_info = None  # φ changed: the JobInfo below must carry it
        return job_speed(run.job_info(now), static, len(run.gpus), run.nodes, batch), curves

    def retunes(self, run: JobRun, static: ClusterSnapshot, now: float) -> bool:
        """Whether a running job that tunes its batch would now pick another one for the φ it last measured."""
        if not (run.adaptive and run.batch is not None):
            return False
        model = model_for(run.running_info or run.job_info(now), static)
        return model is not None and self.batch(run, model, run.spec.profile in self.curves) != run.batch

    def _step_table(self, run: JobRun) -> StepTimes | None:
        """Measured step times of the job's profile on the one GPU type it holds, if any."""
        if not (self.step_times and run.spec.profile and len(run.gpus_by_type) == 1):
            return None
        return self.step_times.get(run.spec.profile, {}).get(next(iter(run.gpus_by_type)))

    def _measured_rate(
        self, run: JobRun, model: GoodputModel, table: StepTimes, batch: int, curves: GradCurves | None,
    ) -> float:
        """Progress per second with measured step times, as the artifact's ``Job.step`` computes it.

        ``Job.update_local_bsz``: the global batch's per-GPU share in s + 1 micro-batches
        (``GoodputModel.micro_batches``) of ⌈share / (s + 1)⌉ samples, at most
        ⌊max_batch_size / (GPUs · (s + 1))⌋; the batch trained is GPUs · micro-batch · (s + 1).
        ``Job.step``: a step takes step_time + s · (step_time − sync_time) (step_times.py); the
        gain is (var + sqr) / (var / scale + sqr) = E · batch / M0 with φ measured at the batch
        trained (``get_grad_stats``), or the job's own φ without curves.
        """
        gpus = len(run.gpus)
        count = model.micro_batches(gpus, batch)
        micro = min(math.ceil(batch / gpus / count - 1e-8), int(model.max_batch_size / (gpus * count)))
        micro = max(micro, 1)
        trained = gpus * micro * count
        if curves is not None:
            run.phi = curves.noise_scale(trained, curves.epoch(run.progress))
        phi = run.phi if run.phi is not None else model.noise_scale
        seconds = table.step_seconds(run.placement, micro, count - 1)
        return float(model.efficiency(trained, phi)) * trained / model.init_batch_size / seconds

    def batch(self, run: JobRun, model: GoodputModel, measured: bool = True) -> int:
        """The global batch a running job trains at (measured gradient statistics or step times only).

        ``measured``: its φ comes from gradient curves, so before it has measured any it starts
        small; otherwise it uses the φ it reports (its profile's when none).
        """
        gpus = len(run.gpus)
        if not run.adaptive:
            return run.policy_batch or run.spec.batch_size or model.init_batch_size
        if run.phi is None and measured:  # nothing measured yet: AdaptDL starts at M0, or the least per-GPU batch
            return min(max(model.init_batch_size, model.min_local_bsz * gpus), model.max_batch_size)
        phi = run.phi if run.phi is not None else model.noise_scale
        key = (id(model), run.nodes, gpus, phi)
        if key not in self.best_batches:
            self.best_batches[key] = model.best_global_batch(run.nodes, gpus, phi)
        return self.best_batches[key]

"""How long a job without a profile will run: its service time predicted from the cluster's finished jobs.

Most jobs of a real cluster are rigid and have no goodput profile, so nothing in their request says how long
they run. Helios' QSSF (Hu et al., "Characterization and Prediction of Deep Learning Workloads in Large-Scale
GPU Datacenters", SC'21, §5) predicts it from history: a job resembles the earlier jobs of the same user with a
similar name, and a gradient-boosted model over the job's attributes covers jobs with no such history. Here:

1. the user's own estimate (``JobFeatures.expected_seconds``) when given;
2. else the median of the last ``HISTORY`` finished jobs of the same owner with the same name key (the name
   with digits folded, so ``bert-run12`` and ``bert-run13`` match), when there is one;
3. else a LightGBM model of log(seconds) over owner, tenant, name key, command key, GPU type, GPUs and
   the hour of submission, once ``MIN_TRAINING`` jobs have finished;
4. else the median of every finished job, else ``PRIOR_SECONDS``;

never more than the job's time limit (``JobFeatures.limit_seconds``), past which its cluster manager kills it. A
time limit is not an estimate: users ask for far more than their jobs run (Tsafrir, Etsion and Feitelson,
"Backfilling Using System-Generated Predictions Rather than User Runtime Estimates", IEEE TPDS 2007), so a job
with a limit and no estimate is predicted from history, as Slurm's ``squeue --start`` does not.

A job already past its prediction is re-estimated from the durations of the jobs like it that ran at least as
long (``remaining``): the median of what those ran beyond that point. It is never due in the past.

Service time = seconds holding GPUs (a rigid job's run at its GPUs, not counting time queued). Pure: no
Django; the model is stored as LightGBM's own text format (``to_text``), never as a pickle.
"""

from __future__ import annotations

import bisect
import json
import math
import re
import statistics
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from scheduler.core.policy import Policy

from .records import WorkloadJob

HISTORY = 5  # similar jobs a history estimate takes the median of
MIN_TRAINING = 30  # finished jobs before a model is trained
PRIOR_SECONDS = 3600.0  # what a job is expected to run when nothing has finished yet
MAX_SECONDS = 365 * 86_400.0  # no prediction beyond a year
CATEGORICAL = ("owner", "tenant", "name_key", "command_key", "gpu_type")
NUMERIC = ("gpus", "submit_hour")
FEATURES = CATEGORICAL + NUMERIC
MODEL_FORMAT = 1  # bump when the features change: a stored model of another format is retrained, not read
# Small trees and few rounds: a cluster's history is thousands of jobs, and training runs every hour on 2 cores.
LIGHTGBM_PARAMS: Mapping[str, Any] = {
    "objective": "regression_l1", "learning_rate": 0.1, "num_leaves": 15, "min_data_in_leaf": 5,
    "min_data_per_group": 5, "cat_smooth": 5.0, "num_threads": 1, "deterministic": True, "seed": 0,
    "verbose": -1,
}
ROUNDS = 60


def name_key(name: str) -> str:
    """A job name with its run numbers folded: lower case, every run of digits one ``#``, trailing separators
    dropped (``BERT-finetune_run12`` → ``bert-finetune_run#``)."""
    return re.sub(r"[\s\-_.:#]+$", "", re.sub(r"\d+", "#", name.strip().lower()))[:100]


def command_key(command: str) -> str:
    """What a command runs: its first two words, without paths or numbers (``python /a/train.py --lr 3`` →
    ``python train.py``)."""
    words = [word.rsplit("/", 1)[-1] for word in command.split()[:2]]
    return name_key(" ".join(words))


@dataclass(frozen=True)
class JobFeatures:
    """What is known about a job when it is submitted; ``expected_seconds`` is the user's own estimate."""

    owner: str = ""
    tenant: str = ""
    name: str = ""
    command: str = ""
    gpu_type: str = ""
    gpus: int = 1
    submit_hour: int = 0  # hour of the day it was submitted (0–23): day jobs are shorter than night runs
    expected_seconds: float | None = None
    limit_seconds: float | None = None  # the cluster manager's time limit: no prediction is longer

    def row(self) -> dict[str, Any]:
        return {"owner": self.owner, "tenant": self.tenant, "name_key": name_key(self.name),
                "command_key": command_key(self.command), "gpu_type": self.gpu_type, "gpus": self.gpus,
                "submit_hour": self.submit_hour}


@dataclass(frozen=True)
class Prediction:
    seconds: float
    source: str  # "user", "history", "model", "median" or "prior": which rule of the module docstring gave it


class RuntimePredictor:
    """Predicted service seconds of jobs, learnt from finished ones (module docstring).

    ``observe`` finished jobs (in the order they finished), ``fit`` the model from them, then ``predict``.
    """

    def __init__(self) -> None:
        self.finished: list[tuple[JobFeatures, float]] = []
        self.history: dict[tuple[str, str], deque[float]] = {}
        self.booster: Any = None  # a lightgbm.Booster once fitted
        self.vocabulary: dict[str, dict[str, int]] = {}
        self.trained_on = 0
        self._sorted: list[float] | None = None

    # --- learning --------------------------------------------------------------------

    def observe(self, features: JobFeatures, seconds: float) -> None:
        """A job finished after ``seconds`` of service (non-finite or negative values are ignored)."""
        if not (math.isfinite(seconds) and seconds >= 0):
            return
        seconds = min(seconds, MAX_SECONDS)
        self.finished.append((features, seconds))
        self.history.setdefault(_history_key(features), deque(maxlen=HISTORY)).append(seconds)
        self._sorted = None

    def fit(self) -> bool:
        """Train the model on every job observed; False (and no model) below ``MIN_TRAINING`` jobs."""
        if len(self.finished) < MIN_TRAINING:
            return False
        import lightgbm  # a second to import: only where a model is trained or read

        rows = [features.row() for features, _ in self.finished]
        self.vocabulary = {name: _vocabulary(row[name] for row in rows) for name in CATEGORICAL}
        matrix = self._matrix(rows)
        target = np.log1p([seconds for _, seconds in self.finished])
        data = lightgbm.Dataset(matrix, target, feature_name=list(FEATURES),
                                categorical_feature=list(CATEGORICAL), free_raw_data=True)
        self.booster = lightgbm.train(dict(LIGHTGBM_PARAMS), data, num_boost_round=ROUNDS)
        self.trained_on = len(self.finished)
        return True

    def _matrix(self, rows: Sequence[Mapping[str, Any]]) -> np.ndarray:
        # Categories never seen in training read as -1: LightGBM sends them down the "other" branch.
        columns: list[list[float]] = [[self.vocabulary[name].get(row[name], -1) for row in rows]
                                      for name in CATEGORICAL]
        columns += [[float(row[name]) for row in rows] for name in NUMERIC]
        return np.array(columns, dtype=float).T.reshape(len(rows), len(FEATURES))

    # --- predicting ------------------------------------------------------------------

    def predict(self, features: JobFeatures) -> Prediction:
        return self.predict_many([features])[0]

    def predict_many(self, jobs: Sequence[JobFeatures]) -> list[Prediction]:
        """Predictions for ``jobs``, the model asked once for all those that need it."""
        answers: list[Prediction | None] = []
        need_model: list[int] = []
        for index, features in enumerate(jobs):
            answer = self._without_model(features)
            if answer is None and self.booster is not None:
                need_model.append(index)
            answers.append(answer)
        if need_model:
            matrix = self._matrix([jobs[i].row() for i in need_model])
            for index, value in zip(need_model, self.booster.predict(matrix), strict=True):
                answers[index] = Prediction(_bounded(math.expm1(float(value))), "model")
        fallback = self._fallback()
        return [_capped(answer or fallback, features.limit_seconds) for answer, features in zip(answers, jobs,
                                                                                                 strict=True)]

    def _without_model(self, features: JobFeatures) -> Prediction | None:
        expected = features.expected_seconds
        if expected is not None and math.isfinite(expected) and expected > 0:
            return Prediction(_bounded(expected), "user")
        similar = self.history.get(_history_key(features))
        if similar and features.name:
            return Prediction(_bounded(statistics.median(similar)), "history")
        return None

    def _fallback(self) -> Prediction:
        if self.finished:
            return Prediction(_bounded(statistics.median(self._durations())), "median")
        return Prediction(PRIOR_SECONDS, "prior")

    def remaining(self, prediction: float, served: float) -> float:
        """Seconds still to run of a job predicted to run ``prediction`` that has been served ``served``.

        Before its prediction: the difference. Past it: the median of what the finished jobs that ran at least
        ``served`` ran beyond it, or, when none ran that long, half of ``served`` again. Always > 0.
        """
        if served < prediction:
            return prediction - served
        durations = self._durations()
        beyond = durations[_first_above(durations, served):]
        extra = statistics.median(beyond) - served if beyond else served / 2
        return max(extra, 60.0)

    def _durations(self) -> list[float]:
        if self._sorted is None:
            self._sorted = sorted(seconds for _, seconds in self.finished)
        return self._sorted

    # --- storing ---------------------------------------------------------------------

    def to_text(self) -> str:
        """The model and its vocabulary as text (JSON around LightGBM's own model format); "" without a model."""
        if self.booster is None:
            return ""
        return json.dumps({"format": MODEL_FORMAT, "vocabulary": self.vocabulary, "trained_on": self.trained_on,
                           "booster": self.booster.model_to_string()})

    def load_text(self, text: str) -> bool:
        """Read a model ``to_text`` wrote; False (and no model) when it is empty or of another format."""
        try:
            stored = json.loads(text) if text else {}
        except ValueError:
            return False
        if stored.get("format") != MODEL_FORMAT:
            return False
        import lightgbm

        self.booster = lightgbm.Booster(model_str=stored["booster"])
        self.vocabulary, self.trained_on = stored["vocabulary"], int(stored["trained_on"])
        return True


def _history_key(features: JobFeatures) -> tuple[str, str]:
    return features.owner or features.tenant, name_key(features.name)


def _vocabulary(values: Iterable[str]) -> dict[str, int]:
    return {value: code for code, value in enumerate(sorted(set(values)))}


def _capped(prediction: Prediction, limit: float | None) -> Prediction:
    if limit is None or not math.isfinite(limit) or limit <= 0 or prediction.seconds <= limit:
        return prediction
    return Prediction(_bounded(limit), prediction.source)


def _bounded(seconds: float) -> float:
    return min(max(seconds, 1.0), MAX_SECONDS) if math.isfinite(seconds) else MAX_SECONDS


def _first_above(ordered: Sequence[float], value: float) -> int:
    return bisect.bisect_left(ordered, value)


def workload_features(spec: WorkloadJob) -> JobFeatures:
    """What a trace job tells a predictor: its tenant, GPUs, GPU type and hour of submission (traces name no
    owner or command; their job names are ids)."""
    return JobFeatures(tenant=spec.tenant, gpu_type=spec.gpu_type or "", gpus=spec.min_gpus,
                       submit_hour=int(spec.submit_time // 3600) % 24)


REFIT_GROWTH = 1.25  # refit once the finished jobs have grown by a quarter: about 40 fits over 80,000 jobs


class OnlineEstimator:
    """A ``RuntimePredictor`` inside one simulation (the engine's ``RuntimeEstimator``): it predicts each
    arriving job from the jobs finished before it, and refits as they accumulate."""

    def __init__(self, predictor: RuntimePredictor | None = None) -> None:
        self.predictor = predictor or RuntimePredictor()
        self._cache: dict[JobFeatures, float] = {}  # a trace has few distinct feature rows: one prediction each

    def estimate(self, spec: WorkloadJob, now: float) -> float:
        self._refit_if_grown()
        features = workload_features(spec)
        if features not in self._cache:
            self._cache[features] = self.predictor.predict(features).seconds
        return self._cache[features]

    def finished(self, spec: WorkloadJob, service_seconds: float) -> None:
        self.predictor.observe(workload_features(spec), service_seconds)
        if self.predictor.booster is None and len(self.predictor.finished) < MIN_TRAINING:
            self._cache.clear()  # the median moves with every job until there is a model

    def _refit_if_grown(self) -> None:
        count = len(self.predictor.finished)
        if count >= MIN_TRAINING and count >= REFIT_GROWTH * self.predictor.trained_on:
            self.predictor.fit()
            self._cache.clear()


def estimator_for(policy: Policy) -> OnlineEstimator | None:
    """A fresh ``OnlineEstimator`` for a policy that reads predicted lengths (``predicts_runtimes``: qssf), else
    None: a simulation predicts only for the policies that use it."""
    return OnlineEstimator() if policy.capabilities.predicts_runtimes else None

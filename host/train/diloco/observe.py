"""What a job's evaluated rounds looked like, gathered from every worker, and the figures that
need all of them at once.

Consensus distance, the Jensen–Shannon divergence of the workers' output distributions and
the validation loss of the workers' average model each need every worker's state of a round.
Workers in one process hand it to a :class:`MemoryObserver`; workers in separate processes (the
fabric agents, :mod:`host.diloco_agent`) each write theirs with a :class:`FileObserver`, one
``.npy`` file per array (``numpy.save``; read back with ``allow_pickle=False``, so nothing is
unpickled). Either way the experiment reads :data:`Observations` afterwards and
:func:`round_figures` computes, per round:

* ``consensus_rms_l2``: sqrt((1/M) Σ_i ‖x_i − x̄‖²) (:mod:`~host.train.diloco.metrics`);
* ``js_divergence_nats``: the JS divergence of the workers' predicted distributions on the
  first :data:`PROBS_ROWS` predicted symbols of the shared validation batch;
* ``mean_model_val_loss``: the validation loss of x̄, the average of the workers' parameters
  (for DiLoCo every worker holds x̄; for the gossip variants one more global Mix1, W1 = J,
  turns every worker into it);
* ``workers_val_loss``: the mean of the workers' own validation losses.

Only the first :data:`PROBS_ROWS` rows of each distribution are kept (a worker's full
distributions on the chars task are 8,192 rows × the vocabulary, 3 MB per round).
"""

from __future__ import annotations

import math
import pathlib
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch

from host.train.diloco import metrics
from host.train.diloco.config import DilocoConfig
from host.train.diloco.task import WorkerTask, bind, evaluate
from host.train.diloco.worker import set_flat

PROBS_ROWS = 1024
"""Predicted symbols (rows of the output distributions) kept per worker and round."""

Observation = tuple[np.ndarray, np.ndarray]
"""One worker's (parameters float32, first rows of its output distributions float32)."""
Observations = dict[int, dict[int, Observation]]
"""round -> rank -> what the worker reported after that round."""

_NAME = re.compile(r"^r(\d+)-w(\d+)-(params|probs)\.npy$")


def _kept(params: np.ndarray, probs: np.ndarray, rows: int) -> Observation:
    return (
        np.asarray(params, dtype=np.float32).copy(),
        np.asarray(probs[:rows], dtype=np.float32).copy(),
    )


class MemoryObserver:
    """Keeps every report in memory (workers that are threads of one process)."""

    def __init__(self, rows: int = PROBS_ROWS) -> None:
        self.rows = rows
        self._lock = threading.Lock()
        self.observations: Observations = {}

    def observe(self, rank: int, round_: int, params: np.ndarray, probs: np.ndarray) -> None:
        kept = _kept(params, probs, self.rows)
        with self._lock:
            self.observations.setdefault(round_, {})[rank] = kept


class FileObserver:
    """Writes each report as two ``.npy`` files under ``directory`` (one worker's process)."""

    def __init__(self, directory: str | pathlib.Path, rows: int = PROBS_ROWS) -> None:
        self.directory = pathlib.Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.rows = rows

    def observe(self, rank: int, round_: int, params: np.ndarray, probs: np.ndarray) -> None:
        params32, probs32 = _kept(params, probs, self.rows)
        stem = f"r{round_:05d}-w{rank:03d}"
        np.save(self.directory / f"{stem}-params.npy", params32, allow_pickle=False)
        np.save(self.directory / f"{stem}-probs.npy", probs32, allow_pickle=False)


def read_observations(directory: str | pathlib.Path) -> Observations:
    """What :class:`FileObserver` wrote under ``directory`` (pairs missing a file are left
    out; unknown file names are ignored).

    Raises:
        ValueError: a file is not a plain ``.npy`` array (nothing is unpickled).
    """
    found: dict[tuple[int, int], dict[str, np.ndarray]] = {}
    for path in sorted(pathlib.Path(directory).glob("*.npy")):
        m = _NAME.match(path.name)
        if m is None:
            continue
        found.setdefault((int(m[1]), int(m[2])), {})[m[3]] = np.load(path, allow_pickle=False)
    out: Observations = {}
    for (round_, rank), arrays in sorted(found.items()):
        if {"params", "probs"} <= set(arrays):
            out.setdefault(round_, {})[rank] = (arrays["params"], arrays["probs"])
    return out


@dataclass(frozen=True)
class RoundFigures:
    """The figures of one evaluated round that need every worker's state."""

    round: int
    workers: int  # how many workers reported the round
    consensus_rms_l2: float
    js_divergence_nats: float
    mean_model_val_loss: float


class MeanModel:
    """Evaluates averaged parameters on a job's validation batch (one model, reused)."""

    def __init__(self, cfg: DilocoConfig) -> None:
        self.task: WorkerTask = bind(cfg, 0)

    def val_loss(self, params: np.ndarray) -> float:
        set_flat(self.task.run.model, torch.from_numpy(np.asarray(params, dtype=np.float32)))
        loss, _probs = evaluate(self.task)
        return loss


def round_figures(
    cfg: DilocoConfig, observations: Observations, model: MeanModel | None = None
) -> dict[int, RoundFigures]:
    """Per evaluated round: consensus distance, JS divergence and the average model's loss."""
    model = model or MeanModel(cfg)
    out: dict[int, RoundFigures] = {}
    for round_, got in sorted(observations.items()):
        params: Mapping[int, np.ndarray] = {r: p for r, (p, _q) in got.items()}
        probs = [q for _r, (_p, q) in sorted(got.items())]
        distances = metrics.consensus_distances(params)
        js = metrics.js_divergence(probs) if len(probs) > 1 else 0.0
        mean = np.mean(np.stack([params[r] for r in sorted(params)]), axis=0)
        loss = model.val_loss(mean) if params else math.nan
        out[round_] = RoundFigures(round_, len(got), metrics.consensus_rms(distances), js, loss)
    return out

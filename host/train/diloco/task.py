"""A task bound to one DiLoCo worker: its model, batches and loss, plus a fixed validation batch.

The model, the batches (each worker its own shard, in its own seeded order) and the loss come
from :data:`host.train.tasks.TASKS`. The validation
batch (:data:`VALIDATION`) is the same on every worker: the validation loss and the output
distributions whose Jensen–Shannon divergence measures how far the workers disagree are
computed on it. Every task is a classification under cross-entropy (per character for the
language models), so one forward pass gives both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
import torch

from host.train import data
from host.train.diloco.config import TASK_NAMES, DilocoConfig
from host.train.tasks import CHARS_M_CONTEXT, CONTEXT, TASKS, Task, TaskRun

CHAR_VALIDATION_WINDOWS = 128
DIGITS_VALIDATION_SAMPLES = 256

ALL_TASKS: dict[str, Task] = TASKS  # every task of the job format


def _digits(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    _train, test = data.digits(seed)
    x, y = test.x[:DIGITS_VALIDATION_SAMPLES], test.y[:DIGITS_VALIDATION_SAMPLES]
    return torch.from_numpy(x), torch.from_numpy(y)


def _chars(context: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    corpus = data.chars()
    rng = np.random.default_rng((seed, 1 << 20))
    x, y = data.char_windows(corpus.valid, context, CHAR_VALIDATION_WINDOWS, rng)
    return torch.from_numpy(x), torch.from_numpy(y)


VALIDATION: dict[str, Callable[[int], tuple[torch.Tensor, torch.Tensor]]] = {
    "digits-mlp": _digits,
    "digits-cnn": _digits,
    "chars-transformer": partial(_chars, CONTEXT),
    "chars-transformer-m": partial(_chars, CHARS_M_CONTEXT),
}
"""Per task: seed → the fixed validation batch (inputs, targets)."""

if not set(ALL_TASKS) == set(VALIDATION) == set(TASK_NAMES):
    raise ImportError(
        f"host.train.diloco.task: tasks {sorted(ALL_TASKS)}, validation {sorted(VALIDATION)} "
        f"and TASK_NAMES {sorted(TASK_NAMES)} differ"
    )


@dataclass
class WorkerTask:
    run: TaskRun
    val_x: torch.Tensor
    val_y: torch.Tensor

    @property
    def parameters(self) -> int:
        return sum(p.numel() for p in self.run.model.parameters())


def bind(cfg: DilocoConfig, rank: int) -> WorkerTask:
    """``cfg.task`` for worker ``rank`` (same initial weights everywhere, own data)."""
    run = ALL_TASKS[cfg.task].bind(cfg.seed, rank, cfg.workers, cfg.batch_size)
    vx, vy = VALIDATION[cfg.task](cfg.seed)
    return WorkerTask(run, vx, vy)


def evaluate(task: WorkerTask) -> tuple[float, np.ndarray]:
    """(validation loss, output distributions as rows of probabilities, float64) of the
    model as it is now."""
    model = task.run.model
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            logits = model(task.val_x)
            flat = logits.reshape(-1, logits.shape[-1])
            loss = torch.nn.functional.cross_entropy(flat, task.val_y.reshape(-1))
            probs = torch.softmax(flat.to(torch.float64), dim=-1).numpy()
    finally:
        model.train(was_training)
    return float(loss), probs

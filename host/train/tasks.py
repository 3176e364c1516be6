"""The training tasks as a table: model, batches, loss and evaluation per task name.

=====================  ======================  ===========  ===============================
name                   data                    model        metric
=====================  ======================  ===========  ===============================
``digits-mlp``         scikit-learn digits     MLP 64-64-10 test accuracy (higher is better)
``digits-cnn``         scikit-learn digits     small CNN    test accuracy
``chars-transformer``  Python's help text      1-layer      validation perplexity (lower is
                                               transformer  better)
``chars-transformer-m`` Python's help text     2-layer      validation perplexity (DiLoCo:
                                               transformer  sized for its regimes)
=====================  ======================  ===========  ===============================
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
import torch
from torch import nn

from host.train import data
from host.train.job import TASK_NAMES
from host.train.models import CharTransformer, Mlp, SmallCnn

CONTEXT = 32
EVAL_WINDOWS = 256
_INIT_LOCK = threading.Lock()  # torch's seed is global: workers in threads build one at a time


def _seeded(seed: int, make: Callable[[], nn.Module]) -> nn.Module:
    """``make()`` with torch seeded by ``seed`` (the same weights on every worker)."""
    with _INIT_LOCK:
        torch.manual_seed(seed)
        return make()


@dataclass
class TaskRun:
    """A task bound to one worker: its model, its batches and the evaluation."""

    model: nn.Module
    batch: Callable[[int], tuple[torch.Tensor, torch.Tensor]]  # round -> (inputs, targets)
    loss: Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]
    evaluate: Callable[[nn.Module], float]


@dataclass(frozen=True)
class Task:
    name: str
    metric: str  # "accuracy" | "perplexity"
    higher_is_better: bool
    bind: Callable[[int, int, int, int], TaskRun]  # (seed, rank, world, batch) -> run

    def reached(self, value: float, target: float) -> bool:
        return value >= target if self.higher_is_better else value <= target


def _xent(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = model(x)
    return nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))


def _digits(make: Callable[[], nn.Module]) -> Callable[[int, int, int, int], TaskRun]:
    def bind(seed: int, rank: int, world: int, batch: int) -> TaskRun:
        train, test = data.digits(seed)
        mine = data.shard(train, rank, world)
        x, y = torch.from_numpy(mine.x), torch.from_numpy(mine.y)
        tx, ty = torch.from_numpy(test.x), torch.from_numpy(test.y)
        model = _seeded(seed, make)
        rng = np.random.default_rng((seed, rank))

        def next_batch(_round: int) -> tuple[torch.Tensor, torch.Tensor]:
            idx = torch.from_numpy(rng.integers(0, len(y), size=batch))
            return x[idx], y[idx]

        def evaluate(m: nn.Module) -> float:
            with torch.no_grad():
                return float((m(tx).argmax(1) == ty).float().mean())

        return TaskRun(model, next_batch, _xent, evaluate)

    return bind


def _chars(
    seed: int,
    rank: int,
    world: int,
    batch: int,
    *,
    width: int = 32,
    layers: int = 1,
    heads: int = 2,
    context: int = CONTEXT,
) -> TaskRun:
    corpus = data.chars()
    mine = data.char_slice(corpus.train, rank, world)
    model = _seeded(
        seed,
        lambda: CharTransformer(corpus.vocab, context, width=width, heads=heads, layers=layers),
    )
    rng = np.random.default_rng((seed, rank))
    vx, vy = data.char_windows(corpus.valid, context, EVAL_WINDOWS, np.random.default_rng(seed))
    vxt, vyt = torch.from_numpy(vx), torch.from_numpy(vy)

    def next_batch(_round: int) -> tuple[torch.Tensor, torch.Tensor]:
        bx, by = data.char_windows(mine, context, batch, rng)
        return torch.from_numpy(bx), torch.from_numpy(by)

    def evaluate(m: nn.Module) -> float:
        with torch.no_grad():
            return math.exp(float(_xent(m, vxt, vyt)))

    return TaskRun(model, next_batch, _xent, evaluate)


CHARS_M_CONTEXT = 64
"""Context of ``chars-transformer-m``."""


TASKS: dict[str, Task] = {
    "digits-mlp": Task("digits-mlp", "accuracy", True, _digits(Mlp)),
    "digits-cnn": Task("digits-cnn", "accuracy", True, _digits(SmallCnn)),
    "chars-transformer": Task("chars-transformer", "perplexity", False, _chars),
    # ~50 k parameters (197 KB as float32), ~10 ms per step of 16 windows on one core: one
    # DiLoCo round of H = 20 is ~0.2 s of compute against a few hundred KB of all-reduce,
    # the paper's communication/compute regime at links of a few Mbit/s.
    "chars-transformer-m": Task(
        "chars-transformer-m",
        "perplexity",
        False,
        partial(_chars, width=48, layers=2, heads=2, context=CHARS_M_CONTEXT),
    ),
}

if set(TASKS) != set(TASK_NAMES):  # the job format and the table must agree
    raise ImportError(f"host.train.tasks: TASKS {sorted(TASKS)} != TASK_NAMES {TASK_NAMES}")

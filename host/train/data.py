"""Datasets that ship inside installed packages (nothing is downloaded at run time).

* **digits**: scikit-learn's 8×8 handwritten digits (1,797 images, 10 classes), scaled to
  [0, 1], split 80/20 with a fixed seed; each worker trains on every ``world``-th sample.
* **chars**: English text shipped with Python (``pydoc_data.topics``, the interpreter's help
  pages, ~460 k characters), as byte-level character ids; 90 % train, 10 % validation; each
  worker samples windows from its own contiguous slice of the training text.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

TEST_FRACTION = 0.2
VALID_FRACTION = 0.1


@dataclass(frozen=True)
class Split:
    x: np.ndarray
    y: np.ndarray


@lru_cache(maxsize=4)
def digits(seed: int = 0) -> tuple[Split, Split]:
    """(train, test) of the digits dataset; features float32 in [0, 1], labels int64."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(y))
    n_test = int(len(y) * TEST_FRACTION)
    test, train = order[:n_test], order[n_test:]
    return Split(x[train], y[train]), Split(x[test], y[test])


def shard(split: Split, rank: int, world: int) -> Split:
    """Every ``world``-th sample starting at ``rank``."""
    return Split(split.x[rank::world], split.y[rank::world])


@lru_cache(maxsize=1)
def python_text() -> str:
    """The help-topic pages that ship with Python, in a fixed order."""
    from pydoc_data.topics import topics

    return "\n".join(topics[k] for k in sorted(topics))


@dataclass(frozen=True)
class CharCorpus:
    train: np.ndarray  # int64 character ids
    valid: np.ndarray
    vocab: int


@lru_cache(maxsize=2)
def chars(max_chars: int = 200_000) -> CharCorpus:
    """The text as character ids over printable ASCII (others map to one id)."""
    text = python_text()[:max_chars]
    codes = np.frombuffer(text.encode("ascii", "replace"), dtype=np.uint8).astype(np.int64)
    ids = np.clip(codes - 31, 0, 96)  # 0: newline/other control, 1..95: ' '..'~', 96: DEL/other
    ids[codes == 10] = 0
    n_valid = int(len(ids) * VALID_FRACTION)
    return CharCorpus(ids[:-n_valid], ids[-n_valid:], 97)


def char_windows(
    ids: np.ndarray, context: int, count: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """``count`` random (input, next-character target) windows of ``context`` ids."""
    starts = rng.integers(0, len(ids) - context - 1, size=count)
    idx = starts[:, None] + np.arange(context + 1)[None, :]
    win = ids[idx]
    return win[:, :-1], win[:, 1:]


def char_slice(ids: np.ndarray, rank: int, world: int) -> np.ndarray:
    """Worker ``rank``'s contiguous part of the training text."""
    n = len(ids) // world
    return ids[rank * n : (rank + 1) * n]

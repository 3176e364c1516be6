"""Merge weights and the two averages of the syncer's outer gradients.

For the n reports of a fragment (learner m: outer gradient Δ_m, c_steps and c_tokens since it
last received the fragment), the weights are one row of :data:`WEIGHTINGS`:

    tokens²/steps   w_m = c_tokens² / c_steps     (quantity × quality: the paper's default)
    tokens          w_m = c_tokens
    equal           w_m = 1

and the average one row of :data:`AVERAGING`:

* **direct**: Δ = Σ w_m Δ_m / Σ w_m.
* **RDA** (Radial–Directional Averaging), with φ(x) = x/‖x‖ (φ(0) = 0):
  Δ = (Σ w_m ‖Δ_m‖ / Σ w_m) · φ(Σ w_m φ(Δ_m) / Σ w_m).
  The norm is the weighted mean of the norms and the direction the normalised weighted mean
  of the directions. M orthogonal outer gradients of norm R average to norm R/√M directly,
  to R under RDA, so the outer learning rate needs no retuning as M grows. RDA of identical
  vectors is that vector.

Under RDA the embedding elements of a fragment (``direct_mask``) are averaged directly and the
rest of the fragment forms one vector for RDA. Arithmetic is float64; results are float32.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from host.train.decoupled.config import Averaging, Weighting


def _tokens_squared_per_step(steps: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    out: np.ndarray = tokens * tokens / steps
    return out


WEIGHTINGS: dict[Weighting, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    Weighting.TOKENS_SQUARED_PER_STEP: _tokens_squared_per_step,
    Weighting.TOKENS: lambda steps, tokens: tokens.copy(),
    Weighting.EQUAL: lambda steps, tokens: np.ones_like(tokens),
}
"""Per weighting: (steps, tokens) per report, float64 → weight per report."""


def merge_weights(weighting: Weighting, steps: Sequence[int], tokens: Sequence[int]) -> np.ndarray:
    """The weights of reports with these counters (float64, one per report).

    Raises:
        ValueError: no reports, lengths differ, or a counter below 1 (such reports are
            refused before they get here).
    """
    s = np.asarray(steps, dtype=np.float64)
    t = np.asarray(tokens, dtype=np.float64)
    if s.size == 0 or s.shape != t.shape or (s < 1).any() or (t < 1).any():
        raise ValueError(f"need matching counters >= 1, got steps {steps}, tokens {tokens}")
    return WEIGHTINGS[weighting](s, t)


def _check(vectors: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    v = np.asarray(vectors, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    if v.ndim != 2 or w.shape != (v.shape[0],) or v.shape[0] == 0:
        raise ValueError(f"need n vectors (n, d) and n weights, got {v.shape} and {w.shape}")
    if not (np.isfinite(w).all() and (w > 0).all()):
        raise ValueError(f"weights must be positive and finite, got {w}")
    return v, w / w.sum()


def direct_average(vectors: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Σ w_m v_m / Σ w_m (float64)."""
    v, w = _check(vectors, weights)
    out: np.ndarray = w @ v
    return out


def _unit(x: np.ndarray) -> np.ndarray:
    """x/‖x‖ per row (rows of norm 0 stay 0)."""
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    out: np.ndarray = np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)
    return out


def rda(vectors: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Radial–Directional Average (float64): the weighted mean norm along the normalised
    weighted mean direction (0 if the directions cancel)."""
    v, w = _check(vectors, weights)
    radius = float(w @ np.linalg.norm(v, axis=1))
    direction = _unit(w @ _unit(v))
    out: np.ndarray = radius * direction
    return out


def _direct(vectors: np.ndarray, weights: np.ndarray, direct_mask: np.ndarray) -> np.ndarray:
    return direct_average(vectors, weights)


def _rda_but_embedding(
    vectors: np.ndarray, weights: np.ndarray, direct_mask: np.ndarray
) -> np.ndarray:
    out = np.empty(vectors.shape[1], dtype=np.float64)
    rest = ~direct_mask
    if direct_mask.any():
        out[direct_mask] = direct_average(vectors[:, direct_mask], weights)
    if rest.any():
        out[rest] = rda(vectors[:, rest], weights)
    return out


AVERAGING: dict[Averaging, Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]] = {
    Averaging.DIRECT: _direct,
    Averaging.RDA: _rda_but_embedding,
}
"""Per averaging: (vectors (n, d), weights (n,), embedding mask (d,)) → the average (d,)."""


def combine(
    averaging: Averaging,
    vectors: np.ndarray,
    weights: np.ndarray,
    direct_mask: np.ndarray | None = None,
) -> np.ndarray:
    """The average of a fragment's outer gradients (float32).

    Args:
        vectors: one outer gradient per row.
        direct_mask: elements averaged directly whatever ``averaging`` says (the embedding);
            None: none.
    Raises:
        ValueError: shapes disagree, or a weight is not positive and finite.
    """
    mask = np.zeros(vectors.shape[-1], dtype=bool) if direct_mask is None else direct_mask
    if mask.shape != (vectors.shape[-1],):
        raise ValueError(f"mask of {mask.shape} for vectors of {vectors.shape}")
    return AVERAGING[averaging](vectors, weights, mask).astype(np.float32)

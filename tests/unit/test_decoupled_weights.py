"""Merge weights and averages: tokens²/steps is quantity × quality, every weighting and
averaging has a row, RDA of identical vectors is the vector, RDA of M orthogonal vectors of
norm R keeps norm R where the plain mean has R/√M, the embedding is averaged directly under
RDA, and bad weights are refused."""

from __future__ import annotations

import math

import numpy as np
import pytest

from host.train.decoupled.config import Averaging, Weighting
from host.train.decoupled.weights import (
    AVERAGING,
    WEIGHTINGS,
    combine,
    direct_average,
    merge_weights,
    rda,
)


def test_every_weighting_and_averaging_has_a_row() -> None:
    assert set(WEIGHTINGS) == set(Weighting)
    assert set(AVERAGING) == set(Averaging)


@pytest.mark.parametrize(
    ("weighting", "expect"),
    [
        # learner 0: 24 steps of 512 tokens; learner 1: 12 steps of 512; learner 2: 24 of 256
        (Weighting.TOKENS_SQUARED_PER_STEP, [12288**2 / 24, 6144**2 / 12, 6144**2 / 24]),
        (Weighting.TOKENS, [12288, 6144, 6144]),
        (Weighting.EQUAL, [1, 1, 1]),
    ],
)
def test_weights_of_each_rule(weighting: Weighting, expect: list[float]) -> None:
    w = merge_weights(weighting, [24, 12, 24], [12288, 6144, 6144])
    np.testing.assert_allclose(w, expect)


def test_tokens_squared_per_step_is_quantity_times_quality() -> None:
    # twice the tokens at the same tokens per step: twice the weight; the same tokens in
    # twice the steps (smaller batches): half the weight
    base, more, slower = merge_weights(
        Weighting.TOKENS_SQUARED_PER_STEP, [10, 20, 20], [100, 200, 100]
    )
    assert more == pytest.approx(2 * base)
    assert slower == pytest.approx(base / 2)


@pytest.mark.parametrize(("steps", "tokens"), [([], []), ([0], [5]), ([3], [0]), ([1, 2], [3])])
def test_counters_below_one_are_refused(steps: list[int], tokens: list[int]) -> None:
    with pytest.raises(ValueError, match="counters >= 1"):
        merge_weights(Weighting.EQUAL, steps, tokens)


def test_rda_of_identical_vectors_is_the_vector() -> None:
    v = np.random.default_rng(0).standard_normal(100)
    got = rda(np.stack([v, v, v]), np.array([1.0, 5.0, 0.3]))
    np.testing.assert_allclose(got, v, rtol=1e-12)


@pytest.mark.parametrize("m", [2, 4, 8])
def test_rda_of_orthogonal_vectors_keeps_the_norm_the_mean_shrinks_it(m: int) -> None:
    radius = 3.0
    q, _r = np.linalg.qr(np.random.default_rng(m).standard_normal((64, m)))
    vectors = radius * q.T  # m orthonormal rows scaled to norm R
    w = np.ones(m)
    assert np.linalg.norm(rda(vectors, w)) == pytest.approx(radius)
    assert np.linalg.norm(direct_average(vectors, w)) == pytest.approx(radius / math.sqrt(m))
    # same direction as the mean
    cos = rda(vectors, w) @ direct_average(vectors, w)
    assert cos > 0


def test_rda_averages_norms_and_directions_separately() -> None:
    a, b = np.array([2.0, 0.0]), np.array([0.0, 4.0])
    got = rda(np.stack([a, b]), np.array([3.0, 1.0]))
    # radius: (3·2 + 1·4)/4 = 2.5; direction: normalise (3·(1,0) + 1·(0,1))/4
    np.testing.assert_allclose(got, 2.5 * np.array([3.0, 1.0]) / math.sqrt(10))


def test_rda_of_opposite_vectors_is_zero_and_zero_vectors_have_no_direction() -> None:
    v = np.array([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(rda(np.stack([v, -v]), np.ones(2)), np.zeros(3))
    got = rda(np.stack([v, np.zeros(3)]), np.ones(2))
    np.testing.assert_allclose(got, v / 2)  # radius (‖v‖ + 0)/2 along v


def test_rda_leaves_the_embedding_to_direct_averaging() -> None:
    rng = np.random.default_rng(1)
    vectors = rng.standard_normal((3, 10)).astype(np.float32)
    w = np.array([1.0, 2.0, 3.0])
    mask = np.zeros(10, dtype=bool)
    mask[:4] = True
    got = combine(Averaging.RDA, vectors, w, mask)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got[:4], direct_average(vectors[:, :4], w), rtol=1e-6)
    np.testing.assert_allclose(got[4:], rda(vectors[:, 4:], w), rtol=1e-6)
    np.testing.assert_allclose(
        combine(Averaging.DIRECT, vectors, w, mask), direct_average(vectors, w), rtol=1e-6
    )


@pytest.mark.parametrize("w", [[1.0, 0.0], [1.0, -1.0], [1.0, math.nan], [1.0]])
def test_bad_weights_are_refused(w: list[float]) -> None:
    with pytest.raises(ValueError):
        combine(Averaging.DIRECT, np.ones((2, 3), np.float32), np.array(w))

"""Mixing matrices: doubly stochastic and symmetric for every graph and valid M, the expected
neighbours, contraction factors (0 for the complete graph, < 1 otherwise, the ring's closed
form), one mixing step contracts disagreement by ρ, and a missing neighbour's weight stays on
the worker's own value."""

from __future__ import annotations

import math

import numpy as np
import pytest

from host.train.diloco.config import Graph
from host.train.diloco.errors import ConfigError
from host.train.diloco.mixing import (
    contraction_factor,
    is_doubly_stochastic,
    mix,
    mixing_matrix,
    neighbours,
    row_weights,
)

VALID = [
    (g, m)
    for g in Graph
    for m in range(2, 17)
    if not (g is Graph.RING and m < 3) and not (g is Graph.HYPERCUBE and m & (m - 1))
]


@pytest.mark.parametrize(("graph", "workers"), VALID)
def test_mixing_matrices_are_symmetric_doubly_stochastic_and_contract(
    graph: Graph, workers: int
) -> None:
    w = mixing_matrix(graph, workers)
    assert is_doubly_stochastic(w)
    np.testing.assert_array_equal(w, w.T)
    rho = contraction_factor(w)
    assert 0.0 <= rho < 1.0
    x = np.random.default_rng(workers).standard_normal((workers, 7))
    mean = x.mean(axis=0)
    assert np.linalg.norm(w @ x - mean) <= rho * np.linalg.norm(x - mean) + 1e-12
    for i in range(workers):
        assert i not in neighbours(graph, workers, i)
        for j in neighbours(graph, workers, i):
            assert i in neighbours(graph, workers, j)


def test_neighbours_of_each_graph() -> None:
    assert neighbours(Graph.RING, 5, 0) == (1, 4)
    assert neighbours(Graph.EXPONENTIAL, 8, 0) == (1, 2, 4, 6, 7)
    assert neighbours(Graph.HYPERCUBE, 8, 5) == (1, 4, 7)
    assert neighbours(Graph.COMPLETE, 4, 2) == (0, 1, 3)
    with pytest.raises(ConfigError, match="power-of-two"):
        neighbours(Graph.HYPERCUBE, 6, 0)


def test_complete_graph_is_exact_averaging() -> None:
    for m in (2, 3, 4, 7):
        w = mixing_matrix(Graph.COMPLETE, m)
        np.testing.assert_array_equal(w, np.full((m, m), 1.0 / m))
        assert contraction_factor(w) < 1e-15


@pytest.mark.parametrize("workers", [3, 4, 5, 8, 12])
def test_ring_contraction_matches_its_spectrum(workers: int) -> None:
    # circulant with 1/3 on the diagonal and both neighbours: eigenvalues (1 + 2cos(2πk/M))/3
    eig = [(1 + 2 * math.cos(2 * math.pi * k / workers)) / 3 for k in range(1, workers)]
    assert contraction_factor(mixing_matrix(Graph.RING, workers)) == pytest.approx(
        max(abs(e) for e in eig)
    )


def test_missing_neighbour_weight_stays_on_the_worker() -> None:
    weights = row_weights(Graph.RING, 5, 0)  # 1/3 each for 0, 1, 4
    x = {0: np.array([3.0], np.float32), 1: np.array([6.0], np.float32)}
    z, missing = mix(0, weights, x)
    assert missing == 1
    np.testing.assert_allclose(z, [(2 * 3.0 + 6.0) / 3])
    full, none_missing = mix(0, weights, {**x, 4: np.array([0.0], np.float32)})
    assert none_missing == 0
    np.testing.assert_allclose(full, [3.0])


def test_mixing_identical_values_returns_them_bit_for_bit() -> None:
    v = np.random.default_rng(0).standard_normal(10_000).astype(np.float32)
    for graph, m in [(Graph.COMPLETE, 3), (Graph.COMPLETE, 5), (Graph.RING, 7)]:
        weights = row_weights(graph, m, 1)
        z, _ = mix(1, weights, dict.fromkeys(weights, v))
        assert z.dtype == np.float32
        np.testing.assert_array_equal(z, v)

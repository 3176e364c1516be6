"""Communication graphs, their mixing matrices, and mixing with what arrived.

Graphs (undirected; every one is regular, so uniform and Metropolis weights agree):

==============  ========================================================  ===============
graph           neighbours of worker i (mod M)                             degree
==============  ========================================================  ===============
ring            i − 1, i + 1                                              2
exponential     i ± 2^k for 2^k < M                                       ≤ 2⌈log2 M⌉
hypercube       i XOR 2^k for 2^k < M (M a power of two)                  log2 M
complete        every other worker                                        M − 1
==============  ========================================================  ===============

The mixing matrix has Metropolis–Hastings weights, W_ij = 1 / (1 + max(d_i, d_j)) for
neighbours and W_ii = 1 − Σ_j W_ij: symmetric and doubly stochastic for any graph.
The contraction factor ρ = ‖W − J‖₂ (J = 11ᵀ/M) bounds one mixing step's effect on the
disagreement: ‖W x − x̄‖ ≤ ρ ‖x − x̄‖ for every vector of worker values x. On a regular
graph (all of the above) every weight is 1/(d + 1), the worker's own included, so the
complete graph's matrix is exactly J.

A worker that mixes without some neighbours' messages (late or lost) keeps their weight on
its own value (:func:`mix`): its row still sums to one, so the step is weaker, not biased
toward zero.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from host.train.diloco.config import Graph, check_graph


def _ring(m: int, i: int) -> set[int]:
    return {(i - 1) % m, (i + 1) % m}


def _exponential(m: int, i: int) -> set[int]:
    out: set[int] = set()
    step = 1
    while step < m:
        out |= {(i + step) % m, (i - step) % m}
        step *= 2
    return out


def _hypercube(m: int, i: int) -> set[int]:
    out: set[int] = set()
    bit = 1
    while bit < m:
        out.add(i ^ bit)
        bit *= 2
    return out


def _complete(m: int, i: int) -> set[int]:
    return set(range(m))


NEIGHBOURS: dict[Graph, Callable[[int, int], set[int]]] = {
    Graph.RING: _ring,
    Graph.EXPONENTIAL: _exponential,
    Graph.HYPERCUBE: _hypercube,
    Graph.COMPLETE: _complete,
}
"""Per graph: (M, i) → the neighbours of worker i (self removed by :func:`neighbours`)."""


def neighbours(graph: Graph, workers: int, rank: int) -> tuple[int, ...]:
    """The neighbours of ``rank`` in ``graph`` over ``workers`` workers, ascending.

    Raises:
        ConfigError: the graph cannot connect that many workers.
    """
    check_graph(graph, workers, "graph")
    return tuple(sorted(NEIGHBOURS[graph](workers, rank) - {rank}))


def mixing_matrix(graph: Graph, workers: int) -> np.ndarray:
    """The Metropolis–Hastings mixing matrix of ``graph`` (float64, M × M)."""
    adj = [neighbours(graph, workers, i) for i in range(workers)]
    w = np.zeros((workers, workers))
    for i in range(workers):
        degree = len(adj[i])
        for j in adj[i]:
            w[i, j] = 1.0 / (1 + max(degree, len(adj[j])))
        regular = all(len(adj[j]) == degree for j in adj[i])
        w[i, i] = 1.0 / (1 + degree) if regular else 1.0 - w[i].sum()
    return w


def row_weights(graph: Graph, workers: int, rank: int) -> dict[int, float]:
    """Row ``rank`` of the mixing matrix as {worker: weight}, the worker itself included."""
    row = mixing_matrix(graph, workers)[rank]
    return {j: float(row[j]) for j in (rank, *neighbours(graph, workers, rank))}


def global_weights(workers: int) -> dict[int, float]:
    """The row of J = 11ᵀ/M (every worker 1/M)."""
    return dict.fromkeys(range(workers), 1.0 / workers)


def is_doubly_stochastic(w: np.ndarray, tol: float = 1e-12) -> bool:
    """Non-negative, every row and every column summing to one."""
    return bool(
        (w >= -tol).all()
        and np.allclose(w.sum(axis=0), 1.0, atol=tol)
        and np.allclose(w.sum(axis=1), 1.0, atol=tol)
    )


def contraction_factor(w: np.ndarray) -> float:
    """ρ = ‖W − 11ᵀ/M‖₂, the spectral norm (largest singular value)."""
    m = w.shape[0]
    return float(np.linalg.norm(w - np.full((m, m), 1.0 / m), ord=2))


def mix(
    rank: int, weights: Mapping[int, float], values: Mapping[int, np.ndarray]
) -> tuple[np.ndarray, int]:
    """Σ_j weights[j] · values[j] over the workers whose value is present; the weight of a
    missing one goes to ``values[rank]`` (which must be present).

    The sum runs in ascending worker order in float64 and is cast to the values' dtype, so
    every worker mixing the same values gets the same bits, and mixing identical values
    returns them unchanged.

    Returns:
        (the mixed vector, how many weighted workers were missing).
    """
    own = values[rank]
    absent = [j for j in weights if j != rank and j not in values]
    effective = {j: w for j, w in weights.items() if j not in absent}
    effective[rank] = weights[rank] + sum(weights[j] for j in absent)
    acc = np.zeros(own.shape, dtype=np.float64)
    for j in sorted(effective):
        acc += effective[j] * values[j].astype(np.float64)
    return acc.astype(own.dtype), len(absent)

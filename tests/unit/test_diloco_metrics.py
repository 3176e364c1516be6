"""Consensus distance, Jensen–Shannon divergence, utilization, the byte model (checked
against messages actually encoded) and the link-rate derivation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from host.train.diloco import metrics
from host.train.diloco.config import VARIANTS, Algorithm, DilocoConfig
from host.train.diloco.exchange import ring_step
from host.train.diloco.wire import HEADER_BYTES, message_bytes


def test_consensus_distance_is_the_l2_distance_to_the_mean() -> None:
    params = {0: np.array([0.0, 0.0], np.float32), 1: np.array([2.0, 0.0], np.float32)}
    d = metrics.consensus_distances(params)
    assert d == {0: 1.0, 1: 1.0}
    assert metrics.consensus_rms(d) == 1.0
    same = metrics.consensus_distances({r: np.ones(5, np.float32) for r in range(3)})
    assert set(same.values()) == {0.0}
    assert metrics.consensus_rms({}) == 0.0


def test_js_divergence_of_agreeing_and_disjoint_distributions() -> None:
    p = np.array([[0.2, 0.8], [0.5, 0.5]])
    assert metrics.js_divergence([p, p, p]) == pytest.approx(0.0, abs=1e-15)
    a, b = np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]])
    assert metrics.js_divergence([a, b]) == pytest.approx(math.log(2))
    assert metrics.js_divergence([a, b]) == metrics.js_divergence([b, a])
    eye = np.eye(4)[:, None, :]
    assert metrics.js_divergence(list(eye)) == pytest.approx(math.log(4))  # the bound ln M
    with pytest.raises(ValueError, match="different shapes"):
        metrics.js_divergence([a, np.ones((2, 2)) / 2])


def test_js_divergence_is_nonnegative_and_bounded() -> None:
    rng = np.random.default_rng(1)
    for m in (2, 3, 5):
        probs = [rng.dirichlet(np.ones(10), size=7) for _ in range(m)]
        js = metrics.js_divergence(probs)
        assert 0.0 < js < math.log(m)


def test_utilization() -> None:
    assert metrics.utilization(0.5, 2.0) == 0.25
    assert metrics.utilization(0.0, 0.0) == 1.0


@pytest.mark.parametrize(("world", "elements"), [(2, 10), (3, 1000), (4, 1001), (5, 7)])
def test_ring_allreduce_bytes_follow_the_schedule(world: int, elements: int) -> None:
    sizes = [len(s) for s in np.array_split(np.zeros(elements), world)]
    for rank in range(world):
        steps = [ring_step(rank, world, s) for s in range(2 * (world - 1))]
        expect = sum(message_bytes(sizes[p.send]) for p in steps)
        assert metrics.ring_allreduce_bytes(world, elements, rank) == expect
        # each phase sends every segment but one: 2(M−1)/M of the model, plus headers
    total = metrics.ring_allreduce_bytes(world, elements)
    assert abs(total - 2 * (world - 1) * (HEADER_BYTES + 4 * elements / world)) <= 8 * world
    assert metrics.ring_allreduce_bytes(1, elements) == 0


def test_round_bytes_per_algorithm() -> None:
    n = 10_000
    full = message_bytes(n)
    ring4 = metrics.ring_allreduce_bytes(4, n)
    base = DilocoConfig(workers=4, inner_steps=5, task="digits-mlp")
    assert metrics.round_bytes(base, n) == ring4
    dp = DilocoConfig(algorithm=Algorithm.DATA_PARALLEL, workers=4, inner_steps=5)
    assert metrics.round_bytes(dp, n) == 5 * ring4
    g1 = DilocoConfig(algorithm=Algorithm.GOSSIP, workers=4, gossip=VARIANTS["GlobalM1"])
    assert metrics.round_bytes(g1, n) == 3 * full
    g2 = DilocoConfig(algorithm=Algorithm.GOSSIP, workers=4, gossip=VARIANTS["GlobalM1LocalM2"])
    assert metrics.round_bytes(g2, n) == 3 * full + 2 * full


def test_link_rate_gives_the_wanted_ratio() -> None:
    wire = metrics.wire_bytes(300_000, messages=6)
    assert wire == 300_000 + 6 * math.ceil(50_000 / 1384) * 68
    rate = metrics.link_rate_mbps(wire, 0.2, 0.89, planes=2)
    assert metrics.comm_time_s(wire, rate, planes=2) == pytest.approx(0.89 * 0.2)
    assert metrics.link_rate_mbps(wire, 0.2, 1.78) == pytest.approx(rate / 2)
    with pytest.raises(ValueError, match="positive"):
        metrics.link_rate_mbps(wire, 0.0, 1.0)

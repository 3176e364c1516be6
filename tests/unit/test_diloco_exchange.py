"""Worker meshes over real MRC endpoints on the in-process emulated fabric: HELLO checks,
ring all-reduce (the exact mean, the same bits everywhere, bytes as the model says), DBLP
ring all-reduce, neighbour mixing with a timeout (missing counted, late arrivals dropped),
Mix1 in the background, ABORT turned into PeerFailed, malformed messages counted."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import numpy as np
import pytest

from host.collectives import RingAllReduce, connect_ring, job_fingerprint
from host.dblp.config import LossPolicy
from host.dblp.phase import PhaseController
from host.train.cluster import EmuCluster, job_dblp_config
from host.train.diloco import metrics
from host.train.diloco.config import Graph, Mix1Transport
from host.train.diloco.errors import PeerFailed, PeerTimeout, SetupFailed
from host.train.diloco.exchange import (
    DblpRingReduce,
    Mix1Background,
    neighbour_mix,
    ring_allreduce,
)
from host.train.diloco.mesh import Mesh
from host.train.diloco.mixing import global_weights, row_weights
from host.train.diloco.wire import DropReason, Key, MessageKind, encode

FP = job_fingerprint("diloco exchange tests")
T = TypeVar("T")


def parallel(fns: dict[int, Callable[[], T]], timeout_s: float = 30.0) -> dict[int, T]:
    out: dict[int, T] = {}
    errors: list[BaseException] = []

    def run(k: int, fn: Callable[[], T]) -> None:
        try:
            out[k] = fn()
        except BaseException as e:  # re-raised below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(k, fn)) for k, fn in fns.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout_s)
    if errors:
        raise errors[0]
    return out


@pytest.fixture
def cluster() -> Iterator[EmuCluster]:
    with EmuCluster() as cl:
        yield cl


def meshes(
    cl: EmuCluster, peers: Callable[[int], set[int]], world: int, fp: Callable[[int], bytes]
) -> dict[int, Mesh]:
    hosts = tuple(range(world))
    return parallel(
        {
            r: (lambda r=r: Mesh(cl.endpoints[r], r, hosts, peers(r), fp(r), setup_timeout_s=5))
            for r in range(world)
        }
    )


def ring_peers(world: int) -> Callable[[int], set[int]]:
    return lambda r: {(r + 1) % world, (r - 1) % world}


def complete(world: int) -> Callable[[int], set[int]]:
    return lambda r: set(range(world)) - {r}


@pytest.mark.parametrize("world", [2, 3, 4])
def test_ring_allreduce_is_the_mean_with_the_same_bits_everywhere(
    cluster: EmuCluster, world: int
) -> None:
    ms = meshes(cluster, ring_peers(world), world, lambda r: FP)
    vecs = {r: np.random.default_rng(r).standard_normal(5003).astype(np.float32) for r in ms}
    try:
        got = parallel(
            {
                r: (lambda r=r: ring_allreduce(ms[r], MessageKind.OUTER_REDUCE, 7, 0, vecs[r], 10))
                for r in ms
            }
        )
    finally:
        for m in ms.values():
            m.close()
    np.testing.assert_allclose(got[0], np.mean([vecs[r] for r in ms], axis=0), atol=1e-6)
    for r in ms:
        np.testing.assert_array_equal(got[r], got[0])
        assert ms[r].bytes_sent(7) == metrics.ring_allreduce_bytes(world, 5003, r)
        assert ms[r].bytes_received(7) == metrics.ring_allreduce_bytes(world, 5003, (r - 1) % world)


def test_dblp_ring_reduce_is_the_mean_and_counts_chunks(cluster: EmuCluster) -> None:
    cfg = job_dblp_config("emu", peer_timeout_s=10)
    hosts = [0, 1, 2]

    def rank(r: int) -> DblpRingReduce:
        nxt, prev = connect_ring(cluster.endpoints[r], r, hosts, FP, cfg, 10)
        ring = RingAllReduce(r, 3, nxt, prev, PhaseController(LossPolicy.RELIABLE))
        return DblpRingReduce(ring, cfg.packet_bytes)

    reducers = parallel({r: (lambda r=r: rank(r)) for r in range(3)})
    vecs = {r: np.full(3000, float(r + 1), np.float32) for r in range(3)}
    try:
        got = parallel(
            {
                r: (lambda r=r: reducers[r].allreduce(MessageKind.OUTER_REDUCE, 4, 0, vecs[r]))
                for r in range(3)
            }
        )
    finally:
        for red in reducers.values():
            red.close()
    for r in range(3):
        np.testing.assert_allclose(got[r].vector, np.full(3000, 2.0))
        assert got[r].delivered_fraction == 1.0
        assert reducers[r].bytes_sent(4) >= 4 * 3000 * 4 // 3  # 2(M-1)/M of 12 KB, in chunks
        assert reducers[r].bytes_sent(3) == 0


def test_another_jobs_fingerprint_fails_the_setup(cluster: EmuCluster) -> None:
    with pytest.raises(SetupFailed, match="runs another job"):
        meshes(cluster, complete(2), 2, lambda r: FP if r == 0 else job_fingerprint("other"))


def test_a_missing_peer_fails_the_setup_with_its_rank(cluster: EmuCluster) -> None:
    with pytest.raises(SetupFailed, match=r"ranks \[0\] did not connect within 0.3 s"):
        Mesh(cluster.endpoints[1], 1, (0, 1), {0}, FP, setup_timeout_s=0.3)


def test_neighbour_mix_waits_its_timeout_then_mixes_what_arrived(cluster: EmuCluster) -> None:
    ms = meshes(cluster, ring_peers(4), 4, lambda r: FP)
    w = {r: row_weights(Graph.RING, 4, r) for r in ms}
    vec = {r: np.full(100, float(r), np.float32) for r in ms}
    try:
        # rank 2 is late: ranks 1 and 3 mix without it after 0.3 s
        got = parallel(
            {
                r: (lambda r=r: neighbour_mix(ms[r], MessageKind.MIX2, 0, vec[r], w[r], 0.3))
                for r in (0, 1, 3)
            }
        )
        t0 = time.monotonic()
        late = neighbour_mix(ms[2], MessageKind.MIX2, 0, vec[2], w[2], 5.0)
        assert time.monotonic() - t0 < 2.0  # its neighbours' messages were already there
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(  # rank 2's message reaches both neighbours
            ms[r].mailbox.late_count(MessageKind.MIX2) < 1 for r in (1, 3)
        ):
            time.sleep(0.01)
    finally:
        for m in ms.values():
            m.close()
    assert [got[r].missing for r in (0, 1, 3)] == [0, 1, 1]
    np.testing.assert_allclose(got[1].vector, (0 + 1 + 1) / 3)  # rank 2's weight on rank 1
    np.testing.assert_allclose(got[0].vector, (3 + 0 + 1) / 3)
    assert late.missing == 0
    np.testing.assert_allclose(late.vector, (1 + 2 + 3) / 3)
    assert ms[1].mailbox.drops[DropReason.LATE] == 1  # rank 2's message came after the mix
    assert ms[3].mailbox.late_count(MessageKind.MIX2) == 1


@pytest.mark.parametrize("transport", list(Mix1Transport))
def test_mix1_runs_in_the_background_and_averages(
    cluster: EmuCluster, transport: Mix1Transport
) -> None:
    world = 3
    ms = meshes(cluster, complete(world), world, lambda r: FP)
    weights = {
        r: global_weights(world)
        if transport is Mix1Transport.ALLREDUCE
        else row_weights(Graph.COMPLETE, world, r)
        for r in ms
    }
    bgs = {r: Mix1Background(ms[r], transport, weights[r], 10.0) for r in ms}
    vec = {r: np.full(2000, float(3 * r), np.float32) for r in ms}
    try:
        handles = {r: bgs[r].start(0, vec[r]) for r in ms}  # returns at once
        got = parallel({r: (lambda r=r: handles[r].finish(10.0)) for r in ms})
    finally:
        for b in bgs.values():
            b.close()
        for m in ms.values():
            m.close()
    for r in ms:
        np.testing.assert_allclose(got[r].vector, 3.0)
        assert got[r].missing == 0


def test_mix1_without_a_neighbour_counts_it_missing_after_the_timeout(
    cluster: EmuCluster,
) -> None:
    ms = meshes(cluster, complete(3), 3, lambda r: FP)
    bgs = {
        r: Mix1Background(ms[r], Mix1Transport.NEIGHBOURS, row_weights(Graph.COMPLETE, 3, r), 5)
        for r in ms
    }
    try:
        handles = {r: bgs[r].start(0, np.full(10, float(r), np.float32), send=r != 2) for r in ms}
        t0 = time.monotonic()
        got = {r: handles[r].finish(0.25) for r in (0, 1)}
        waited = time.monotonic() - t0
    finally:
        for b in bgs.values():
            b.close()
        for m in ms.values():
            m.close()
    assert 0.25 <= waited < 2.0
    assert got[0].missing == got[1].missing == 1
    np.testing.assert_allclose(got[0].vector, (0 + 1 + 0) / 3)


def test_an_abort_reaches_waiters_as_peer_failed(cluster: EmuCluster) -> None:
    ms = meshes(cluster, complete(2), 2, lambda r: FP)
    try:
        ms[1].abort(3, "InjectedFault: killed")
        with pytest.raises(
            PeerFailed, match=r"rank 1 \(host 1\) stopped in round 3: Injected"
        ) as e:
            ms[0].take(Key(MessageKind.OUTER_REDUCE, 3, 1), 5.0)
        assert (e.value.rank, e.value.host, e.value.round) == (1, 1, 3)
        with pytest.raises(PeerTimeout, match="no MIX2 of round 0"):
            ms[1].take(Key(MessageKind.MIX2, 0, 0), 0.05)
    finally:
        for m in ms.values():
            m.close()


def test_a_ring_all_reduce_stops_when_any_member_is_gone_not_only_the_one_it_waits_for(
    cluster: EmuCluster,
) -> None:
    ms = meshes(cluster, ring_peers(4), 4, lambda r: FP)
    try:
        ms[2].abort(0, "gone")  # rank 1 waits for rank 0's segment, but rank 2 is gone
        t0 = time.monotonic()
        with pytest.raises(PeerFailed, match=r"rank 2 \(host 2\) stopped in round 0: gone"):
            ring_allreduce(ms[1], MessageKind.OUTER_REDUCE, 0, 0, np.ones(8, np.float32), 20.0)
        assert time.monotonic() - t0 < 5.0
    finally:
        for m in ms.values():
            m.close()


def test_malformed_and_misattributed_messages_are_counted_and_dropped(
    cluster: EmuCluster,
) -> None:
    ms = meshes(cluster, complete(2), 2, lambda r: FP)
    try:
        conn = ms[1]._conns[0]
        conn.send(b"junk" * 10)
        conn.send(encode(MessageKind.MIX1, 0, 0, np.zeros(3, np.float32)))  # claims rank 0
        conn.send(encode(MessageKind.MIX1, 0, 1, np.ones(3, np.float32)))
        got = ms[0].take(Key(MessageKind.MIX1, 0, 1), 5.0)
    finally:
        for m in ms.values():
            m.close()
    np.testing.assert_array_equal(got.array, np.ones(3))
    assert ms[0].mailbox.drops[DropReason.BAD_MAGIC] == 1
    assert ms[0].mailbox.drops[DropReason.WRONG_SENDER] == 1

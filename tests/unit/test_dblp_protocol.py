"""The per-round DBLP protocol: probe / bitmap / stop, resending only missing chunks,
zero-fill, early stop, drop counting and failure by timeout, on in-memory connections
(deterministic, fast) and over MRC on the in-process emulated fabric with loss bursts."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from host.dblp.chunks import TensorSpec, decode_chunk, encode_chunks, is_chunk
from host.dblp.config import DblpConfig, StopRule
from host.dblp.control import Control, ControlKind, decode_control, encode_control, is_control
from host.dblp.errors import RoundFailed
from host.dblp.link import DblpLink
from host.dblp.memconn import MemConnection, mem_pair
from host.dblp.protocol import RecvReport, SendReport, recv_tensor, send_tensor
from host.train.cluster import EmuCluster, job_dblp_config

CFG = DblpConfig(
    packet_bytes=452,
    settle_timeout_s=0.01,
    probe_interval_s=0.005,
    peer_timeout_s=2.0,
    linger_s=0.2,
)
X = np.random.default_rng(0).standard_normal(2000).astype(np.float32)  # 20 chunks of 100
SPEC = TensorSpec.of(0, X)


@pytest.fixture
def pair() -> Iterator[tuple[MemConnection, MemConnection, DblpLink, DblpLink]]:
    a, b = mem_pair()
    la, lb = DblpLink(a, CFG, name="sender side"), DblpLink(b, CFG, name="receiver side")
    yield a, b, la, lb
    la.close()
    lb.close()


def exchange(
    la: DblpLink, lb: DblpLink, bound: float, round_: int = 1, rx_bound: float | None = None
) -> tuple[SendReport, RecvReport]:
    with ThreadPoolExecutor(1) as pool:
        fut = pool.submit(send_tensor, la, round_, 0, X, bound)
        rep = recv_tensor(lb, round_, SPEC, rx_bound)
        return fut.result(timeout=30), rep


def lossy(p: float, seed: int = 1) -> Callable[[bytes, bool], bool]:
    rng = random.Random(seed)
    return lambda data, reliable: rng.random() < p


def chunk_indices(conn: MemConnection) -> list[int]:
    return [decode_chunk(d).index for d, rel in conn.sent if is_chunk(d)]


def controls(conn: MemConnection, kind: ControlKind) -> list[Control]:
    return [c for c in (decode_control(d) for d, _ in conn.sent if is_control(d)) if c.kind is kind]


def test_lossless_transfer_is_exact_in_one_attempt(pair) -> None:  # type: ignore[no-untyped-def]
    a, b, la, lb = pair
    sent, got = exchange(la, lb, 0.0)
    np.testing.assert_array_equal(got.array, X)
    assert (got.chunks, got.received, got.delivered_fraction) == (20, 20, 1.0)
    assert (sent.attempts, sent.chunks_sent, sent.delivered) == (1, 20, 20)


def test_only_missing_chunks_are_resent_until_p0_delivers_everything(pair) -> None:  # type: ignore[no-untyped-def]
    a, b, la, lb = pair
    a.drop = lossy(0.5)
    sent, got = exchange(la, lb, 0.0)
    np.testing.assert_array_equal(got.array, X)
    assert sent.attempts > 2
    idx = chunk_indices(a)
    assert sorted(set(idx)) == list(range(20))
    bitmaps = controls(b, ControlKind.BITMAP)
    resent = idx[20:]
    # every resend was reported missing by a bitmap, and each attempt resends exactly those
    assert set(resent) <= {i for bm in bitmaps for i, got_ in enumerate(bm.bitmap()) if not got_}
    assert len(resent) == sent.chunks_sent - 20


def test_bound_stops_at_one_minus_p_and_zero_fills_the_rest(pair) -> None:  # type: ignore[no-untyped-def]
    a, b, la, lb = pair
    a.drop = lossy(0.5, seed=3)
    sent, got = exchange(la, lb, 0.408)
    assert got.received >= 12 and got.delivered_fraction >= 1 - 0.408  # 12 of 20 chunks
    assert got.bound == pytest.approx(0.408)  # learned from the sender's chunks
    assert sent.delivered == got.received
    flat = got.array
    arrived = flat != 0
    np.testing.assert_array_equal(flat[arrived], X[arrived])
    assert np.count_nonzero(arrived) == got.received * 100
    assert controls(b, ControlKind.STOP)


def test_the_receivers_own_bound_wins_over_the_senders(pair) -> None:  # type: ignore[no-untyped-def]
    a, b, la, lb = pair
    a.drop = lossy(0.5, seed=4)
    sent, got = exchange(la, lb, 0.408, rx_bound=0.0)
    np.testing.assert_array_equal(got.array, X)


def test_receiver_waits_for_a_probe_before_stopping_short_of_every_chunk(pair) -> None:  # type: ignore[no-untyped-def]
    a, b, la, lb = pair
    for data in encode_chunks(1, SPEC, X, 100, 0.5)[:10]:
        b.inject(data)
    stops_before_probe: list[Control] = []

    def probe() -> None:
        stops_before_probe.extend(controls(b, ControlKind.STOP))
        b.inject(encode_control(Control(ControlKind.PROBE, 1, 0, 0, 20, 0, 500_000, 1)))

    timer = threading.Timer(0.2, probe)
    timer.start()
    got = recv_tensor(lb, 1, SPEC)
    timer.join()
    # STOP answered the probe, not the 10th chunk: none was sent before the probe came
    assert stops_before_probe == []
    assert got.received == 10 and got.probes == 1
    assert {c.received for c in controls(b, ControlKind.STOP)} == {10}  # and its copies
    assert controls(b, ControlKind.BITMAP) == []  # 1 - P was in: no resend asked for


def test_receiver_stops_unprompted_when_every_chunk_is_in(pair) -> None:  # type: ignore[no-untyped-def]
    a, b, la, lb = pair
    for data in encode_chunks(1, SPEC, X, 100, 0.5):
        b.inject(data)
    got = recv_tensor(lb, 1, SPEC)
    assert got.received == 20 and got.probes == 0


def test_on_arrival_rule_stops_as_soon_as_one_minus_p_is_in() -> None:
    a, b = mem_pair()
    cfg = DblpConfig(packet_bytes=452, stop_rule=StopRule.ON_ARRIVAL, linger_s=0.0)
    with DblpLink(b, cfg) as lb:
        for data in encode_chunks(1, SPEC, X, 100, 0.5)[:10]:  # no probe at all
            b.inject(data)
        got = recv_tensor(lb, 1, SPEC)
    assert got.received == 10 and got.probes == 0
    assert controls(b, ControlKind.STOP)[0].received == 10


def test_wrong_round_duplicate_foreign_and_garbage_chunks_are_dropped_and_counted(pair) -> None:  # type: ignore[no-untyped-def]
    a, b, la, lb = pair
    chunks = encode_chunks(5, SPEC, X, 100, 0.0)
    stale = encode_chunks(4, SPEC, X, 100, 0.0)[0]
    other = np.zeros(2000, dtype=np.float64)
    foreign = encode_chunks(5, TensorSpec.of(0, other), other, 50, 0.0)[0]
    for data in [stale, chunks[0], chunks[0], foreign, b"\x00garbage", *chunks[1:]]:
        b.inject(data)
    corrupt = bytearray(chunks[3])
    corrupt[-1] ^= 1
    b.inject(bytes(corrupt))
    got = recv_tensor(lb, 5, SPEC)
    np.testing.assert_array_equal(got.array, X)
    time.sleep(0.05)
    drops = lb.drops
    assert got.drops == {"wrong_round": 1, "duplicate": 1, "foreign": 1}
    assert drops["bad_magic"] == 1 and drops["bad_crc"] <= 1
    # once finished, late chunks of the transfer are dropped as wrong-round
    b.inject(chunks[2])
    time.sleep(0.05)
    assert lb.drops["wrong_round"] >= 2


def test_chunks_of_a_later_transfer_are_kept_until_it_starts(pair) -> None:  # type: ignore[no-untyped-def]
    a, b, la, lb = pair
    for data in encode_chunks(8, SPEC, X, 100, 0.0):
        b.inject(data)
    for data in encode_chunks(7, SPEC, X * 2, 100, 0.0):
        b.inject(data)
    first = recv_tensor(lb, 7, SPEC)
    second = recv_tensor(lb, 8, SPEC)
    np.testing.assert_array_equal(first.array, X * 2)
    np.testing.assert_array_equal(second.array, X)


def test_late_probe_of_a_finished_transfer_is_answered_with_stop(pair) -> None:  # type: ignore[no-untyped-def]
    a, b, la, lb = pair
    exchange(la, lb, 0.0, round_=3)
    before = len(controls(b, ControlKind.STOP))
    b.inject(encode_control(Control(ControlKind.PROBE, 3, 0, 0, 20, 0, 0, 99)))
    deadline = time.monotonic() + 2

    def answers() -> list[Control]:
        # redundant copies of the transfer's own probes may still be answered: look for ours
        return [c for c in controls(b, ControlKind.STOP)[before:] if c.seq == 99]

    while not answers() and time.monotonic() < deadline:
        time.sleep(0.01)
    late = answers()
    assert late and late[0].key == (3, 0) and late[0].received == 20


def test_sender_fails_with_a_clear_error_when_the_receiver_disappears() -> None:
    a, b = mem_pair()
    b.vanished = True
    cfg = DblpConfig(packet_bytes=452, probe_interval_s=0.01, peer_timeout_s=0.3, linger_s=0.0)
    with DblpLink(a, cfg, name="worker 2") as la:
        with pytest.raises(
            RoundFailed,
            match=r"round 6 tensor 0: no answer from worker 2 for [\d.]+ s \(attempt 0, \d+ probes\)",
        ) as info:
            send_tensor(la, 6, 0, X, 0.0)
    # it gave up on silence after probing again and again, and reports the probes it sent
    probes = controls(a, ControlKind.PROBE)
    assert {c.key for c in probes} == {(6, 0)}
    assert f"{len({c.seq for c in probes})} probes" in str(info.value) and len(probes) > 1


def test_receiver_fails_with_a_clear_error_when_the_sender_disappears() -> None:
    a, b = mem_pair()
    cfg = DblpConfig(packet_bytes=452, peer_timeout_s=0.3, linger_s=0.0)
    with DblpLink(b, cfg, name="server") as lb:
        for data in encode_chunks(2, SPEC, X, 100, 0.0)[:5]:
            b.inject(data)
        with pytest.raises(
            RoundFailed, match=r"round 2 tensor 0: nothing from server for .* \(5/20 chunks\)"
        ):
            recv_tensor(lb, 2, SPEC)


def test_abort_from_the_peer_fails_the_waiting_side(pair) -> None:  # type: ignore[no-untyped-def]
    a, b, la, lb = pair
    threading.Timer(0.1, lambda: la.abort("worker 1 failed: out of memory")).start()
    with pytest.raises(RoundFailed, match="aborted the job: worker 1 failed: out of memory"):
        recv_tensor(lb, 1, SPEC)


def test_closed_connection_fails_the_waiting_side(pair) -> None:  # type: ignore[no-untyped-def]
    a, b, la, lb = pair
    threading.Timer(0.1, b.close).start()
    with pytest.raises(RoundFailed, match="connection to receiver side failed"):
        recv_tensor(lb, 1, SPEC)


# -- over MRC on the emulated fabric --------------------------------------------------------


@pytest.fixture(scope="module")
def emu_links() -> Iterator[tuple[EmuCluster, DblpLink, DblpLink]]:
    cfg = job_dblp_config("emu", peer_timeout_s=20.0)
    with EmuCluster() as cl:
        conn = cl.endpoints[1].connect(0)
        conn.send(b"hi").wait(5)
        acc = cl.endpoints[0].accept(5)
        acc.recv(5)
        la, lb = DblpLink(conn, cfg, name="h2"), DblpLink(acc, cfg, name="h1")
        yield cl, la, lb
        la.close()
        lb.close()


EMU_X = np.random.default_rng(1).standard_normal(3000).astype(np.float32)  # 10 chunks


def emu_exchange(
    la: DblpLink, lb: DblpLink, round_: int, bound: float
) -> tuple[SendReport, RecvReport]:
    with ThreadPoolExecutor(1) as pool:
        fut = pool.submit(send_tensor, la, round_, 0, EMU_X, bound)
        rep = recv_tensor(lb, round_, TensorSpec.of(0, EMU_X))
        return fut.result(timeout=60), rep


def test_over_mrc_reliable_bound_delivers_exactly_under_loss(emu_links) -> None:  # type: ignore[no-untyped-def]
    cl, la, lb = emu_links
    cl.set_loss(0.3)
    try:
        for r in range(3):
            sent, got = emu_exchange(la, lb, 10 + r, 0.0)
            np.testing.assert_array_equal(got.array, EMU_X)
    finally:
        cl.set_loss(0.0)
    assert cl.emu.counters["dropped_loss"] > 0


def test_over_mrc_a_loss_burst_costs_p_high_fewer_attempts_than_p_low(emu_links) -> None:  # type: ignore[no-untyped-def]
    cl, la, lb = emu_links
    attempts: dict[float, list[int]] = {0.008: [], 0.408: []}
    cl.set_loss(0.8)
    try:
        for r in range(3):
            for i, bound in enumerate(attempts):
                sent, got = emu_exchange(la, lb, 100 + 2 * r + i, bound)
                assert got.delivered_fraction >= 1 - bound
                attempts[bound].append(sent.attempts)
    finally:
        cl.set_loss(0.0)
    assert sum(attempts[0.408]) < sum(attempts[0.008])
    sent, got = emu_exchange(la, lb, 200, 0.0)  # after the burst: back to one attempt
    assert got.received == got.chunks

"""Traffic manager: depth and tail drop, drain rates, strict priority, queue telemetry."""

from __future__ import annotations

import pytest

from switch.device.tm import TrafficManager


def test_tail_drop_at_the_default_depth_of_64() -> None:
    tm = TrafficManager()
    accepted = [tm.enqueue(1, 0, i, now_us=0) for i in range(70)]
    assert accepted[:64] == list(range(64))  # enq_qdepth: packets ahead of this one
    assert accepted[64:] == [None] * 6
    assert tm.ports[1].drops == 6


def test_unlimited_rate_drains_everything_at_once() -> None:
    tm = TrafficManager()
    for i in range(10):
        tm.enqueue(2, 0, i, 0)
    out = tm.dequeue_ready(5, limit=100)
    assert [item for _, item, _, _ in out] == list(range(10))
    assert [d for *_, d in out] == list(range(9, -1, -1))  # deq_qdepth after each dequeue


def test_rate_limits_departures() -> None:
    tm = TrafficManager()
    tm.set_rate(1000, port=1)  # 1000 packets/s: one per 1000 us
    for i in range(5):
        tm.enqueue(1, 0, i, 0)
    sent = []
    for now in range(0, 5000, 100):
        sent += [(now, item) for _, item, _, _ in tm.dequeue_ready(now)]
    times = [t for t, _ in sent]
    assert [i for _, i in sent] == [0, 1, 2, 3, 4]
    assert all(b - a >= 900 for a, b in zip(times, times[1:]))


def test_bit_rate_uses_packet_size() -> None:
    class Pkt:
        def __init__(self, nbytes: int) -> None:
            self.nbytes = nbytes

    tm = TrafficManager()
    tm.set_rate(8_000_000, port=3, unit="bps")  # 1 byte/us
    tm.enqueue(3, 0, Pkt(1000), 0)
    tm.enqueue(3, 0, Pkt(1000), 0)
    assert len(tm.dequeue_ready(0)) == 1
    assert tm.dequeue_ready(500) == []
    assert len(tm.dequeue_ready(1000)) == 1


def test_strict_priority_serves_high_first() -> None:
    tm = TrafficManager(priority_queues=4)
    tm.set_rate(1000, port=1)
    tm.enqueue(1, 0, "low", 0)
    tm.enqueue(1, 3, "high", 0)
    tm.enqueue(1, 1, "mid", 0)
    order = []
    for now in range(0, 4000, 1000):
        order += [item for _, item, _, _ in tm.dequeue_ready(now)]
    assert order == ["high", "mid", "low"]


def test_priority_without_a_queue_is_dropped() -> None:
    tm = TrafficManager(priority_queues=1)
    assert tm.enqueue(1, 2, "x", 0) is None


def test_depth_and_rate_validation() -> None:
    tm = TrafficManager()
    with pytest.raises(ValueError):
        tm.set_depth(-1)
    with pytest.raises(ValueError):
        tm.set_rate(-5)
    tm.set_depth(2, port=4)
    assert [tm.enqueue(4, 0, i, 0) for i in range(3)] == [0, 1, None]


def test_next_departure_reports_the_earliest_port() -> None:
    tm = TrafficManager()
    assert tm.next_departure_us() is None
    tm.set_rate(100, port=1)
    tm.enqueue(1, 0, "a", 0)
    tm.enqueue(1, 0, "b", 0)
    tm.dequeue_ready(0)
    assert tm.next_departure_us() == pytest.approx(10_000, abs=10)

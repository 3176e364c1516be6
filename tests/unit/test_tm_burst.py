"""The traffic manager's burst allowance and the device's cut-through on rate-limited ports.

A software data path runs in rounds; with ``burst_us`` a fast port sends more than one packet
per round, while the long-run rate, the queue telemetry and strict priorities stay what they
are without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from switch.compile.package import load_device_config, make_device_config
from switch.device.device import Device, Pipeline
from switch.device.sscli import run_command
from switch.device.tm import TrafficManager
from switch.p4info import build_p4info
from switch.pipeline.tables import TableEntry
from switch.schema import ActionCall


class Pkt:
    def __init__(self, n: int, nbytes: int = 1436) -> None:
        self.n = n
        self.nbytes = nbytes


def test_without_a_burst_a_fast_port_sends_one_packet_per_round() -> None:
    tm = TrafficManager()
    tm.set_rate(10e9, port=1, unit="bps")  # 1,500 bytes take 1.2 us
    for i in range(20):
        tm.enqueue(1, 0, Pkt(i), 0)
    assert len(tm.dequeue_ready(0)) == 1


def test_a_burst_lets_a_fast_port_send_a_round_worth_of_packets() -> None:
    tm = TrafficManager(burst_us=200)
    tm.set_rate(10e9, port=1, unit="bps")
    for i in range(60):
        tm.enqueue(1, 0, Pkt(i), 0)
    out = tm.dequeue_ready(0, limit=64)
    # 200 us at 10 Gbit/s is 250,000 bytes: every queued packet may go
    assert [p.n for _, p, _, _ in out] == list(range(60))
    assert [d for *_, d in out] == list(range(59, -1, -1))  # deq_qdepth unchanged


@pytest.mark.parametrize("burst_us", [0.0, 200.0, 5000.0])
def test_the_long_run_rate_is_the_configured_one(burst_us: float) -> None:
    tm = TrafficManager(depth=10_000, burst_us=burst_us)
    tm.set_rate(1000, port=1)  # 1,000 packets/s
    for i in range(5000):
        tm.enqueue(1, 0, Pkt(i), 0)
    sent = 0
    for now in range(0, 2_000_000, 100):  # two seconds in rounds of 100 us
        sent += len(tm.dequeue_ready(now, limit=1000))
    # 2,000 in two seconds, plus at most one burst's worth (and the packet at t=0)
    assert 2000 <= sent <= 2001 + burst_us / 1000


def test_a_late_busy_port_catches_up_at_most_a_burst() -> None:
    tm = TrafficManager(depth=100, burst_us=200)
    tm.set_rate(1000, port=1)  # 1,000 us per packet
    for i in range(20):
        tm.enqueue(1, 0, Pkt(i), 0)
    assert len(tm.dequeue_ready(0)) == 1  # next departure at 1,000 us
    # woken 3,000 us late: it owes three packets but catches up only 200 us of them
    assert len(tm.dequeue_ready(4000)) == 1
    assert tm.ports[1].next_free_us == 4800  # 4,000 - 200 + 1,000
    assert len(tm.dequeue_ready(4800 - 200)) == 1  # on time again: the burst lets it go


def test_catchup_us_sets_how_far_back_a_late_port_catches_up() -> None:
    tm = TrafficManager(depth=100, burst_us=200, catchup_us=2000)
    tm.set_rate(1000, port=1)
    for i in range(20):
        tm.enqueue(1, 0, Pkt(i), 0)
    tm.dequeue_ready(0)
    # 3,000 us late: 2,000 us of it caught up, two more packets leave at once
    assert len(tm.dequeue_ready(4000)) == 3
    assert tm.ports[1].next_free_us == 5000  # 4,000 - 2,000 + 3 x 1,000
    with pytest.raises(ValueError):
        TrafficManager(catchup_us=-1)


def test_an_idle_port_gets_no_credit() -> None:
    tm = TrafficManager(burst_us=200)
    tm.set_rate(1000, port=1)
    pq = tm.port(1)
    tm.charge(pq, Pkt(0), 10_000)  # cut through after a long idle time
    assert pq.next_free_us == 11_000  # from now, not from now - burst
    tm.enqueue(1, 0, Pkt(1), 50_000)  # queued at 50,000 (nothing owed before it came)
    tm.dequeue_ready(50_100)  # 100 us later: it starts when it came, not 200 us back
    assert pq.next_free_us == 51_000


def test_a_burst_keeps_strict_priority() -> None:
    tm = TrafficManager(priority_queues=2, burst_us=100)
    tm.set_rate(1000, port=1)  # 1,000 us per packet: the burst allows nothing extra
    tm.enqueue(1, 0, "low1", 0)
    tm.enqueue(1, 0, "low2", 0)
    tm.enqueue(1, 1, "high", 0)
    order: list[Any] = []
    for now in range(0, 4000, 100):
        order += [item for _, item, _, _ in tm.dequeue_ready(now)]
    assert order == ["high", "low1", "low2"]


def test_may_send_now_follows_the_rate_and_the_queue() -> None:
    tm = TrafficManager(burst_us=100)
    pq = tm.port(1)
    assert tm.may_send_now(pq, 0)  # unlimited, empty
    tm.set_rate(1000, port=1)
    assert tm.may_send_now(pq, 0)  # free
    tm.charge(pq, Pkt(0), 0)  # busy until 1000 us
    assert not tm.may_send_now(pq, 800)
    assert tm.may_send_now(pq, 900)  # within the burst allowance
    exact = TrafficManager()
    exact.set_rate(1000, port=1)
    assert not exact.may_send_now(exact.port(1), 0)  # exact schedule: always through the queue
    tm.enqueue(1, 0, Pkt(1), 2000)
    assert not tm.may_send_now(pq, 5000)  # something is queued: it goes first


def test_negative_burst_is_refused() -> None:
    with pytest.raises(ValueError, match="burst_us"):
        TrafficManager(burst_us=-1)


PROG = Path(__file__).resolve().parents[1] / "p4" / "cpu_port.p4"
TELEMETRY = bytes.fromhex("02000000000102000000000288b5") + bytes(20) + b"data"


class Clock:
    def __init__(self) -> None:
        self.t = 1000

    def __call__(self) -> int:
        return self.t


def _device(burst_us: float) -> tuple[Device, Clock]:
    clock = Clock()
    dev = Device(device_id=1, cpu_port=255, clock=clock, queue_burst_us=burst_us)
    cfg = make_device_config(PROG)
    prog = load_device_config(cfg)
    dev.commit(Pipeline(prog, build_p4info(prog.schema), cfg, 1))
    assert dev.state is not None
    dev.state.table("forward").insert(TableEntry((1,), action=ActionCall("I.to_port", (2,))))
    return dev, clock


def _telemetry(frame: bytes) -> list[int]:
    """enq_timestamp, enq_qdepth, deq_timedelta, deq_qdepth as the program writes them."""
    return [int.from_bytes(frame[14 + 4 * i : 18 + 4 * i], "big") for i in range(4)]


def test_a_free_rate_limited_port_cuts_through_with_zero_queue_telemetry() -> None:
    dev, clock = _device(burst_us=100)
    assert dev.state is not None
    run_command(dev.state, dev.tm, "set_queue_rate 1000 2")  # one packet per ms on port 2
    for _ in range(3):
        dev.receive(1, TELEMETRY)
    # the first left at once (the port was free); the others queued behind its departure
    first = dev.service_queues()
    assert [_telemetry(p) for _, p in first] == [[1000, 0, 0, 0]]
    out = []
    for step in range(1, 4):
        clock.t = 1000 + step * 1000
        out += dev.service_queues()
    assert [_telemetry(p) for _, p in out] == [[1000, 0, 1000, 1], [1000, 1, 2000, 0]]
    pq = dev.tm.ports[2]
    assert (pq.enqueued, pq.dequeued, dev.tm.backlog) == (3, 3, 0)


def test_without_a_burst_every_packet_of_a_rate_limited_port_queues() -> None:
    dev, clock = _device(burst_us=0)
    assert dev.state is not None
    run_command(dev.state, dev.tm, "set_queue_rate 1000 2")
    for _ in range(2):
        dev.receive(1, TELEMETRY)
    assert dev.tm.backlog == 2  # as before the burst allowance existed (BMv2's view)

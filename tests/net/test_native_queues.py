"""The egress queues in C (switch.device.fastpath) against the Python traffic manager.

``p4/fabric.p4`` as a fabric leaf on real veths, every port rate-limited to 1 Mbit/s with
64-packet queues: a burst into port 1 fills the uplinks' queues (tail drops) and they drain as
the clock advances. The native rounds keep those packets in C (queue, rate schedule, tail drop,
dequeue, egress with ``enq_qdepth``/``deq_qdepth``/timestamps) and must send, per port and in
order, what the Python executor's per-packet path with the Python traffic manager sends, with
the same drops, traffic-manager counts and schedule, the same register and counter state
(``fabric.p4`` keeps ``deq_qdepth`` per port, marks ECN by ``enq_qdepth`` and trims by
depth) and exact conservation while packets wait. A second case takes a VLAN-tagged frame in
the middle of the burst (the Python path: the queues in C move into the traffic manager
first), a third sets the queues' depth anew while packets wait in C.
"""

from __future__ import annotations

import time

import pytest

from switch.device.device import Device, Pipeline
from switch.device.fastpath import RingFastPath
from switch.pipeline.drops import DropReason
from switch.pipeline.v1model import V1Switch
from tests.fabric_device import NOW_US, fabric_device
from tests.net.test_native_ring import (  # noqa: F401 - the rig and pipeline fixtures
    ATTACHED,
    Rig,
    _drain,
    _drops,
    _frames,
    pipeline,
    rig,
)
from tests.netkit import NET_MARKS

pytestmark = NET_MARKS

RATE_BPS = 1e6
DEPTH = 56  # over fabric.p4's trim (48) and ECN (20) thresholds
STEP_US = 700  # the clock's step while the queues drain (under a packet's time) ...
LATE_US = 4000  # ... and every tenth step a late wake-up (the ports catch up ...)
CATCHUP_US = 1500  # ... this much of it)


def _step(i: int) -> int:
    return LATE_US if i % 10 == 9 else STEP_US


def _device(pipe: Pipeline, native: bool) -> Device:
    dev = fabric_device(pipe, native, RATE_BPS, queue_depth=DEPTH)
    dev.tm.catchup_us = CATCHUP_US
    return dev


def _burst(pipe: Pipeline, case: str) -> list[bytes]:
    """Frames for attached ports (and a few for others), none for the slow path except, in
    the ``vlan`` case, one tagged frame in the middle."""
    frames = [f for f in _frames(pipe) if f[12:14] != b"\x81\x00"] * 4
    if case == "vlan":  # in the second half
        i = len(frames) * 3 // 4
        tagged = frames[i][:12] + b"\x81\x00\x00\x05" + frames[i][12:]
        frames = frames[:i] + [tagged] + frames[i:]
    return frames


def _state(dev: Device) -> tuple[object, ...]:
    sw = dev.switch
    assert sw is not None
    st = sw.state
    regs = {n: list(r.values) for n, r in sorted(st.registers.items())}
    # burst reports of ports whose bursts end in the same instant may come in either order:
    # the report ring as a sorted list of (port, start, end, peak, packets)
    ring = [n for n in regs if "burst_ring_" in n and not n.endswith("head")]
    regs["burst reports"] = sorted(zip(*(regs.pop(n) for n in sorted(ring))))
    ctrs = {n: (list(c.packets), list(c.bytes)) for n, c in sorted(st.counters.items())}
    return regs, ctrs


def _tm(dev: Device) -> dict[int, tuple[int, int, int, float, int]]:
    return {
        p: (pq.enqueued, pq.dequeued, pq.drops, pq.next_free_us, pq.max_depth_seen)
        for p, pq in sorted(dev.tm.ports.items())
    }


def _queued(dev: Device) -> int:
    with dev.lock:
        return dev.packet_totals().queued_pkts


def _set_clock(dev: Device, t: int) -> None:
    dev._clock = lambda: t


def _reference(pipe: Pipeline, frames: list[bytes], case: str) -> tuple[object, ...]:
    dev = _device(pipe, False)
    out: list[tuple[int, bytes]] = []
    for i, f in enumerate(frames):
        if case == "depth" and i == len(frames) // 2:
            dev.tm.set_depth(DEPTH // 2)
        dev.receive_batch([(1, f)])
        out += dev.service_queues(64)
    clock_us = NOW_US
    i = 0
    while dev.tm.backlog:
        clock_us += _step(i)
        i += 1
        _set_clock(dev, clock_us)
        out += dev.service_queues(64)
    per_port: dict[int, list[bytes]] = {n: [] for n in ATTACHED}
    for port, data in out:
        if port in per_port:
            per_port[port].append(data)
    return per_port, _drops(dev.drop_cells()), _tm(dev), _state(dev)


@pytest.mark.parametrize("case", ["plain", "vlan", "depth"])
def test_queues_in_c_behave_as_the_python_traffic_manager(
    rig: Rig,  # noqa: F811 - the fixture imported above
    pipeline: Pipeline,  # noqa: F811
    case: str,
) -> None:
    frames = _burst(pipeline, case)
    want_ports, want_drops, want_tm, want_state = _reference(pipeline, frames, case)

    dev = _device(pipeline, True)
    dev.io_drops = rig.ports.drop_cells
    dev.io_packets = rig.ports.packets
    fast = RingFastPath(dev, rig.ports)
    assert fast.usable
    half = len(frames) // 2

    def run_round() -> None:
        with dev.lock:
            got = fast.round(256)
            if got < 0:  # a Python round, as the daemon's loop
                dev.receive_batch(rig.ports.recv_batch(64))
            out = dev.service_queues(64)
        rig.ports.send_batch(out)

    def take(n: int) -> None:
        deadline = time.monotonic() + 5
        while rig.ports[1].counters.rx < n and time.monotonic() < deadline:
            run_round()

    for f in frames[:half]:
        rig.tx.send(f)
    take(half)
    if case == "depth":
        with dev.lock:
            dev.tm.set_depth(DEPTH // 2)
    held_mid = fast.held()
    for f in frames[half:]:
        rig.tx.send(f)
    take(len(frames))
    with dev.lock:  # conservation while packets wait (in C, or in the traffic manager)
        drops = dev.drop_cells()
        totals = dev.packet_totals()
    port_in = sum(p.in_pkts for p in totals.ports)
    port_tx = sum(p.tx_pkts for p in totals.ports)
    assert port_in == len(frames)
    assert totals.queued_pkts > 0
    assert port_in == port_tx + sum(c.packets for c in drops) + totals.queued_pkts
    held_full = fast.held()
    clock_us = NOW_US
    i = 0
    while _queued(dev):
        clock_us += _step(i)
        i += 1
        _set_clock(dev, clock_us)
        run_round()
    got_ports = {n: _drain(s) for n, s in rig.rx.items()}

    if case == "plain":  # the queues were in C, and drained there
        assert held_mid > 0 and held_full > 0 and fast.dequeued > 0
    else:  # the tagged frame's Python pass, or the new depth, took them into the traffic manager
        assert held_mid > 0 and held_full == 0
    assert got_ports == want_ports
    with dev.lock:
        drops = dev.drop_cells()
        totals = dev.packet_totals()
    no_port = [c for c in drops if c.reason is not DropReason.NO_PORT]
    assert _drops(no_port) == want_drops
    assert any(r == DropReason.TAIL_DROP.value for r, _p, _n in want_drops)
    assert _tm(dev) == want_tm
    got_regs, got_ctrs = _state(dev)
    want_regs, want_ctrs = want_state  # type: ignore[misc]
    for name, values in want_regs.items():
        assert got_regs[name] == values, name
    assert got_ctrs == want_ctrs
    port_in = sum(p.in_pkts for p in totals.ports)
    port_tx = sum(p.tx_pkts for p in totals.ports)
    assert totals.queued_pkts == 0
    assert port_in == port_tx + sum(c.packets for c in drops)


def test_python_reference_is_not_trivially_equal(pipeline: Pipeline) -> None:  # noqa: F811
    """The comparison above means something: another depth changes what is sent and kept."""
    frames = _burst(pipeline, "plain")
    a = _reference(pipeline, frames, "plain")
    dev = fabric_device(pipeline, False, RATE_BPS, queue_depth=DEPTH // 4)
    for f in frames:
        dev.receive_batch([(1, f)])
        dev.service_queues(64)
    assert _tm(dev) != a[2]
    assert isinstance(dev.switch, V1Switch)

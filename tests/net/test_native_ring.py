"""The data path's fast round in C (switch.device.fastpath) against the Python per-packet path.

``p4/fabric.p4`` as a fabric leaf (:func:`switch.bench_fabric.setup_fabric`) on real veths:
frames are sent into port 1's PACKET_MMAP ring from a namespace, the switch runs rounds as the
daemon does (a C round, else a Python one; then the traffic manager's queues), and what the
peers receive on every port must be what the Python executor's per-packet path sends, frame for
frame and in order per port, with the same drops by reason and port, the same traffic-manager
counts and exact packet conservation. Cases: every port unlimited; 10 Gbit/s ports (the burst
allowance lets the batch cut through); 1 Mbit/s ports (packets must queue: they wait in the
ports' queues in C until the VLAN-tagged frame's Python pass moves them into the traffic
manager); a VLAN-tagged frame (the ring's slow path). ``test_native_queues.py`` drains the
queues in C themselves.
"""

from __future__ import annotations

import random
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from switch.bench_fabric import UPLINK_BASE, setup_fabric
from switch.device.device import Device, Pipeline
from switch.device.fastpath import RingFastPath
from switch.device.ports import PortSet
from switch.pipeline.drops import DropCell, DropReason
from switch.pipeline.v1model import V1Switch
from tests.fabric_device import NOW_US, fabric_device, fabric_pipeline
from tests.netkit import NET_MARKS, NetKit, call_in_netns

pytestmark = NET_MARKS

ATTACHED = (1, 2, UPLINK_BASE, UPLINK_BASE + 1, UPLINK_BASE + 2)


@pytest.fixture(scope="module")
def pipeline() -> Pipeline:
    return fabric_pipeline()


def _device(pipe: Pipeline, native: bool, rate_bps: float) -> Device:
    return fabric_device(pipe, native, rate_bps, queue_depth=8)  # a slow port's queue fills


def _frames(pipe: Pipeline) -> list[bytes]:
    """Frames for the attached uplinks mostly, a few for ports without a veth, one the parser
    rejects, one VLAN-tagged."""
    sw = V1Switch(pipe.program)
    _n, frames = setup_fabric(sw, random.Random(7), 3000)
    probe = _device(pipe, False, 0.0).switch
    assert probe is not None
    kept: list[bytes] = []
    other = 0
    for f in frames:
        outs = probe.process(1, f)
        if outs and outs[0][0] in ATTACHED:
            kept.append(f)
        elif outs and other < 3:
            kept.append(f)
            other += 1
    bad = frames[0][:40]  # a truncated IPv6 header: the parser fails, the program drops it
    tagged = frames[1][:12] + b"\x81\x00\x00\x05" + frames[1][12:]
    return kept[:10] + [bad] + kept[10:20] + [tagged] + kept[20:]


@dataclass
class Rig:
    ports: PortSet
    tx: socket.socket  # into port 1
    rx: dict[int, socket.socket]  # what each port sends


@pytest.fixture
def rig(netkit: NetKit) -> Iterator[Rig]:
    ns = netkit.netns("peer")
    ports = PortSet(rx_frames=1024)
    rx: dict[int, socket.socket] = {}
    tx: socket.socket | None = None
    try:
        for n in ATTACHED:
            pair = netkit.veth(f"s{n}", f"p{n}", ns_b=ns, switch_side=True, host_ipv6=False)
            ports.add(n, pair.a)
            rx[n] = call_in_netns(ns.name, lambda b=pair.b: _raw(b))
            if n == 1:
                tx = call_in_netns(ns.name, lambda b=pair.b: _raw(b))
        assert tx is not None
        yield Rig(ports, tx, rx)
    finally:
        ports.close()
        for s in rx.values():
            s.close()
        if tx is not None:
            tx.close()


def _raw(ifname: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind((ifname, 0))
    return s


def _drain(s: socket.socket, quiet_s: float = 0.2) -> list[bytes]:
    out: list[bytes] = []
    s.settimeout(quiet_s)
    while True:
        try:
            data, addr = s.recvfrom(4096)
        except TimeoutError:
            return out
        if addr[2] != socket.PACKET_OUTGOING:
            out.append(data)


def _reference(pipe: Pipeline, frames: list[bytes], rate_bps: float) -> tuple[object, ...]:
    """The Python executor, per packet, then the queues drained (as the daemon's rounds)."""
    dev = _device(pipe, False, rate_bps)
    out: list[tuple[int, bytes]] = []
    for f in frames:
        dev.receive_batch([(1, f)])
        out += dev.service_queues(64)
    clock_us = NOW_US
    while dev.tm.backlog:  # later rounds: time passes until the queues are empty
        clock_us += 1000
        dev._clock = lambda t=clock_us: t
        out += dev.service_queues(64)
    per_port: dict[int, list[bytes]] = {n: [] for n in ATTACHED}
    for port, data in out:
        if port in per_port:
            per_port[port].append(data)
    unknown = sum(1 for port, _ in out if port not in per_port)
    return per_port, _drops(dev.drop_cells()), _tm(dev), unknown


def _drops(cells: list[DropCell]) -> list[tuple[str, int, int]]:
    return sorted((c.reason.value, c.port, c.packets) for c in cells)


def _tm(dev: Device) -> dict[int, tuple[int, int, int, float]]:
    return {
        p: (pq.enqueued, pq.dequeued, pq.drops, pq.next_free_us)
        for p, pq in sorted(dev.tm.ports.items())
    }


@pytest.mark.parametrize("rate_bps", [0.0, 10e9, 1e6])
def test_c_round_sends_what_the_python_per_packet_path_sends(
    rig: Rig, pipeline: Pipeline, rate_bps: float
) -> None:
    frames = _frames(pipeline)
    want_ports, want_drops, want_tm, want_unknown = _reference(pipeline, frames, rate_bps)

    dev = _device(pipeline, True, rate_bps)
    dev.io_drops = rig.ports.drop_cells
    dev.io_packets = rig.ports.packets
    fast = RingFastPath(dev, rig.ports)
    assert fast.usable
    for f in frames:
        rig.tx.send(f)
    deadline = time.monotonic() + 5
    while rig.ports[1].counters.rx < len(frames) and time.monotonic() < deadline:
        with dev.lock:
            got = fast.round(256)
            if got < 0:  # a Python round, as the daemon's loop
                batch = rig.ports.recv_batch(64)
                dev.receive_batch(batch)
            out = dev.service_queues(64)
        rig.ports.send_batch(out)
    clock_us = NOW_US
    while dev.tm.backlog:
        clock_us += 1000
        dev._clock = lambda t=clock_us: t
        with dev.lock:
            out = dev.service_queues(64)
        rig.ports.send_batch(out)
    got_ports = {n: _drain(s) for n, s in rig.rx.items()}

    assert fast.rounds > 0 and fast.frames > 0  # the C round ran
    assert rig.ports[1].counters.rx == len(frames)
    assert got_ports == want_ports
    with dev.lock:
        drops = dev.drop_cells()
        totals = dev.packet_totals()
    no_port = [c for c in drops if c.reason is DropReason.NO_PORT]
    assert sum(c.packets for c in no_port) == want_unknown
    assert _drops([c for c in drops if c.reason is not DropReason.NO_PORT]) == want_drops
    assert _tm(dev) == want_tm
    port_in = sum(p.in_pkts for p in totals.ports)
    port_tx = sum(p.tx_pkts for p in totals.ports)
    assert port_in == len(frames)
    assert port_in == port_tx + sum(c.packets for c in drops) + totals.queued_pkts
    if rate_bps == 1e6:  # the case is what it means to be: packets queued and were dropped
        assert any(r == DropReason.TAIL_DROP.value for r, _p, _n in want_drops)

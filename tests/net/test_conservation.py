"""Packet conservation across the default fabric (issue 19): every packet accounted for.

One bring-up of the default fabric (2 planes x (2 leaves + 2 spines), 4 hosts, tf-switch), then
five randomized runs (seeds). Each run sends known traffic: random UDP flows between all hosts
on all planes, over micro-SID paths (a random spine) and the ECMP baseline, and an incast onto
one host; while it runs, the controller fails plane 1 and injects loss on a leaf-spine link,
and restores both afterwards. Every datagram goes to a UDP socket listening on the destination
host, so the hosts' kernels answer nothing (no ICMP); the hosts send nothing of their own
(no DAD, no router solicitations).

From the switches' own counters (P4Runtime ``ExternEntry`` 0x82 packets, 0x81 drops by reason),
read before and after each run once they are quiet, the test checks, exactly:

* per switch: packets in = packets out + counted drops (+ queued, which is 0 by then);
* per link: what one switch sent on a port = what the switch at the other end took in;
* into and out of the fabric: the leaves took in exactly the datagrams the hosts sent and sent
  out exactly the datagrams the hosts' sockets received;
* in total: datagrams sent = datagrams received + drops counted on the way, and the drops
  include tail drops, the failed plane's port-down drops and the injected loss.

~11-35 s (bring-up ~3 s, five runs of ~1.5 s of traffic each). Root, Mininet's ``mnexec``.
"""

from __future__ import annotations

import functools
import random
import selectors
import shutil
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from controller.commands import SwitchCounters, read_switch_counters
from controller.drops import PacketTotals, add_up
from controller.fabric import FabricController
from controller.incast import IncastResult, plan_incast, run_incast
from controller.linux import in_netns_of
from tests.netkit import NET_MARKS
from topologies.emulation.bringup import BringUp, bring_up
from topologies.emulation.fabricnet import FabricNetOptions
from topologies.emulation.mnfabric import SwitchOptions
from topologies.model import Fabric, FabricSpec, build_fabric

pytestmark = [
    *NET_MARKS,
    pytest.mark.skipif(shutil.which("mnexec") is None, reason="Mininet's mnexec is not installed"),
]

SEEDS = (1, 2, 3, 4, 5)
PORT = 7100
FLOWS = 24
SOL_UDP = 17
UDP_NO_CHECK6_TX, UDP_NO_CHECK6_RX = 101, 102
QUIET_READS = 3  # consecutive identical reads: the switches are idle
LOSSY_LINK = "p0l0-p0s0"


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BringUp]:
    if Path("/sys/class/net/p0l0-eth1").exists():
        pytest.skip("a fabric is already running on this machine (p0l0-eth1 exists)")
    results = tmp_path_factory.mktemp("conservation")
    options = FabricNetOptions(
        switch=SwitchOptions(log_dir=str(results / "fabric" / "logs")),
        results_dir=str(results),
    )
    with bring_up(build_fabric(FabricSpec()), options) as fabric_up:
        assert fabric_up.verified
        yield fabric_up


# -- the switches' counters ----------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    """Every switch's packet counters and drops, read while the fabric is idle."""

    read: dict[str, SwitchCounters]

    def packets(self, switch: str) -> PacketTotals:
        got = self.read[switch].packets
        assert got is not None, f"{switch}: the target does not count packets"
        return got

    def port_in(self, switch: str, port: int) -> int:
        return next(p.in_pkts for p in self.packets(switch).ports if p.port == port)

    def port_out(self, switch: str, port: int) -> int:
        return next(p.tx_pkts for p in self.packets(switch).ports if p.port == port)

    def dropped(self, switch: str) -> int:
        target = self.read[switch].target
        assert target is not None, f"{switch}: the target does not count drops"
        return sum(d.packets for d in target)

    def reasons(self) -> dict[str, int]:
        return add_up(c.reasons() for c in self.read.values())


def _read(ctl: FabricController) -> Snapshot:
    return Snapshot(read_switch_counters(ctl, list(ctl.sessions)))


def _key(s: Snapshot) -> tuple[object, ...]:
    return tuple(
        (n, s.packets(n).in_pkts, s.packets(n).out_pkts, s.packets(n).queued_pkts, s.dropped(n))
        for n in sorted(s.read)
    )


def read_idle(ctl: FabricController, timeout_s: float = 10.0) -> Snapshot:
    """A snapshot once :data:`QUIET_READS` reads in a row, 50 ms apart, are the same."""
    deadline = time.monotonic() + timeout_s
    last, same = _read(ctl), 1
    while same < QUIET_READS:
        assert time.monotonic() < deadline, "the switches never went idle"
        time.sleep(0.05)
        now = _read(ctl)
        same = same + 1 if _key(now) == _key(last) else 1
        last = now
    return last


# -- traffic -------------------------------------------------------------------------------


def _udp_socket(bind: bool) -> socket.socket:
    sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    sock.setsockopt(SOL_UDP, UDP_NO_CHECK6_TX, 1)
    sock.setsockopt(SOL_UDP, UDP_NO_CHECK6_RX, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    if bind:
        sock.bind(("::", PORT))
        sock.setblocking(False)
    return sock


class Receivers:
    """One socket per host on :data:`PORT` (every NIC): datagrams received per host."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.counts: Counter[str] = Counter()
        self._sel = selectors.DefaultSelector()
        self._socks = {
            h: in_netns_of(pid, functools.partial(_udp_socket, True)) for h, pid in pids.items()
        }
        for h, s in self._socks.items():
            self._sel.register(s, selectors.EVENT_READ, h)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            for key, _ in self._sel.select(0.05):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                while True:
                    try:
                        sock.recv(2048)
                    except BlockingIOError:
                        break
                    self.counts[key.data] += 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for s in self._socks.values():
            s.close()


@dataclass(frozen=True)
class FlowPlan:
    src: str
    dst: str
    address: str
    datagrams: int
    size: int


def plan_flows(fabric: Fabric, rng: random.Random) -> list[FlowPlan]:
    """Random flows between all hosts on all planes: micro-SID paths and baseline addresses."""
    hosts = [h.name for h in fabric.hosts]
    flows = []
    for i in range(FLOWS):
        src, dst = rng.sample(hosts, 2)
        plane = i % fabric.spec.planes  # every plane, every run
        if rng.random() < 0.5:
            address = rng.choice(fabric.paths(src, dst, {plane})).address
        else:
            address = fabric.host(dst).nics[plane].baseline_address
        flows.append(FlowPlan(src, dst, address, rng.randint(10, 60), rng.randint(64, 1452)))
    return flows


def send_flows(
    flows: list[FlowPlan],
    pids: dict[str, int],
    rng: random.Random,
    between: list[Callable[[], object]],
) -> int:
    """Every host sends its flows, interleaved, at once, in ``len(between) + 1`` segments of
    random length; ``between[k]`` runs after segment ``k``. The datagrams sent."""
    by_host: dict[str, list[tuple[str, int]]] = {}
    for f in flows:
        by_host.setdefault(f.src, []).extend([(f.address, f.size)] * f.datagrams)
    for items in by_host.values():
        rng.shuffle(items)
    cuts = {
        h: [0, *sorted(rng.randint(1, len(v) - 1) for _ in between), len(v)]
        for h, v in by_host.items()
    }
    socks = {h: in_netns_of(pids[h], functools.partial(_udp_socket, False)) for h in by_host}
    sent = Counter[str]()

    def run(host: str, k: int) -> None:
        for i, (address, size) in enumerate(by_host[host][cuts[host][k] : cuts[host][k + 1]]):
            socks[host].sendto(bytes(size), (address, PORT))
            sent[host] += 1
            if i % 8 == 7:
                time.sleep(0.002)

    try:
        for k in range(len(between) + 1):
            threads = [threading.Thread(target=run, args=(h, k)) for h in by_host]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=60)
            if k < len(between):
                between[k]()
    finally:
        for s in socks.values():
            s.close()
    return sum(sent.values())


# -- the test ------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_every_packet_is_accounted_for(up: BringUp, seed: int) -> None:
    ctl = up.controller
    assert isinstance(ctl, FabricController)
    fabric = up.net.fabric
    assert ctl.processes is not None
    pids = dict(ctl.processes.hosts)
    assert set(pids) == {h.name for h in fabric.hosts}
    rng = random.Random(seed)
    flows = plan_flows(fabric, rng)
    incast_dst = rng.choice([h.name for h in fabric.hosts])
    incast = plan_incast(fabric, incast_dst, 3, rng.randint(200_000, 300_000), udp_port=PORT)

    before = read_idle(ctl)
    receivers = Receivers(pids)
    loss_pct = rng.choice((30, 50))
    incast_done: list[IncastResult] = []
    incaster = threading.Thread(
        target=lambda: incast_done.append(run_incast(incast, pids)), daemon=True
    )
    try:
        # plane 1 fails after the first segment of traffic, the link turns lossy after the
        # second; the incast starts with a random segment
        starts: list[Callable[[], object]] = [incaster.start, lambda: None, lambda: None]
        rng.shuffle(starts)
        starts[0]()
        sent = send_flows(
            flows,
            pids,
            rng,
            [
                lambda: (ctl.run_command(["fail", "plane", "1"]), starts[1]()),
                lambda: (ctl.run_command(["loss", LOSSY_LINK, str(loss_pct)]), starts[2]()),
            ],
        )
        incaster.join(timeout=60)
        ctl.run_command(["restore", "all"])
        ctl.run_command(["loss", LOSSY_LINK, "0"])
        after = read_idle(ctl)
        time.sleep(0.2)  # the last datagrams from the switches' ports into the host sockets
    finally:
        receivers.close()
    [res] = incast_done
    assert res.send_errors == 0
    sent += res.datagrams_sent
    received = sum(receivers.counts.values())

    problems = []
    for name in sorted(after.read):
        d_in = after.packets(name).in_pkts - before.packets(name).in_pkts
        d_out = after.packets(name).out_pkts - before.packets(name).out_pkts
        d_drop = after.dropped(name) - before.dropped(name)
        queued = after.packets(name).queued_pkts
        if d_in != d_out + d_drop + queued:
            problems.append(
                f"{name}: in {d_in} != out {d_out} + drops {d_drop} + queued {queued} "
                f"({d_in - d_out - d_drop - queued} unexplained)"
            )
    into_fabric = out_of_fabric = 0
    for sw in fabric.switches:
        for port in sorted(sw.ports):
            end = ctl.wiring.peer(sw.name, port)
            assert end is not None
            tx = after.port_out(sw.name, port) - before.port_out(sw.name, port)
            rx = after.port_in(sw.name, port) - before.port_in(sw.name, port)
            if end.is_host:
                into_fabric += rx
                out_of_fabric += tx
            else:
                assert end.port is not None
                peer_rx = after.port_in(end.name, end.port) - before.port_in(end.name, end.port)
                if tx != peer_rx:
                    problems.append(
                        f"link {sw.name}:{port} -> {end.name}:{end.port}: sent {tx}, "
                        f"the other end took in {peer_rx}"
                    )
    drops = sum(after.dropped(n) - before.dropped(n) for n in after.read)
    old = before.reasons()
    reasons = {r: n - old.get(r, 0) for r, n in after.reasons().items() if n - old.get(r, 0)}
    if into_fabric != sent:
        problems.append(f"hosts sent {sent} datagrams, the leaves took in {into_fabric}")
    if out_of_fabric != received:
        problems.append(f"the leaves sent {out_of_fabric} to hosts, their sockets got {received}")
    if sent != received + drops:
        problems.append(
            f"sent {sent} != received {received} + dropped {drops} "
            f"({sent - received - drops} unexplained); drops: {reasons}"
        )
    assert not problems, "\n".join(problems)
    assert reasons.get("tail_drop", 0) > 0, reasons  # the incast filled a queue
    assert reasons.get("port down", 0) > 0, reasons  # the failed plane
    assert reasons.get("injected loss", 0) > 0, reasons
    print(f"seed {seed}: sent {sent} = received {received} + dropped {drops}: {reasons}")

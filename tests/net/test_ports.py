"""switch.device.ports on real veths: frames in and out of namespaces, counters, pcap."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from scapy.layers.inet6 import UDP, IPv6
from scapy.layers.l2 import Dot1Q, Ether
from scapy.sendrecv import sendp
from scapy.utils import rdpcap

from switch.device.pcap import PcapWriter, port_pcap_paths
from switch.device.ports import Port, PortSet
from tests.netkit import NET_MARKS, NetKit, add_address, add_neighbor, call_in_netns

pytestmark = NET_MARKS

ETHERTYPE_TEST = 0x88B5  # IEEE local experimental: never sent by the kernel itself
SW_MAC = "02:00:00:00:0a:01"
HOST_MAC = "02:00:00:00:0b:01"
MODES = [
    pytest.param({"ring": True, "tx_ring": False}, id="rx-ring"),
    pytest.param({"ring": False, "tx_ring": False}, id="plain"),
    pytest.param({"ring": True, "tx_ring": True}, id="rx-tx-rings"),
    pytest.param({"ring": True, "tx_ring": True, "ring_min_batch": 1}, id="tx-ring-always"),
]


def make_frame(seq: int, size: int = 64) -> bytes:
    head = bytes.fromhex(HOST_MAC.replace(":", "")) + bytes.fromhex(SW_MAC.replace(":", ""))
    body = seq.to_bytes(4, "big") + b"T" * (size - 18)
    return head + ETHERTYPE_TEST.to_bytes(2, "big") + body


def ours(frames: list[bytes]) -> list[bytes]:
    return [f for f in frames if f[12:14] == ETHERTYPE_TEST.to_bytes(2, "big")]


def drain(get: object, want: int, timeout: float = 2.0) -> list[bytes]:
    """Call ``get()`` (returns a list of frames) until ``want`` test frames came or time ran out."""
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got += ours(get())  # type: ignore[operator]
        if len(got) >= want:
            break
        time.sleep(0.005)
    return got


class Rig:
    """One switch port (root namespace) wired to one host port in a namespace."""

    def __init__(
        self,
        kit: NetKit,
        n_ports: int = 1,
        host_ipv6: bool = False,
        host_offloads: bool = False,
        **options: object,
    ) -> None:
        self.ns = kit.netns("h")
        self.pairs = [
            kit.veth(
                f"s{i}",
                f"h{i}",
                ns_b=self.ns,
                switch_side=True,
                host_ipv6=host_ipv6,
                offloads=host_offloads,
                mac_a=SW_MAC[:-1] + str(i),
                mac_b=HOST_MAC[:-1] + str(i),
            )
            for i in range(1, n_ports + 1)
        ]
        self.ports = PortSet(**options)
        for i, pair in enumerate(self.pairs, start=1):
            self.ports.add(i, pair.a)
        self.hosts = [
            Port(90 + i, p.b, netns=self.ns.name, ring=False)
            for i, p in enumerate(self.pairs, start=1)
        ]

    def close(self) -> None:
        self.ports.close()
        for h in self.hosts:
            h.close()


@pytest.fixture(params=MODES)
def rig(request: pytest.FixtureRequest, netkit: NetKit) -> Iterator[Rig]:
    r = Rig(netkit, **request.param)
    try:
        yield r
    finally:
        r.close()


def test_modes_are_what_was_asked(rig: Rig) -> None:
    port = rig.ports[1]
    want = "ring" if port.mode == "ring" else "plain"
    assert port.ring_error is None
    assert port.rx_mode == want
    assert port.mtu == 1500


def test_frames_from_namespace_arrive_in_order(rig: Rig) -> None:
    frames = [make_frame(i, 60 + i) for i in range(200)]
    for f in frames:
        assert rig.hosts[0].send(f)
    got = drain(lambda: [f for _p, f in rig.ports.recv_batch(64)], len(frames))
    assert got == frames
    c = rig.ports.counters()[1]
    assert c.rx >= 200 and c.malformed == 0 and c.rx_dropped == 0


def test_frames_sent_arrive_in_namespace_and_not_back(rig: Rig) -> None:
    frames = [make_frame(i) for i in range(50)]
    assert rig.ports.send(1, frames[0])
    assert rig.ports.send_batch([(1, f) for f in frames[1:]]) == 49
    got = drain(rig.hosts[0].recv_batch, 50)
    assert got == frames
    time.sleep(0.05)
    assert ours([f for _p, f in rig.ports.recv_batch(256)]) == []  # own transmissions unseen
    c = rig.ports.counters()[1]
    assert c.tx == 50 and c.tx_errors == 0


def test_bad_frames_are_counted_not_raised(rig: Rig) -> None:
    assert not rig.ports.send(1, b"\x00" * 13)
    assert not rig.ports.send(1, make_frame(0, 1500 + 14 + 1))
    assert rig.ports.send(1, make_frame(1, 1500 + 14))
    tagged = make_frame(2, 1500 + 14 + 4)
    tagged = tagged[:12] + b"\x81\x00\x00\x07" + tagged[12:-4]
    assert rig.ports.send(1, tagged)  # a VLAN tag may come on top of the MTU
    assert not rig.ports.send(1, tagged + b"x")
    assert not rig.ports.send(7, make_frame(2))  # no such port
    assert rig.ports.unknown_port == 1
    c = rig.ports.counters()[1]
    assert c.malformed == 3 and c.tx == 2 and c.tx_errors == 0


def test_vlan_tag_is_put_back(rig: Rig) -> None:
    tagged = bytes(
        Ether(dst=SW_MAC, src=HOST_MAC)
        / Dot1Q(vlan=42, prio=5)
        / IPv6(src="2001:db8::1", dst="2001:db8::2")
        / UDP(sport=1, dport=2)
        / (b"v" * 20)
    )
    rig.hosts[0].send(tagged)
    got: list[bytes] = []
    deadline = time.monotonic() + 2
    while not got and time.monotonic() < deadline:
        got = [f for _p, f in rig.ports.recv_batch() if f[12:14] == b"\x81\x00"]
        time.sleep(0.005)
    assert got == [tagged]


def test_scapy_sendp_from_namespace(rig: Rig) -> None:
    pkt = Ether(dst=SW_MAC, src=HOST_MAC, type=ETHERTYPE_TEST) / (b"\x00\x00\x00\x07" + b"s" * 50)
    iface = rig.pairs[0].b
    call_in_netns(rig.ns.name, lambda: sendp(pkt, iface=iface, count=3, verbose=False))
    got = drain(lambda: [f for _p, f in rig.ports.recv_batch()], 3)
    assert got == [bytes(pkt)] * 3


def test_kernel_drops_are_counted(netkit: NetKit) -> None:
    rig = Rig(netkit, ring=True, rx_frames=64)
    try:
        assert rig.ports[1].mode == "ring"
        for i in range(400):
            rig.hosts[0].send(make_frame(i))
        time.sleep(0.05)
        c = rig.ports.counters()[1]
        assert c.rx_dropped > 0
        got = drain(lambda: [f for _p, f in rig.ports.recv_batch(64)], 400, timeout=0.3)
        assert 0 < len(got) <= 64
        assert rig.ports.counters()[1].rx_dropped == c.rx_dropped  # accumulated, not reset
    finally:
        rig.close()


def test_recv_batch_is_fair_across_ports(netkit: NetKit) -> None:
    rig = Rig(netkit, n_ports=3)
    try:
        for h in rig.hosts[:2]:
            for i in range(100):
                h.send(make_frame(i))
        rig.hosts[2].send(make_frame(0))
        time.sleep(0.05)
        assert rig.ports.wait(0.5)
        batch = [(p, f) for p, f in rig.ports.recv_batch(30) if f[12:14] == b"\x88\xb5"]
        per_port = {n: sum(1 for p, _f in batch if p == n) for n in (1, 2, 3)}
        assert per_port[3] == 1
        assert abs(per_port[1] - per_port[2]) <= 1 and per_port[1] + per_port[2] >= 27
        while rig.ports.recv_batch(256):
            pass
        t0 = time.monotonic()
        assert not rig.ports.wait(0.1)
        # kept on purpose: wait() must block for its timeout when nothing comes (a caller's
        # loop would spin otherwise); poll() never returns early, so this cannot fail by load
        assert time.monotonic() - t0 >= 0.09
    finally:
        rig.close()


@pytest.mark.parametrize("ring", [True, False], ids=["rx-ring", "plain"])
@pytest.mark.parametrize("host_offloads", [False, True], ids=["offloads-off", "offloads-on"])
def test_kernel_udp_checksum_and_offloads(netkit: NetKit, ring: bool, host_offloads: bool) -> None:
    """Offloads off on the host veth: the stack's UDP checksum is complete on the wire.

    With them on, the frame arrives with only the pseudo-header sum; the port counts it.
    """
    rig = Rig(netkit, host_ipv6=True, host_offloads=host_offloads, ring=ring)
    try:
        host_if = rig.pairs[0].b
        add_address(rig.ns.name, host_if, "2001:db8::1/64")
        add_neighbor(rig.ns.name, host_if, "2001:db8::2", SW_MAC[:-1] + "1")

        def send() -> None:
            with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
                s.sendto(b"hello", ("2001:db8::2", 4791))

        call_in_netns(rig.ns.name, send)
        got: list[bytes] = []
        deadline = time.monotonic() + 2
        while not got and time.monotonic() < deadline:
            got = [f for _p, f in rig.ports.recv_batch() if f[12:14] == b"\x86\xdd" and f[20] == 17]
            time.sleep(0.005)
        assert got
        pkt = Ether(got[0])
        wire = pkt[UDP].chksum
        del pkt[UDP].chksum
        correct = Ether(bytes(pkt))[UDP].chksum
        partial = rig.ports.counters()[1].csum_partial
        if host_offloads:
            assert partial == 1 and wire != correct
        else:
            assert partial == 0 and wire == correct
    finally:
        rig.close()


def test_pcap_of_port_traffic(rig: Rig, tmp_path: Path) -> None:
    in_path, out_path = port_pcap_paths(tmp_path, rig.pairs[0].a)
    frames = [make_frame(i) for i in range(20)]
    with PcapWriter(in_path) as pin, PcapWriter(out_path) as pout:
        for f in frames:
            rig.hosts[0].send(f)
        received = drain(lambda: [f for _p, f in rig.ports.recv_batch()], 20)
        for f in received:
            pin.write(f)
            rig.ports.send(1, f)
            pout.write(f)
    assert [bytes(p) for p in rdpcap(str(in_path))] == frames
    assert [bytes(p) for p in rdpcap(str(out_path))] == frames
    if shutil.which("tcpdump"):
        out = subprocess.run(
            ["tcpdump", "-nn", "-e", "-r", str(out_path)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        out = [line for line in out if not line.startswith("\t")]  # hex dumps of unknown types
        assert len(out) == 20 and "ethertype Unknown (0x88b5)" in out[0]


def test_close_is_idempotent(netkit: NetKit) -> None:
    rig = Rig(netkit)
    with rig.ports as ports:
        assert ports.send(1, make_frame(0))
    ports.close()
    assert ports.ports[0].closed
    assert not ports.ports[0].send(make_frame(1))  # counted, not raised
    assert ports.ports[0].recv_batch() == []
    for h in rig.hosts:
        h.close()


def test_tx_ring_overflow_and_queue_keep_order(netkit: NetKit) -> None:
    rig = Rig(netkit, ring=True, tx_ring=True, tx_frames=8)
    try:
        port = rig.ports[1]
        assert port.tx_mode == "ring"
        frames = [make_frame(i) for i in range(100)]
        assert port.send_many(frames[:50]) == 50  # more than the ring holds
        for f in frames[50:]:
            assert port.queue(f)
        port.flush()
        got = drain(rig.hosts[0].recv_batch, 100)
        assert got == frames
        assert rig.ports.counters()[1].tx == 100
    finally:
        rig.close()


def test_link_down_is_counted_and_does_not_spin(rig: Rig) -> None:
    name = rig.pairs[0].a
    subprocess.run(["ip", "link", "set", name, "down"], check=True)
    t0 = time.monotonic()
    assert not rig.ports.wait(0.2)  # the socket error is read, not reported as "ready"
    # kept on purpose: ... and wait() goes on blocking for its timeout after reading it (no
    # spin); poll() never returns early, so this cannot fail by load
    assert time.monotonic() - t0 >= 0.15
    assert not rig.ports.send(1, make_frame(0))
    c = rig.ports.counters()[1]
    assert c.errors == 1 and c.tx_errors == 1
    subprocess.run(["ip", "link", "set", name, "up"], check=True)
    assert rig.ports.send(1, make_frame(1))
    assert drain(rig.hosts[0].recv_batch, 1) == [make_frame(1)]


def test_falls_back_to_plain_sockets_when_the_ring_is_refused(netkit: NetKit) -> None:
    rig = Rig(netkit, ring=True, tx_ring=True, rx_frames=1 << 26)  # 128 GiB: refused
    try:
        port = rig.ports[1]
        assert port.rx_mode == "plain" and port.tx_mode == "plain"
        assert port.ring_error is not None
        rig.hosts[0].send(make_frame(1))
        assert drain(lambda: [f for _p, f in rig.ports.recv_batch()], 1) == [make_frame(1)]
        assert rig.ports.send_batch([(1, make_frame(i)) for i in range(5)]) == 5
        assert drain(rig.hosts[0].recv_batch, 5) == [make_frame(i) for i in range(5)]
    finally:
        rig.close()

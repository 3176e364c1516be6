"""tf-switch's event-driven data path on real veths: idle sleep, batches, overload, busy-poll.

The switch runs in this process (:class:`switch.daemon.SwitchDaemon`, its own data-path thread)
with ``p4/ipv6_router.p4`` between two hosts in their own network namespaces (quiet veths: the
hosts' kernels send nothing of their own). Every assertion is about behaviour (how many loop
rounds, which frames arrive in which order, whether every frame is accounted for), never about
how fast this machine is: the tests hold on a busy two-core machine.
"""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from switch.daemon import BATCH, SwitchDaemon, load_pipeline, parse_args
from switch.device.device import Pipeline
from switch.pipeline.tables import TableEntry
from switch.schema import ActionCall
from tests.netkit import NET_MARKS, NetKit, call_in_netns

pytestmark = NET_MARKS

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "p4" / "ipv6_router.p4"
H2_NET = 0x2001_0DB8_0002_0000 << 64
H2_MAC = 0x02_00_00_00_00_22
CLK_TCK = 100


@pytest.fixture(scope="module")
def pipeline() -> Pipeline:
    return load_pipeline(str(PROGRAM), [])


@dataclass
class Rig:
    daemon: SwitchDaemon
    tx: socket.socket  # a packet socket on h1's end (sends into switch port 1)
    rx: socket.socket  # a packet socket on h2's end (what switch port 2 sends)
    h1: str  # h1's namespace
    h1_if: str  # h1's end of the veth to port 1


# Sends frames 0..255 (as frame() makes them) from a packet socket on argv[1] for argv[2]
# seconds, as fast as it can; prints when it started and ended (CLOCK_MONOTONIC, the same in
# every process) and how many frames the kernel took.
FLOOD = textwrap.dedent("""
    import socket, struct, sys, time
    from tests.net.test_switch_loop import frame
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.bind((sys.argv[1], 0))
    frames = [frame(i) for i in range(256)]
    start = time.monotonic()
    sent, end = 0, start + float(sys.argv[2])
    while time.monotonic() < end:
        for f in frames:
            try:
                s.send(f)
                sent += 1
            except OSError:
                pass  # no room in the host's own queue: it never reached the switch
    print(start, time.monotonic(), sent)
""")


@pytest.fixture
def rig_factory(netkit: NetKit, pipeline: Pipeline) -> Iterator[object]:
    made: list[Rig] = []

    def make(*extra: str) -> Rig:
        h1, h2 = netkit.netns("h1"), netkit.netns("h2")
        p1 = netkit.veth("s1p1", "h1e", ns_b=h1, switch_side=True, host_ipv6=False)
        p2 = netkit.veth("s1p2", "h2e", ns_b=h2, switch_side=True, host_ipv6=False)
        args = parse_args(
            ["-i", f"1@{p1.a}", "-i", f"2@{p2.a}", "--thrift-port", "0", *extra, "--no-p4"]
            + ["--", "--grpc-server-addr", "127.0.0.1:0"]
        )
        daemon = SwitchDaemon(args)
        daemon.device.commit(pipeline)
        assert daemon.device.state is not None
        daemon.device.state.table("ipv6_lpm").insert(
            TableEntry(((H2_NET, 64),), action=ActionCall("MyIngress.ipv6_forward", (H2_MAC, 2)))
        )
        tx = call_in_netns(h1.name, lambda: _raw(p1.b))
        rx = call_in_netns(h2.name, lambda: _raw(p2.b))
        daemon.start()
        rig = Rig(daemon, tx, rx, h1.name, p1.b)
        made.append(rig)
        return rig

    yield make
    for rig in made:
        rig.daemon.stop()
        rig.tx.close()
        rig.rx.close()


def _raw(ifname: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
    s.bind((ifname, 0))
    s.settimeout(0.5)
    return s


def frame(seq: int) -> bytes:
    eth = Ether(src="02:00:00:00:00:11", dst="02:00:00:00:00:aa")
    pkt = eth / IPv6(dst="2001:db8:2::2", hlim=64) / UDP(dport=9) / struct.pack("!I", seq)
    return bytes(pkt / (b"z" * 60))


def seq_of(data: bytes) -> int | None:
    """The sequence number of a frame the switch forwarded (None: something else)."""
    if len(data) < 66 or data[12:14] != b"\x86\xdd" or data[14 + 6] != 17:
        return None
    return int(struct.unpack_from("!I", data, 62)[0])


def drain(rx: socket.socket, quiet_s: float = 0.5) -> list[bytes]:
    """Everything ``rx`` receives until it stays quiet for ``quiet_s``."""
    out: list[bytes] = []
    rx.settimeout(quiet_s)
    while True:
        try:
            out.append(rx.recv(4096))
        except TimeoutError:
            return out


def thread_cpu_s(thread: threading.Thread) -> float:
    """User + system CPU seconds of one thread of this process."""
    stat = Path(f"/proc/self/task/{thread.native_id}/stat").read_text()
    parts = stat.rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / CLK_TCK


def test_an_idle_switch_sleeps(rig_factory: object) -> None:
    rig = rig_factory()  # type: ignore[operator]
    d = rig.daemon
    assert d.loop_thread is not None
    time.sleep(0.5)
    rounds, cpu = d.rounds, thread_cpu_s(d.loop_thread)
    time.sleep(2.0)
    # asleep in poll: one round per second at most (plus a spurious wake-up or two)
    assert d.rounds - rounds <= 6, d.rounds - rounds
    assert thread_cpu_s(d.loop_thread) - cpu <= 0.1  # 5 % of a core at the very most
    # and it still wakes up for a frame at once
    rig.tx.send(frame(7))
    got = [seq_of(f) for f in drain(rig.rx)]
    assert got == [7]


def test_a_burst_is_read_and_forwarded_in_batches_in_order(rig_factory: object) -> None:
    rig = rig_factory()  # type: ignore[operator]
    d = rig.daemon
    n = 900  # fits in the receive ring (2,048 slots by default): nothing may be lost
    # Hold the data path (as a long control-plane write would) while the burst arrives, so
    # the frames wait in the ring and must come out of it in batches.
    with d.device.lock:
        for i in range(n):
            rig.tx.send(frame(i))
        time.sleep(0.2)
        rounds = d.rounds
    got = drain(rig.rx)
    rounds = d.rounds - rounds
    seqs = [seq_of(f) for f in got]
    assert seqs == list(range(n))
    first = got[0]
    assert first[:6] == H2_MAC.to_bytes(6, "big")  # rewritten by ipv6_forward
    assert first[14 + 7] == 63  # hop limit decremented
    assert first[62:] == frame(0)[62:]  # the rest unchanged
    # batches of up to BATCH frames: far fewer rounds than frames
    assert rounds <= n // BATCH + 20, rounds
    with d.device.lock:  # the counters as the control plane reads them (the loop in C reports)
        port1, port2 = (d.ports[1].counters, d.ports[2].counters) if d.ports else (None, None)
    assert port1 is not None and port2 is not None
    assert (port1.rx, port2.tx) == (n, n)


def test_overload_keeps_delivering_and_every_frame_is_accounted_for(rig_factory: object) -> None:
    rig = rig_factory("--queue-depth", "16")  # type: ignore[operator]
    d = rig.daemon
    arrivals: list[float] = []
    stop = threading.Event()

    def receive() -> None:
        rig.rx.settimeout(0.05)
        while not stop.is_set():
            try:
                data = rig.rx.recv(4096)
            except TimeoutError:
                continue
            if seq_of(data) is not None:
                arrivals.append(time.monotonic())

    reader = threading.Thread(target=receive)
    reader.start()
    # The flood comes from another process (in this one it would hold the GIL): as fast as
    # it can, far beyond what the switch forwards.
    try:
        blaster = subprocess.run(
            ["ip", "netns", "exec", rig.h1, sys.executable, "-c", FLOOD, rig.h1_if, "2.5"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
        )
        time.sleep(1.0)
    finally:
        stop.set()
        reader.join()
    assert blaster.returncode == 0, blaster.stderr
    start, end, sent = blaster.stdout.split()
    t0, t1 = float(start), float(end)
    # it kept forwarding through the whole flood: every half second of it delivered frames
    windows = [
        sum(1 for t in arrivals if t0 + k * 0.5 <= t < t0 + (k + 1) * 0.5)
        for k in range(int((t1 - t0) / 0.5))
    ]
    assert len(windows) >= 4
    assert all(n > 0 for n in windows), windows
    with d.device.lock:
        totals = d.device.packet_totals()
        cells = d.device.drop_cells()
    drops = sum(c.packets for c in cells)
    took_in = sum(p.in_pkts for p in totals.ports)
    put_out = sum(p.tx_pkts for p in totals.ports)
    # every frame the switch took in was sent or counted as dropped (ring overruns included)
    assert took_in == put_out + drops + totals.queued_pkts, (took_in, put_out, cells)
    assert len(arrivals) <= put_out
    assert took_in <= int(sent)
    # full rounds gave the core away before the next (--yield-when-full on, the default)
    with d.device.lock:
        stats = d.loop_stats()
    assert stats["yields"] + stats.get("c_loop_yields", 0) > 0, stats
    print(f"flood of {sent}: switch took in {took_in}, sent {put_out}, per 0.5 s {windows}")


def test_busy_poll_forwards_and_still_sleeps_when_idle(rig_factory: object) -> None:
    rig = rig_factory("--busy-poll", "2000")  # type: ignore[operator]
    d = rig.daemon
    for i in range(20):
        rig.tx.send(frame(i))
    assert [seq_of(f) for f in drain(rig.rx)] == list(range(20))
    time.sleep(0.5)

    def rounds_so_far() -> int:
        # The C loop adds up its rounds when it returns (at the latest after a second idle):
        # taking the device lock makes it return, so the count read is current, not one that
        # still lacks the 2 ms of spinning after the frames above.
        with d.device.lock:
            return int(d.fast.rounds if d.fast is not None else d.rounds)

    rounds = rounds_so_far()
    time.sleep(1.0)
    spun = rounds_so_far() - rounds
    assert spun <= 6, spun  # spun for 2 ms after the last frame, then slept

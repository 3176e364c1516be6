"""tf-switch's wait-and-round loop in C (``--c-loop on``, :mod:`switch.native.loop`) on veths.

The switch runs in this process with ``p4/ipv6_router.p4`` on the native path between two
hosts in their own namespaces (the rig of ``test_switch_loop.py``). While the loop waits and
runs rounds in C it holds the device lock with the GIL released: these tests check that the
control plane still gets the lock at once (a table write while packets flow takes effect
within a bound, counters read under the lock are up to date), that a stop ends a wait
promptly, that packets for Python's path (a queue in the Python traffic manager) and rate-
limited queues in C keep their order and pace, and that an idle switch stays asleep in C.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time

import pytest

from switch.device.control import RuntimeCliClient
from switch.device.fastpath import RingFastPath
from switch.device.sscli import CliError, run_command
from switch.pipeline.tables import TableEntry
from switch.schema import ActionCall
from tests.net import test_switch_loop as base
from tests.net.test_switch_loop import (
    H2_MAC,
    H2_NET,
    ROOT,
    Rig,
    drain,
    frame,
    seq_of,
    thread_cpu_s,
)
from tests.netkit import NET_MARKS

pytestmark = NET_MARKS
pipeline = base.pipeline  # the rig's fixtures
rig_factory = base.rig_factory

NEW_MAC = 0x02_00_00_00_00_33

# Sends frames 0..argv[3]-1 (frame(i)) from a packet socket on argv[1] at argv[2] per second.
PACED = textwrap.dedent("""
    import socket, sys, time
    from tests.net.test_switch_loop import frame
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.bind((sys.argv[1], 0))
    rate, n = float(sys.argv[2]), int(sys.argv[3])
    frames = [frame(i) for i in range(n)]
    start = time.monotonic()
    for i, f in enumerate(frames):
        while time.monotonic() < start + i / rate:
            time.sleep(0.0002)
        s.send(f)
""")


def _fast(rig: Rig) -> RingFastPath:
    end = time.monotonic() + 5
    while rig.daemon.fast is None and time.monotonic() < end:
        time.sleep(0.01)  # the data-path thread makes it when it starts
    fast = rig.daemon.fast
    if fast is None or fast.loop_error is not None:
        pytest.skip(f"no native loop here: {fast.loop_error if fast else 'no fast path'}")
    return fast


def _wait_for(cond: object, timeout_s: float = 5.0) -> None:
    end = time.monotonic() + timeout_s
    while not cond():  # type: ignore[operator]
        assert time.monotonic() < end, "timed out"
        time.sleep(0.01)


def test_the_loop_forwards_in_c_and_an_idle_switch_sleeps_there(rig_factory: object) -> None:
    rig = rig_factory()  # type: ignore[operator]
    d = rig.daemon
    fast = _fast(rig)
    for i in range(50):
        rig.tx.send(frame(i))
    assert [seq_of(f) for f in drain(rig.rx)] == list(range(50))
    with d.device.lock:  # the loop in C hands its counts over when it returns
        assert fast.loop_calls > 0 and fast.frames >= 50
    assert d.loop_thread is not None
    time.sleep(0.3)
    calls, cpu = fast.loop_calls, thread_cpu_s(d.loop_thread)
    time.sleep(2.0)
    # asleep in ppoll inside C: it returns to Python once a second at most (its deadline)
    assert fast.loop_calls - calls <= 4, fast.loop_calls - calls
    assert thread_cpu_s(d.loop_thread) - cpu <= 0.1


def test_show_loop_says_how_the_loop_ran_and_why_it_returned(rig_factory: object) -> None:
    rig = rig_factory()  # type: ignore[operator]
    d = rig.daemon
    _fast(rig)
    for i in range(30):
        rig.tx.send(frame(i))
    assert [seq_of(f) for f in drain(rig.rx)] == list(range(30))
    assert d.cli is not None
    client = RuntimeCliClient(port=d.cli.port)
    try:
        reply = client.run("show_loop")
        assert reply["ok"], reply
        stats = {k: int(v) for k, v in (line.split() for line in reply["output"].splitlines())}
        assert stats["c_frames"] >= 30 and stats["c_rounds"] >= 1
        # taking the device lock for this command made the loop return: counted as a wake-up
        assert stats["c_loop_return_wake"] >= 1
        assert stats["c_loop_calls"] == sum(
            v for k, v in stats.items() if k.startswith("c_loop_return_")
        )
        bad = client.run("show_loop now")
        assert not bad["ok"] and "usage: show_loop" in bad["error"]
    finally:
        client.close()
    with pytest.raises(CliError, match="no data-path loop runs here"):
        run_command(d.device.state, None, "show_loop")  # as in an STF test: no loop


def test_the_control_plane_gets_the_lock_at_once_and_reads_current_counters(
    rig_factory: object,
) -> None:
    rig = rig_factory()  # type: ignore[operator]
    d = rig.daemon
    _fast(rig)
    n = 300
    for i in range(n):
        rig.tx.send(frame(i))
    assert len(drain(rig.rx, 0.3)) == n
    waits = []
    for _ in range(5):
        time.sleep(0.1)  # the loop is back asleep in C, holding the lock
        t0 = time.monotonic()
        with d.device.lock:
            waits.append(time.monotonic() - t0)
            totals = d.device.packet_totals()
            assert d.ports is not None
            assert (d.ports[1].counters.rx, d.ports[2].counters.tx) == (n, n)
        assert sum(p.in_pkts for p in totals.ports) >= n
    # without the wake-up the loop would hold the lock up to its 1 s deadline
    assert max(waits) < 0.2, waits
    assert d.device.lock.waits >= 1


def test_a_table_write_while_packets_flow_is_seen_within_a_bound(rig_factory: object) -> None:
    rig = rig_factory()  # type: ignore[operator]
    d = rig.daemon
    fast = _fast(rig)
    got: list[tuple[float, bytes]] = []
    stop = threading.Event()

    def receive() -> None:
        rig.rx.settimeout(0.05)
        while not stop.is_set():
            try:
                data = rig.rx.recv(4096)
            except TimeoutError:
                continue
            if seq_of(data) is not None:
                got.append((time.monotonic(), data))

    reader = threading.Thread(target=receive)
    reader.start()
    n, rate = 4000, 2000
    sender = subprocess.Popen(
        ["ip", "netns", "exec", rig.h1, sys.executable, "-c", PACED, rig.h1_if, str(rate), str(n)],
        cwd=ROOT,
    )
    try:
        _wait_for(lambda: len(got) > 400, 30.0)  # the sender imports scapy first
        calls = fast.loop_calls
        t0 = time.monotonic()
        with d.device.lock:
            wait_s = time.monotonic() - t0
            assert d.device.state is not None
            d.device.state.table("ipv6_lpm").modify(
                TableEntry(
                    ((H2_NET, 64),), action=ActionCall("MyIngress.ipv6_forward", (NEW_MAC, 2))
                )
            )
            written = time.monotonic()
        assert sender.wait(30) == 0
        time.sleep(0.3)
    finally:
        stop.set()
        reader.join()
        if sender.poll() is None:
            sender.kill()
    assert wait_s < 0.2, wait_s
    macs = [int.from_bytes(data[:6], "big") for _t, data in got]
    seqs = [seq_of(data) for _t, data in got]
    assert seqs == sorted(seqs)
    first_new = macs.index(NEW_MAC)
    assert set(macs[:first_new]) == {H2_MAC} and set(macs[first_new:]) == {NEW_MAC}
    assert got[first_new][0] - written < 0.1  # the next packets already use the new entry
    assert len(got) >= 0.95 * n
    assert fast.loop_calls > calls  # the loop went back into C after the write


def test_a_stop_while_the_loop_waits_in_c_returns_promptly(rig_factory: object) -> None:
    rig = rig_factory()  # type: ignore[operator]
    d = rig.daemon
    fast = _fast(rig)
    rig.tx.send(frame(1))
    assert [seq_of(f) for f in drain(rig.rx, 0.3)] == [1]
    assert fast.loop_calls > 0
    time.sleep(0.2)
    assert d.loop_thread is not None
    t0 = time.monotonic()
    d.stopping.set()  # what stop() does first (then it stops the gRPC and CLI servers)
    d.device.wakeup.set()
    d.loop_thread.join(2.0)
    assert not d.loop_thread.is_alive()
    assert time.monotonic() - t0 < 0.2  # not the loop's 1 s deadline
    d.stop()


@pytest.mark.parametrize("queues", ["1", "2"])
def test_rate_limited_queues_keep_order_and_pace(rig_factory: object, queues: str) -> None:
    # One queue per port: the packets wait in C and the loop sleeps until each departure;
    # two priority queues: they wait in the Python traffic manager (the loop returns to
    # Python, which serves them at their time, then goes back into C).
    rig = rig_factory("--queue-rate", "200", "--priority-queues", queues)  # type: ignore[operator]
    d = rig.daemon
    fast = _fast(rig)
    n = 30
    got: list[float] = []
    seqs: list[int | None] = []
    frames = [frame(i) for i in range(n)]  # built first: a burst, not one per scapy build
    for f in frames:
        rig.tx.send(f)
    rig.rx.settimeout(1.0)
    while len(seqs) < n:
        data = rig.rx.recv(4096)
        got.append(time.monotonic())
        seqs.append(seq_of(data))
    assert seqs == list(range(n))
    # 200 packets/s after the burst allowance: at least ~(n - 2) / 200 s in all
    assert got[-1] - got[0] >= 0.8 * (n - 2) / 200, got[-1] - got[0]
    assert fast.loop_calls > 0
    with d.device.lock:
        assert d.device.packet_totals().queued_pkts == 0


def test_a_frame_for_the_rings_slow_path_goes_through_python_in_order(
    rig_factory: object,
) -> None:
    # A VLAN-tagged frame: the kernel takes the tag out, the round in C stops before it and
    # the loop returns; Python's ring code puts the tag back and runs the per-packet path
    # (ipv6_router's parser does not know 802.1Q: it is counted, not forwarded).
    rig = rig_factory()  # type: ignore[operator]
    d = rig.daemon
    fast = _fast(rig)
    plain = [frame(i) for i in range(40)]
    f = frame(99)
    tagged = f[:12] + b"\x81\x00\x00\x05" + f[12:]
    for data in plain[:20] + [tagged] + plain[20:]:
        rig.tx.send(data)
    assert [seq_of(x) for x in drain(rig.rx)] == list(range(40))
    with d.device.lock:
        assert d.ports is not None
        assert d.ports[1].counters.rx == 41  # the tagged one too
        assert d.device.counters.rx == 41
        totals = d.device.packet_totals()
        cells = d.device.drop_cells()
    assert sum(p.in_pkts for p in totals.ports) == 41
    assert sum(c.packets for c in cells) + sum(p.tx_pkts for p in totals.ports) == 41
    assert fast.loop_calls > 0


def test_a_link_going_down_does_not_make_the_loop_spin(rig_factory: object) -> None:
    rig = rig_factory()  # type: ignore[operator]
    d = rig.daemon
    fast = _fast(rig)
    assert d.loop_thread is not None
    ifname = d.args.ports[2]
    rig.tx.send(frame(1))
    assert [seq_of(f) for f in drain(rig.rx, 0.3)] == [1]
    subprocess.run(["ip", "link", "set", ifname, "down"], check=True)
    try:
        for i in range(5):  # sends into a link that is down: errors on the port's socket
            rig.tx.send(frame(10 + i))
        time.sleep(0.3)
        cpu, calls = thread_cpu_s(d.loop_thread), fast.loop_calls
        time.sleep(1.0)
        assert thread_cpu_s(d.loop_thread) - cpu <= 0.1
        assert fast.loop_calls - calls <= 5, fast.loop_calls - calls
    finally:
        subprocess.run(["ip", "link", "set", ifname, "up"], check=True)
    time.sleep(0.5)  # the veth's carrier comes back
    rig.tx.send(frame(2))
    assert 2 in [seq_of(f) for f in drain(rig.rx, 0.5)]

"""Host NICs with NAPI receive (``host_napi``, :mod:`topologies.emulation.mnfabric`) on real veths.

* GRO on (:func:`switch.device.offloads.enable_gro`) with threaded NAPI gives the host end a
  kernel thread ``napi/<nic>-<id>``; :func:`prioritise_napi_threads` finds it and makes it
  ``SCHED_FIFO``; a frame the switch end sends arrives through it.
* A switch port's TX ring against a host NIC whose NAPI thread cannot run (pinned to the CPU
  of a ``SCHED_FIFO`` sender): the peer's 256-frame ring fills, the kernel answers ``ENOBUFS``
  and leaves the rest requested; :meth:`PacketRings.kick` keeps them (it used to drop them all)
  and the next kick delivers every frame, in order.
* :func:`topologies.hostconf.shell_script` writes the ``threaded`` attribute only when asked.
"""

from __future__ import annotations

import os
import pathlib
import socket
import struct
import time

import pytest

from switch.device.netns import call_in_netns, run_in_netns
from switch.device.offloads import active_features, enable_gro
from switch.device.ports import PortSet
from tests.netkit import NET_MARKS, NetKit
from topologies.emulation.mnfabric import (
    NAPI_PRIORITY,
    FabricNetError,
    configure_hosts,
    prioritise_napi_threads,
)
from topologies.hostconf import HostConfig, shell_script

pytestmark = NET_MARKS

ETH_P_EXPERIMENTAL = 0x88B5


def _frame(seq: int) -> bytes:
    return b"\xff" * 6 + b"\x02\x00\x00\x00\x00\x01" + struct.pack("!HI", ETH_P_EXPERIMENTAL, seq)


def _listener(ifname: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_EXPERIMENTAL))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind((ifname, 0))
    s.settimeout(0.3)
    return s


def _sequence(s: socket.socket) -> list[int]:
    out = []
    while True:
        try:
            data = s.recv(2048)
        except TimeoutError:
            return out
        out.append(struct.unpack_from("!I", data, 14)[0])


def _threaded(ns: str | None, ifname: str) -> None:
    run_in_netns(ns, ["sh", "-c", f"echo 1 > /sys/class/net/{ifname}/threaded"])


def _napi_pid(ifname: str) -> int:
    for d in pathlib.Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                comm = (d / "comm").read_text().strip()
            except OSError:
                continue
            if comm.startswith(f"napi/{ifname}-"[:15]):
                return int(d.name)
    raise AssertionError(f"no NAPI thread for {ifname}")


def test_threaded_napi_thread_found_prioritised_and_receives(netkit: NetKit) -> None:
    ns = netkit.netns("host")
    pair = netkit.veth("sw", "nic", ns_b=ns, switch_side=True, host_ipv6=False)
    assert call_in_netns(ns.name, lambda: active_features(pair.b)["rx-gro"]) is False
    assert prioritise_napi_threads([pair.b]) == []  # no NAPI without GRO
    assert call_in_netns(ns.name, lambda: enable_gro(pair.b)) is True
    _threaded(ns.name, pair.b)
    assert prioritise_napi_threads([pair.b]) == [pair.b]
    pid = _napi_pid(pair.b)
    assert os.sched_getscheduler(pid) == os.SCHED_FIFO
    assert os.sched_getparam(pid).sched_priority == NAPI_PRIORITY
    rx = call_in_netns(ns.name, lambda: _listener(pair.b))
    tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    try:
        tx.bind((pair.a, 0))
        for i in range(20):
            tx.send(_frame(i))
        assert _sequence(rx) == list(range(20))
    finally:
        tx.close()
        rx.close()


def test_kick_keeps_frames_a_full_napi_ring_refuses(netkit: NetKit) -> None:
    pair = netkit.veth("sw", "nic", switch_side=True, host_ipv6=False)
    assert enable_gro(pair.b)
    _threaded(None, pair.b)
    cpu = max(os.sched_getaffinity(0))
    napi = _napi_pid(pair.b)
    os.sched_setaffinity(napi, {cpu})
    ports = PortSet(rx_frames=64)
    rx = _listener(pair.b)
    affinity = os.sched_getaffinity(0)
    try:
        port = ports.add(1, pair.a)
        rings = port._rings
        assert rings is not None and rings.tx_frames >= 512
        n = 500  # more than the peer's 256-frame NAPI ring
        # On the NAPI thread's CPU with a real-time priority above it: the thread cannot
        # drain the peer's ring while the kick runs.
        os.sched_setaffinity(0, {cpu})
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(NAPI_PRIORITY + 1))
        try:
            assert rings.put_many([_frame(i) for i in range(n)]) == n
            refused = rings.kick()
        finally:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
            os.sched_setaffinity(0, affinity)
        assert refused == 0 and rings.tx_errors == 0
        first = _sequence(rx)  # what the peer's ring held, once its thread ran
        assert 0 < len(first) < n, "the peer's ring did not fill"
        assert first == list(range(len(first)))
        assert rings.tx_pending, "the refused frames are still requested"
        for _ in range(200):
            rings.kick()
            if rings.tx_pending == 0:
                break
            time.sleep(0.005)
        assert rings.tx_pending == 0 and rings.tx_errors == 0
        assert first + _sequence(rx) == list(range(n))
    finally:
        ports.close()
        rx.close()


def test_shell_script_threaded_napi_only_when_asked() -> None:
    cfg = HostConfig("h1", ("h1-eth0", "h1-eth1"), (), (), (), ())
    assert "threaded" not in shell_script(cfg)
    script = shell_script(cfg, threaded_napi=True)
    assert "echo 1 > /sys/class/net/h1-eth0/threaded" in script
    assert "echo 1 > /sys/class/net/h1-eth1/threaded" in script


def test_configure_hosts_rejects_an_unknown_mode() -> None:
    with pytest.raises(FabricNetError, match="host NAPI mode 'fast'"):
        configure_hosts(None, [], "/nonexistent", host_napi="fast")  # type: ignore[arg-type]

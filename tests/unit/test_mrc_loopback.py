"""The transports over real sockets on loopback: MRC and single path over UDP (one ::1 socket
per plane), and the TCP baseline, all through the same message API."""

from __future__ import annotations

import os
import socket
import threading

import pytest

from host.baseline import TcpEndpoint, single_path_config
from host.errors import ConnectionClosed, PeerClosed, RouteError, TransportError
from host.mrc.config import loopback_config
from host.mrc.endpoint import Endpoint
from host.network import UdpNetwork
from host.paths import RouteTable, loopback_evs, loopback_nics


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


pytestmark = pytest.mark.skipif(not _has_ipv6_loopback(), reason="no IPv6 loopback (::1)")


def udp_pair(
    planes: int = 2, spines: int = 2, single_path: bool = False
) -> tuple[Endpoint, Endpoint]:
    na, nb = UdpNetwork(loopback_nics(planes)), UdpNetwork(loopback_nics(planes))
    cfg = loopback_config()
    if single_path:
        cfg = single_path_config(cfg)
    a = Endpoint(na, 0, RouteTable({1: loopback_evs(nb.ports, spines)}), cfg)
    b = Endpoint(nb, 1, RouteTable({0: loopback_evs(na.ports, spines)}), cfg)
    return a, b


@pytest.mark.parametrize("single_path", [False, True], ids=["mrc", "single_path"])
def test_udp_loopback_carries_messages_both_ways(single_path: bool) -> None:
    a, b = udp_pair(single_path=single_path)
    with a, b:
        conn = a.connect(1)
        msgs = [os.urandom(n) for n in (0, 1, 8192, 8193, 300_000, 2_000_000)]
        handles = [conn.send(m) for m in msgs]
        peer = b.accept(timeout=5)
        assert [peer.recv(timeout=20) for _ in msgs] == msgs
        assert all(h.wait(timeout=10).msg_len == len(m) for h, m in zip(handles, msgs))
        peer.send(b"reply").wait(timeout=5)
        assert conn.recv(timeout=5) == b"reply"
        used = [e for e in conn.ev_stats() if e.packets_sent]
        if single_path:  # one EV, re-hashed only by a retransmission timeout
            assert len(used) <= 1 + conn.stats().rto_events
        else:
            assert len(used) == 4
        assert a.stats().internal_errors == b.stats().internal_errors == 0


def test_udp_network_reports_bound_ports_and_bad_addresses() -> None:
    with UdpNetwork(loopback_nics(3)) as net:
        assert len(net.ports) == 3 and all(p > 0 for p in net.ports)
    from host.paths import LocalNic

    with pytest.raises(TransportError, match="plane 0: cannot bind 2001:db8::99"):
        UdpNetwork([LocalNic(0, "2001:db8::99", 0)])


def test_tcp_baseline_has_the_same_api_on_loopback() -> None:
    with TcpEndpoint(1) as server, TcpEndpoint(0, peers={1: server.address}) as client:
        conn = client.connect(1)
        accepted: list[object] = []
        t = threading.Thread(target=lambda: accepted.append(server.accept(timeout=5)))
        t.start()
        msgs = [os.urandom(n) for n in (0, 1, 70_000, 3_000_000)]
        handles = [conn.send(m) for m in msgs]
        t.join(timeout=5)
        peer = accepted[0]
        assert [peer.recv(timeout=10) for _ in msgs] == msgs  # type: ignore[attr-defined]
        assert [h.wait(timeout=10).msg_len for h in handles] == [len(m) for m in msgs]
        peer.send(b"pong").wait(timeout=5)  # type: ignore[attr-defined]
        assert conn.recv(timeout=5) == b"pong"
        with pytest.raises(TransportError, match="no unreliable mode"):
            conn.send(b"x", reliable=False)
        with pytest.raises(RouteError):
            client.connect(5)
        conn.close()
        with pytest.raises(ConnectionClosed):
            conn.recv(timeout=1)
        with pytest.raises(PeerClosed):  # closed between messages: the end of the stream
            peer.recv(timeout=5)  # type: ignore[attr-defined]


def test_tcp_peer_closing_in_the_middle_of_a_frame_is_not_an_orderly_end() -> None:
    with TcpEndpoint(1) as server, TcpEndpoint(0, peers={1: server.address}) as client:
        conn = client.connect(1)
        peer = server.accept(timeout=5)
        conn._sock.sendall(b"\x74\x54\x01")  # the start of a frame header, then close
        conn._sock.shutdown(socket.SHUT_RDWR)
        with pytest.raises(ConnectionClosed, match="middle of a frame") as err:
            peer.recv(timeout=5)
        assert not isinstance(err.value, PeerClosed)
        conn.close()

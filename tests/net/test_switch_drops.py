"""Every packet through a real tf-switch is accounted for: packets in = packets out + drops.

tf-switch runs ``p4/ipv6_router.p4`` between two hosts in their own network namespaces (quiet
veths: the hosts' kernels send nothing of their own). h1 sends a known mix as fast as it can:
frames to route, frames whose hop limit runs out, truncated IPv6 headers and non-IPv6 frames,
into an egress queue of 8 packets drained at 2,000 packets/s. The switch's drop counters, read
over P4Runtime (the target-specific ``ExternEntry`` read) and from the runtime CLI, must explain
every frame h2 did not receive, exactly, by reason; and the switch's own packet counters must
count what h1 sent as in and what h2 received as out.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from controller.drops import balance, decode_drops, decode_packets, drop_read, packets_read
from tests.net.test_switch_daemon import free_port, wait_listening
from tests.netkit import NET_MARKS, NetKit, call_in_netns, read_if_stat

pytestmark = NET_MARKS

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "p4" / "ipv6_router.p4"
H2_NET = "2001:db8:2::"
ROUTED, EXPIRING, TRUNCATED, NOT_IPV6 = 400, 20, 10, 10


def frames() -> list[bytes]:
    eth = Ether(src="02:00:00:00:00:11", dst="02:00:00:00:00:aa")
    routed = bytes(eth / IPv6(dst=H2_NET + "2", hlim=64) / UDP(dport=9) / (b"x" * 64))
    expiring = bytes(eth / IPv6(dst=H2_NET + "2", hlim=1) / UDP(dport=9) / (b"x" * 64))
    truncated = routed[: 14 + 20]  # half an IPv6 header: the parser fails
    not_ipv6 = bytes(eth)[:12] + b"\x88\xb5" + b"y" * 50
    mix = (
        [routed] * ROUTED + [expiring] * EXPIRING + [truncated] * TRUNCATED + [not_ipv6] * NOT_IPV6
    )
    # interleave deterministically so every kind meets a full queue and an empty one
    return [mix[(i * 7919) % len(mix)] for i in range(len(mix))]


def cli(port: int, *words: str) -> str:
    r = subprocess.run(
        [sys.executable, "-m", "switch.device.control", "--thrift-port", str(port), *words],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_packets_in_equal_packets_out_plus_counted_drops(netkit: NetKit) -> None:
    h1, h2 = netkit.netns("h1"), netkit.netns("h2")
    p1 = netkit.veth("s1p1", "h1e", ns_b=h1, switch_side=True, host_ipv6=False)
    p2 = netkit.veth("s1p2", "h2e", ns_b=h2, switch_side=True, host_ipv6=False)
    grpc_port, cli_port = free_port(), free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "switch.daemon",
            "-i",
            f"1@{p1.a}",
            "-i",
            f"2@{p2.a}",
            "--queue-depth",
            "8",
            "--queue-rate",
            "2000",
            "--thrift-port",
            str(cli_port),
            str(PROGRAM),
            "--",
            "--grpc-server-addr",
            f"127.0.0.1:{grpc_port}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        wait_listening(grpc_port, proc, timeout=30)
        cli(
            cli_port,
            "table_add",
            "ipv6_lpm",
            "ipv6_forward",
            f"{H2_NET}/64",
            "=>",
            "02:00:00:00:00:22",
            "2",
        )
        out_before = read_if_stat(h2.name, p2.b, "rx_packets")
        tx = call_in_netns(h1.name, lambda: _raw(p1.b))
        sent = 0
        try:
            for f in frames():
                try:
                    tx.send(f)
                    sent += 1
                except OSError:
                    pass  # no room in the host's own queue: never reached the switch
        finally:
            tx.close()
        time.sleep(1.0)  # 8 queued packets drain in 4 ms; the rest is margin
        out = read_if_stat(h2.name, p2.b, "rx_packets") - out_before

        with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as ch:
            stub = p4runtime_pb2_grpc.P4RuntimeStub(ch)
            req = p4runtime_pb2.ReadRequest(device_id=1, entities=[drop_read(), packets_read()])
            read = [e for rep in stub.Read(req, timeout=10) for e in rep.entities]
        drops = decode_drops(read)
        packets = decode_packets(read)
        by = {(d.reason, d.port, d.queue): d.packets for d in drops}
        print(f"sent {sent}, received {out}, drops {by}, switch counted {packets}")
        assert sent == ROUTED + EXPIRING + TRUNCATED + NOT_IPV6
        assert by.get(("ingress_drop", 1, None), 0) == EXPIRING + NOT_IPV6
        assert by.get(("parser_error", 1, None), 0) == TRUNCATED
        assert by.get(("tail_drop", 2, 0), 0) > 0
        assert sent == out + sum(by.values())
        # the switch's own count of what came in and went out agrees with the hosts'
        assert packets is not None
        assert (packets.in_pkts, packets.out_pkts, packets.queued_pkts) == (sent, out, 0)
        assert balance(packets, drops).unexplained_pkts == 0

        shown = cli(cli_port, "show_drops")
        assert f"total {sum(by.values())} packets dropped" in shown
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _raw(ifname: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    s.bind((ifname, 0))
    return s

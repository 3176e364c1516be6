"""Differential test: p4/fabric.p4's uN against Linux's own SRv6 NEXT-C-SID End.

A network namespace routes ``fcbb:bb00:1001::/48`` with ``seg6local action End flavors next-csid
lblen 32 nflen 16`` (RFC 9800 uN, F3216) and everything else in the block to an output veth.
The same frames go through Linux (injected on one veth, captured on the other with packet
sockets) and through the program (one switch whose uSID is 1001); the IPv6 packets that come
out (destination address, hop limit, SRH, payload) must be byte-identical.
"""

from __future__ import annotations

import ipaddress
import random
import socket
import time
from pathlib import Path

import pytest
from scapy.layers.inet6 import UDP, IPv6, IPv6ExtHdrSegmentRouting
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from switch.compile import load_program
from switch.device.netns import NetnsError, write_sysctl
from switch.pipeline.tables import TableEntry
from switch.pipeline.v1model import V1Switch
from switch.schema import ActionCall
from tests.netkit import NET_MARKS, NetKit

pytestmark = NET_MARKS

P4 = Path(__file__).resolve().parents[2] / "p4" / "fabric.p4"
BLOCK = 0xFCBB_BB00
MY_USID = 0x1001
IN_A, IN_B = "02:00:00:00:0a:01", "02:00:00:00:0b:01"  # injector, router's input
OUT_A, OUT_B = "02:00:00:00:0a:02", "02:00:00:00:0b:02"  # capture, router's output
MARK = b"TFDIFF"
ETH_P_ALL = 0x0003


def carrier(*usids: int) -> str:
    value = BLOCK
    for u in usids:
        value = (value << 16) | u
    return str(ipaddress.IPv6Address(value << (16 * (6 - len(usids)))))


def frame(
    dst: str, seq: int, *, hlim: int = 64, srh: IPv6ExtHdrSegmentRouting | None = None
) -> bytes:
    pkt = Ether(dst=IN_B, src=IN_A) / IPv6(src=carrier(0x8010), dst=dst, hlim=hlim, fl=seq)
    if srh is not None:
        pkt = pkt / srh
    return bytes(pkt / UDP(sport=40000 + seq, dport=4791) / Raw(MARK + seq.to_bytes(2, "big")))


def cases() -> list[tuple[str, bytes]]:
    rng = random.Random(9800)
    out: list[tuple[str, bytes]] = []
    seq = 0
    for n in range(2, 7):  # my uSID followed by 1..5 others
        for _ in range(3):
            usids = [MY_USID] + [
                rng.choice((0x2000, 0x1000, 0x8000)) | rng.getrandbits(8) for _ in range(n - 1)
            ]
            out.append((f"carrier-{n}", frame(carrier(*usids), seq)))
            seq += 1
    # argument empty: End on the SRH loads the next carrier (SL 1 -> 0)
    srh = IPv6ExtHdrSegmentRouting(
        nh=17, addresses=[carrier(0x2002, 0x1002, 0x8021), carrier(MY_USID)], segleft=1
    )
    out.append(("end-srh", frame(carrier(MY_USID), seq, srh=srh)))
    seq += 1
    srh3 = IPv6ExtHdrSegmentRouting(
        nh=17, addresses=[carrier(0x8021), carrier(0x2001, 0x1002), carrier(MY_USID)], segleft=2
    )
    out.append(("end-srh-3", frame(carrier(MY_USID), seq, srh=srh3)))
    seq += 1
    out.append(("hop-limit-1", frame(carrier(MY_USID, 0x2001, 0x1002), seq, hlim=1)))
    return out


def through_the_program(frames: list[bytes]) -> list[bytes | None]:
    sw = V1Switch(load_program(P4))
    sw.state.table("my_sid").insert(
        TableEntry(
            (((BLOCK << 96) | (MY_USID << 80), 48),), action=ActionCall("FabricIngress.usid_un")
        )
    )
    sw.state.table("routes").insert(
        TableEntry(((BLOCK << 96, 32),), action=ActionCall("FabricIngress.set_egress_port", (2,)))
    )
    out: list[bytes | None] = []
    for f in frames:
        sent = sw.process(1, f)
        assert len(sent) <= 1
        out.append(sent[0][1] if sent and sent[0][0] == 2 else None)
    return out


def through_linux(kit: NetKit, frames: list[bytes]) -> list[bytes | None]:
    r = kit.netns("r")
    pin = kit.veth("in", "rin", ns_b=r, switch_side=True, mac_a=IN_A, mac_b=IN_B)
    pout = kit.veth("out", "rout", ns_b=r, switch_side=True, mac_a=OUT_A, mac_b=OUT_B)
    for key in (
        "net.ipv6.conf.all.forwarding",
        "net.ipv6.conf.all.seg6_enabled",
        f"net.ipv6.conf.{pin.b}.seg6_enabled",
    ):
        write_sysctl(r.name, key, 1)
    try:
        r.run(
            [
                "ip",
                "-6",
                "route",
                "add",
                f"{carrier(MY_USID)}/48",
                "encap",
                "seg6local",
                "action",
                "End",
                "flavors",
                "next-csid",
                "lblen",
                "32",
                "nflen",
                "16",
                "dev",
                pin.b,
            ]
        )
    except NetnsError as exc:
        pytest.skip(f"this kernel or iproute2 has no SRv6 NEXT-C-SID End: {exc}")
    r.run(["ip", "-6", "route", "add", f"{carrier()}/32", "via", "fe80::2", "dev", pout.b])
    r.run(
        [
            "ip",
            "-6",
            "neigh",
            "replace",
            "fe80::2",
            "lladdr",
            OUT_A,
            "dev",
            pout.b,
            "nud",
            "permanent",
        ]
    )
    tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    try:
        tx.bind((pin.a, 0))
        rx.bind((pout.a, 0))
        rx.settimeout(0.05)
        got: dict[int, bytes] = {}
        for f in frames:
            tx.send(f)
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and len(got) < len(frames):
            try:
                data = rx.recv(4096)
            except TimeoutError:
                continue
            at = data.find(MARK)
            if at >= 0 and data[12:14] == b"\x86\xdd" and data[20] != 58:  # not ICMPv6 errors
                got[int.from_bytes(data[at + len(MARK) : at + len(MARK) + 2], "big")] = data
        return [got.get(i) for i in range(len(frames))]
    finally:
        tx.close()
        rx.close()


def test_un_rewrites_like_linux_next_csid_end(netkit: NetKit) -> None:
    names, frames = zip(*cases())
    ours = through_the_program(list(frames))
    linux = through_linux(netkit, list(frames))
    for name, sent, a, b in zip(names, frames, ours, linux):
        if name == "hop-limit-1":
            assert a is None and b is None, name  # neither forwards (Linux sends time exceeded)
            continue
        assert a is not None and b is not None, name
        assert b[14:] == a[14:], (
            name,
            Ether(sent)[IPv6].dst,
            Ether(a)[IPv6].dst,
            Ether(b)[IPv6].dst,
        )
        assert Ether(a)[IPv6].dst != Ether(sent)[IPv6].dst, name

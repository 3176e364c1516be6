"""Classic pcap files from switch.device.pcap: scapy and tcpdump read them back."""

from __future__ import annotations

import shutil
import struct
import subprocess
import time
from pathlib import Path

import pytest
from scapy.layers.inet6 import UDP, IPv6
from scapy.layers.l2 import Ether
from scapy.utils import rdpcap

from switch.device.pcap import (
    GLOBAL_HEADER,
    PcapWriter,
    PortCaptures,
    global_header,
    port_pcap_paths,
    read_pcap,
    record,
)


def _frame(i: int) -> bytes:
    pkt = (
        Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01")
        / IPv6(src="2001:db8::1", dst="2001:db8::2")
        / UDP(sport=1000 + i, dport=4791)
        / (b"p" * 64)
    )
    return bytes(pkt)


def test_global_header_fields() -> None:
    magic, major, minor, zone, sigfigs, snaplen, linktype = GLOBAL_HEADER.unpack(global_header())
    assert (magic, major, minor, zone, sigfigs, linktype) == (0xA1B2C3D4, 2, 4, 0, 0, 1)
    assert snaplen == 262144


def test_record_microseconds_and_rounding() -> None:
    rec = record(b"abc", 12.9999996)
    sec, usec, incl, orig = struct.unpack_from("<IIII", rec)
    assert (sec, usec, incl, orig) == (13, 0, 3, 3)
    rec = record(b"x" * 10, 5.25, snaplen=4)
    assert struct.unpack_from("<IIII", rec) == (5, 250000, 4, 10)
    assert rec[16:] == b"xxxx"


def test_scapy_reads_what_we_write(tmp_path: Path) -> None:
    path = tmp_path / "veth0_in.pcap"
    frames = [_frame(i) for i in range(5)]
    with PcapWriter(path) as writer:
        for i, f in enumerate(frames):
            writer.write(f, ts=1_700_000_000 + i * 0.001)
    pkts = rdpcap(str(path))
    assert [bytes(p) for p in pkts] == frames
    assert float(pkts[3].time) == pytest.approx(1_700_000_000.003, abs=1e-6)
    assert pkts[0][UDP].dport == 4791
    assert [f for _ts, f in read_pcap(path)] == frames


def test_reader_sees_packets_within_a_second(tmp_path: Path) -> None:
    path = tmp_path / "live.pcap"
    writer = PcapWriter(path, flush_interval=0.2)
    try:
        writer.write(_frame(0))
        assert path.stat().st_size == 24  # buffered
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline and path.stat().st_size == 24:
            time.sleep(0.02)
        assert [f for _ts, f in read_pcap(path)] == [_frame(0)]
    finally:
        writer.close()
    writer.close()  # idempotent
    writer.write(_frame(1))  # ignored after close, never raises
    assert len(list(read_pcap(path))) == 1


def test_truncated_file_reads_complete_records(tmp_path: Path) -> None:
    path = tmp_path / "cut.pcap"
    with PcapWriter(path) as writer:
        writer.write(_frame(0), ts=1.0)
        writer.write(_frame(1), ts=2.0)
    data = path.read_bytes()
    path.write_bytes(data[:-5])
    assert [ts for ts, _f in read_pcap(path)] == [1.0]


def test_port_paths_follow_bmv2(tmp_path: Path) -> None:
    assert port_pcap_paths(tmp_path, "veth2") == (
        tmp_path / "veth2_in.pcap",
        tmp_path / "veth2_out.pcap",
    )


@pytest.mark.skipif(shutil.which("tcpdump") is None, reason="tcpdump is not installed")
def test_tcpdump_reads_what_we_write(tmp_path: Path) -> None:
    path = tmp_path / "p.pcap"
    with PcapWriter(path) as writer:
        for i in range(3):
            writer.write(_frame(i), ts=1_700_000_000.5 + i)
    out = subprocess.run(
        ["tcpdump", "-nn", "-tt", "-r", str(path)], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert len(out) == 3
    assert out[0].startswith("1700000000.500000")
    assert "2001:db8::1.1000 > 2001:db8::2.4791: UDP, length 64" in out[0]


def test_port_captures_write_in_and_out_files(tmp_path: Path) -> None:
    with PortCaptures(tmp_path / "pcaps", {1: "veth1", 2: "veth3"}) as caps:
        caps.received(1, _frame(1))
        caps.sent(2, _frame(2))
        caps.sent(2, _frame(3))
        caps.sent(9, _frame(9))  # no such port: ignored
    d = tmp_path / "pcaps"
    assert sorted(p.name for p in d.iterdir()) == [
        "veth1_in.pcap",
        "veth1_out.pcap",
        "veth3_in.pcap",
        "veth3_out.pcap",
    ]
    assert [f for _t, f in read_pcap(d / "veth1_in.pcap")] == [_frame(1)]
    assert [f for _t, f in read_pcap(d / "veth3_out.pcap")] == [_frame(2), _frame(3)]
    assert list(read_pcap(d / "veth1_out.pcap")) == []

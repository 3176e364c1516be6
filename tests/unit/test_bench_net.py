"""switch.bench_net without a network: the generated frame, command expansion, statistics."""

from __future__ import annotations

import math
import sys

import pytest
from scapy.layers.inet6 import UDP, IPv6
from scapy.layers.l2 import Ether

from switch.bench_net import (
    BUILTIN,
    BenchResult,
    LatencyResult,
    ThroughputResult,
    Topology,
    _rates,
    ipv6_udp_frame,
    latency_payload,
    latency_result,
    switch_argv,
)

TOP = Topology("src-ns", "sink-ns", "tfabsrc", "tfabsw1", "tfabsw2", "tfabsnk")


def test_frame_is_ipv6_udp_with_64_byte_payload_and_valid_checksum() -> None:
    frame = ipv6_udp_frame("2001:db8:9::9")
    assert len(frame) == 14 + 40 + 8 + 64
    pkt = Ether(frame)
    assert pkt[IPv6].dst == "2001:db8:9::9" and pkt[IPv6].plen == 72 and pkt[IPv6].hlim == 64
    wire = pkt[UDP].chksum
    del pkt[UDP].chksum
    assert Ether(bytes(pkt))[UDP].chksum == wire
    assert len(latency_payload(7, 123)) == 64


def test_switch_command_expansion() -> None:
    argv = switch_argv("tf-switch -i 1@{if1} -i 2@{if2} --route {dst}", TOP, "2001:db8::2")
    assert argv == ["tf-switch", "-i", "1@tfabsw1", "-i", "2@tfabsw2", "--route", "2001:db8::2"]
    argv = switch_argv(f"{BUILTIN} --plain", TOP, "::1")
    assert argv[:3] == [sys.executable, "-m", "switch.bench_net"]
    assert argv[3:] == ["forwarder", "--if1", "tfabsw1", "--if2", "tfabsw2", "--plain"]


def test_rates_and_percentiles() -> None:
    assert _rates("top, 1000,63000") == [None, 1000, 63000]
    values = [float(v) for v in range(100, 0, -1)]
    lat = latency_result(1000, 102, values)
    assert (lat.samples, lat.lost, lat.max_us, lat.mean_us) == (100, 2, 100.0, 50.5)
    assert lat.p50_us == 50.5
    assert lat.p99_us == pytest.approx(99.01)
    assert latency_result(1000, 1, [3.0]).p99_us == 3.0
    assert math.isnan(latency_result(1000, 5, []).p50_us)


def test_csv_rows() -> None:
    res = BenchResult(
        "x",
        126,
        [ThroughputResult("top", 1000.0, 900.0, 1001.0, 8.0)],
        LatencyResult(1000, 10, 0, 20.0, 30.0, 21.0, 40.0),
    )
    rows = res.rows()
    assert rows[0]["delivery_ratio"] == 0.9 and rows[0]["test"] == "throughput"
    assert rows[1]["p99_us"] == 30.0 and rows[1]["test"] == "latency"

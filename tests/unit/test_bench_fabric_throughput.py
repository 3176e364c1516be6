"""The fabric throughput benchmark's parts that need no fabric: flows, routers, udpblast, CSV."""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from experiments.bench_fabric_throughput import (
    BLAST_PORT,
    CSV_FIELDS,
    HOST_NAPI_COMM,
    BenchError,
    Row,
    blast_frame,
    build_blaster,
    cpu_split,
    first_port,
    flows_for,
    main,
    per_switch_lines,
    plot,
    read_csv,
    write_csv,
    xdp_frame,
    xdp_xmit_errors,
)
from experiments.kernel_fabric import router_batch
from topologies.model import FabricSpec, build_fabric, usid_address


@pytest.mark.parametrize("planes", [2, 4])
def test_one_flow_crosses_leaf_spine_leaf_and_all_hosts_send_once(planes: int) -> None:
    fabric = build_fabric(FabricSpec(planes=planes))
    [one] = flows_for(fabric, "one")
    assert len(one.hops) == 3 and one.hops[0] != one.hops[2]
    assert fabric.host(one.src).leaf_index != fabric.host(one.dst).leaf_index
    flows = flows_for(fabric, "all")
    hosts = sorted(h.name for h in fabric.hosts)
    assert sorted(f.src for f in flows) == hosts
    assert sorted(f.dst for f in flows) == hosts
    for f in flows:
        assert fabric.host(f.src).leaf_index != fabric.host(f.dst).leaf_index
        assert f.address in {p.address for p in fabric.paths(f.src, f.dst)}
    # the flows spread over the planes
    assert len({fabric.switch(f.hops[1]).plane for f in flows}) == min(planes, len(flows))


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(Exception, match="unknown mode"):
        flows_for(build_fabric(FabricSpec()), "some")


def test_a_linux_router_shifts_its_own_usid_and_routes_every_neighbour() -> None:
    fabric = build_fabric(FabricSpec())
    leaf = fabric.leaf(0, 0)
    text = router_batch(fabric, leaf.name)
    own = f"{usid_address(leaf.usid)}/48"
    assert f"route replace {own} encap seg6local action End flavors next-csid" in text
    for port, peer in leaf.ports.items():
        if peer.startswith("h"):
            prefix = f"{fabric.host(peer).nics[0].address}/48"
        else:
            prefix = f"{usid_address(fabric.switch(peer).usid)}/48"
        assert f"route replace {prefix} via " in text
        assert f"dev e{port} nud permanent" in text


def test_udpblast_counts_sequence_numbers_and_latency_on_loopback(tmp_path: Path) -> None:
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    exe = build_blaster(tmp_path)
    rx = subprocess.Popen(
        [str(exe), "recv", "5899", "3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert rx.stdout is not None
        assert "ready" in rx.stdout.readline()
        tx = subprocess.run(
            [str(exe), "send", "::1", "5899", "4000", "0.5", "64", "7"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert tx.returncode == 0, tx.stderr
        sent = json.loads(tx.stdout)
        time.sleep(0.2)
        rx.terminate()
        out, _err = rx.communicate(timeout=10)
    finally:
        if rx.poll() is None:
            rx.kill()
    got = json.loads(out.splitlines()[-1])
    assert 1800 <= sent["sent"] <= 2100  # 4000/s for 0.5 s
    assert (got["packets"], got["bad"], got["duplicates"]) == (sent["sent"], 0, 0)
    assert got["bytes"] == 64 * sent["sent"]
    assert 0 < got["p50_us"] <= got["p99_us"] <= got["max_us"]


def test_a_sender_slower_than_its_rate_stops_at_the_end_all_the_same(tmp_path: Path) -> None:
    # 50M datagrams/s is beyond any sender here: what it owes past the deadline is not sent
    # (before, it went on sending the backlog: a 2 s step took 10.7 s and the sweep's
    # sender timeout ended the benchmark at 1.2M packets/s offered)
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    exe = build_blaster(tmp_path)
    tx = subprocess.run(
        [str(exe), "send", "::1", "5898", "50000000", "0.5", "1400", "3"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert tx.returncode == 0, tx.stderr
    sent = json.loads(tx.stdout)
    assert sent["duration_s"] < 1.5, sent
    assert 0 < sent["sent"] < 50_000_000 * 0.5


def test_udpblast_refuses_bad_arguments(tmp_path: Path) -> None:
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    exe = build_blaster(tmp_path)
    bad = subprocess.run(
        [str(exe), "send", "nowhere", "1", "10", "1", "64", "0"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "bad destination address" in bad.stderr
    small = subprocess.run(
        [str(exe), "send", "::1", "1", "10", "1", "8", "0"], capture_output=True, text=True
    )
    assert small.returncode == 2 and "payload" in small.stderr


def test_the_csv_has_units_and_the_plot_reads_it(tmp_path: Path) -> None:
    nan = float("nan")
    rows = [
        Row("tf", 2, "idle", 0, 0, 0, 0, 0, 0, nan, nan, nan, 0.01, nan, 10.0),
        Row("tf", 2, "one", 1, 64, 1000, 1000, 990, 0.5, 0.01, 50, 400, 0.2, 200.0, 3.0, 0.05),
        Row("kernel", 2, "one", 1, 64, 1000, 1000, 1000, 0.5, 0.0, 10, 40, nan, nan, 3.0),
    ]
    out = tmp_path / "b.csv"
    write_csv(rows, out)
    with out.open() as f:
        assert next(csv.reader(f)) == CSV_FIELDS
    assert "delivered_pps" in CSV_FIELDS and "switch_cpu_us_per_pkt" in CSV_FIELDS
    plot(out, tmp_path / "b.png")
    assert (tmp_path / "b.png").stat().st_size > 1000


def test_a_csv_from_before_the_napi_column_is_appended_to(tmp_path: Path) -> None:
    out = tmp_path / "old.csv"
    old_fields = CSV_FIELDS[: CSV_FIELDS.index("napi_cpu_cores")]
    with out.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(old_fields)
        w.writerow(["tf", 2, "one", 1, 64, 1000, 1000, 990, 0.5, 0.01, 50, 400, 0.2, 200.0, 3.0])
    rows = read_csv(out)
    assert rows[0].delivered_pps == 990 and math.isnan(rows[0].napi_cpu_cores)
    assert (rows[0].sender, rows[0].sender_cpus) == ("udp", 0)
    write_csv(rows, out)
    with out.open() as f:
        assert next(csv.reader(f)) == CSV_FIELDS


def test_only_fabric_host_nics_napi_threads_count() -> None:
    assert HOST_NAPI_COMM.match("napi/h1-eth0-81") and HOST_NAPI_COMM.match("napi/h12-eth1-8")
    assert not HOST_NAPI_COMM.match("napi/eth0-3") and not HOST_NAPI_COMM.match("napi/p0l0-eth1")


def test_the_xdp_senders_frame_is_what_the_hosts_stack_would_send() -> None:
    from scapy.layers.inet import UDP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import Ether

    frame = blast_frame(
        "02:00:00:00:00:01", "02:00:00:00:00:02", "fc00::1", "fcbb:bb00:1::", 100, 5, 0x1234
    )
    assert len(frame) == 14 + 40 + 8 + 100
    pkt = Ether(frame)
    assert (pkt.src, pkt.dst, pkt.type) == ("02:00:00:00:00:01", "02:00:00:00:00:02", 0x86DD)
    ip6 = pkt[IPv6]
    assert (ip6.src, ip6.dst, ip6.hlim, ip6.nh, ip6.plen) == (
        "fc00::1",
        "fcbb:bb00:1::",
        64,
        17,
        108,
    )
    udp = pkt[UDP]
    assert (udp.sport, udp.dport, udp.len, udp.chksum) == (BLAST_PORT, BLAST_PORT, 108, 0)
    payload = bytes(udp.payload)
    # magic, version 1, sender id, run; sequence number and send time left for the BPF program
    assert payload[:8] == b"TFUB" + bytes([1, 5]) + b"\x12\x34"
    assert payload[8:] == bytes(92)


def test_the_xdp_frame_of_a_flow_goes_from_its_nic_to_its_leaf() -> None:
    fabric = build_fabric(FabricSpec())
    [flow] = flows_for(fabric, "one")
    frame = xdp_frame(fabric, flow, 64, 0, 1)
    nic = fabric.host(flow.src).nics[0]
    leaf = fabric.switch(nic.leaf)
    assert frame[:12] == bytes.fromhex(leaf.mac.replace(":", "") + nic.mac.replace(":", ""))
    assert first_port(fabric, flow) == (nic.ifname, f"{leaf.name}-eth{nic.leaf_port}")


def test_sender_cpus_split_the_machine_or_are_refused() -> None:
    cpus = sorted(os.sched_getaffinity(0))
    for n in (0, len(cpus)):
        with pytest.raises(BenchError, match="need at least one each"):
            cpu_split(n)
    if len(cpus) < 2:
        pytest.skip("one CPU: nothing to split")
    split = cpu_split(1)
    assert split.senders == {cpus[-1]} and split.fabric == set(cpus[:-1])
    assert split.receivers == split.fabric  # by default the receivers run with the switches
    assert cpu_split(1, receivers_with_senders=True).receivers == {cpus[-1]}


def test_the_xdp_sender_needs_cpus_of_its_own(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--sender", "xdp"]) == 2
    assert "--sender-cpus" in capsys.readouterr().err
    assert main(["--sender", "xdp", "--sender-cpus", "1", "--kernel"]) == 2
    assert main(["--receivers-with-senders"]) == 2
    assert "needs --sender-cpus" in capsys.readouterr().err


def test_per_switch_rates_are_per_second_of_sending_and_cpu_per_second_of_the_step() -> None:
    before = {"p0l0": (1.0, 0, 0), "p0s0": (2.0, 0, 0), "p1l0": (0.0, 5, 5)}
    after = {"p0l0": (3.0, 900_000, 600_000), "p0s0": (3.0, 600_000, 600_000), "p1l0": (0.0, 9, 9)}
    lines = per_switch_lines(before, after, 4.0, 3.0)
    assert len(lines) == 2  # the quiet switch is left out
    assert (
        "p0l0: cpu 0.50 cores  in    300000/s  out    200000/s  not forwarded  33.3 %" in lines[0]
    )
    assert "p0s0: cpu 0.25 cores  in    200000/s" in lines[1] and "forwarded   0.0 %" in lines[1]


def test_xmit_errors_are_summed_over_queues_and_zero_when_unreadable(tmp_path: Path) -> None:
    fake = tmp_path / "ethtool"
    fake.write_text(
        "#!/bin/sh\necho 'NIC statistics:'\necho '     tx_queue_0_xdp_xmit: 900'\n"
        "echo '     tx_queue_0_xdp_xmit_errors: 7'\necho '     tx_queue_1_xdp_xmit_errors: 5'\n"
    )
    fake.chmod(0o755)
    # the "enter" prefix runs the fake in place of ethtool: env PATH=<tmp> ethtool -S nic
    assert xdp_xmit_errors(["env", f"PATH={tmp_path}"], "h1-eth0") == 12
    assert xdp_xmit_errors(["false"], "h1-eth0") == 0

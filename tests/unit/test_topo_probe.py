"""The path checker's plan, wire format and report; the fork server; cleanup helpers (no root)."""

from __future__ import annotations

import ipaddress
import json
import os
import socket
import time
from pathlib import Path

import pytest

from topologies.emulation import cleanup, probe
from topologies.emulation.cli import main
from topologies.emulation.swlaunch import SwitchLauncher
from topologies.model import Fabric, FabricSpec, TopologyError, build_fabric


def test_plan_covers_every_ordered_pair_on_every_plane_and_spine() -> None:
    fabric = build_fabric(FabricSpec(planes=2, leaves=2, spines=3, hosts_per_leaf=2))
    plan = probe.plan_probes(fabric)
    assert len(plan) == 4 * 3 * 2 * 3
    assert len({p.key for p in plan}) == len(plan)
    assert [p.pid for p in plan] == list(range(len(plan)))


def test_reply_goes_back_on_the_reverse_path_of_the_same_plane_and_spine() -> None:
    fabric = build_fabric(FabricSpec())
    for p in probe.plan_probes(fabric, [("h1", "h4")]):
        src, dst, plane, spine = p.key
        back = fabric.paths(dst, src, {plane})[spine]
        assert (back.plane, back.spine) == (plane, spine)
        assert ipaddress.IPv6Address(p.reply_to) == ipaddress.IPv6Address(back.address)
        # the reverse path ends at the prober's own plane NIC
        assert back.address.endswith(f":{fabric.host(src).nics[plane].usid:x}::")


def test_plan_restricts_to_planes() -> None:
    fabric = build_fabric(FabricSpec(planes=3))
    plan = probe.plan_probes(fabric, [("h1", "h2")], planes={2})
    assert {p.key[2] for p in plan} == {2} and len(plan) == fabric.spec.spines


def test_wire_format_round_trips_and_rejects_other_datagrams() -> None:
    addr = ipaddress.IPv6Address("fcbb:bb00:1000:2000:1001:8020::").packed
    data = probe.encode(probe.REQUEST, 7, 123456789, addr)
    assert probe.decode(data) == (probe.REQUEST, 7, 123456789, addr)
    assert probe.decode(data[:-1]) is None
    assert probe.decode(b"XXXX" + data[4:]) is None
    assert probe.decode(data[:4] + b"\x09" + data[5:]) is None


def test_summary_counts_per_plane_and_lists_failures() -> None:
    rs = [
        probe.ProbeResult("h1", "h2", 0, 0, "a", True, 1.0),
        probe.ProbeResult("h1", "h2", 0, 1, "b", True, 3.0),
        probe.ProbeResult("h1", "h2", 1, 0, "c", False, None, "no reply"),
    ]
    text = probe.summarize(rs)
    assert text.splitlines()[0].startswith("2/3 paths ok")
    assert "plane 0: 2/2" in text and "plane 1: 0/1" in text
    assert "FAILED h1 -> h2 plane 1 spine 0 (c): no reply" in text
    assert probe.failed(rs) == [rs[2]]


def test_pairs_are_parsed_against_the_fabric() -> None:
    fabric = build_fabric(FabricSpec())
    assert probe.parse_pairs("h1:h2, h3:h4", fabric) == [("h1", "h2"), ("h3", "h4")]
    with pytest.raises(TopologyError, match="write SRC:DST"):
        probe.parse_pairs("h1-h2", fabric)
    with pytest.raises(TopologyError, match="unknown host 'h9'"):
        probe.parse_pairs("h1:h9", fabric)


def test_tf_topo_json_writes_a_loadable_topology(tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    assert (
        main(
            [
                "json",
                "--planes",
                "3",
                "--leaves",
                "2",
                "--spines",
                "1",
                "--hosts",
                "1",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    fabric = Fabric.load(out)
    assert (fabric.spec.planes, fabric.spec.spines, len(fabric.hosts)) == (3, 1, 2)


# -- fork server -------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_fork_server_starts_tf_switch_processes_and_stops_them(tmp_path: Path) -> None:
    grpc, thrift = _free_port(), _free_port()
    log = tmp_path / "sw.log"
    with SwitchLauncher() as launcher:
        launcher.request(
            "s1",
            [
                "--no-p4",
                "--thrift-port",
                str(thrift),
                "--log-console",
                "--",
                "--grpc-server-addr",
                f"127.0.0.1:{grpc}",
            ],
            str(log),
        )
        pid = launcher.collect(1)["s1"]
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", grpc), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.02)
        assert Path(f"/proc/{pid}/comm").read_text().strip() == "tf-switch"
    assert not cleanup.process_alive(pid)
    assert "tf-switch ready" in log.read_text()


def test_fork_server_reports_bad_requests() -> None:
    with SwitchLauncher() as launcher:
        assert launcher.proc.stdin is not None
        launcher.proc.stdin.write("{}\n")
        launcher.proc.stdin.flush()
        launcher.wait_ready()
        assert "bad request" in launcher._readline()["error"]


# -- cleanup helpers ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "ours"),
    [
        ("p0l0-eth1", True),
        ("p12s255-eth300", True),
        ("s1-eth1", False),
        ("h1-eth0", False),
        ("p0l0-eth1x", False),
        ("eth0", False),
    ],
)
def test_only_fabric_switch_ports_match(name: str, ours: bool) -> None:
    assert bool(cleanup.SWITCH_PORT_RE.match(name)) == ours


def test_state_processes_lists_every_recorded_pid() -> None:
    state = json.loads(
        json.dumps(
            {
                "launcher_pid": 10,
                "switches": {"p0l0": {"pid": 11}, "p0s0": {"pid": None}},
                "hosts": {"h1": {"pid": 12}},
                "controller": {"pid": 13},
            }
        )
    )
    assert sorted(cleanup.state_processes(state)) == [10, 11, 12, 13]


def test_cleanup_without_a_fabric_only_removes_its_directory(tmp_path: Path) -> None:
    net = Path("/sys/class/net")
    if net.is_dir() and any(cleanup.SWITCH_PORT_RE.match(n.name) for n in net.iterdir()):
        pytest.skip("another fabric is running on this machine; cleanup would remove its ports")
    (tmp_path / "fabric" / "logs").mkdir(parents=True)
    done = cleanup.cleanup(str(tmp_path), log=lambda s: None)
    assert done == [f"removed {tmp_path / 'fabric'}"]
    assert not (tmp_path / "fabric").exists()


def test_the_fabric_lock_lets_one_fabric_run_at_a_time(tmp_path: Path) -> None:
    from topologies.emulation.fabricnet import FabricLock, fabric_lock_held
    from topologies.emulation.mnfabric import FabricNetError

    path = tmp_path / "fabric.lock"
    first, second = FabricLock(path), FabricLock(path)
    assert not fabric_lock_held(path)
    first.acquire()
    assert fabric_lock_held(path)
    with pytest.raises(FabricNetError, match=rf"pid {os.getpid()}"):
        second.acquire()
    first.release()
    first.release()  # idempotent
    assert not fabric_lock_held(path)
    second.acquire()
    assert fabric_lock_held(path)
    second.release()

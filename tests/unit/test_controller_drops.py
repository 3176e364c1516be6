"""``tf-ctl counters`` and ``status`` show the switches' drops by reason, per switch and port:
in-process tf-switch P4Runtime servers running fabric.p4 (no root, no ports), real gRPC."""

from __future__ import annotations

import contextlib
import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from p4.v1 import p4data_pb2, p4runtime_pb2
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from controller import program as fp
from controller.config import ControllerConfig
from controller.fabric import FabricController
from switch.compile.package import load_device_config, make_device_config
from switch.device.device import Device
from switch.p4info import p4info_text
from switch.p4rt import P4RuntimeServer
from switch.p4rt.entities import HANDLERS, Unsupported
from switch.pipeline.drops import DropReason
from tests.unit.p4rt_helpers import DataPath
from topologies.model import FabricSpec, build_fabric

ROOT = Path(__file__).resolve().parents[2]
LEAF = "p0l0"


@contextlib.contextmanager
def controller(tmp: Path) -> Iterator[tuple[FabricController, dict[str, Device]]]:
    """A 3-switch fabric of in-process tf-switches, routes installed (no telemetry flushes)."""
    fabric = build_fabric(FabricSpec(planes=1, leaves=2, spines=1, hosts_per_leaf=1))
    cfg = make_device_config(ROOT / "p4" / "fabric.p4")
    (tmp / "fabric.tfp4.json").write_bytes(cfg)
    (tmp / "fabric.p4info.txtpb").write_text(p4info_text(load_device_config(cfg).schema))
    devices: dict[str, Device] = {}
    addresses: dict[str, str] = {}
    with contextlib.ExitStack() as stack:
        for sw in fabric.switches:
            dev = devices[sw.name] = Device(sw.device_id, cpu_port=fp.CPU_PORT)
            server = P4RuntimeServer(dev, "127.0.0.1:0").start()
            stack.callback(server.stop)
            stack.callback(DataPath(dev).start().stop)
            addresses[sw.name] = f"127.0.0.1:{server.port}"
        ctl = stack.enter_context(
            FabricController(
                fabric,
                tmp / "fabric.p4info.txtpb",
                tmp / "fabric.tfp4.json",
                results_dir=tmp,
                addresses=addresses,
                config=ControllerConfig(telemetry_flush_s=0),
            )
        )
        ctl.connect()
        ctl.push_pipeline()
        ctl.install_routes()
        yield ctl, devices


@pytest.fixture(scope="module")
def fabric_with_drops(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[FabricController, int, int]]:
    """A fabric where LEAF received 8 packets on its host port: it tail-dropped 7 on its
    uplink (a queue of depth 0) and its program dropped one whose hop limit ran out."""
    with controller(tmp_path_factory.mktemp("drops")) as (ctl, devices):
        dev = devices[LEAF]
        host_port, uplink = sorted(ctl.wiring.switch_ports(LEAF))
        assert ctl.wiring.peer(LEAF, uplink).name.startswith("p0s")  # type: ignore[union-attr]
        with dev.lock:
            dev.tm.set_depth(0, port=uplink)  # every packet for the spine is tail-dropped
            to_spine = Ether() / IPv6(dst="fcbb:bb00:2000::", hlim=64) / UDP(dport=9)  # p0s0
            for _ in range(7):
                dev.receive(host_port, bytes(to_spine))
            expiring = Ether() / IPv6(dst="2001:db8::1", hlim=1) / UDP(dport=9)
            dev.receive(host_port, bytes(expiring))
        yield ctl, host_port, uplink


def test_counters_show_the_switch_drops_per_port_and_the_reasons_once(
    fabric_with_drops: tuple[FabricController, int, int],
) -> None:
    ctl, host_port, uplink = fabric_with_drops
    out = json.loads(ctl.run_command(["counters", LEAF, "--json"]))
    rows = {r["port"]: r for r in out["rows"]}
    assert rows[uplink]["tail_drop_pkts"] == 7 and rows[uplink]["switch_drop_pkts"] == 0
    assert rows[host_port]["rx_drop_pkts"] == 1  # the program's counter saw its own drop
    assert rows[host_port]["tail_drop_pkts"] == 0
    # the program's drop is told by fabric.p4's reason, not again as the switch's ingress_drop
    assert out["message"] == (
        "drops by reason: tail_drop 7, hop limit 1\n"
        "packets in 8 = out 0 + dropped 8 + queued 0, unexplained 0 (1 switch)"
    )
    table = ctl.run_command(["counters"]).splitlines()
    assert "tail_drop_pkts" in table[0]
    assert table[-2:] == [
        "drops by reason: tail_drop 7, hop limit 1",
        "packets in 8 = out 0 + dropped 8 + queued 0, unexplained 0 (3 switches)",
    ]


def test_counters_by_reason_lists_port_queue_and_source(
    fabric_with_drops: tuple[FabricController, int, int],
) -> None:
    ctl, host_port, uplink = fabric_with_drops
    rows = list(csv.DictReader(io.StringIO(ctl.run_command(["counters", "--by-reason", "--csv"]))))
    got = {
        (r["switch"], r["port"], r["queue"], r["source"], r["reason"], r["drop_pkts"]) for r in rows
    }
    assert got == {
        (LEAF, str(uplink), "0", "switch", "tail_drop", "7"),
        (LEAF, str(host_port), "", "program", "ingress_drop", "1"),
        (LEAF, "", "", "program counter", "hop limit", "1"),
    }


def test_status_shows_each_switch_drops(
    fabric_with_drops: tuple[FabricController, int, int],
) -> None:
    ctl, _, _ = fabric_with_drops
    rows = {r["switch"]: r for r in json.loads(ctl.run_command(["status", "--json"]))["rows"]}
    assert rows[LEAF]["drop_pkts"] == 8
    assert rows[LEAF]["drops_by_reason"] == "tail_drop 7, hop limit 1"
    assert {r["drop_pkts"] for n, r in rows.items() if n != LEAF} == {0}
    assert {r["drops_by_reason"] for n, r in rows.items() if n != LEAF} == {"none"}


def burst_digest(
    ctl: FabricController, switch: str, *bursts: tuple[int, ...]
) -> p4runtime_pb2.DigestList:
    """A DigestList of burst_digest_t records (port, start_us, end_us, peak_qdepth, packets)."""
    schema = ctl.sessions[switch].need_schema()
    msg = p4runtime_pb2.DigestList(digest_id=schema.digest(fp.BURST_DIGEST).preamble.id, list_id=1)
    for burst in bursts:
        members = [
            p4data_pb2.P4Data(bitstring=v.to_bytes(8, "big").lstrip(b"\0") or b"\0") for v in burst
        ]
        msg.data.add().struct.members.extend(members)
    return msg


def test_burst_records_carry_the_tail_drops_of_their_port(tmp_path: Path) -> None:
    with controller(tmp_path) as (ctl, devices):
        _host_port, uplink = sorted(ctl.wiring.switch_ports(LEAF))
        dev = devices[LEAF]

        def tail_drops(queue: int, n: int) -> None:
            with dev.lock:
                dev.drops.count(DropReason.TAIL_DROP, uplink, queue, n)

        tail_drops(0, 4)  # before telemetry starts: in no record
        tel = ctl.start_telemetry()
        tail_drops(0, 9)
        tail_drops(1, 2)
        session = ctl.sessions[LEAF]
        ctl._on_digest(session, burst_digest(ctl, LEAF, (uplink, 10, 20, 64, 90)))
        tail_drops(0, 3)
        ctl._on_digest(
            session, burst_digest(ctl, LEAF, (uplink, 30, 40, 64, 50), (uplink, 50, 60, 20, 5))
        )
        assert [r.drop_pkts for r in tel.recent()] == [11, 3, 0]
        with open(tmp_path / "telemetry.csv") as f:
            rows = list(csv.DictReader(f))
        assert [r["drop_pkts"] for r in rows] == ["11", "3", "0"]
        watch = ctl.run_command(["telemetry", "recent", "--json"])
        assert [r["drop_pkts"] for r in json.loads(watch)["rows"]] == [11, 3, 0]


def test_a_target_without_drop_counters_is_named_not_guessed(
    fabric_with_drops: tuple[FabricController, int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    ctl, _, uplink = fabric_with_drops
    # BMv2 (PI) serves no ExternEntry: the switch answers as it does
    monkeypatch.setitem(HANDLERS, "extern_entry", Unsupported("no target externs"))
    assert ctl.sessions[LEAF].read_target_drops() is None
    out = json.loads(ctl.run_command(["counters", LEAF, "--json"]))
    assert out["message"] == (
        f"drops by reason: hop limit 1 (switch drops unavailable from {LEAF}: "
        "no target drop counters)"
    )
    assert {r["port"]: r["tail_drop_pkts"] for r in out["rows"]}[uplink] == ""

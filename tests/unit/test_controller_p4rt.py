"""The controller's P4Runtime client and switch sessions against tf-switch's P4Runtime server,
in process (no root): arbitration, pipeline push, writes with per-update errors, wildcard reads,
entity sync and read-back, counters, packet-out / packet-in, digests with acknowledgements.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import queue
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from google.rpc import code_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2
from scapy.layers.inet6 import UDP, IPv6
from scapy.layers.l2 import Ether

from controller import program as fp
from controller.conditions import Conditions, Fault, FaultKind
from controller.config import ControllerConfig
from controller.entries import ActionCall, Exact, Lpm, TableEntry
from controller.errors import FabricUnavailable, P4RuntimeError, SchemaError
from controller.p4rt import INSERT, ClientOptions, P4RuntimeClient, update
from controller.routes import desired_entities
from controller.schema import Schema, load_p4info, pipeline_cookie
from controller.switches import SwitchSession
from switch.compile.package import load_device_config, make_device_config
from switch.device.device import Device
from switch.device.sscli import run_command
from switch.p4info import build_p4info, p4info_text
from switch.p4rt import P4RuntimeServer
from tests.unit.p4rt_helpers import DataPath
from topologies.model import FabricSpec, build_fabric, usid_address

ROOT = Path(__file__).resolve().parents[2]
FABRIC_P4 = ROOT / "p4" / "fabric.p4"


@functools.cache
def device_config() -> bytes:
    return make_device_config(FABRIC_P4)


@functools.cache
def _p4info_bytes() -> bytes:
    return build_p4info(load_device_config(device_config()).schema).SerializeToString()


def p4info() -> p4info_pb2.P4Info:
    info = p4info_pb2.P4Info()
    info.ParseFromString(_p4info_bytes())
    return info


class Clock:
    def __init__(self) -> None:
        self.t = 1000

    def __call__(self) -> int:
        return self.t


@contextlib.contextmanager
def tf_switch(clock: Clock | None = None, datapath: bool = True) -> Iterator[tuple[Device, str]]:
    dev = Device(1, cpu_port=fp.CPU_PORT, clock=clock) if clock else Device(1, cpu_port=fp.CPU_PORT)
    server = P4RuntimeServer(dev, "127.0.0.1:0").start()
    dp = DataPath(dev).start() if datapath else None
    try:
        yield dev, f"127.0.0.1:{server.port}"
    finally:
        if dp is not None:
            dp.stop()
        server.stop()


def client(address: str, election_id: int | None = None) -> P4RuntimeClient:
    return P4RuntimeClient(
        address, ClientOptions(device_id=1, election_id=election_id, connect_timeout_s=5)
    )


def wait_for(predicate, timeout: float = 3.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def test_higher_election_id_wins_and_a_backup_can_take_over_when_primary_leaves() -> None:
    with tf_switch() as (_dev, addr), client(addr, 10) as a, client(addr, 5) as b:
        assert a.connect().primary
        arb = b.connect()
        assert not arb.primary and arb.code == code_pb2.ALREADY_EXISTS
        assert arb.highest_election_id == 10
        seen: list[bool] = []
        b.on_arbitration = lambda x: seen.append(x.no_primary)
        a.close()
        assert wait_for(lambda: bool(seen) and seen[-1])
        assert b.arbitrate(11).primary and b.is_primary
        a.close()  # idempotent


def test_default_election_ids_follow_the_clock() -> None:
    with tf_switch() as (_dev, addr), client(addr) as a, client(addr) as b:
        assert a.connect().primary
        assert b.connect().primary  # the later one
        assert wait_for(lambda: a.arbitration is not None and not a.arbitration.primary)


def test_connect_to_nothing_fails_clearly() -> None:
    c = P4RuntimeClient(
        "127.0.0.1:1", ClientOptions(device_id=1, connect_timeout_s=0.3), name="p9l9"
    )
    with pytest.raises(FabricUnavailable, match="p9l9: no P4Runtime server at 127.0.0.1:1"):
        c.connect()
    c.close()


def test_pipeline_push_get_and_cookie() -> None:
    with tf_switch() as (_dev, addr), client(addr) as c:
        c.connect()
        assert c.get_pipeline() is None
        cookie = pipeline_cookie(p4info(), device_config())
        c.set_pipeline(p4info(), device_config(), cookie=cookie)
        got = c.get_pipeline()
        assert got is not None and got.cookie.cookie == cookie
        assert Schema(got.p4info).table_id(fp.ROUTES) == Schema(p4info()).table_id(fp.ROUTES)


def test_pipeline_push_errors_name_the_switch_and_operation() -> None:
    with tf_switch() as (_dev, addr), client(addr) as c:
        c.connect()
        with pytest.raises(P4RuntimeError, match=r"SetForwardingPipelineConfig: INVALID_ARGUMENT"):
            c.set_pipeline(p4info(), b'{"pipelines": []}')


def route(value: str, plen: int, port: int) -> TableEntry:
    lpm = Lpm(fp.DST_ADDR, int(ipaddress.IPv6Address(value)), plen)
    return TableEntry(fp.ROUTES, (lpm,), ActionCall(fp.SET_EGRESS_PORT, (("port", port),)))


def test_write_errors_are_decoded_per_update() -> None:
    schema = Schema(p4info())
    with tf_switch() as (_dev, addr), client(addr) as c:
        c.connect()
        c.set_pipeline(p4info(), device_config())
        first = route("2001:db8:1::", 48, 1)
        c.write([update(INSERT, schema.encode(first))])
        with pytest.raises(P4RuntimeError) as info:
            c.write(
                [
                    update(INSERT, schema.encode(route("2001:db8:2::", 48, 2))),
                    update(INSERT, schema.encode(first)),
                ]
            )
        err = info.value
        assert [e.code for e in err.errors] == [code_pb2.OK, code_pb2.ALREADY_EXISTS]
        assert err.is_already_exists_only and not err.is_not_found_only
        assert "1 of 2 updates failed: #1: ALREADY_EXISTS" in str(err)
        entries = c.read(schema.read_all([fp.ROUTES], []))
        assert len(entries) == 2


def test_writes_from_a_backup_are_refused() -> None:
    schema = Schema(p4info())
    with tf_switch() as (_dev, addr), client(addr, 10) as a, client(addr, 5) as b:
        a.connect()
        a.set_pipeline(p4info(), device_config())
        b.connect()
        with pytest.raises(P4RuntimeError, match="PERMISSION_DENIED"):
            b.write([update(INSERT, schema.encode(route("2001:db8:1::", 48, 1)))])


def test_schema_checks_names_and_widths_with_suggestions() -> None:
    schema = Schema(p4info())
    with pytest.raises(SchemaError, match="did you mean"):
        schema.table("FabricIngress.rutes")
    bad_port = TableEntry(fp.PORT_STATE, (Exact(fp.EGRESS_SPEC, 512),), ActionCall(fp.PORT_DOWN))
    with pytest.raises(SchemaError, match="512 does not fit in 9 bits"):
        schema.encode(bad_port)
    bad_param = TableEntry(
        fp.ROUTES, (Lpm(fp.DST_ADDR, 0, 0),), ActionCall(fp.SET_EGRESS_PORT, (("prt", 1),))
    )
    with pytest.raises(SchemaError, match="parameter 'port' is missing"):
        schema.encode(bad_param)
    wrong_table = TableEntry(fp.ROUTES, (Lpm(fp.DST_ADDR, 0, 0),), ActionCall(fp.PORT_DOWN))
    with pytest.raises(SchemaError, match="not an action of table FabricIngress.routes"):
        schema.encode(wrong_table)


def test_p4info_files_load_in_text_and_binary_form(tmp_path: Path) -> None:
    text = tmp_path / "f.p4info.txtpb"
    text.write_text(p4info_text(load_device_config(device_config()).schema))
    binary = tmp_path / "f.p4info.bin"
    binary.write_bytes(_p4info_bytes())
    assert load_p4info(text) == load_p4info(binary)
    with pytest.raises(SchemaError, match="cannot read P4Info"):
        load_p4info(tmp_path / "missing.txt")
    (tmp_path / "junk.txt").write_text("this is { not")
    with pytest.raises(SchemaError, match="not a P4Info"):
        load_p4info(tmp_path / "junk.txt")


def session(addr: str, name: str = "p0l0", config: ControllerConfig | None = None) -> SwitchSession:
    fabric = build_fabric(FabricSpec())
    sw = fabric.switch(name)
    sw = type(sw)(**{**sw.__dict__, "device_id": 1})
    return SwitchSession(sw, addr, config or ControllerConfig(), Schema(p4info()))


def test_session_sync_installs_exactly_the_desired_entities_and_reads_them_back() -> None:
    fabric = build_fabric(FabricSpec())
    with tf_switch() as (_dev, addr):
        s = session(addr)
        try:
            s.connect()
            s.push(p4info(), device_config(), cookie=7)
            desired = desired_entities(fabric)["p0l0"]
            result = s.sync(desired)
            assert result.inserted == len(desired) and result.total == len(desired)
            assert s.read_installed() == desired
            assert s.sync(desired).total == 0
            failed = desired_entities(
                fabric,
                None,
                Conditions(ecn_threshold_pkts=20).with_fault(
                    Fault(FaultKind.LINK, ("p0l0", "p0s1"))
                ),
            )["p0l0"]
            r = s.sync(failed)
            assert (r.inserted, r.modified, r.deleted) == (1, 1, 0)  # port_state + group
            assert s.read_installed() == failed
            r = s.sync(desired)
            assert (r.inserted, r.modified, r.deleted) == (0, 1, 1)
            assert s.read_installed() == desired
        finally:
            s.close()


def test_session_keeps_its_mirror_true_after_a_partly_failed_write() -> None:
    with tf_switch() as (_dev, addr):
        s = session(addr)
        try:
            s.connect()
            s.push(p4info(), device_config(), cookie=7)
            a, b = route("2001:db8:1::", 48, 1), route("2001:db8:2::", 48, 2)
            s.client.write([update(INSERT, s.need_schema().encode(b))])  # behind our back
            with pytest.raises(P4RuntimeError):
                s.sync({a.key: a, b.key: b})
            assert set(s.installed) == {a.key}
            assert s.read_installed() == {a.key: a, b.key: b}
        finally:
            s.close()


def test_packet_out_comes_back_as_packet_in_and_counters_read_with_wildcards() -> None:
    fabric = build_fabric(FabricSpec())
    with tf_switch() as (_dev, addr):
        s = session(addr)
        got: queue.Queue[p4runtime_pb2.PacketIn] = queue.Queue()
        try:
            s.connect()
            s.client.on_packet_in = got.put
            s.push(p4info(), device_config(), cookie=7)
            s.sync(desired_entities(fabric)["p0l0"])
            own = str(usid_address(fabric.switch("p0l0").usid))  # argument zero: for the switch
            frame = bytes(
                Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
                / IPv6(src="fcbb:bb00:8010::", dst=own)
                / UDP(sport=1, dport=2)
            )
            s.packet_out(frame, routed=1)
            pin = got.get(timeout=3)
            meta = s.need_schema().packet_in_metadata(pin)
            assert meta["ingress_port"] == fp.CPU_PORT and meta["reason"] == 2  # PUNT_LOCAL
            counters = s.read_counters([fp.PORT_RX, fp.PORT_TX])
            assert len(counters) == 2 * 512
            assert counters[(fp.PORT_RX, fp.CPU_PORT)][0] == 1
            assert counters[(fp.PORT_TX, fp.CPU_PORT)][0] == 1
            with pytest.raises(SchemaError, match="has no field 'route'"):
                s.packet_out(frame, route=1)
        finally:
            s.close()


def test_burst_digests_arrive_decoded_and_are_acknowledged() -> None:
    clock = Clock()
    config = ControllerConfig(
        digest_max_timeout_ns=0, digest_max_list_size=1, digest_ack_timeout_ns=10**12
    )
    with tf_switch(clock, datapath=False) as (dev, addr):
        s = session(addr, config=config)
        lists: queue.Queue[p4runtime_pb2.DigestList] = queue.Queue()
        try:
            s.connect()
            s.client.on_digest = lists.put
            s.push(p4info(), device_config(), cookie=7)
            burst = TableEntry(
                fp.BURST_CONFIG,
                (Exact(fp.EGRESS_PORT, 2),),
                ActionCall(fp.TRACK_BURSTS, (("high", 8), ("low", 2))),
            )
            r = route("2001:db8:2::", 48, 2)
            s.sync({burst.key: burst, r.key: r})
            s.enable_digest(fp.BURST_DIGEST)
            s.enable_digest(fp.BURST_DIGEST)  # again: modified, not an error
            frame = bytes(
                Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
                / IPv6(src="2001:db8:1::1", dst="2001:db8:2::1")
                / UDP(sport=1, dport=2)
            )
            with dev.lock:
                assert dev.state is not None
                run_command(dev.state, dev.tm, "set_queue_rate 1000 2")
                for _ in range(20):
                    dev.receive(1, frame)
                for _ in range(25):
                    dev.service_queues()
                    clock.t += 1000
                dev.receive(1, frame)  # carries the report out of ingress
            d = lists.get(timeout=3)
            [rec] = s.decode_digest(d)
            assert rec == {
                "port": 2,
                "start_us": 1000,
                "end_us": 18000,
                "peak_qdepth": 19,
                "packets": 18,
            }
            s.client.ack_digest(d.digest_id, d.list_id)
            assert s.digest_name(d.digest_id) == fp.BURST_DIGEST
        finally:
            s.close()

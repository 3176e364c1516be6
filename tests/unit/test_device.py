"""The Device: queues between ingress and egress, queue telemetry, CPU port packet I/O."""

from __future__ import annotations

from pathlib import Path

import pytest

from switch.compile.package import load_device_config, make_device_config
from switch.device.device import Device, Pipeline
from switch.device.sscli import CliError, run_command
from switch.p4info import build_p4info
from switch.pipeline.tables import TableEntry
from switch.pipeline.v1model import V1Switch
from switch.schema import ActionCall

PROG = Path(__file__).resolve().parents[1] / "p4" / "cpu_port.p4"
ETH = bytes.fromhex("0200000000010200000000020800") + b"payload"
TELEMETRY = bytes.fromhex("02000000000102000000000288b5") + bytes(20) + b"data"


class Clock:
    def __init__(self) -> None:
        self.t = 1000

    def __call__(self) -> int:
        return self.t


@pytest.fixture
def device() -> tuple[Device, Clock]:
    clock = Clock()
    dev = Device(device_id=1, cpu_port=255, priority_queues=2, clock=clock)
    cfg = make_device_config(PROG)
    prog = load_device_config(cfg)
    dev.commit(Pipeline(prog, build_p4info(prog.schema), cfg, 1))
    assert dev.state is not None
    dev.state.table("forward").insert(TableEntry((1,), action=ActionCall("I.to_port", (2,))))
    return dev, clock


def test_packet_goes_through_the_queue_to_its_port(device: tuple[Device, Clock]) -> None:
    dev, _ = device
    assert dev.receive(1, ETH) == 1
    assert dev.service_queues() == [(2, ETH)]


def test_unknown_ingress_port_goes_to_cpu_as_packet_in(device: tuple[Device, Clock]) -> None:
    dev, _ = device
    got: list[tuple[bytes, dict[int, int]]] = []
    dev.on_packet_in = lambda payload, meta: got.append((payload, meta))
    dev.receive(7, ETH)
    assert dev.service_queues() == []
    assert got == [(ETH, {1: 7, 2: 0})]


def test_packet_out_leaves_on_the_port_in_its_metadata(device: tuple[Device, Clock]) -> None:
    dev, _ = device
    assert dev.packet_out(ETH, {1: 3}) == 1
    assert dev.wakeup.is_set()
    assert dev.service_queues() == [(3, ETH)]


def test_queue_telemetry_reaches_egress(device: tuple[Device, Clock]) -> None:
    dev, clock = device
    run_command(dev.state, dev.tm, "set_queue_rate 1000 2")  # one packet per ms on port 2
    for _ in range(3):
        dev.receive(1, TELEMETRY)
    out = []
    for step in range(4):
        clock.t = 1000 + step * 1000
        out += dev.service_queues()
    assert len(out) == 3
    fields = [[int.from_bytes(p[14 + 4 * i : 18 + 4 * i], "big") for i in range(4)] for _, p in out]
    enq_ts = [f[0] for f in fields]
    enq_depth = [f[1] for f in fields]
    deq_delta = [f[2] for f in fields]
    deq_depth = [f[3] for f in fields]
    assert enq_ts == [1000, 1000, 1000]
    assert enq_depth == [0, 1, 2]
    assert deq_delta == [0, 1000, 2000]
    assert deq_depth == [2, 1, 0]


def test_priority_queue_is_served_first(device: tuple[Device, Clock]) -> None:
    dev, clock = device
    src_hi = bytes.fromhex("0200000000ff")
    dev.state.table("qos").insert(
        TableEntry((int(src_hi.hex(), 16),), action=ActionCall("I.set_priority", (1,)))
    )
    run_command(dev.state, dev.tm, "set_queue_rate 1000 2")
    low = TELEMETRY
    high = TELEMETRY[:6] + src_hi + TELEMETRY[12:]
    dev.receive(1, low)
    dev.receive(1, low)
    dev.receive(1, high)
    out = []
    for step in range(1, 5):
        clock.t = 1000 + step * 1000
        out += dev.service_queues()
    prios = [p[14 + 16] for _, p in out]
    assert prios[0] in (0, 1)
    assert prios.index(1) <= 1  # the high-priority packet overtakes the queued low one


def test_queue_depth_command_and_tail_drop(device: tuple[Device, Clock]) -> None:
    dev, _ = device
    run_command(dev.state, dev.tm, "set_queue_depth 2 2")
    run_command(dev.state, dev.tm, "set_queue_rate 1 2")
    assert [dev.receive(1, ETH) for _ in range(4)] == [1, 1, 0, 0]
    assert "2" in run_command(dev.state, dev.tm, "show_queues")


def test_no_pipeline_counts_drops() -> None:
    dev = Device()
    assert dev.receive(1, ETH) == 0
    assert dev.counters.no_pipeline_drops == 1


def test_reconcile_keeps_entries(device: tuple[Device, Clock]) -> None:
    dev, _ = device
    assert dev.pipeline is not None
    dev.commit(dev.pipeline, keep_state=True)
    assert len(dev.state.table("forward")) == 1
    dev.commit(dev.pipeline)
    assert len(dev.state.table("forward")) == 0


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("set_queue_ratee 10", "did you mean 'set_queue_rate'"),
        ("set_queue_rate fast", "rate must be a number"),
        ("set_queue_depth", "usage: set_queue_depth"),
        ("mc_node_associate 1", "usage"),
        ("register_read nope 0", "nope"),
    ],
)
def test_bad_cli_commands_are_rejected_and_change_nothing(
    device: tuple[Device, Clock], line: str, message: str
) -> None:
    dev, _ = device
    with pytest.raises((CliError, Exception)) as info:
        run_command(dev.state, dev.tm, line)
    assert message in str(info.value)


def test_cli_multicast_and_mirroring_commands(device: tuple[Device, Clock]) -> None:
    dev, _ = device
    st = dev.state
    run_command(st, dev.tm, "mc_mgrp_create 1")
    out = run_command(st, dev.tm, "mc_node_create 0 2 3")
    handle = int(out.split()[-1])
    run_command(st, dev.tm, f"mc_node_associate 1 {handle}")
    assert st.pre.replicas(1) == ((2, 0), (3, 0))
    run_command(st, dev.tm, "mirroring_add 5 4")
    assert st.pre.clone_replicas(5) == ((4, 0),)
    assert "group 1" in run_command(st, dev.tm, "mc_dump")


def test_runtime_cli_server_runs_commands_and_survives_bad_requests(
    device: tuple[Device, Clock],
) -> None:
    import socket

    from switch.device.control import RuntimeCliClient, RuntimeCliServer, main

    dev, _ = device
    srv = RuntimeCliServer(dev, port=0).start()
    try:
        with RuntimeCliClient(port=srv.port) as c:
            assert c.run("set_queue_rate 100mbps 2") == {"ok": True, "output": ""}
            assert dev.tm.port(2).rate_bps == 100e6
            bad = c.run("frobnicate")
            assert not bad["ok"] and "valid commands" in bad["error"]
            assert c.run("show_queues")["ok"]
        with socket.create_connection(("127.0.0.1", srv.port)) as s:
            f = s.makefile("rwb")
            f.write(b"this is not json\n")
            f.flush()
            assert b'"ok": false' in f.readline()
        assert main(["--thrift-port", str(srv.port), "set_queue_depth", "10"]) == 0
        assert dev.tm.default_depth == 10
        assert main(["--thrift-port", str(srv.port), "nope"]) == 1
    finally:
        srv.stop()


def test_reconcile_carries_counters_registers_and_defaults() -> None:
    prog_path = Path(__file__).resolve().parents[1] / "stf" / "registers.p4"
    cfg = make_device_config(prog_path)
    prog = load_device_config(cfg)
    dev = Device()
    pipe = Pipeline(prog, build_p4info(prog.schema), cfg, 1)
    dev.commit(pipe)
    reg = next(iter(dev.state.registers.values()))
    reg.control_write(0, 7)
    dev.commit(pipe, keep_state=True)
    assert next(iter(dev.state.registers.values())).control_read(0) == 7
    dev.commit(pipe)
    assert next(iter(dev.state.registers.values())).control_read(0) == 0


def test_bmv2_json_device_config_is_refused_with_a_clear_message() -> None:
    from switch.compile.package import DeviceConfigError

    with pytest.raises(DeviceConfigError, match="BMv2 JSON"):
        load_device_config(b'{"header_types": [], "pipelines": []}')


def test_cli_table_add_takes_simple_switch_cli_syntax() -> None:
    from switch.compile import load_program

    sw = V1Switch(load_program(Path(__file__).resolve().parents[2] / "p4" / "ipv6_router.p4"))
    out = run_command(
        sw.state, None, "table_add ipv6_lpm ipv6_forward 2001:db8::/32 => 00:00:00:00:00:02 3"
    )
    assert "handle 0" in out
    e = sw.state.table("ipv6_lpm").entries()[0]
    assert e.match == ((0x20010DB8 << 96, 32),) and e.action.args == (2, 3)
    for bad, msg in [
        ("table_add ipv6_lpm nope 2001:db8::/32 => 1", "has no action 'nope'"),
        ("table_add ipv6_lpm ipv6_forward 2001:db8::/32 => 1", "takes 2 parameter"),
        ("table_add ipv6_lpm ipv6_forward 2001:db8::/32 1", "usage: table_add"),
        ("table_add ipv6_lpm ipv6_forward 2001:zz::/32 => 1 2", "cannot read"),
        ("table_add ipv6_lpm ipv6_forward 2001:db8::/32 => 1 512", "does not fit in 9 bits"),
    ]:
        with pytest.raises(CliError, match=msg):
            run_command(sw.state, None, bad)
    assert len(sw.state.table("ipv6_lpm")) == 1
    run_command(sw.state, None, "table_set_default ipv6_lpm ipv6_forward 0x02 4")
    assert sw.state.table("ipv6_lpm").default.args == (2, 4)


def test_tf_switch_queue_options_apply_to_every_port() -> None:
    from switch.daemon import SwitchDaemon, parse_args

    args = parse_args(
        [
            "--no-p4",
            "--queue-rate",
            "20mbps",
            "--queue-depth",
            "16",
            "--",
            "--grpc-server-addr",
            "127.0.0.1:1",
        ]
    )
    tm = SwitchDaemon(args).device.tm
    pq = tm.port(7)
    assert (pq.rate_pps, pq.rate_bps) == (0.0, 20e6)
    assert pq.depth == [16]

"""FabricController, the tf-ctl command table, its server and one-shot mode, against the default
8-switch fabric of in-process tf-switch P4Runtime servers (no root, no ports).

Installed routes read back equal to the computed ones and give every host pair P x S paths;
``fail`` / ``restore`` change exactly the port-state entries and are idempotent; bad commands
name the valid choices and leave every switch untouched; ``loss --for`` expires on time; output
formats; the JSON-lines server validates requests and streams telemetry; a one-shot controller
takes over without a server and hands the switches back.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller import program as fp
from controller.cli import main, mininet_command, run_direct
from controller.client import ServerUnavailable, send_command
from controller.commands import COMMANDS, TARGETS, parse
from controller.conditions import FaultKind
from controller.config import ControllerConfig
from controller.entries import TableEntry
from controller.errors import CommandError, ControllerError, FabricUnavailable
from controller.fabric import FabricController
from controller.output import Format, Result, render
from controller.server import ControlServer, RequestError, parse_request
from controller.telemetry import BurstRecord, FlushPacer
from host.wire import DATA_HEADER_BYTES
from switch.device.device import Device
from switch.p4rt import P4RuntimeServer
from tests.unit.p4rt_helpers import DataPath
from topologies.model import Fabric, FabricSpec, build_fabric

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def switches(fabric: Fabric) -> Iterator[dict[str, str]]:
    """One in-process tf-switch (device + P4Runtime server + data path) per fabric switch."""
    stack = contextlib.ExitStack()
    addresses = {}
    with stack:
        for sw in fabric.switches:
            dev = Device(sw.device_id, cpu_port=fp.CPU_PORT)
            server = P4RuntimeServer(dev, "127.0.0.1:0").start()
            stack.callback(server.stop)
            dp = DataPath(dev).start()
            stack.callback(dp.stop)
            addresses[sw.name] = f"127.0.0.1:{server.port}"
        yield addresses


@pytest.fixture(scope="module")
def fabric() -> Fabric:
    return build_fabric(FabricSpec())


@pytest.fixture(scope="module")
def live(
    fabric: Fabric, pipeline_files: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FabricController]:
    results = tmp_path_factory.mktemp("results")
    with switches(fabric) as addresses:
        ctl = FabricController(
            fabric,
            *pipeline_files,
            results_dir=results,
            addresses=addresses,
            config=ControllerConfig(telemetry_flush_s=0.1),
        )
        with ctl:
            ctl.connect()
            ctl.push_pipeline()
            ctl.install_routes()
            ctl.start_telemetry()
            yield ctl


@pytest.fixture
def ctl(live: FabricController) -> Iterator[FabricController]:
    """The live controller, with every failure and loss cleared after the test."""
    yield live
    live.run_command(["restore", "all"])
    live.run_command(["ecn", "20"])


def snapshot(ctl: FabricController) -> dict[str, dict]:  # type: ignore[type-arg]
    return {n: s.read_installed() for n, s in ctl.sessions.items()}


def port_state(ctl: FabricController) -> set[tuple[str, int]]:
    return {
        (n, e.match[0].value)
        for n, s in ctl.sessions.items()  # type: ignore[union-attr]
        for e in s.read_installed().values()
        if isinstance(e, TableEntry) and e.table == fp.PORT_STATE
    }


def test_installed_routes_read_back_as_computed_and_give_all_paths(ctl: FabricController) -> None:
    report = ctl.check_paths()
    assert report.ok, report.summary()
    assert report.pairs == 4 * 3 and report.paths_per_pair == 4
    assert set(report.working.values()) == {4}
    assert {"connect", "push_pipeline", "install_routes"} <= set(ctl.timings_s)


def test_fail_plane_marks_exactly_its_ports_and_restore_clears_them(ctl: FabricController) -> None:
    t0 = time.monotonic()
    out = ctl.run_command(["fail", "plane", "1"])
    assert "plane 1 failed" in out
    sent, done = ctl.last_sync.first_write_sent, ctl.last_sync.first_write_done
    assert sent is not None and done is not None  # the plane went down between the two
    assert t0 < sent < done < time.monotonic() and ctl.last_sync.total > 0
    plane1 = {(s.name, p) for s in ctl.fabric.switches if s.plane == 1 for p in s.ports}
    assert port_state(ctl) == plane1
    report = ctl.check_paths()
    assert set(report.working.values()) == {2} and not any(report.drift.values())
    assert "nothing to do" in ctl.run_command(["fail", "plane", "1"])
    routes = json.loads(ctl.run_command(["routes", "h1", "h4", "--json"]))
    assert [(r["plane"], r["state"]) for r in routes["rows"]] == [
        (0, "up"),
        (0, "up"),
        (1, "down"),
        (1, "down"),
    ]
    assert "port down at p1l0" in routes["rows"][2]["detail"]
    assert "restored" in ctl.run_command(["restore", "plane", "1"])
    assert port_state(ctl) == set()
    assert "not failed" in ctl.run_command(["restore", "plane", "1"])
    assert ctl.check_paths().ok


def test_fail_link_and_switch_then_routes_summary(ctl: FabricController) -> None:
    ctl.run_command(["fail", "link", "p0s1", "p0l0"])
    ctl.run_command(["fail", "switch", "p1s0"])
    assert port_state(ctl) == {
        ("p0l0", 4),
        ("p0s1", 1),
        ("p1s0", 1),
        ("p1s0", 2),
        ("p1l0", 3),
        ("p1l1", 3),
    }
    text = ctl.run_command(["routes"])
    assert "host pairs have fewer than 4 paths" in text
    rows = list(csv.DictReader(io.StringIO(ctl.run_command(["routes", "--csv"]))))
    counts = {(r["src"], r["dst"]): int(r["paths_up"]) for r in rows}
    assert counts[("h1", "h3")] == 2  # p0s1 via p0l0 and plane-1 spine 0 gone
    assert counts[("h3", "h4")] == 3  # same leaf p0l1/p1l1: only p1s0 is gone
    status = ctl.run_command(["status"])
    assert "link p0l0 p0s1" in status and "switch p1s0" in status


BAD_COMMANDS = [
    (["fial", "plane", "1"], "unknown command 'fial'; did you mean 'fail'?"),
    (["fail", "plane", "7"], "unknown plane '7'"),
    (["fail", "plan", "1"], "did you mean 'plane'?"),
    (["fail", "link", "p0l0", "p1s0"], "'p0l0' and 'p1s0' are not linked"),
    (["fail", "switch", "p0s9"], "unknown switch 'p0s9'; did you mean"),
    (["fail", "switch", "p0s0", "--phys"], "unknown option '--phys'; did you mean '--phy'?"),
    (["fail", "switch", "p0s0", "--phy"], "--phy needs the running fabric's state"),
    (["restore", "al"], "did you mean 'all'?"),
    (["loss", "p0l0-p0s0", "150"], "loss PCT must be 0..100"),
    (["loss", "p0l0-p0s0", "five"], "is not a number"),
    (["loss", "p0l0:9", "5"], "switch p0l0 has no port '9'"),
    (["loss", "p0l0-p0s0", "5", "--for", "-3"], "loss --for must be"),
    (["loss", "p0l0", "5"], "neither a link"),
    (["ecn", "-1"], "ecn K must be"),
    (["ecn", "1e9"], "is not an integer"),
    (["routes", "h1", "h99"], "unknown host 'h99'"),
    (["routes", "h1", "h2", "h3"], "usage: routes"),
    (["incast", "h1", "--senders", "2"], "--bytes is required"),
    (["incast", "h1", "--senders", "2", "--bytes", "100"], "needs the hosts' pids"),
    (["telemetry", "wach"], "did you mean 'watch'?"),
    (["counters", "p9l9"], "unknown switch"),
    ([], "no command given"),
]


@pytest.mark.parametrize(
    ("argv", "message"), BAD_COMMANDS, ids=lambda x: " ".join(x) if isinstance(x, list) else None
)
def test_bad_commands_fail_clearly_and_change_nothing(
    ctl: FabricController, argv: list[str], message: str
) -> None:
    before = snapshot(ctl)
    with pytest.raises(CommandError) as info:
        ctl.run_command(argv)
    assert message in str(info.value)
    assert snapshot(ctl) == before


def test_unknown_names_list_the_valid_ones(ctl: FabricController) -> None:
    with pytest.raises(CommandError) as info:
        ctl.run_command(["counters", "nope"])
    assert "(valid: p0l0, p0l1, p0s0, p0s1, p1l0, p1l1, p1s0, p1s1)" in str(info.value)


def test_loss_event_is_installed_and_expires_on_time(ctl: FabricController) -> None:
    # long enough that the checks below finish inside the window on a loaded machine
    before = time.time()
    ctl.run_command(["loss", "p0l0-p0s0", "50", "--for", "1500"])
    after = time.time()
    (expires,) = set(ctl.pending_expiries())
    assert before + 1.5 <= expires <= after + 1.5

    def lossy() -> set[tuple[str, int, int]]:
        return {
            (n, e.match[0].value, e.action.param("threshold"))  # type: ignore[union-attr]
            for n, s in ctl.sessions.items()
            for e in s.read_installed().values()
            if isinstance(e, TableEntry) and e.table == fp.LOSS_INJECT
        }

    assert lossy() == {("p0l0", 3, 32768), ("p0s0", 1, 32768)}
    assert "ms left" in ctl.run_command(["status"])
    hang_guard = expires + 15  # nothing else removes it: it goes by itself or not at all
    while lossy() and time.time() < hang_guard:
        time.sleep(0.02)
    seen_gone = time.time()
    assert not lossy() and ctl.conditions.losses == ()
    assert seen_gone >= expires  # gone, and only once its time was up: not removed early


def test_loss_zero_removes_and_ecn_sets_every_port(ctl: FabricController) -> None:
    ctl.run_command(["loss", "p1s1:2", "5"])
    assert len(ctl.conditions.losses) == 1
    ctl.run_command(["loss", "p1s1-eth2", "0"])
    assert ctl.conditions.losses == ()
    ctl.run_command(["ecn", "7"])
    ks = {
        e.action.param("k")
        for s in ctl.sessions.values()  # type: ignore[union-attr]
        for e in s.read_installed().values()
        if isinstance(e, TableEntry) and e.table == fp.ECN_CONFIG
    }
    assert ks == {7}
    ctl.run_command(["ecn", "off"])
    assert not any(
        isinstance(e, TableEntry) and e.table == fp.ECN_CONFIG
        for s in ctl.sessions.values()
        for e in s.read_installed().values()
    )


def test_trim_sets_every_port_to_keep_the_mrc_header_and_off_removes_it(
    ctl: FabricController,
) -> None:
    assert "trim: off" in ctl.run_command(["status"])
    assert "trim at 12 packets" in ctl.run_command(["trim", "12"])
    installed = [
        (n, e)
        for n, s in ctl.sessions.items()  # type: ignore[union-attr]
        for e in s.read_installed().values()
        if isinstance(e, TableEntry) and e.table == fp.TRIM_CONFIG
    ]
    assert {(n, e.match[0].value) for n, e in installed} == {
        (sw.name, port) for sw in ctl.fabric.switches for port in sw.ports
    }
    params = {
        (e.action.param("threshold"), e.action.param("keep_bytes"), e.action.param("priority"))
        for _n, e in installed
    }
    assert params == {(12, DATA_HEADER_BYTES, 0)}
    assert "trim: 12 packets" in ctl.run_command(["status"])
    with pytest.raises(CommandError, match="trim K must be"):
        ctl.run_command(["trim", "0"])
    ctl.run_command(["trim", "off"])
    assert not any(
        isinstance(e, TableEntry) and e.table == fp.TRIM_CONFIG
        for s in ctl.sessions.values()
        for e in s.read_installed().values()
    )


def test_counters_status_and_help_render_in_every_format(ctl: FabricController) -> None:
    text = ctl.run_command(["counters", "p0l0"])
    assert text.splitlines()[0].split()[:4] == ["switch", "port", "peer", "rx_pkts"]
    rows = json.loads(ctl.run_command(["counters", "--json"]))["rows"]
    assert len(rows) == sum(len(s.ports) for s in ctl.fabric.switches)
    status = list(csv.DictReader(io.StringIO(ctl.run_command(["status", "--csv"]))))
    assert {r["pipeline"] for r in status} == {"ours"}
    assert {r["primary"] for r in status} == {"yes"}
    assert {c for c in COMMANDS} <= set(ctl.run_command(["help"]).split())


def test_every_command_row_is_complete() -> None:
    for name, cmd in COMMANDS.items():
        assert cmd.name == name and cmd.usage.startswith(name) and cmd.summary
        assert cmd.min_args <= cmd.max_args
    with pytest.raises(CommandError, match="--for needs a value"):
        parse(COMMANDS["loss"], ["a-b", "5", "--for"])
    assert {t.kind for t in TARGETS.values()} == set(FaultKind)
    expected = {
        Format.TABLE: "a\n-\n1\nm",
        Format.JSON: '{"message": "m", "rows": [{"a": 1}]}',
        Format.CSV: "a\n1",
    }
    assert {fmt: render(Result.table(("a",), [(1,)], "m"), fmt) for fmt in Format} == expected


def test_telemetry_records_reach_csv_watchers_and_recent(ctl: FabricController) -> None:
    tel = ctl.telemetry
    assert tel is not None
    lines: list[str] = []
    t = threading.Thread(
        target=lambda: ctl.run_command(
            ["telemetry", "watch", "--count", "2", "--json"], out=lines.append
        )
    )
    t.start()
    time.sleep(0.2)
    tel.add(
        [
            BurstRecord("p0s0", 1, 10, 20, 33, 40, time.time()),
            BurstRecord("p0s0", 2, 30, 50, 17, 20, time.time()),
        ]
    )
    t.join(3)
    assert [json.loads(x)["peak_qdepth"] for x in lines] == [33, 17]
    assert json.loads(lines[0])["peer"] == "p0l0"
    with open(tel.csv_path) as f:  # type: ignore[arg-type]
        rows = list(csv.reader(f))
    assert rows[0] == [
        "switch",
        "port",
        "start_us",
        "end_us",
        "peak_qdepth",
        "packets",
        "drop_pkts",
    ]
    assert ["p0s0", "1", "10", "20", "33", "40", ""] in rows
    assert "p0s0" in ctl.run_command(["telemetry", "recent", "--last", "2"])


def test_flush_pacer_slows_down_when_quiet_and_speeds_up_for_watchers_and_reports() -> None:
    pacer = FlushPacer(0.5, 4.0)
    quiet = [pacer.next_wait(100.0 + i, 0, None) for i in range(6)]
    assert quiet == [1.0, 2.0, 4.0, 4.0, 4.0, 4.0]  # doubles up to the idle maximum
    assert pacer.next_wait(200.0, 1, None) == 0.5  # a watcher: the busy pace at once
    assert pacer.next_wait(201.0, 0, None) == 1.0
    assert pacer.next_wait(202.0, 0, 199.0) == 0.5  # a burst reported 3 s ago: still busy
    assert pacer.next_wait(210.0, 0, 199.0) == 1.0  # 11 s ago: quiet again
    assert FlushPacer(0.5, 0.1).idle_max_s == 0.5  # the quiet pace is never the faster one
    with pytest.raises(ValueError):
        FlushPacer(0, 4.0)


def test_a_quiet_fabric_is_flushed_seldom_and_a_watch_brings_the_pace_back(
    ctl: FabricController,
) -> None:
    tel = ctl.telemetry
    assert tel is not None and tel.watcher_count == 0
    flushes: list[float] = []
    flush = ctl.flush_reports

    def counted() -> None:
        flushes.append(time.monotonic())
        flush()

    ctl._last_report = None  # no burst lately (earlier tests may have had some)
    ctl.flush_reports = counted  # type: ignore[method-assign]
    try:
        time.sleep(3.0)  # busy pace (0.1 s) would be 30 rounds; quiet: 0.2, 0.4, 0.8, 1.6 ...
        quiet = len(flushes)
        assert quiet <= 8, flushes
        q = tel.subscribe()
        ctl.watching()
        t0 = time.monotonic()
        time.sleep(1.0)
        fast = [t for t in flushes if t >= t0]
        assert len(fast) >= 5, (quiet, fast)  # about every 0.1 s while someone watches
        tel.unsubscribe(q)
    finally:
        del ctl.flush_reports  # the class's method again


def test_closing_the_controller_lets_the_last_burst_records_out(
    fabric: Fabric, pipeline_files: tuple[Path, Path], tmp_path: Path
) -> None:
    with switches(fabric) as addresses:
        ctl = FabricController(
            fabric,
            *pipeline_files,
            results_dir=tmp_path,
            addresses=addresses,
            config=ControllerConfig(telemetry_flush_s=0.1),
        )
        flushed: list[bool] = []  # whether the periodic flushing had stopped by then
        flush = ctl.flush_reports

        def counted() -> None:
            flushed.append(ctl._flush_stop.is_set())
            flush()

        ctl.flush_reports = counted  # type: ignore[method-assign]
        with ctl:
            ctl.connect()
            ctl.push_pipeline()
            ctl.start_telemetry()
        assert flushed and flushed[-1], flushed  # one more round after the pacer stopped


def test_server_runs_commands_validates_requests_and_streams(ctl: FabricController) -> None:
    with ControlServer(ctl, 0, topology="t.json") as srv:
        results = ctl.results_dir
        assert json.loads((results / "fabric" / "controller.json").read_text())["port"] == srv.port
        assert "plane 0 failed" in send_command(["fail", "plane", "0"], results)
        assert "already down" in send_command(["fail", "plane", "0"], results)
        with pytest.raises(CommandError, match="unknown command"):
            send_command(["explode"], results)
        assert "restored" in send_command(["restore", "plane", "0"], results)
        with socket.create_connection(("127.0.0.1", srv.port)) as sock:
            f = sock.makefile("rwb")
            for bad in (
                b"not json\n",
                b'["argv"]\n',
                b'{"argv": [], "x": 1}\n',
                b'{"argv": []}\n',
                b'{"argv": [1, 2]}\n',
                b"\xff\xfe\n",
            ):
                f.write(bad)
                f.flush()
                reply = json.loads(f.readline())
                assert reply["ok"] is False and reply["kind"] == "request", bad
            f.write(b'{"argv": ["status", "--json"]}\n')
            f.flush()
            assert json.loads(json.loads(f.readline())["output"])["rows"]
        streamed: list[str] = []
        t = threading.Thread(
            target=lambda: send_command(
                ["telemetry", "watch", "--count", "1", "--csv"], results, out=streamed.append
            )
        )
        t.start()
        time.sleep(0.3)
        assert ctl.telemetry is not None
        ctl.telemetry.add([BurstRecord("p1l1", 3, 1, 2, 9, 4, time.time())])
        t.join(3)
        assert streamed and streamed[0].splitlines()[1].startswith("p1l1,3,1,2,9,4")
    assert not (ctl.results_dir / "fabric" / "controller.json").exists()
    with pytest.raises(ServerUnavailable):
        send_command(["status"], ctl.results_dir)


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (b'{"argv": ["x"], "v": 2}', "protocol version"),
        (b'{"argv": ["' + b"a" * 2000 + b'"]}', "at most 1024"),
        (b"[" * 70000, "longer than"),
    ],
)
def test_request_validation(line: bytes, why: str) -> None:
    with pytest.raises(RequestError, match=why):
        parse_request(line)


def test_mininet_command_never_raises(ctl: FabricController) -> None:
    assert mininet_command("fail plane 9", controller=ctl).startswith("error: unknown plane")
    assert mininet_command('routes "h1', controller=ctl).startswith("error:")
    assert "host pairs" in mininet_command("routes", controller=ctl)


def test_one_shot_takes_primary_applies_and_the_server_takes_it_back(
    ctl: FabricController, fabric: Fabric, tmp_path: Path
) -> None:
    topo = tmp_path / "topology.json"
    fabric.to_json(topo)
    state = {
        "topology": str(topo),
        "hosts": {},
        "switches": {n: {"grpc": s.address} for n, s in ctl.sessions.items()},
    }
    results = ctl.results_dir
    (results / "fabric").mkdir(exist_ok=True)
    (results / "fabric" / "state.json").write_text(json.dumps(state))
    try:
        out = run_direct(["fail", "plane", "1"], str(results), None)
        assert "plane 1 failed" in out
        # the long-running controller became primary again and adopted the saved conditions
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not all(
            s.client.is_primary for s in ctl.sessions.values()
        ):
            time.sleep(0.05)
        assert all(s.client.is_primary for s in ctl.sessions.values())
        while time.monotonic() < deadline and not ctl.conditions.faults:
            time.sleep(0.05)
        assert [f.describe() for f in ctl.conditions.faults] == ["plane 1"]
        assert main(["--results", str(results), "--direct", "restore", "plane", "1"]) == 0
        assert main(["--results", str(results), "--direct", "fail", "plane", "5"]) == 1
    finally:
        (results / "fabric" / "state.json").unlink()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and ctl.conditions.faults:
        time.sleep(0.05)
    assert not ctl.conditions.faults
    assert ctl.check_paths().ok


def test_a_new_controller_adopts_the_switches_without_rewriting_them(
    ctl: FabricController, fabric: Fabric, pipeline_files: tuple[Path, Path], tmp_path: Path
) -> None:
    addresses = {n: s.address for n, s in ctl.sessions.items()}
    with FabricController(
        fabric, *pipeline_files, results_dir=tmp_path, addresses=addresses
    ) as second:
        second.connect()
        assert second.install_routes().total == 0  # read back, nothing to write
    other = tmp_path / "other.tfp4.json"
    other.write_bytes(pipeline_files[1].read_bytes() + b" ")
    with FabricController(
        fabric, pipeline_files[0], other, results_dir=tmp_path, addresses=addresses
    ) as third:
        third.connect()
        with pytest.raises(ControllerError, match="runs another pipeline"):
            third.install_routes()


def test_adopting_a_switch_without_a_pipeline_says_so(
    fabric: Fabric, pipeline_files: tuple[Path, Path], tmp_path: Path
) -> None:
    with switches(fabric) as addresses:
        with FabricController(
            fabric, *pipeline_files, results_dir=tmp_path, addresses=addresses
        ) as c:
            c.connect()
            with pytest.raises(FabricUnavailable, match="has no pipeline: push one"):
                c.install_routes()
        with FabricController(fabric, results_dir=tmp_path, addresses=addresses) as c:
            with pytest.raises(FabricUnavailable, match="no switch has a pipeline"):
                c.connect()


def test_a_watch_ends_when_its_client_goes_away(ctl: FabricController) -> None:
    assert ctl.telemetry is not None
    with ControlServer(ctl, 0) as srv:
        sock = socket.create_connection(("127.0.0.1", srv.port))
        sock.sendall(b'{"argv": ["telemetry", "watch"]}\n')
        deadline = time.monotonic() + 3
        while ctl.telemetry.watcher_count == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert ctl.telemetry.watcher_count == 1
        sock.close()
        deadline = time.monotonic() + 3
        while ctl.telemetry.watcher_count and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ctl.telemetry.watcher_count == 0

"""The controller against a live fabric of tf-switch processes (root: namespaces and veths).

A 2-plane fabric with 2 leaves and 1 spine per plane and 4 hosts (6 switches, built here without
Mininet: veths between switch ports, one network namespace per host with a NIC per plane, a
``sleep`` process standing in for Mininet's host shell). ``tf-ctl serve`` pushes the pipeline,
installs routes and collects telemetry; commands go through ``tf-ctl`` and its socket.

Real UDP datagrams prove: every micro-SID path and every ECMP baseline address of every host
pair delivers; ``fail plane`` removes exactly that plane's paths and ``restore`` brings them
back; ``fail link --phy`` takes the Linux link down and back up; a ``loss --for`` event drops
traffic and expires on time; ``incast`` fills a queue and the burst reaches
``results/telemetry.csv`` with a plausible peak; bad commands leave every switch as it was.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from controller import program as fp
from controller.client import send_command
from controller.entries import TableEntry
from controller.errors import CommandError
from controller.p4rt import ClientOptions, P4RuntimeClient
from controller.schema import Schema, load_p4info
from switch.compile.package import load_device_config, make_device_config
from switch.p4info import p4info_text
from tests.netkit import NET_MARKS, NetKit, Netns, add_address, add_neighbor, call_in_netns
from topologies.model import Fabric, FabricSpec, build_fabric

pytestmark = NET_MARKS

ROOT = Path(__file__).resolve().parents[2]
SPEC = FabricSpec(planes=2, leaves=2, spines=1, hosts_per_leaf=2, queue_depth=64)
QUEUE_RATE = "20mbps"
PROBE_PORT = 7777
UDP_NO_CHECK6_TX, UDP_NO_CHECK6_RX = 101, 102
GATEWAY = "fe80::1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"process exited early: {proc.args}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.02)
    raise AssertionError(f"nothing listens on {port} after {timeout} s")


def stop(proc: subprocess.Popen[bytes], timeout: float = 10) -> int | None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return None
    return proc.returncode


@dataclass
class LiveFabric:
    fabric: Fabric
    results: Path
    p4info: Path
    hosts: dict[str, Netns]
    ifnames: dict[tuple[str, int], str]
    addresses: dict[str, str]
    serve_log: str = ""
    receivers: dict[str, socket.socket] = field(default_factory=dict)
    senders: dict[str, socket.socket] = field(default_factory=dict)
    readers: dict[str, P4RuntimeClient] = field(default_factory=dict)
    schema: Schema | None = None

    def ctl(self, *argv: str) -> str:
        return send_command(list(argv), self.results)

    def cli(self, *argv: str) -> subprocess.CompletedProcess[str]:
        """The real ``tf-ctl`` entry point, as a user runs it."""
        return subprocess.run(
            [sys.executable, "-m", "controller.cli", "--results", str(self.results), *argv],
            capture_output=True,
            text=True,
            timeout=60,
        )

    def reader(self, switch: str) -> P4RuntimeClient:
        """A client for reads only (no stream, no arbitration), kept open."""
        if switch not in self.readers:
            sw = self.fabric.switch(switch)
            c = P4RuntimeClient(
                self.addresses[switch], ClientOptions(sw.device_id, connect_timeout_s=5)
            )
            c.open()
            self.readers[switch] = c
        return self.readers[switch]

    def tables(self, switches: list[str] | None = None) -> dict[str, set[object]]:
        """Every managed entity of the switches (default: all), read directly."""
        if self.schema is None:
            self.schema = Schema(load_p4info(self.p4info))
        schema = self.schema
        out = {}
        for name in switches or [sw.name for sw in self.fabric.switches]:
            msgs = self.reader(name).read(schema.read_all(fp.MANAGED_TABLES, fp.MANAGED_PROFILES))
            out[name] = {schema.decode(m) for m in msgs}
        return out

    def open_sockets(self) -> None:
        for name, ns in self.hosts.items():

            def rx() -> socket.socket:
                s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
                s.setsockopt(socket.SOL_UDP, UDP_NO_CHECK6_RX, 1)
                s.bind(("::", PROBE_PORT))
                s.setblocking(False)
                return s

            def tx() -> socket.socket:
                s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
                s.setsockopt(socket.SOL_UDP, UDP_NO_CHECK6_TX, 1)
                return s

            self.receivers[name] = call_in_netns(ns.name, rx)
            self.senders[name] = call_in_netns(ns.name, tx)

    def probe(
        self, flows: list[tuple[str, str, str, str]], repeats: int = 3, wait_s: float = 0.6
    ) -> set[str]:
        """Send each ``(src, dst, address, tag)`` ``repeats`` times; the tags that reached
        ``dst``."""
        for r in self.receivers.values():  # drop leftovers of earlier probes
            with contextlib.suppress(BlockingIOError):
                while True:
                    r.recv(2048)
        for _ in range(repeats):
            for src, _dst, addr, tag in flows:
                with contextlib.suppress(OSError):
                    self.senders[src].sendto(tag.encode(), (addr, PROBE_PORT))
            time.sleep(0.02)
        want = {tag: dst for _src, dst, _addr, tag in flows}
        got: set[str] = set()
        by_fd = {s.fileno(): (h, s) for h, s in self.receivers.items()}
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and got != set(want):
            ready, _, _ = select.select(list(by_fd), [], [], 0.05)
            for fd in ready:
                host, s = by_fd[fd]
                with contextlib.suppress(BlockingIOError):
                    while True:
                        tag = s.recv(2048).decode()
                        if want.get(tag) == host:
                            got.add(tag)
        return got

    def path_flows(self, planes: set[int] | None = None) -> list[tuple[str, str, str, str]]:
        flows = []
        for a in self.fabric.hosts:
            for b in self.fabric.hosts:
                if a is not b:
                    for p in self.fabric.paths(a.name, b.name, planes):
                        flows.append(
                            (a.name, b.name, p.address, f"{a.name}>{b.name}/p{p.plane}s{p.spine}")
                        )
        return flows

    def baseline_flows(self) -> list[tuple[str, str, str, str]]:
        return [
            (a.name, b.name, nic.baseline_address, f"{a.name}>{b.name}/base{nic.plane}")
            for a in self.fabric.hosts
            for b in self.fabric.hosts
            if a is not b
            for nic in b.nics
        ]


def build_hosts(kit: NetKit, fabric: Fabric) -> tuple[dict[str, Netns], dict[tuple[str, int], str]]:
    hosts: dict[str, Netns] = {}
    ifnames: dict[tuple[str, int], str] = {}
    for link in fabric.links:
        if link.a.startswith("h"):
            host = fabric.host(link.a)
            if host.name not in hosts:
                hosts[host.name] = kit.netns(host.name)
            ns = hosts[host.name]
            nic = host.nics[link.plane]
            leaf = fabric.switch(nic.leaf)
            pair = kit.veth(
                f"{leaf.name}e{nic.leaf_port}",
                f"{host.name}n{nic.plane}",
                ns_b=ns,
                switch_side=True,
                mac_b=nic.mac,
            )
            ifnames[(leaf.name, nic.leaf_port)] = pair.a
            add_address(ns.name, pair.b, f"{nic.address}/128")
            add_address(ns.name, pair.b, f"{nic.baseline_address}/64")
            add_neighbor(ns.name, pair.b, GATEWAY, leaf.mac)
            for route in (f"fcbb:bb00:1{nic.plane:x}00::/40", f"2001:db8:{nic.plane:x}::/48"):
                ns.run(["ip", "-6", "route", "add", route, "via", GATEWAY, "dev", pair.b])
        else:
            pair = kit.veth(
                f"{link.a}e{link.a_port}",
                f"{link.b}e{link.b_port}",
                switch_side=True,
                host_ipv6=False,
            )
            ifnames[(link.a, link.a_port)] = pair.a
            ifnames[(link.b, link.b_port)] = pair.b
    return hosts, ifnames


def sleeper_in(ns: Netns) -> subprocess.Popen[bytes]:
    """A process inside ``ns``, standing in for a Mininet host shell."""
    proc = subprocess.Popen(["ip", "netns", "exec", ns.name, "sleep", "600"])
    target = os.stat(f"/run/netns/{ns.name}").st_ino
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if os.stat(f"/proc/{proc.pid}/ns/net").st_ino == target:
                return proc
        time.sleep(0.01)
    raise AssertionError("sleep did not enter the namespace")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveFabric]:
    t0 = time.monotonic()
    tmp = tmp_path_factory.mktemp("ctlnet")
    results = tmp / "results"
    (results / "fabric").mkdir(parents=True)
    cfg = make_device_config(ROOT / "p4" / "fabric.p4")
    config, p4info = tmp / "fabric.tfp4.json", tmp / "fabric.p4info.txtpb"
    config.write_bytes(cfg)
    p4info.write_text(p4info_text(load_device_config(cfg).schema))
    fabric = build_fabric(SPEC)
    topology = results / "fabric" / "topology.json"
    fabric.to_json(topology)
    procs: list[subprocess.Popen[bytes]] = []
    with NetKit() as kit:
        try:
            hosts, ifnames = build_hosts(kit, fabric)
            addresses, state_switches = {}, {}
            waits = []
            for sw in fabric.switches:
                grpc, thrift = free_port(), free_port()
                ports = [f"{p}@{ifnames[(sw.name, p)]}" for p in sorted(sw.ports)]
                cmd = [
                    sys.executable,
                    "-m",
                    "switch.daemon",
                    *sum((["-i", x] for x in ports), []),
                    "--device-id",
                    str(sw.device_id),
                    "--cpu-port",
                    "255",
                    "--thrift-port",
                    str(thrift),
                    "--queue-rate",
                    QUEUE_RATE,
                    "--queue-depth",
                    str(SPEC.queue_depth),
                    "--no-p4",
                    "--",
                    "--grpc-server-addr",
                    f"127.0.0.1:{grpc}",
                ]
                proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                procs.append(proc)
                waits.append((grpc, proc))
                addresses[sw.name] = f"127.0.0.1:{grpc}"
                state_switches[sw.name] = {
                    "pid": proc.pid,
                    "grpc": addresses[sw.name],
                    "thrift_port": thrift,
                    "interfaces": {str(p): ifnames[(sw.name, p)] for p in sw.ports},
                }
            sleepers = {name: sleeper_in(ns) for name, ns in hosts.items()}
            procs += sleepers.values()
            for grpc, proc in waits:
                wait_listening(grpc, proc, 30)
            state = {
                "topology": str(topology),
                "switches": state_switches,
                "hosts": {h: {"pid": p.pid} for h, p in sleepers.items()},
            }
            (results / "fabric" / "state.json").write_text(json.dumps(state, indent=1))
            serve = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "controller.cli",
                    "serve",
                    "--topology",
                    str(topology),
                    "--p4info",
                    str(p4info),
                    "--config",
                    str(config),
                    "--results",
                    str(results),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            procs.insert(0, serve)
            assert serve.stdout is not None
            line = serve.stdout.readline().decode()
            assert "serving on" in line, line + serve.stdout.read().decode()
            print(f"\nfabric up in {time.monotonic() - t0:.1f} s; {line.strip()}")
            lf = LiveFabric(fabric, results, p4info, hosts, ifnames, addresses, line)
            lf.open_sockets()
            yield lf
            for s in [*lf.receivers.values(), *lf.senders.values()]:
                s.close()
            for c in lf.readers.values():
                c.close()
        finally:
            stop(procs[0])  # the controller first, then everything else at once
            for proc in procs[1:]:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            for proc in procs[1:]:
                stop(proc)


@pytest.fixture
def fab(live: LiveFabric) -> Iterator[LiveFabric]:
    yield live
    live.ctl("restore", "all")


def test_installed_routes_give_all_pairs_reachability(fab: LiveFabric) -> None:
    paths = fab.path_flows()
    assert len(paths) == 4 * 3 * 2  # ordered pairs x P x S
    assert fab.probe(paths) == {t for *_x, t in paths}
    base = fab.baseline_flows()
    assert fab.probe(base) == {t for *_x, t in base}
    summary = json.loads(fab.ctl("routes", "--json"))
    assert {(r["paths_up"], r["paths_total"]) for r in summary["rows"]} == {(2, 2)}
    status = json.loads(fab.ctl("status", "--json"))["rows"]
    assert {(r["stream"], r["primary"], r["pipeline"]) for r in status} == {(True, True, "ours")}


def test_fail_plane_removes_exactly_that_planes_paths_and_restore_brings_them_back(
    fab: LiveFabric,
) -> None:
    paths = fab.path_flows()
    r = fab.cli("fail", "plane", "1")
    assert r.returncode == 0 and "plane 1 failed" in r.stdout, r.stderr
    got = fab.probe(paths, wait_s=0.8)
    assert got == {t for _s, _d, _a, t in paths if t.endswith("/p0s0")}
    r = fab.cli("fail", "plane", "1")
    assert r.returncode == 0 and "nothing to do" in r.stdout
    r = fab.cli("restore", "plane", "1")
    assert r.returncode == 0 and "restored" in r.stdout, r.stderr
    assert fab.probe(paths) == {t for *_x, t in paths}


def test_phy_link_failure_takes_the_linux_link_down_and_up(fab: LiveFabric) -> None:
    ifname = fab.ifnames[("p0l0", 3)]
    flows = [f for f in fab.path_flows({0}) if f[0] in ("h1", "h2")]
    fab.ctl("fail", "link", "p0l0", "p0s0", "--phy")
    flags = int(Path(f"/sys/class/net/{ifname}/flags").read_text(), 16)
    assert not flags & 1  # IFF_UP cleared
    assert fab.probe(flows, repeats=2, wait_s=0.4) == set()
    fab.ctl("restore", "link", "p0l0", "p0s0")
    assert int(Path(f"/sys/class/net/{ifname}/flags").read_text(), 16) & 1
    deadline = time.monotonic() + 5
    got: set[str] = set()
    while time.monotonic() < deadline and got != {t for *_x, t in flows}:
        got = fab.probe(flows)
    assert got == {t for *_x, t in flows}
    rows = json.loads(fab.ctl("status", "--json"))["rows"]
    assert all(r["stream"] for r in rows)


def test_loss_event_drops_traffic_and_expires_on_time(fab: LiveFabric) -> None:
    flows = [f for f in fab.path_flows({0}) if f[0] == "h1" and f[1] == "h3"]
    assert fab.probe(flows)
    issued = time.time()  # the controller's deadline is at least 1.5 s after this
    fab.ctl("loss", "p0l0-p0s0", "100", "--for", "1500")
    assert fab.probe(flows, repeats=3, wait_s=0.3) == set()

    def lossy() -> bool:
        return any(
            isinstance(e, TableEntry) and e.table == fp.LOSS_INJECT
            for t in fab.tables(["p0l0"]).values()
            for e in t
        )

    assert lossy()
    hang_guard = issued + 1.5 + 15  # nothing else removes it: it goes by itself or not at all
    while lossy() and time.time() < hang_guard:
        time.sleep(0.01)
    seen_gone = time.time()
    assert not lossy()
    assert seen_gone >= issued + 1.5  # gone, and only once its time was up: not removed early
    assert fab.probe(flows) == {t for *_x, t in flows}


def test_incast_fills_a_queue_and_the_burst_reaches_telemetry(fab: LiveFabric) -> None:
    out = json.loads(fab.ctl("incast", "h1", "--senders", "3", "--bytes", "150000", "--json"))
    assert "3 flows from h2, h3, h4" in out["message"]
    bursts = out["rows"]
    assert bursts, out["message"]
    high, depth = 16, SPEC.queue_depth  # ControllerConfig.burst_high_pkts, switch queue depth
    assert all(high <= b["peak_qdepth"] <= depth for b in bursts), bursts
    assert all(b["packets"] >= 1 and b["end_us"] >= b["start_us"] for b in bursts)
    with open(fab.results / "telemetry.csv") as f:
        rows = list(csv.DictReader(f))
    columns = ["switch", "port", "start_us", "end_us", "peak_qdepth", "packets", "drop_pkts"]
    assert list(rows[0]) == columns
    assert all(int(r["drop_pkts"]) >= 0 for r in rows)  # the burst port's tail drops
    recorded = {(r["switch"], int(r["port"]), int(r["start_us"])) for r in rows}
    assert {(b["switch"], b["port"], b["start_us"]) for b in bursts} <= recorded
    counters = json.loads(fab.ctl("counters", bursts[0]["switch"], "--json"))["rows"]
    assert sum(r["tx_pkts"] for r in counters) > 100


BAD = [
    ("fail", "plane", "2"),
    ("fail", "link", "p0l0", "p1s0"),
    ("fail", "switch", "p0s7", "--phy"),
    ("restore", "switch", "nosuch"),
    ("loss", "p0l0-p0s0", "101"),
    ("loss", "p0l0:7", "5", "--for", "100"),
    ("ecn", "zero"),
    ("incast", "h9", "--senders", "2", "--bytes", "10"),
    ("incast", "h1", "--senders", "0", "--bytes", "10"),
    ("routes", "h1", "p0l0"),
    ("frobnicate",),
]


def test_bad_commands_leave_state_untouched(fab: LiveFabric) -> None:
    fab.ctl("fail", "link", "p1l1", "p1s0")
    before = fab.tables()
    for argv in BAD:
        with pytest.raises(CommandError):
            fab.ctl(*argv)
    r = fab.cli("fail", "plane", "9")
    assert r.returncode == 1 and "unknown plane '9'" in r.stderr and "(valid: 0, 1)" in r.stderr
    assert fab.tables() == before
    assert "link p1l1 p1s0" in fab.ctl("status")

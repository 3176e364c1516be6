"""The one place that turns a topology model into Mininet nodes and running switches.

* :class:`FabricIntf` -- a Mininet interface that configures nothing itself: MACs are set when
  the veth pair is made, and everything else is applied in one batch per node.
* :class:`FabricHost` -- a Mininet host (its own network namespace) with one NIC per plane,
  configured by one script (:mod:`topologies.hostconf`): addresses, routes, static neighbours,
  sysctls; its offloads go off through :func:`switch.device.offloads.disable_offloads`, called
  from a thread inside its namespace.
* :class:`P4Switch` -- a P4 switch process in the root namespace on the Mininet interfaces;
  :class:`TfSwitch` runs ``tf-switch`` (through the fork server of
  :mod:`topologies.emulation.swlaunch`, or as its own program), :class:`Bmv2Switch` runs BMv2's
  ``simple_switch_grpc``. Both start with no program (``--no-p4``); the controller pushes the
  pipeline over P4Runtime.
* :func:`build_mininet` -- hosts, switches and links of a :class:`~topologies.model.Fabric`.

Names, ports and MACs come from the model: host ``h1``'s NIC ``p`` is ``h1-eth<p>``, switch
port ``n`` of ``p0l0`` is ``p0l0-eth<n>`` (:func:`~topologies.model.port_ifname`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from mininet.net import Mininet
from mininet.node import Host, Switch

# mininet.link.Intf is untyped; subclassing it is the intended extension point
from mininet.link import Intf  # isort: skip

from switch.device.netns import NetnsError, call_in_thread, join_netns, netns_of_pid
from switch.device.offloads import disable_offloads, enable_gro
from topologies import hostconf
from topologies.emulation.cleanup import process_alive
from topologies.emulation.swlaunch import SwitchLauncher, exec_switch
from topologies.model import Fabric, port_ifname
from topologies.model import Switch as SwitchModel

log = logging.getLogger(__name__)

IFNAMSIZ = 16
CPU_PORT = 255
BMV2_BINARY = "simple_switch_grpc"
BMV2_CLI = "simple_switch_CLI"
TARGETS = ("tf", "bmv2")
LAUNCH_MODES = ("fork", "exec")
ASSUMED_PACKET_BYTES = 1500  # BMv2's queue rate is in packets/s: link rate / full frames
# How a host NIC (a veth) receives what its leaf sends. ``off``: inside the leaf's transmit
# call (veth without NAPI), so the host's whole IPv6/UDP receive is charged to the leaf
# switch's process. ``gro``: receive GRO on, which gives the veth a NAPI context: frames are
# queued and received in batches from a softirq (still on the sender's CPU, mostly in its
# context). ``threaded``: that NAPI poll runs in a kernel thread of its own (``napi/<nic>-N``)
# at a real-time priority (:func:`prioritise_napi_threads`), before ordinary tasks, as a NIC's
# interrupt-driven receive is on a real host; the leaf only queues the frame. ``auto`` (the
# default): ``threaded`` where the kernel gives the NICs NAPI threads, else ``gro`` with a
# warning (an older kernel still runs every fabric).
HOST_NAPI_MODES = ("auto", "threaded", "gro", "off")


class FabricNetError(RuntimeError):
    """The fabric cannot be built or a switch did not come up (the message says why)."""


QUEUE_BURST_MAX_US = 1_000_000
"""The largest ``--queue-burst-us`` that ``tf-switch`` accepts."""


@dataclass(frozen=True)
class SwitchOptions:
    """How every switch process of a fabric is started."""

    target: str = "tf"
    """``tf`` (tailfabric's ``tf-switch``) or ``bmv2`` (``simple_switch_grpc`` on PATH)."""
    launch: str = "fork"
    """tf only: ``fork`` (fork server, fast start) or ``exec`` (one ``python -m switch.daemon``)."""
    python: str = sys.executable
    """The interpreter with the project installed (``exec`` and the fork server)."""
    log_dir: str = "results/fabric/logs"
    """``<switch>.log`` per switch (``--log-console`` output)."""
    pcap_dir: str | None = None
    """Write ``<ifname>_in.pcap`` / ``<ifname>_out.pcap`` per port here (None: no capture)."""
    log_level: str = "info"
    link_mbps: float = 100.0
    """Egress queue drain rate of every port: the emulated link capacity."""
    queue_depth: int = 64
    """Egress queue capacity in packets."""
    queue_burst_us: float | None = None
    """tf only: how far ahead of its exact schedule a rate-limited port may send (``tf-switch
    --queue-burst-us``: a token bucket this deep); None: the switch's default."""
    bmv2_binary: str = BMV2_BINARY

    def validate(self) -> None:
        if self.target not in TARGETS:
            raise FabricNetError(f"unknown target '{self.target}': use one of {', '.join(TARGETS)}")
        if self.launch not in LAUNCH_MODES:
            raise FabricNetError(
                f"unknown launch mode '{self.launch}': use one of {', '.join(LAUNCH_MODES)}"
            )
        if self.queue_burst_us is not None:
            if self.target != "tf":
                raise FabricNetError("queue_burst_us is a tf-switch option (TARGET=tf)")
            if not 0 <= self.queue_burst_us <= QUEUE_BURST_MAX_US:
                raise FabricNetError(f"queue_burst_us must be 0..{QUEUE_BURST_MAX_US} (us)")
        if self.target == "bmv2" and shutil.which(self.bmv2_binary) is None:
            raise FabricNetError(
                f"TARGET=bmv2 needs BMv2's {self.bmv2_binary} on PATH, and it "
                "is not there: install behavioral-model (p4lang/behavioral-model) "
                "with its gRPC server, or use TARGET=tf (tailfabric's own "
                "tf-switch)"
            )
        if self.link_mbps <= 0 or self.queue_depth < 1:
            raise FabricNetError("link_mbps and queue_depth must be positive")


class FabricIntf(Intf):  # type: ignore[misc]
    """An interface that leaves its configuration to the node's batch (no ``ifconfig`` calls)."""

    def config(self, **params: Any) -> dict[str, Any]:
        return {}


class FabricHost(Host):  # type: ignore[misc]
    """A host with one NIC per plane, configured by :func:`configure_hosts` (not by Mininet)."""

    def config(self, **params: Any) -> dict[str, Any]:
        return {}


class P4Switch(Switch):  # type: ignore[misc]
    """A P4 switch process in the root namespace, ports = this node's Mininet interfaces.

    The process starts with no program and serves P4Runtime on ``127.0.0.1:<grpc_port>`` and
    its runtime CLI on ``thrift_port``; :meth:`stop` ends it (idempotent).
    """

    target: ClassVar[str] = ""

    def __init__(
        self,
        name: str,
        *,
        model: SwitchModel,
        options: SwitchOptions,
        launcher: SwitchLauncher | None = None,
        **params: Any,
    ) -> None:
        self.model = model
        self.options = options
        self.launcher = launcher
        self.process: subprocess.Popen[bytes] | None = None
        self.switch_pid: int | None = None
        params["inNamespace"] = False
        super().__init__(name, dpid=f"{model.device_id:016x}", **params)

    # -- command line -------------------------------------------------------------------

    @property
    def grpc_address(self) -> str:
        return f"127.0.0.1:{self.model.grpc_port}"

    @property
    def log_path(self) -> str:
        return str(Path(self.options.log_dir) / f"{self.name}.log")

    def argv(self) -> list[str]:
        """The switch's arguments (without the program name): :func:`switch_argv`."""
        return switch_argv(self.model, self.options)

    # -- lifecycle ----------------------------------------------------------------------

    def start(self, controllers: Sequence[Any] = ()) -> None:
        """Start the process without waiting for it (see :func:`wait_switches_ready`)."""
        raise NotImplementedError

    def configure_queues(self) -> None:
        """Set the link rate and queue depth after start, where the command line cannot."""

    def alive(self) -> bool:
        pid = self.switch_pid
        if pid is None:
            return False
        if self.process is not None:
            return self.process.poll() is None
        return process_alive(pid)

    def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803 - Mininet's signature
        pid, self.switch_pid = self.switch_pid, None
        if pid is not None:
            _terminate(pid, self.process)
        self.process = None
        super().stop(deleteIntfs)

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = Path(self.log_path).read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:]) or "(empty log)"


class TfSwitch(P4Switch):
    """tailfabric's ``tf-switch`` (module ``switch.daemon``), link capacity = its queue rate."""

    target = "tf"

    def start(self, controllers: Sequence[Any] = ()) -> None:
        if self.launcher is not None and self.options.launch == "fork":
            self.launcher.request(self.name, self.argv(), self.log_path)
        else:
            cmd = [self.options.python, "-m", "switch.daemon", *self.argv()]
            self.process = exec_switch(cmd, self.log_path)
            self.switch_pid = self.process.pid


class Bmv2Switch(P4Switch):
    """BMv2's ``simple_switch_grpc``; queue rate (packets/s) and depth set over its CLI."""

    target = "bmv2"

    def start(self, controllers: Sequence[Any] = ()) -> None:
        self.process = exec_switch([self.options.bmv2_binary, *self.argv()], self.log_path)
        self.switch_pid = self.process.pid

    def configure_queues(self) -> None:
        o = self.options
        pps = max(1, round(o.link_mbps * 1e6 / (8 * ASSUMED_PACKET_BYTES)))
        cli = shutil.which(BMV2_CLI)
        if cli is None:
            raise FabricNetError(
                f"{BMV2_CLI} is not on PATH: cannot set the queue rate of {self.name}"
            )
        script = f"set_queue_rate {pps}\nset_queue_depth {o.queue_depth}\n"
        proc = subprocess.run(
            [cli, "--thrift-port", str(self.model.thrift_port)],
            input=script,
            capture_output=True,
            text=True,
            timeout=30,
        )
        # simple_switch_CLI reports a failed command on stdout and still exits 0
        if proc.returncode != 0 or "error" in proc.stdout.lower():
            raise FabricNetError(
                f"{self.name}: {BMV2_CLI} failed: {(proc.stderr or proc.stdout).strip()}"
            )


SWITCH_CLASSES: dict[str, type[P4Switch]] = {"tf": TfSwitch, "bmv2": Bmv2Switch}


def switch_argv(model: SwitchModel, options: SwitchOptions) -> list[str]:
    """A switch's command line after the program name (simple_switch_grpc's syntax).

    Both targets: ``-i PORT@IFNAME`` per port, device id, runtime CLI port, console log,
    optional pcap directory, ``--no-p4``, then the target options ``--grpc-server-addr`` and
    ``--cpu-port``. tf-switch also gets the queue rate (the emulated link capacity) and depth;
    BMv2 gets them over its CLI (:meth:`Bmv2Switch.configure_queues`).
    """
    o = options
    args: list[str] = []
    for port in sorted(model.ports):
        args += ["-i", f"{port}@{port_ifname(model.name, port)}"]
    args += [
        "--device-id",
        str(model.device_id),
        "--thrift-port",
        str(model.thrift_port),
        "--log-console",
    ]
    if o.pcap_dir:
        args += ["--pcap", o.pcap_dir]
    if o.target == "tf":
        args += [
            "-L",
            o.log_level,
            "--queue-rate",
            f"{o.link_mbps:g}mbps",
            "--queue-depth",
            str(o.queue_depth),
        ]
        if o.queue_burst_us is not None:
            args += ["--queue-burst-us", f"{o.queue_burst_us:g}"]
    else:
        args += ["--log-level", o.log_level]
    return [
        *args,
        "--no-p4",
        "--",
        "--grpc-server-addr",
        f"127.0.0.1:{model.grpc_port}",
        "--cpu-port",
        str(CPU_PORT),
    ]


def _terminate(pid: int, process: subprocess.Popen[bytes] | None, grace_s: float = 2.0) -> None:
    terminate_all([(pid, process)], grace_s)


def terminate_all(
    procs: Sequence[tuple[int, subprocess.Popen[bytes] | None]], grace_s: float = 2.0
) -> None:
    """SIGTERM every process at once, wait up to ``grace_s`` for all, then SIGKILL the rest."""
    for pid, _proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s

    def alive(pid: int, proc: subprocess.Popen[bytes] | None) -> bool:
        return proc.poll() is None if proc is not None else process_alive(pid)

    left = list(procs)
    while left and time.monotonic() < deadline:
        left = [(pid, proc) for pid, proc in left if alive(pid, proc)]
        if left:
            time.sleep(0.01)
    for pid, proc in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        if proc is not None:
            proc.wait()


def check_names(fabric: Fabric) -> None:
    """Every interface name fits Linux's limit (15 characters)."""
    for s in fabric.switches:
        for port in s.ports:
            name = port_ifname(s.name, port)
            if len(name) >= IFNAMSIZ:
                raise FabricNetError(
                    f"interface name {name} is longer than {IFNAMSIZ - 1} characters"
                )


def port_mac(switch: SwitchModel, port: int) -> str:
    """A locally administered MAC for one switch port: ``06:<device id>:<port>``."""
    d = switch.device_id
    return f"06:{d >> 16 & 0xFF:02x}:{d >> 8 & 0xFF:02x}:{d & 0xFF:02x}:{port >> 8 & 0xFF:02x}:{port & 0xFF:02x}"


@dataclass
class MininetFabric:
    """A built (not yet started) Mininet network of a fabric and its typed node lists."""

    net: Mininet
    hosts: list[FabricHost] = field(default_factory=list)
    switches: list[P4Switch] = field(default_factory=list)


def build_mininet(
    fabric: Fabric, options: SwitchOptions, launcher: SwitchLauncher | None = None
) -> MininetFabric:
    """Hosts, switches (not started) and veth links of ``fabric`` in a new Mininet.

    Raises:
        FabricNetError: bad options (unknown target, BMv2 missing) or an interface name too long.
    """
    options.validate()
    check_names(fabric)
    cls = SWITCH_CLASSES[options.target]
    net = Mininet(
        topo=None,
        controller=None,
        host=FabricHost,
        switch=cls,
        intf=FabricIntf,
        build=False,
        autoSetMacs=False,
        autoStaticArp=False,
        cleanup=False,
    )
    out = MininetFabric(net)
    try:
        for h in fabric.hosts:
            out.hosts.append(net.addHost(h.name, cls=FabricHost, ip=None))
        for s in fabric.switches:
            out.switches.append(
                net.addSwitch(s.name, cls=cls, model=s, options=options, launcher=launcher)
            )
        for h in fabric.hosts:
            for nic in h.nics:
                leaf = fabric.switch(nic.leaf)
                net.addLink(
                    h.name,
                    nic.leaf,
                    port1=nic.plane,
                    port2=nic.leaf_port,
                    intfName1=nic.ifname,
                    intfName2=port_ifname(nic.leaf, nic.leaf_port),
                    addr1=nic.mac,
                    addr2=port_mac(leaf, nic.leaf_port),
                )
        for link in fabric.links:
            if link.a_port == 0:
                continue  # host links are above
            a, b = fabric.switch(link.a), fabric.switch(link.b)
            net.addLink(
                link.a,
                link.b,
                port1=link.a_port,
                port2=link.b_port,
                intfName1=port_ifname(link.a, link.a_port),
                intfName2=port_ifname(link.b, link.b_port),
                addr1=port_mac(a, link.a_port),
                addr2=port_mac(b, link.b_port),
            )
        net.build()
    except BaseException:
        teardown(out)
        raise
    return out


def switch_ifnames(fabric: Fabric) -> list[str]:
    return [port_ifname(s.name, port) for s in fabric.switches for port in sorted(s.ports)]


def configure_switch_ports(fabric: Fabric) -> None:
    """Root-namespace ends: IPv6 off (no NDP/MLD of the kernel's own), offloads off, up.

    Raises:
        FabricNetError: a port is missing or ``ip`` failed (every failure, one message).
    """
    names = switch_ifnames(fabric)
    for name in names:
        with contextlib.suppress(OSError):
            Path(f"/proc/sys/net/ipv6/conf/{name}/disable_ipv6").write_text("1")
    errors = []
    for name in names:
        try:
            disable_offloads(name)
        except OSError as e:
            errors.append(f"{name}: {e.strerror or e}")
    batch = "".join(f"link set dev {n} up\n" for n in names)
    proc = subprocess.run(["ip", "-batch", "-"], input=batch, capture_output=True, text=True)
    if proc.returncode != 0:
        errors.append(proc.stderr.strip())
    if errors:
        raise FabricNetError("configuring switch ports failed: " + "; ".join(errors))


def disable_host_offloads(host: FabricHost, ifnames: Iterable[str], gro: bool = False) -> None:
    """Offloads off on ``ifnames`` inside ``host``'s namespace, from a thread that joins it;
    with ``gro``, receive GRO back on (a host NIC's NAPI receive, see :data:`HOST_NAPI_MODES`).

    Raises:
        OSError: the namespace or an interface is missing, or GRO could not be turned on.
        NetnsError: ``setns`` failed.
    """
    names = list(ifnames)

    def disable_all() -> None:
        for name in names:
            disable_offloads(name)
            if gro and not enable_gro(name):
                raise OSError(f"{name}: GRO cannot be turned on")

    netns = netns_of_pid(int(host.pid))
    call_in_thread(lambda: join_netns(netns), disable_all, f"offloads-{host.name}")


def configure_hosts(
    fabric: Fabric, hosts: Iterable[FabricHost], script_dir: str, host_napi: str = "auto"
) -> None:
    """Turn every host NIC's offloads off (:func:`disable_host_offloads`; GRO back on unless
    ``host_napi`` is ``off``), then run every host's :func:`topologies.hostconf.shell_script`
    in its namespace, in parallel (threaded NAPI when ``host_napi`` is ``threaded`` or
    ``auto``; ``auto`` falls back to ``gro`` with a warning where the kernel gives no thread).

    Raises:
        FabricNetError: a host could not be configured (every failure, one message), or
            ``host_napi`` is not one of :data:`HOST_NAPI_MODES`.
    """
    if host_napi not in HOST_NAPI_MODES:
        raise FabricNetError(
            f"host NAPI mode {host_napi!r}: expected one of {', '.join(HOST_NAPI_MODES)}"
        )
    configs = [(h, hostconf.host_config(fabric, h.name)) for h in hosts]
    errors = []
    for h, cfg in configs:
        try:
            disable_host_offloads(h, cfg.ifnames, gro=host_napi != "off")
        except (OSError, NetnsError) as e:
            errors.append(f"{h.name}: offloads: {e}")
    if errors:
        raise FabricNetError("configuring hosts failed:\n" + "\n".join(errors))
    Path(script_dir).mkdir(parents=True, exist_ok=True)
    for h, cfg in configs:
        path = Path(script_dir) / f"{h.name}.sh"
        threaded = host_napi in ("threaded", "auto")
        path.write_text(hostconf.shell_script(cfg, threaded_napi=threaded))
        h.sendCmd(f"sh {path} 2>&1; echo tf-status=$?")
    for h, _cfg in configs:
        out = h.waitOutput()
        status = out.strip().rsplit("tf-status=", 1)
        if len(status) != 2 or status[1].strip() != "0":
            errors.append(f"{h.name}: {out.strip()}")
    if errors:
        raise FabricNetError("configuring hosts failed:\n" + "\n".join(errors))
    if host_napi in ("threaded", "auto"):
        nics = [name for _h, cfg in configs for name in cfg.ifnames]
        missing = set(nics) - set(prioritise_napi_threads(nics))
        if missing and host_napi == "auto":
            log.warning(
                "no threaded NAPI for %s (Linux 5.12 or later): those host NICs receive in "
                "softirq (host_napi 'gro')",
                ", ".join(sorted(missing)),
            )
        elif missing:
            raise FabricNetError(
                "configuring hosts failed: no NAPI thread for "
                + ", ".join(sorted(missing))
                + " (threaded NAPI needs Linux 5.12 or later; host_napi 'gro' or 'off' does not)"
            )


NAPI_PRIORITY = 50  # SCHED_FIFO, as the kernel's threaded interrupt handlers get


def prioritise_napi_threads(ifnames: Iterable[str]) -> list[str]:
    """Give the threaded-NAPI kernel threads of ``ifnames`` (``napi/<ifname>-<id>``)
    ``SCHED_FIFO`` priority :data:`NAPI_PRIORITY`; return the interfaces that have one.

    A NIC's receive runs before ordinary tasks on a real host (interrupt, softirq). On the
    default policy a host NIC's NAPI thread waits its turn among the busy switch processes
    for milliseconds, and its 256-frame veth ring overflows at a fraction of the rate the
    leaf sends. The real-time scheduler's throttling (``sched_rt_runtime_us``) still bounds it.

    Raises:
        OSError: a thread's policy could not be set.
    """
    wanted = {f"napi/{name}-": name for name in ifnames}
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            comm = (d / "comm").read_text().strip()
        except OSError:
            continue  # gone
        for prefix, name in wanted.items():
            if comm.startswith(prefix) or (len(comm) == 15 and prefix.startswith(comm)):
                os.sched_setscheduler(int(d.name), os.SCHED_FIFO, os.sched_param(NAPI_PRIORITY))
                found.append(name)
    return found


RESERVED_PORTS = Path("/proc/sys/net/ipv4/ip_local_reserved_ports")


def reserve_ports(first: int, last: int, path: Path = RESERVED_PORTS) -> str | None:
    """Keep the kernel from handing ``first``..``last`` out as ephemeral ports: the switches'
    gRPC ports sit inside Linux's ephemeral range (32768-60999), and a client socket that
    happened to get one made that switch fail to bind ("Address already in use"). Binding
    them explicitly still works.

    Returns:
        the entry added (for :func:`release_ports`), or None when the range was already
        listed or the setting cannot be written (not root, no such file).
    """
    entry = f"{first}-{last}"
    try:
        listed = [e for e in path.read_text().strip().split(",") if e]
        if entry in listed:
            return None
        path.write_text(",".join([*listed, entry]))
    except OSError:
        return None
    return entry


def release_ports(entry: str, path: Path = RESERVED_PORTS) -> None:
    """Remove the entry :func:`reserve_ports` added (and nothing else)."""
    with contextlib.suppress(OSError):
        listed = [e for e in path.read_text().strip().split(",") if e]
        path.write_text(",".join(e for e in listed if e != entry) or "\n")


def wait_switches_ready(switches: Sequence[P4Switch], timeout_s: float = 30.0) -> None:
    """Block until every switch serves gRPC; a switch that died or stays silent is an error."""
    import socket

    pending = {s.name: s for s in switches}
    deadline = time.monotonic() + timeout_s
    while pending:
        for name, s in list(pending.items()):
            if not s.alive():
                raise FabricNetError(
                    f"switch {name} exited while starting; its log ({s.log_path}):\n{s.log_tail()}"
                )
            try:
                with socket.create_connection(("127.0.0.1", s.model.grpc_port), timeout=0.05):
                    del pending[name]
            except OSError:
                pass
        if not pending:
            break
        if time.monotonic() > deadline:
            s = next(iter(pending.values()))
            raise FabricNetError(
                f"switches {', '.join(pending)} did not serve gRPC within "
                f"{timeout_s:g} s; log of {s.name}:\n{s.log_tail()}"
            )
        time.sleep(0.01)


def teardown(mf: MininetFabric) -> None:
    """Stop switches, hosts and links quickly and completely (idempotent).

    Switch processes first (they hold the root-side ports), then host shells (their namespaces
    and every veth with an end inside go with them), then the remaining switch-to-switch veths
    in one ``ip -batch``, then the switches' Mininet shells.
    """
    running = [(s.switch_pid, s.process) for s in mf.switches if s.switch_pid is not None]
    terminate_all(running)
    for s in mf.switches:
        s.switch_pid, s.process = None, None
    for h in mf.hosts:
        with contextlib.suppress(Exception):
            h.terminate()
    names = [intf.name for s in mf.switches for intf in s.intfList() if intf.name != "lo"]
    existing = [n for n in names if Path(f"/sys/class/net/{n}").exists()]
    if existing:
        batch = "".join(f"link del dev {n}\n" for n in existing)
        subprocess.run(["ip", "-force", "-batch", "-"], input=batch, capture_output=True, text=True)
    for s in mf.switches:
        with contextlib.suppress(Exception):
            s.terminate()

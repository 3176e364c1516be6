"""UDP throughput, loss, latency and switch CPU through an emulated fabric (``make bench-fabric-throughput``).

A fabric is brought up for the run (default: 2 planes x 2 leaves x 2 spines x 2 hosts per leaf,
``--planes 4`` for the 4-plane one) with links so fast that they never limit (the switches'
egress drain rate, ``--link-mbps``, 10 Gbit/s by default). Traffic comes from ``udpblast``
(``experiments/udpblast.c``, compiled into ``build/`` on first use): paced UDP datagrams with a
sequence number and a send timestamp, received with the kernel's receive timestamps.

Modes (``--modes``):

* ``one``: one flow from h1 to the first host on another leaf, on plane 0 through spine 0
  (leaf - spine - leaf: three switches);
* ``all``: every host sends at once to the host half the host list away (always on another
  leaf), host i on plane i mod planes through spine (i div planes) mod spines, the offered
  rate split evenly.

For each mode and payload size (``--sizes``, 64 and 1,400 bytes) the offered rate climbs the
``--rates`` ladder (packets/s, all senders together) until the fabric is overloaded: loss above
50 % at an offered rate of at least ``--overload`` (10) times the best delivered rate so far,
so the rows also show whether delivery holds up under overload (no receive livelock).

Per row: offered and delivered packets/s, delivered Mbit/s (UDP payload), loss, one-way
latency p50/p99 in microseconds (``all``: the mean of the flows' p50 and the largest p99), the
switches' CPU (user + system of every switch process over the step, from ``/proc``) in cores
and in microseconds per delivered packet. ``--idle S`` adds an ``idle`` row: the switches'
CPU with no traffic at all. ``--kernel`` builds the same topology from Linux routers instead
(:mod:`experiments.kernel_fabric`: seg6local End with next-csid on every leaf and spine): the
physical reference; its forwarding runs in softirq context, so the CPU columns stay empty.
``--target bmv2`` runs BMv2's ``simple_switch_grpc`` as the switches (on PATH).
``--sender-priority low|idle`` runs the senders at ``nice 19`` or ``SCHED_IDLE`` (for every
network kind alike): in a physical network the load generator is another machine, here it
shares the cores with the switches it overloads. ``--sender-cpus N`` goes further: the senders
run on the last N CPUs and everything else (switches, receivers, the host NICs' NAPI threads) on
the others, as if the generator were another machine; the first switch's receive (into its
ring, or the drop when the ring is full) runs on the sending CPU, as a NIC's DMA would. On a
2-core machine the fabric then has one core. ``--receivers-with-senders`` moves the receivers
and the NAPI threads to the senders' CPUs as well (the fabric's CPUs then run switches only). ``--sender xdp`` makes the datagrams in the kernel
(:data:`SENDERS`: ``udpblast xdp``, a BPF program in BPF_PROG_RUN's live-frame mode), fast
enough to offer 10x the fabric's peak from one core. ``--per-switch`` prints, for every step, each
busy switch's CPU share and the packets its interfaces took in and sent out (the kernel's
counters), the UDP receive errors of the receiving hosts, the CPU of the hosts' NAPI threads and
the switch ports' transmit drops: where an overloaded fabric drops. ``--host-napi`` chooses how
the hosts' NICs receive (:data:`topologies.emulation.mnfabric.HOST_NAPI_MODES`; ``threaded``,
the fabric's default: a real-time NAPI thread per NIC, so a last leaf no longer pays its
receiving host's stack; ``off``: as before, inside the leaf's send).

Results: ``--out`` (CSV, header row, units in the column names) and a plot next to it (PNG).
Run it as root, under the fabric lock (the make target takes it).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import itertools
import json
import math
import os
import pathlib
import re
import shutil
import struct
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, fields

from switch import bench_net
from topologies.model import Fabric, FabricSpec, Nic, build_fabric, port_ifname

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
BLAST_PORT = 5999
DEFAULT_RATES = (1000, 2000, 5000, 10000, 20000, 40000, 80000, 160000)
DEFAULT_SIZES = (64, 1400)
DEFAULT_LINK_MBPS = 10000.0
STEP_S = 3.0
DRAIN_S = 1.0
LOSS_OVERLOAD = 0.5
CLK_TCK = os.sysconf("SC_CLK_TCK")


class BenchError(RuntimeError):
    """The benchmark cannot run (the message says why)."""


@dataclass(frozen=True)
class Row:
    network: str  # tf, bmv2 or kernel
    planes: int
    mode: str  # one, all, idle
    flows: int
    payload_bytes: int
    offered_pps: float
    sent_pps: float
    delivered_pps: float
    delivered_mbps: float
    loss: float
    p50_us: float
    p99_us: float
    switch_cpu_cores: float  # CPU seconds of all switches per second of the step
    switch_cpu_us_per_pkt: float  # CPU microseconds of all switches per delivered packet
    duration_s: float
    # CPU seconds per second of the host NICs' threaded-NAPI receive (the receiving hosts'
    # kernel work, in no switch's column; nan: the NICs have no NAPI threads)
    napi_cpu_cores: float = math.nan
    sender: str = "udp"  # --sender: udp (a socket) or xdp (made in the kernel)
    sender_cpus: int = 0  # --sender-cpus: CPUs of the senders' own (0: shared with the fabric)
    receivers_on: str = "fabric"  # or "senders" (--receivers-with-senders)


CSV_FIELDS = [f.name for f in fields(Row)]


@dataclass(frozen=True)
class Flow:
    src: str  # host name
    dst: str
    address: str  # the path's destination address
    src_address: str  # the sending NIC's address
    hops: tuple[str, ...]


@dataclass
class Network:
    """What the benchmark needs of a running fabric: where hosts and switches are."""

    kind: str
    fabric: Fabric
    enter: dict[str, list[str]]  # per host: the command prefix that runs a program inside it
    switch_pids: dict[str, int]  # empty: forwarding not done by processes (kernel)


# -- udpblast -------------------------------------------------------------------------------


def build_blaster(build_dir: pathlib.Path) -> pathlib.Path:
    """``build/udpblast`` from its C source, rebuilt when the source is newer
    (:func:`switch.bench_net.build_blaster`).

    Raises:
        BenchError: no C compiler, or the source did not compile.
    """
    try:
        return bench_net.build_blaster(build_dir)
    except RuntimeError as e:
        raise BenchError(str(e)) from None


def _enter_pid(pid: int) -> list[str]:
    """The command prefix that runs a program in the namespaces of process ``pid``."""
    mnexec = shutil.which("mnexec")
    return [mnexec, "-a", str(pid)] if mnexec else ["nsenter", "-t", str(pid), "-n", "--"]


def _in_host(enter: list[str], argv: Sequence[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*enter, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _result(proc: subprocess.Popen[str], timeout_s: float, what: str) -> dict[str, float]:
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise BenchError(f"{what} did not finish within {timeout_s:g} s") from None
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if proc.returncode or not lines:
        raise BenchError(f"{what} failed (exit {proc.returncode}): {err.strip()[-300:]}")
    doc: dict[str, float] = json.loads(lines[-1])
    return doc


# -- measurements --------------------------------------------------------------------------


def cpu_seconds(pids: Sequence[int]) -> float:
    """User + system CPU seconds of these processes (all their threads) so far."""
    total = 0
    for pid in pids:
        try:
            parts = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(parts[11]) + int(parts[12])  # utime, stime (fields 14 and 15)
    return total / CLK_TCK


def switch_snapshot(pids: dict[str, int]) -> dict[str, tuple[float, int, int]]:
    """Per switch: CPU seconds and the packets its interfaces received and sent (the kernel's
    counters of ``/sys/class/net/SWITCH-eth*``, in the root namespace; frames that the switch's
    full receive ring dropped are among those received, not among those sent)."""
    snap = {}
    for name, pid in pids.items():
        rx = tx = 0
        for dev in pathlib.Path("/sys/class/net").glob(f"{name}-eth*"):
            with contextlib.suppress(OSError, ValueError):
                rx += int((dev / "statistics" / "rx_packets").read_text())
                tx += int((dev / "statistics" / "tx_packets").read_text())
        snap[name] = (cpu_seconds([pid]), rx, tx)
    return snap


HOST_NAPI_COMM = re.compile(r"^napi/h\d+-eth")


def napi_threads() -> dict[str, int]:
    """The fabric host NICs' threaded-NAPI threads (``napi/h<N>-eth<p>-<id>``) by name: the
    hosts' receive when the fabric runs with ``--host-napi threaded`` (or ``auto``)."""
    out = {}
    for d in pathlib.Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError):
                comm = (d / "comm").read_text().strip()
                if HOST_NAPI_COMM.match(comm):
                    out[comm] = int(d.name)
    return out


def _cores(pids: Sequence[int], cpu0: float, seconds: float) -> float:
    return round((cpu_seconds(pids) - cpu0) / seconds, 3) if pids else math.nan


def host_udp_drops(enter: list[str]) -> int:
    """UDP datagrams a host's kernel dropped on receive (its sockets' buffers full and other
    receive errors: ``Udp6InErrors`` + ``UdpInErrors`` of its namespace); -1 if unreadable."""
    total = 0
    for path, key in (("/proc/net/snmp6", "Udp6InErrors"), ("/proc/net/snmp", "Udp:")):
        try:
            text = subprocess.run(
                [*enter, "cat", path], capture_output=True, text=True, timeout=5, check=True
            ).stdout
        except (OSError, subprocess.SubprocessError):
            return -1
        if key == "Udp:":  # two lines: the names, then the values
            rows = [line.split() for line in text.splitlines() if line.startswith("Udp:")]
            if len(rows) == 2 and "InErrors" in rows[0]:
                total += int(rows[1][rows[0].index("InErrors")])
        else:
            total += sum(
                int(v) for k, v in (line.split() for line in text.splitlines()) if k == key
            )
    return total


def tx_dropped(pids: dict[str, int]) -> int:
    """Frames the switches' ports could not hand to their veth peer (``tx_dropped``: e.g. a
    host NIC's full NAPI ring)."""
    total = 0
    for name in pids:
        for dev in pathlib.Path("/sys/class/net").glob(f"{name}-eth*"):
            with contextlib.suppress(OSError, ValueError):
                total += int((dev / "statistics" / "tx_dropped").read_text())
    return total


def per_switch_lines(
    before: dict[str, tuple[float, int, int]],
    after: dict[str, tuple[float, int, int]],
    secs: float,
    send_secs: float | None = None,
) -> list[str]:
    """One line per switch that carried traffic: CPU share over ``secs``, packets in and out
    per second of sending (``send_secs``, the rows' time base; default ``secs``), and the share
    of what came in that did not go out (dropped at its receive ring, mostly)."""
    lines = []
    per = send_secs or secs
    for name in sorted(after):
        cpu = (after[name][0] - before[name][0]) / secs
        rx = (after[name][1] - before[name][1]) / per
        tx = (after[name][2] - before[name][2]) / per
        if rx < 100:
            continue
        lines.append(
            f"    {name}: cpu {cpu:4.2f} cores  in {rx:9.0f}/s  out {tx:9.0f}/s"
            f"  not forwarded {max(0.0, 1 - tx / rx) * 100:5.1f} %"
        )
    return lines


def flows_for(fabric: Fabric, mode: str) -> list[Flow]:
    """The flows of ``mode`` (see the module docstring)."""
    hosts = [h.name for h in fabric.hosts]
    if mode == "one":
        src = hosts[0]
        leaf = fabric.host(src).leaf_index
        dst = next(h.name for h in fabric.hosts if h.leaf_index != leaf)
        pairs = [(src, dst, 0)]
    elif mode == "all":
        n = len(hosts)
        pairs = [(hosts[i], hosts[(i + n // 2) % n], i) for i in range(n)]
    else:
        raise BenchError(f"unknown mode {mode!r}: use one or all")
    flows = []
    planes, spines = fabric.spec.planes, fabric.spec.spines
    for src, dst, k in pairs:
        paths = fabric.paths(src, dst)  # plane-major
        p = paths[(k % planes) * spines + (k // planes) % spines]
        nic = fabric.host(src).nics[p.plane].address
        flows.append(Flow(src, dst, p.address, nic, p.hops))
    return flows


_runs = itertools.count(1)


SENDER_PRIORITIES = {
    "normal": [],
    "low": ["nice", "-n", "19"],
    "idle": ["chrt", "--idle", "0"],
}
"""``--sender-priority``: how the senders run (the receivers always at normal priority).
In a physical network the load generator is another machine; here it shares the two cores
with the switches, and at 10x overload its own kernel work (sending, and delivering into the
first switch's full ring) competes with the switches it overloads. ``low``: ``nice 19``;
``idle``: ``SCHED_IDLE`` (it runs only when a core has nothing else to do; under overload on
two cores it can starve until its step times out). Measured on 2026-12-02: neither lifts the
delivered rate at 10x the peak here."""
RECEIVER_PRIORITIES = {
    "normal": [],
    "high": ["nice", "-n", "-10"],
}
"""``--receiver-priority``: how the receivers run. The receiving program, too, is another
machine in a physical network; here, once the fabric delivers ~120k packets/s under overload,
a receiver that shares the cores with the busy switches and the sender can fall behind by more
than its socket buffer (``--per-switch`` shows its UDP receive errors) and the row then
measures the receiver, not the fabric. ``high``: ``nice -10``."""


SENDERS = ("udp", "xdp")
"""``--sender``: how the load is made. ``udp``: ``udpblast send``, datagrams through the sending
host's IPv6/UDP stack (a socket, ``sendmmsg``), ~1.3 M/s on one core here. ``xdp``: ``udpblast
xdp``, the same datagrams (header, sequence numbers, send times) made and sent by the kernel
from a BPF program (BPF_PROG_RUN's live-frame mode), ~5 M/s on one core: what 10x the fabric's
peak takes. It keeps its CPU busy at any rate, so it needs ``--sender-cpus``, and it needs the
first leaf's port to receive through NAPI: GRO is turned on there for its steps (no UDP is
merged) and off again after."""


def blast_frame(
    src_mac: str, dst_mac: str, src: str, dst: str, size: int, sender_id: int, run: int
) -> bytes:
    """An Ethernet/IPv6/UDP frame as ``udpblast send`` would have its host's stack make it (hop
    limit 64, UDP checksum zero as ``UDP_NO_CHECK6_TX``, both ports :data:`BLAST_PORT`), the
    payload's header with sequence number and send time zero: what ``udpblast xdp`` sends (its
    BPF program writes those two into every copy)."""
    payload = (b"TFUB" + struct.pack("!BBH", 1, sender_id, run) + bytes(16)).ljust(size, b"\0")
    return bench_net.ipv6_udp_frame(
        dst,
        src_ip=src,
        dst_mac=dst_mac,
        src_mac=src_mac,
        payload=payload,
        ports=(BLAST_PORT, BLAST_PORT),
        checksum=False,
    )


def _sending_nic(fabric: Fabric, flow: Flow) -> Nic:
    return next(n for n in fabric.host(flow.src).nics if n.address == flow.src_address)


def xdp_frame(fabric: Fabric, flow: Flow, size: int, sender_id: int, run: int) -> bytes:
    """:func:`blast_frame` for ``flow``: from its NIC's MAC to its leaf's (the host's static
    neighbour), to the path's address."""
    nic = _sending_nic(fabric, flow)
    leaf_mac = fabric.switch(nic.leaf).mac
    return blast_frame(nic.mac, leaf_mac, flow.src_address, flow.address, size, sender_id, run)


def first_port(fabric: Fabric, flow: Flow) -> tuple[str, str]:
    """The sending NIC of ``flow`` and the first leaf's port it is cabled to."""
    nic = _sending_nic(fabric, flow)
    return nic.ifname, port_ifname(nic.leaf, nic.leaf_port)


@contextlib.contextmanager
def napi_receive(ports: Sequence[str]) -> Iterator[None]:
    """GRO (so a NAPI context) on these switch ports for a while: ``udpblast xdp`` hands its
    frames to the veth peer's NAPI queue, which a port without one refuses."""
    from switch.device.offloads import disable_offloads, enable_gro

    try:
        for port in ports:
            if not enable_gro(port):
                raise BenchError(f"cannot turn GRO on for {port}: the xdp sender needs it")
        yield
    finally:
        for port in ports:
            with contextlib.suppress(OSError):
                disable_offloads(port)


XMIT_ERRORS = re.compile(r"^\s*tx_queue_\d+_xdp_xmit_errors:\s*(\d+)\s*$", re.M)


def xdp_xmit_errors(enter: list[str], nic: str) -> int:
    """Frames a host veth failed to hand to its peer from XDP (``ethtool -S``: the
    ``tx_queue_N_xdp_xmit_errors`` counters, summed; 0 where the driver has none)."""
    try:
        text = subprocess.run(
            [*enter, "ethtool", "-S", nic], capture_output=True, text=True, timeout=5, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(int(n) for n in XMIT_ERRORS.findall(text))


@dataclass(frozen=True)
class CpuSplit:
    """``--sender-cpus``: which CPUs run what. The switches always run on ``fabric``; the
    receivers and the host NICs' NAPI threads there too, or with the senders
    (``--receivers-with-senders``: in a physical test they are other machines as well)."""

    senders: frozenset[int]
    fabric: frozenset[int]
    receivers_with_senders: bool = False

    @property
    def receivers(self) -> frozenset[int]:
        return self.senders if self.receivers_with_senders else self.fabric


def cpu_split(sender_cpus: int, receivers_with_senders: bool = False) -> CpuSplit:
    """``--sender-cpus N``: the senders on the last ``N`` CPUs this process may use, the
    switches (and, unless ``receivers_with_senders``, the receivers and host NICs' NAPI threads)
    on the others.

    Raises:
        BenchError: ``N`` leaves no CPU for one side.
    """
    cpus = sorted(os.sched_getaffinity(0))
    if not 0 < sender_cpus < len(cpus):
        raise BenchError(
            f"--sender-cpus {sender_cpus}: this machine gives the benchmark {len(cpus)} CPUs; "
            f"the senders and the fabric need at least one each"
        )
    return CpuSplit(
        frozenset(cpus[-sender_cpus:]), frozenset(cpus[:-sender_cpus]), receivers_with_senders
    )


def pin(pids: Sequence[int], cpus: frozenset[int]) -> None:
    """Every thread of these processes onto ``cpus`` (threads started later inherit their
    creator's CPUs)."""
    for pid in pids:
        with contextlib.suppress(OSError):
            for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(int(task.name), cpus)


def _on_cpus(cpus: frozenset[int] | None) -> list[str]:
    """The command prefix that runs a program on ``cpus`` (none: wherever the kernel likes)."""
    return ["taskset", "-c", ",".join(map(str, sorted(cpus)))] if cpus else []


def run_step(
    net: Network,
    blast: pathlib.Path,
    flows: Sequence[Flow],
    pps: float,
    size: int,
    step_s: float,
    sender_priority: str = "normal",
    per_switch: bool = False,
    receiver_priority: str = "normal",
    split: CpuSplit | None = None,
    sender: str = "udp",
) -> Row:
    """Every flow at ``pps / len(flows)`` for ``step_s`` seconds; one row.

    Each step's datagrams carry a run number of their own: what an earlier, overloaded step
    left queued in the network is not counted (``stale``).
    """
    run = next(_runs) & 0xFFFF
    sender_cpus = split.senders if split else None
    receiver_cpus = split.receivers if split else None
    if split:
        pin(list(net.switch_pids.values()), split.fabric)
        pin(list(napi_threads().values()), split.receivers)
    receivers = {
        dst: _in_host(
            net.enter[dst],
            [
                *_on_cpus(receiver_cpus),
                *RECEIVER_PRIORITIES[receiver_priority],
                str(blast),
                "recv",
                str(BLAST_PORT),
                str(step_s + 4),
                str(run),
            ],
        )
        for dst in sorted({f.dst for f in flows})
    }
    try:
        for dst, proc in receivers.items():
            assert proc.stdout is not None
            if "ready" not in proc.stdout.readline():
                raise BenchError(f"the receiver on {dst} did not start: {proc.stderr}")
        pids = list(net.switch_pids.values())
        snap0 = switch_snapshot(net.switch_pids) if per_switch else {}
        napi = list(napi_threads().values())
        napi0 = cpu_seconds(napi)
        txdrop0 = tx_dropped(net.switch_pids) if per_switch else 0
        dst_drops0 = {d: host_udp_drops(net.enter[d]) for d in receivers} if per_switch else {}
        cpu0, t0 = cpu_seconds(pids), time.monotonic()
        per_flow = pps / len(flows)

        # xdp: per flow its sending NIC and the first leaf's port
        firsts = [first_port(net.fabric, f) for f in flows] if sender == "xdp" else []

        def sender_argv(i: int, f: Flow) -> list[str]:
            if sender == "xdp":
                frame = xdp_frame(net.fabric, f, size, i, run).hex()
                return ["xdp", firsts[i][0], frame, f"{per_flow:.3f}", str(step_s)]
            return [
                "send", f.address, str(BLAST_PORT), f"{per_flow:.3f}", str(step_s), str(size),
                str(i), f.src_address, str(run),
            ]  # fmt: skip

        def xmit_errors() -> int:
            return sum(xdp_xmit_errors(net.enter[f.src], nic) for f, (nic, _) in zip(flows, firsts))

        xmit_errors0 = xmit_errors()
        with napi_receive([port for _, port in firsts]):
            senders = [
                _in_host(
                    net.enter[f.src],
                    [
                        *_on_cpus(sender_cpus),
                        *SENDER_PRIORITIES[sender_priority],
                        str(blast),
                        *sender_argv(i, f),
                    ],
                )
                for i, f in enumerate(flows)
            ]
            sent = [
                _result(s, step_s + 10, f"the sender on {f.src}") for s, f in zip(senders, flows)
            ]
        time.sleep(DRAIN_S)
        cpu1, t1 = cpu_seconds(pids), time.monotonic()
        napi_cores = _cores(napi, napi0, t1 - t0)
        if per_switch:
            send_s = max(x["duration_s"] for x in sent)
            lines = per_switch_lines(snap0, switch_snapshot(net.switch_pids), t1 - t0, send_s)
            for d, n0 in dst_drops0.items():
                n1 = host_udp_drops(net.enter[d])
                if n0 >= 0 and n1 >= 0:
                    lines.append(f"    {d}: UDP receive errors (socket buffer full) {n1 - n0}")
            if napi:
                napi_cpu = (cpu_seconds(napi) - napi0) / (t1 - t0)
                lines.append(f"    host NICs' NAPI threads: cpu {napi_cpu:4.2f} cores")
            lines.append(
                f"    switch ports' transmit drops: {tx_dropped(net.switch_pids) - txdrop0}"
            )
            print("\n".join(lines), flush=True)
        for proc in receivers.values():
            proc.terminate()
        got = [_result(p, 10, f"the receiver on {d}") for d, p in receivers.items()]
    finally:
        for proc in receivers.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    # frames the xdp sender's veth could not queue at its peer never reached the first switch
    lost_at_nic = xmit_errors() - xmit_errors0
    n_sent = sum(s["sent"] for s in sent) - lost_at_nic
    n_got = sum(g["packets"] for g in got)
    took = max(s["duration_s"] for s in sent)
    delivered = n_got / took
    cpu = cpu1 - cpu0
    lat = [g for g in got if g["packets"]]
    return Row(
        network=net.kind,
        planes=net.fabric.spec.planes,
        mode="one" if len(flows) == 1 else "all",
        flows=len(flows),
        payload_bytes=size,
        offered_pps=pps,
        sent_pps=round(n_sent / took, 1),
        delivered_pps=round(delivered, 1),
        delivered_mbps=round(delivered * size * 8 / 1e6, 3),
        loss=round(1 - n_got / n_sent, 4) if n_sent else math.nan,
        p50_us=round(sum(g["p50_us"] for g in lat) / len(lat), 1) if lat else math.nan,
        p99_us=max((g["p99_us"] for g in lat), default=math.nan),
        switch_cpu_cores=round(cpu / (t1 - t0), 3) if pids else math.nan,
        switch_cpu_us_per_pkt=round(cpu / n_got * 1e6, 2) if pids and n_got else math.nan,
        duration_s=round(took, 3),
        napi_cpu_cores=napi_cores,
        sender=sender,
        sender_cpus=len(sender_cpus or ()),
        receivers_on="senders" if split and split.receivers_with_senders else "fabric",
    )


def idle_row(net: Network, seconds: float) -> Row:
    """The switches' CPU over ``seconds`` with no traffic."""
    pids = list(net.switch_pids.values())
    napi = list(napi_threads().values())
    cpu0, napi0, t0 = cpu_seconds(pids), cpu_seconds(napi), time.monotonic()
    time.sleep(seconds)
    cpu = cpu_seconds(pids) - cpu0
    took = time.monotonic() - t0
    nan = math.nan
    return Row(
        net.kind, net.fabric.spec.planes, "idle", 0, 0, 0, 0, 0, 0, nan, nan, nan,
        round(cpu / took, 4) if pids else nan, nan, round(took, 3), _cores(napi, napi0, took),
    )  # fmt: skip


def sweep(
    net: Network,
    blast: pathlib.Path,
    modes: Sequence[str],
    sizes: Sequence[int],
    rates: Sequence[float],
    *,
    step_s: float = STEP_S,
    overload: float = 10.0,
    sender_priority: str = "normal",
    per_switch: bool = False,
    receiver_priority: str = "normal",
    split: CpuSplit | None = None,
    sender: str = "udp",
) -> Iterator[Row]:
    """Rows of every mode and size, the offered rate stepped up to overload."""
    for mode in modes:
        flows = flows_for(net.fabric, mode)
        for size in sizes:
            best = 0.0
            for pps in rates:
                row = run_step(
                    net, blast, flows, pps, size, step_s, sender_priority, per_switch,
                    receiver_priority, split, sender,
                )  # fmt: skip
                yield row
                best = max(best, row.delivered_pps)
                if row.loss > LOSS_OVERLOAD and pps >= overload * best:
                    break


def _describe(row: Row) -> str:
    if row.mode == "idle":
        return f"{row.network} idle: switches use {row.switch_cpu_cores * 100:.2f} % of one core"
    return (
        f"{row.network} {row.mode:3s} {row.payload_bytes:5d} B  offered {row.offered_pps:9.0f}"
        f" sent {row.sent_pps:9.0f} delivered {row.delivered_pps:9.0f} pkt/s"
        f" ({row.delivered_mbps:8.2f} Mbit/s) loss {row.loss * 100:5.1f} %"
        f"  p50 {row.p50_us:8.1f} p99 {row.p99_us:9.1f} us"
        f"  cpu {row.switch_cpu_cores:5.2f} cores {row.switch_cpu_us_per_pkt:7.1f} us/pkt"
        + ("" if math.isnan(row.napi_cpu_cores) else f" napi {row.napi_cpu_cores:4.2f} cores")
        + (
            f"  [{row.sender}, {row.sender_cpus} sender CPUs, receivers on the {row.receivers_on}'s]"
            if row.sender_cpus
            else ""
        )
    )


# -- networks ------------------------------------------------------------------------------


@contextlib.contextmanager
def tf_network(
    spec: FabricSpec, target: str, results_dir: str, host_napi: str = "threaded"
) -> Iterator[Network]:
    """The emulated fabric of ``spec`` with P4 switches of ``target``, brought up and stopped."""
    from topologies.emulation.bringup import bring_up, busy_reason
    from topologies.emulation.fabricnet import FabricNetOptions
    from topologies.emulation.mnfabric import FabricNetError, SwitchOptions

    reason = busy_reason(results_dir)
    if reason:
        raise BenchError(reason)
    run_dir = pathlib.Path(results_dir) / "fabric"
    options = FabricNetOptions(
        switch=SwitchOptions(
            target=target,
            log_dir=str(run_dir / "logs"),
            link_mbps=spec.link_mbps,
            queue_depth=spec.queue_depth,
        ),
        results_dir=results_dir,
        host_napi=host_napi,
    )
    try:
        up = bring_up(build_fabric(spec), options)
    except FabricNetError as e:
        raise BenchError(f"fabric bring-up failed: {e}") from None
    try:
        if not up.verified:
            raise BenchError("some paths of the fabric do not work")
        mf = up.net.mf
        assert mf is not None
        switch_pids = {s.name: s.switch_pid for s in mf.switches if s.switch_pid is not None}
        enter = {h: _enter_pid(pid) for h, pid in up.net.host_pids().items()}
        yield Network(target, up.net.fabric, enter, switch_pids)
    finally:
        up.stop()


@contextlib.contextmanager
def kernel_network(spec: FabricSpec) -> Iterator[Network]:
    """The topology of ``spec`` from Linux routers (:mod:`experiments.kernel_fabric`)."""
    from experiments.kernel_fabric import KernelFabricError, kernel_fabric

    fabric = build_fabric(spec)
    try:
        with kernel_fabric(fabric) as ns:
            enter = {h.name: ["ip", "netns", "exec", ns[h.name]] for h in fabric.hosts}
            yield Network("kernel", fabric, enter, {})
    except KernelFabricError as e:
        raise BenchError(f"cannot build the Linux-router fabric: {e}") from None


def write_csv(rows: Sequence[Row], path: pathlib.Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        w.writeheader()
        for row in rows:
            w.writerow(asdict(row))


def read_csv(path: pathlib.Path) -> list[Row]:
    """The rows of a CSV :func:`write_csv` wrote (also before a column was added: its default)."""
    with path.open() as f:
        return [
            Row(**{k: (type_of(k))(v) for k, v in r.items() if v is not None})  # type: ignore[arg-type]
            for r in csv.DictReader(f)
        ]


def plot(csv_path: pathlib.Path, png_path: pathlib.Path) -> None:
    """Delivered vs offered packets/s and switch CPU per packet, from the CSV only."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    with csv_path.open() as f:
        rows = [r for r in csv.DictReader(f) if r["mode"] != "idle"]
    series: dict[tuple[str, str, str, str, str], list[dict[str, str]]] = {}
    for r in rows:
        cpus = r.get("sender_cpus") or "0"
        how = r.get("sender") or "udp"
        if cpus != "0":
            how += f", {cpus} sender CPU" + ("s" if cpus != "1" else "")
            if r.get("receivers_on") == "senders":
                how += " with the receivers"
        key = (r["network"], r["planes"], r["mode"], r["payload_bytes"], how)
        series.setdefault(key, []).append(r)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for (network, planes, mode, size, how), rs in sorted(series.items()):
        label = f"{network} {planes}p {mode} {size} B ({how})"
        x = [float(r["offered_pps"]) for r in rs]
        style = "--" if network == "kernel" else "-"
        ax1.plot(x, [float(r["delivered_pps"]) for r in rs], style, marker="o", label=label)
        cpu = [float(r["switch_cpu_us_per_pkt"]) for r in rs]
        if not all(math.isnan(c) for c in cpu):
            ax2.plot(x, cpu, marker="o", label=label)
    offered = [float(r["offered_pps"]) for r in rows] or [1.0]
    lo, top = min(offered), max(offered)
    ax1.plot([lo, top], [lo, top], color="grey", linestyle=":", label="loss-free")
    for ax in (ax1, ax2):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("offered packets/s (all senders)")
        ax.grid(True, which="both", alpha=0.3)
    ax1.set_ylabel("delivered packets/s")
    ax2.set_ylabel("switch CPU µs per delivered packet")
    ax1.legend(fontsize=7)
    if ax2.lines:
        ax2.legend(fontsize=7)
    fig.suptitle("UDP through the fabric (links do not limit)")
    fig.tight_layout()
    fig.savefig(png_path, dpi=120)
    plt.close(fig)


def _numbers(text: str, kind: type[int] | type[float]) -> list[float]:
    try:
        return [kind(x) for x in text.split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated numbers, got {text!r}"
        ) from None


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m experiments.bench_fabric_throughput",
        description=(__doc__ or "").splitlines()[0],
    )
    ap.add_argument("--out", default="results/bench_fabric_throughput.csv")
    ap.add_argument("--results", default="results", help="the fabric's run directory's parent")
    ap.add_argument("--planes", type=lambda t: _numbers(t, int), default=[2], help="e.g. 2,4")
    ap.add_argument("--target", default="tf", choices=("tf", "bmv2"))
    ap.add_argument("--kernel", action="store_true", help="Linux routers instead of P4 switches")
    ap.add_argument("--modes", default="one,all")
    ap.add_argument("--sizes", type=lambda t: _numbers(t, int), default=list(DEFAULT_SIZES))
    ap.add_argument("--rates", type=lambda t: _numbers(t, float), default=list(DEFAULT_RATES))
    ap.add_argument("--step-s", type=float, default=STEP_S, help="seconds per offered rate")
    ap.add_argument(
        "--overload",
        type=float,
        default=10.0,
        help="stop a sweep once loss is over 50 %% at this many times the best delivered rate",
    )
    ap.add_argument("--idle", type=float, default=10.0, help="seconds of the idle row (0: none)")
    ap.add_argument("--link-mbps", type=float, default=DEFAULT_LINK_MBPS)
    ap.add_argument("--append", action="store_true", help="add to the CSV instead of replacing")
    ap.add_argument(
        "--sender-priority",
        choices=sorted(SENDER_PRIORITIES),
        default="normal",
        help="CPU priority of the senders (low: nice 19, idle: SCHED_IDLE); the same for every "
        "network kind",
    )
    ap.add_argument(
        "--per-switch",
        action="store_true",
        help="print each busy switch's CPU share and packets in/out per step (where the fabric "
        "drops under overload)",
    )
    ap.add_argument(
        "--receiver-priority",
        choices=sorted(RECEIVER_PRIORITIES),
        default="normal",
        help="CPU priority of the receivers (high: nice -10)",
    )
    ap.add_argument(
        "--host-napi",
        choices=("auto", "threaded", "gro", "off"),
        default="threaded",
        help="how the hosts' NICs receive (topologies.emulation.mnfabric.HOST_NAPI_MODES)",
    )
    ap.add_argument(
        "--sender-cpus",
        type=int,
        default=0,
        help="run the senders on the last N CPUs and everything else (switches, receivers, host "
        "NICs' NAPI threads) on the others, as if the load generator were another machine "
        "(0: no pinning)",
    )
    ap.add_argument(
        "--sender",
        choices=SENDERS,
        default="udp",
        help="udp: datagrams from a UDP socket; xdp: the same made by the kernel from a BPF "
        "program, fast enough for 10x the peak (needs --sender-cpus; not with --kernel)",
    )
    ap.add_argument(
        "--receivers-with-senders",
        action="store_true",
        help="with --sender-cpus: the receivers and the host NICs' NAPI threads on the senders' "
        "CPUs too, so the fabric's CPUs run the switches only (all-hosts mode: four receivers "
        "on the fabric's CPU overflow their socket buffers under overload)",
    )
    args = ap.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    bad = [m for m in modes if m not in ("one", "all")]
    if bad or any(s < 24 or s > 1452 for s in args.sizes) or args.step_s <= 0:
        print(
            "error: modes are one/all, payload sizes 24..1452 bytes, --step-s positive",
            file=sys.stderr,
        )
        return 2
    if args.receivers_with_senders and not args.sender_cpus:
        print("error: --receivers-with-senders needs --sender-cpus N", file=sys.stderr)
        return 2
    if args.sender == "xdp" and (args.kernel or not args.sender_cpus):
        print(
            "error: --sender xdp keeps its CPUs busy at any rate: give it --sender-cpus N; "
            "and it runs against P4 switches only (not --kernel)",
            file=sys.stderr,
        )
        return 2
    if os.geteuid() != 0:
        print("error: the benchmark builds network namespaces: run it as root", file=sys.stderr)
        return 2
    out = pathlib.Path(args.out)
    rows: list[Row] = []
    if args.append and out.exists():
        rows = read_csv(out)
    try:
        split = (
            cpu_split(args.sender_cpus, args.receivers_with_senders) if args.sender_cpus else None
        )
        blast = build_blaster(REPO_ROOT / "build")
        for planes in args.planes:
            spec = FabricSpec(planes=int(planes), link_mbps=args.link_mbps)
            if args.kernel:
                ctx = kernel_network(spec)
            else:
                ctx = tf_network(spec, args.target, args.results, args.host_napi)
            with ctx as net:
                print(f"{net.kind} fabric up: {planes} planes", flush=True)
                if args.idle > 0:
                    time.sleep(1.0)
                    rows.append(idle_row(net, args.idle))
                    print(_describe(rows[-1]), flush=True)
                for row in sweep(
                    net, blast, modes, args.sizes, args.rates,
                    step_s=args.step_s, overload=args.overload,
                    sender_priority=args.sender_priority, per_switch=args.per_switch,
                    receiver_priority=args.receiver_priority, split=split, sender=args.sender,
                ):  # fmt: skip
                    rows.append(row)
                    print(_describe(row), flush=True)
                    write_csv(rows, out)
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
        if rows:
            write_csv(rows, out)
        return 1
    write_csv(rows, out)
    png = out.with_suffix(".png")
    plot(out, png)
    print(f"wrote {out} and {png}")
    return 0


def type_of(name: str) -> type[int] | type[float] | type[str]:
    """The Python type of a CSV column of :class:`Row`."""
    t = {f.name: f.type for f in fields(Row)}[name]
    return {"int": int, "float": float, "str": str}[str(t)]


if __name__ == "__main__":
    sys.exit(main())

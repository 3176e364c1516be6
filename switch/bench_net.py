"""Throughput and latency of a switch process on veths (``python -m switch.bench_net``).

Topology (made here, removed afterwards)::

    [src ns] src --veth-- sw1 [root ns: the switch] sw2 --veth-- snk [sink ns]

The switch runs in the root namespace as a child process from ``--switch-cmd``; the command
may use ``{if1}``, ``{if2}`` (its two interfaces: port 1 faces the source, port 2 the sink),
``{src_mac}``, ``{sink_mac}``, ``{dst}`` and ``{python}``. ``--setup-cmd`` (same placeholders)
runs once the switch is started, e.g. to push a pipeline and a route. Forwarding is then probed
until a frame crosses, and measured:

* **throughput**: ONE 64-byte-payload IPv6/UDP frame (126 bytes on the wire) is sent over and
  over from the source namespace, at top speed and at the ``--rates`` given, by ``udpblast
  raw`` (``experiments/udpblast.c``: ``sendmmsg`` batches from a packet socket, built into
  ``build/``; ``--generator tcpreplay``: looped by tcpreplay, one system call per frame, which
  tops out near 300k frames/s on this machine). Offered
  = growth of ``sw1``'s receive counter, delivered = growth of the sink veth's receive counter
  (``/proc/net/dev`` of the sink namespace: the same counter as
  ``/sys/class/net/<if>/statistics/rx_packets`` there), both over ``--duration`` seconds after
  a one-second warm-up; the generator's own rate is reported too (column ``tcpreplay_pps``).
* **latency**: ``--latency-count`` frames at ``--latency-pps`` from a packet socket in the
  source namespace, each carrying its send time (CLOCK_REALTIME); the sink's packet socket
  takes the kernel's receive timestamp (``SO_TIMESTAMPNS``). p50/p99 of the difference, by
  ``numpy.percentile`` (linear interpolation).

``--switch-cmd "builtin-forwarder [--plain] [--no-tx-ring] [--work-us N]"`` runs a stand-in
written with :class:`switch.device.ports.PortSet` that forwards every frame from port 1 to
port 2: the raw packet-I/O ceiling of one Python process here (``--plain``: no RX ring,
``--no-tx-ring``: one ``send`` per frame, ``--work-us``: burn CPU per frame like a pipeline
would). Results go to a CSV (``--out``).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import re
import shlex
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from switch.device.netns import (
    Netns,
    VethPair,
    call_in_netns,
    cleanup_stale,
    net_unavailable_reason,
    netns_name,
    random_suffix,
    read_proc_net_dev,
)
from switch.device.pcap import PcapWriter
from switch.device.ports import Port, PortSet, disable_offloads

BUILTIN = "builtin-forwarder"
SRC_MAC = "02:00:00:00:01:01"
SINK_MAC = "02:00:00:00:02:02"
SRC_IP = "2001:db8:1::1"
DST_IP = "2001:db8:2::2"
UDP_SPORT, UDP_DPORT = 49152, 4791
PAYLOAD_BYTES = 64
LAT_MAGIC = b"TFLAT\x00"
SO_TIMESTAMPNS = 35
CSV_FIELDS = [
    "test",
    "switch",
    "target_pps",
    "offered_pps",
    "delivered_pps",
    "delivery_ratio",
    "tcpreplay_pps",
    "p50_us",
    "p99_us",
    "mean_us",
    "max_us",
    "samples",
    "lost",
    "duration_s",
    "frame_bytes",
    "generator",
]


# ------------------------------------------------------------------------------------------
# Frames


def _mac(text: str) -> bytes:
    return bytes.fromhex(text.replace(":", ""))


def _sum16(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total: int = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def ipv6_udp_frame(
    dst_ip: str = DST_IP,
    *,
    src_ip: str = SRC_IP,
    dst_mac: str = SINK_MAC,
    src_mac: str = SRC_MAC,
    payload: bytes = b"\x00" * PAYLOAD_BYTES,
    hop_limit: int = 64,
    ports: tuple[int, int] = (UDP_SPORT, UDP_DPORT),
    checksum: bool = True,
) -> bytes:
    """An Ethernet/IPv6/UDP frame with a correct UDP checksum (``checksum=False``: zero, as a
    sender with ``UDP_NO_CHECK6_TX`` leaves it)."""
    src = socket.inet_pton(socket.AF_INET6, src_ip)
    dst = socket.inet_pton(socket.AF_INET6, dst_ip)
    udp_len = 8 + len(payload)
    udp = struct.pack("!HHHH", *ports, udp_len, 0) + payload
    if checksum:
        pseudo = src + dst + struct.pack("!IxxxB", udp_len, 17)
        csum = 0xFFFF - _sum16(pseudo + udp) or 0xFFFF
        udp = udp[:6] + struct.pack("!H", csum) + udp[8:]
    ip = struct.pack("!IHBB", 6 << 28, udp_len, 17, hop_limit) + src + dst
    return _mac(dst_mac) + _mac(src_mac) + b"\x86\xdd" + ip + udp


def latency_payload(seq: int, sent_ns: int) -> bytes:
    """Payload of a latency probe: magic, sequence number, send time; padded to 64 bytes."""
    return (LAT_MAGIC + struct.pack("!IQ", seq, sent_ns)).ljust(PAYLOAD_BYTES, b"\0")


# ------------------------------------------------------------------------------------------
# Topology


@dataclass
class Topology:
    """Names of the benchmark's namespaces and interfaces."""

    src_ns: str
    sink_ns: str
    src_if: str
    if1: str
    if2: str
    sink_if: str


@contextlib.contextmanager
def topology(mtu: int = 1500) -> Iterator[Topology]:
    """Make the source/sink namespaces and the two veth pairs; always remove them."""
    cleanup_stale("tf")
    sfx = random_suffix()
    with contextlib.ExitStack() as stack:
        src = stack.enter_context(Netns(netns_name("bsrc", suffix=sfx)))
        sink = stack.enter_context(Netns(netns_name("bsnk", suffix=sfx)))
        top = Topology(
            src.name, sink.name, f"tf{sfx}src", f"tf{sfx}sw1", f"tf{sfx}sw2", f"tf{sfx}snk"
        )
        # Sources and sinks have IPv6 off: they send nothing of their own, and the sink's
        # kernel drops the frames right after counting them.
        stack.enter_context(
            VethPair(
                top.src_if,
                top.if1,
                ns_a=src,
                mtu=mtu,
                mac_a=SRC_MAC,
                ipv6_off=[top.src_if, top.if1],
            )
        )
        stack.enter_context(
            VethPair(
                top.if2,
                top.sink_if,
                ns_b=sink,
                mtu=mtu,
                mac_b=SINK_MAC,
                ipv6_off=[top.if2, top.sink_if],
            )
        )
        yield top


def _rx_packets(ns: str | None, ifname: str) -> int:
    return read_proc_net_dev(ns)[ifname]["rx_packets"]


# ------------------------------------------------------------------------------------------
# The switch under test


def _expand(cmd: str, top: Topology, dst: str) -> list[str]:
    values = {
        "if1": top.if1,
        "if2": top.if2,
        "src_mac": SRC_MAC,
        "sink_mac": SINK_MAC,
        "dst": dst,
        "python": sys.executable,
    }
    return [part.format(**values) for part in shlex.split(cmd)]


def switch_argv(cmd: str, top: Topology, dst: str) -> list[str]:
    """The command line to start: ``builtin-forwarder ...`` or the expanded ``cmd``."""
    argv = _expand(cmd, top, dst)
    if argv and argv[0] == BUILTIN:
        return [
            sys.executable,
            "-m",
            "switch.bench_net",
            "forwarder",
            "--if1",
            top.if1,
            "--if2",
            top.if2,
            *argv[1:],
        ]
    return argv


@contextlib.contextmanager
def running(
    argv: Sequence[str], log: Path | None, cpu: int | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``argv`` in its own session; SIGTERM (then SIGKILL) it on exit."""
    if cpu is not None:
        argv = ["taskset", "-c", str(cpu), *argv]
    out = open(log, "ab") if log else None
    proc = subprocess.Popen(
        list(argv),
        stdout=subprocess.DEVNULL if out is None else out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if out is not None:
            out.close()


def wait_forwarding(
    top: Topology, frame: bytes, proc: subprocess.Popen[bytes], timeout: float
) -> float:
    """Send ``frame`` every 50 ms until one reaches the sink; return the seconds it took."""
    start = time.monotonic()
    with Port(0, top.src_if, netns=top.src_ns, ring=False) as tx:
        base = _rx_packets(top.sink_ns, top.sink_if)
        while time.monotonic() - start < timeout:
            if proc.poll() is not None:
                raise RuntimeError(f"the switch exited with status {proc.returncode}")
            tx.send(frame)
            time.sleep(0.05)
            if _rx_packets(top.sink_ns, top.sink_if) > base:
                return time.monotonic() - start
    raise RuntimeError(f"no frame crossed the switch within {timeout} s")


# ------------------------------------------------------------------------------------------
# Measurements


@dataclass
class ThroughputResult:
    target_pps: str  # "top" or the rate asked of tcpreplay
    offered_pps: float
    delivered_pps: float
    tcpreplay_pps: float | None  # the generator's own rate (tcpreplay's, or udpblast's)
    duration_s: float
    generator: str = "tcpreplay"

    @property
    def delivery_ratio(self) -> float:
        return self.delivered_pps / self.offered_pps if self.offered_pps else 0.0


@dataclass
class LatencyResult:
    target_pps: int
    samples: int
    lost: int
    p50_us: float
    p99_us: float
    mean_us: float
    max_us: float


@dataclass
class BenchResult:
    switch: str
    frame_bytes: int
    throughput: list[ThroughputResult] = field(default_factory=list)
    latency: LatencyResult | None = None

    def rows(self) -> list[dict[str, object]]:
        """CSV rows (``CSV_FIELDS``)."""
        out: list[dict[str, object]] = []
        for t in self.throughput:
            out.append(
                {
                    "test": "throughput",
                    "switch": self.switch,
                    "target_pps": t.target_pps,
                    "offered_pps": round(t.offered_pps),
                    "delivered_pps": round(t.delivered_pps),
                    "delivery_ratio": round(t.delivery_ratio, 4),
                    "tcpreplay_pps": "" if t.tcpreplay_pps is None else round(t.tcpreplay_pps),
                    "duration_s": round(t.duration_s, 3),
                    "frame_bytes": self.frame_bytes,
                    "generator": t.generator,
                }
            )
        if self.latency:
            lat = self.latency
            out.append(
                {
                    "test": "latency",
                    "switch": self.switch,
                    "target_pps": lat.target_pps,
                    "p50_us": round(lat.p50_us, 1),
                    "p99_us": round(lat.p99_us, 1),
                    "mean_us": round(lat.mean_us, 1),
                    "max_us": round(lat.max_us, 1),
                    "samples": lat.samples,
                    "lost": lat.lost,
                    "frame_bytes": self.frame_bytes,
                }
            )
        return out


_TCPREPLAY_RATE = re.compile(r"Rated:\s*[\d.]+\s*Bps,\s*[\d.]+\s*Mbps,\s*([\d.]+)\s*pps")


BLAST_SOURCE = Path(__file__).resolve().parents[1] / "experiments" / "udpblast.c"


def build_blaster(build_dir: Path) -> Path:
    """``udpblast`` (its ``raw`` mode is the fast generator) compiled into ``build_dir``.

    Raises:
        RuntimeError: no C compiler, or the source did not compile.
    """
    exe = build_dir / "udpblast"
    if exe.exists() and exe.stat().st_mtime >= BLAST_SOURCE.stat().st_mtime:
        return exe
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise RuntimeError("no C compiler (cc/gcc) on PATH to build udpblast")
    build_dir.mkdir(parents=True, exist_ok=True)
    tmp = build_dir / f".udpblast-{os.getpid()}"
    proc = subprocess.run(
        [cc, "-O2", "-Wall", "-o", str(tmp), str(BLAST_SOURCE)], capture_output=True, text=True
    )
    if proc.returncode:
        raise RuntimeError(f"cannot compile {BLAST_SOURCE}: {proc.stderr.strip()}")
    os.replace(tmp, exe)
    return exe


def measure_throughput(
    top: Topology,
    pcap: Path,
    rate: int | None,
    duration: float,
    warmup: float = 1.0,
    gen_cpu: int | None = None,
    pps_multi: int = 10,
    blaster: Path | None = None,
    frame: bytes = b"",
) -> ThroughputResult:
    """Loop ``pcap`` with tcpreplay (``rate`` pps, None: top speed) and count what crosses.

    With ``blaster`` (``udpblast``), its ``raw`` mode sends ``frame`` instead (``sendmmsg``
    batches: tcpreplay's one system call per frame tops out near 300k frames/s here).
    """
    if blaster is not None:
        argv = [str(blaster), "raw", top.src_if, frame.hex(), str(rate or 0)]
        argv.append(str(int(warmup + duration + 2)))
    else:
        argv = [
            "tcpreplay",
            "-q",
            "-K",
            f"--intf1={top.src_if}",
            "--loop=0",
            f"--duration={int(warmup + duration + 2)}",
        ]
        if rate is None:
            argv += ["--topspeed"]
        else:
            # tcpreplay's default timer (gtod) spins a whole CPU even at low rates; sleeping
            # and sending in bursts of ``pps_multi`` leaves the CPU to the switch.
            argv += [f"--pps={rate}", f"--pps-multi={pps_multi}", "--timer=nano"]
        argv.append(str(pcap))
    if gen_cpu is not None:
        argv = ["taskset", "-c", str(gen_cpu), *argv]
    argv = ["ip", "netns", "exec", top.src_ns, *argv]
    with tempfile.TemporaryFile() as out:
        gen = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        try:
            time.sleep(warmup)
            t0 = time.monotonic()
            off0 = _rx_packets(None, top.if1)
            del0 = _rx_packets(top.sink_ns, top.sink_if)
            time.sleep(duration)
            off1 = _rx_packets(None, top.if1)
            del1 = _rx_packets(top.sink_ns, top.sink_if)
            elapsed = time.monotonic() - t0
        finally:
            if gen.poll() is None:
                gen.send_signal(signal.SIGINT)  # tcpreplay prints its statistics and stops
            try:
                gen.wait(10)
            except subprocess.TimeoutExpired:
                gen.kill()
                gen.wait()
        out.seek(0)
        text = out.read().decode(errors="replace")
    gen_pps: float | None = None
    if blaster is not None:
        m2 = re.search(r'"sent": (\d+), "send_errors": \d+, "duration_s": ([\d.]+)', text)
        gen_pps = int(m2.group(1)) / float(m2.group(2)) if m2 and float(m2.group(2)) else None
    else:
        m = _TCPREPLAY_RATE.search(text)
        gen_pps = float(m.group(1)) if m else None
    return ThroughputResult(
        target_pps="top" if rate is None else str(rate),
        offered_pps=(off1 - off0) / elapsed,
        delivered_pps=(del1 - del0) / elapsed,
        tcpreplay_pps=gen_pps,
        duration_s=elapsed,
        generator="tcpreplay" if blaster is None else "udpblast",
    )


def measure_latency(
    top: Topology,
    count: int,
    pps: int,
    dst: str,
    dst_mac: str,
    settle: float = 0.5,
) -> LatencyResult:
    """Send ``count`` timestamped probes at ``pps``; kernel-timestamp them at the sink."""

    def open_sink() -> socket.socket:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
        s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        s.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)  # SO_RCVBUFFORCE
        s.bind((top.sink_if, 0x0003))
        s.settimeout(0.2)
        return s

    sink = call_in_netns(top.sink_ns, open_sink)
    delays: dict[int, int] = {}
    stop = threading.Event()

    def receive() -> None:
        while not stop.is_set():
            try:
                data, anc, _flags, _addr = sink.recvmsg(2048, 64)
            except TimeoutError:
                continue
            at = data.find(LAT_MAGIC)
            if at < 0 or not anc:
                continue
            seq, sent = struct.unpack_from("!IQ", data, at + len(LAT_MAGIC))
            if seq >= count:
                continue  # warm-up probe
            sec, nsec = struct.unpack_from("qq", anc[0][2])
            delays[seq] = sec * 1_000_000_000 + nsec - sent

    rx = threading.Thread(target=receive, daemon=True)
    rx.start()
    template = ipv6_udp_frame(dst, dst_mac=dst_mac)
    head = template[:-PAYLOAD_BYTES]
    try:
        with Port(0, top.src_if, netns=top.src_ns, ring=False) as tx:
            period = 1.0 / pps
            warm = min(200, max(10, count // 10))  # not counted: caches, page faults, wake-ups
            next_at = time.monotonic()
            for i in range(-warm, count):
                delay = next_at - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                # The UDP checksum is left stale: switches and sinks here do not verify it.
                tx.send(head + latency_payload(i & 0xFFFFFFFF, time.time_ns()))
                next_at += period
        time.sleep(settle)
    finally:
        stop.set()
        rx.join()
        sink.close()
    return latency_result(pps, count, [d / 1000 for d in delays.values()])


def latency_result(pps: int, sent: int, delays_us: Sequence[float]) -> LatencyResult:
    """The latency row of ``sent`` probes at ``pps`` of which ``delays_us`` came back.

    Percentiles are ``numpy.percentile``'s (linear interpolation between the closest ranks);
    with no delay at all every statistic is NaN.
    """
    if not delays_us:
        nan = float("nan")
        return LatencyResult(pps, 0, sent, nan, nan, nan, nan)
    return LatencyResult(
        target_pps=pps,
        samples=len(delays_us),
        lost=sent - len(delays_us),
        p50_us=float(np.percentile(delays_us, 50)),
        p99_us=float(np.percentile(delays_us, 99)),
        mean_us=statistics.fmean(delays_us),
        max_us=max(delays_us),
    )


def run_benchmark(
    switch_cmd: str,
    *,
    rates: Sequence[int | None] = (None,),
    duration: float = 8.0,
    latency_count: int = 2000,
    latency_pps: int = 1000,
    dst: str = DST_IP,
    dst_mac: str = SINK_MAC,
    setup_cmd: str | None = None,
    ready_timeout: float = 60.0,
    log: Path | None = None,
    switch_cpu: int | None = None,
    gen_cpu: int | None = None,
    progress: bool = False,
    generator: str = "tcpreplay",
) -> BenchResult:
    """Build the topology, start the switch, measure; everything is torn down afterwards.

    ``rates``: offered rates in pps, ``None`` for top speed. ``generator``: ``tcpreplay`` or
    ``udpblast`` (its ``raw`` mode, built into ``build/`` here).
    ``latency_count=0`` skips the latency test.
    """
    reason = net_unavailable_reason()
    if reason:
        raise RuntimeError(reason)
    frame = ipv6_udp_frame(dst, dst_mac=dst_mac)
    if generator not in ("tcpreplay", "udpblast"):
        raise ValueError(f"generator must be tcpreplay or udpblast, got {generator!r}")
    blaster = build_blaster(Path("build")) if generator == "udpblast" else None
    result = BenchResult(switch=switch_cmd, frame_bytes=len(frame))
    with tempfile.TemporaryDirectory(prefix="tf-bench-") as tmp, topology() as top:
        pcap = Path(tmp) / "frame.pcap"
        with PcapWriter(pcap) as writer:
            writer.write(frame)
        argv = switch_argv(switch_cmd, top, dst)
        with running(argv, log, switch_cpu) as proc:
            if setup_cmd:
                subprocess.run(_expand(setup_cmd, top, dst), check=True, timeout=ready_timeout)
            took = wait_forwarding(top, frame, proc, ready_timeout)
            if progress:
                print(f"switch forwarding after {took:.1f} s: {shlex.join(argv)}", file=sys.stderr)
            if latency_count:
                result.latency = measure_latency(top, latency_count, latency_pps, dst, dst_mac)
                if progress:
                    print(f"latency: {asdict(result.latency)}", file=sys.stderr)
            for rate in rates:
                res = measure_throughput(
                    top, pcap, rate, duration, gen_cpu=gen_cpu, blaster=blaster, frame=frame
                )
                result.throughput.append(res)
                if progress:
                    print(
                        f"rate {res.target_pps}: offered {res.offered_pps:,.0f} pps, "
                        f"delivered {res.delivered_pps:,.0f} pps "
                        f"({res.generator} {res.tcpreplay_pps})",
                        file=sys.stderr,
                    )
                if proc.poll() is not None:
                    raise RuntimeError(f"the switch exited with status {proc.returncode}")
    return result


def write_csv(path: Path, results: Sequence[BenchResult]) -> None:
    """Write every result's rows to ``path`` (parents made)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for res in results:
            writer.writerows(res.rows())


# ------------------------------------------------------------------------------------------
# The stand-in switch


def _spin(us: float) -> None:
    end = time.perf_counter() + us / 1e6
    while time.perf_counter() < end:
        pass


def run_forwarder(
    if1: str,
    if2: str,
    *,
    ring: bool = True,
    tx_ring: bool = True,
    batch: int = 64,
    work_us: float = 0.0,
) -> dict[int, dict[str, int]]:
    """Forward every frame from port 1 (``if1``) to port 2 (``if2``) until SIGTERM/SIGINT.

    ``work_us`` burns that much CPU per frame, standing in for a packet pipeline.
    """
    stop = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    for name in (if1, if2):
        disable_offloads(name)
    with PortSet(ring=ring, tx_ring=tx_ring) as ports:
        ports.add(1, if1)
        ports.add(2, if2)
        print(f"forwarder: {ports[1]!r} -> {ports[2]!r}", file=sys.stderr, flush=True)
        recv_batch, send_batch, wait = ports.recv_batch, ports.send_batch, ports.wait
        while not stop:
            frames = recv_batch(batch)
            if not frames:
                wait(0.2)
                continue
            if work_us:
                for _ in frames:
                    _spin(work_us)
            send_batch([(2, f) for p, f in frames if p == 1])
        return {n: c.as_dict() for n, c in ports.counters().items()}


# ------------------------------------------------------------------------------------------
# Command line


def _rates(text: str) -> list[int | None]:
    out: list[int | None] = []
    for part in text.split(","):
        part = part.strip()
        if part:
            out.append(None if part == "top" else int(part))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "forwarder":
        fp = argparse.ArgumentParser(prog="python -m switch.bench_net forwarder")
        fp.add_argument("--if1", required=True)
        fp.add_argument("--if2", required=True)
        fp.add_argument("--plain", action="store_true", help="no PACKET_MMAP RX ring")
        fp.add_argument("--no-tx-ring", action="store_true", help="plain send() per frame")
        fp.add_argument("--batch", type=int, default=64)
        fp.add_argument(
            "--work-us",
            type=float,
            default=0.0,
            help="CPU time to burn per frame (a stand-in for a P4 pipeline)",
        )
        fa = fp.parse_args(args[1:])
        counters = run_forwarder(
            fa.if1,
            fa.if2,
            ring=not fa.plain,
            tx_ring=not fa.no_tx_ring,
            batch=fa.batch,
            work_us=fa.work_us,
        )
        print(json.dumps(counters), file=sys.stderr)
        return 0
    ap = argparse.ArgumentParser(
        prog="python -m switch.bench_net",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--switch-cmd",
        action="append",
        required=True,
        help="switch command line (repeatable; placeholders {if1} {if2} ...) or "
        f"'{BUILTIN} [--plain] [--no-tx-ring] [--work-us N]'",
    )
    ap.add_argument("--setup-cmd", help="run after the switch starts (e.g. push a pipeline)")
    ap.add_argument("--out", type=Path, default=Path("results/bench_switch.csv"))
    ap.add_argument(
        "--rates",
        type=_rates,
        default=[None],
        help="comma-separated offered rates in pps; 'top' = tcpreplay --topspeed",
    )
    ap.add_argument("--duration", type=float, default=8.0)
    ap.add_argument("--latency-count", type=int, default=2000)
    ap.add_argument("--latency-pps", type=int, default=1000)
    ap.add_argument("--dst", default=DST_IP, help="IPv6 destination of the generated frame")
    ap.add_argument("--dst-mac", default=SINK_MAC)
    ap.add_argument("--ready-timeout", type=float, default=60.0)
    ap.add_argument("--switch-cpu", type=int, help="pin the switch to this CPU (taskset)")
    ap.add_argument("--gen-cpu", type=int, help="pin the generator to this CPU (taskset)")
    ap.add_argument(
        "--generator",
        choices=("udpblast", "tcpreplay"),
        default="udpblast",
        help="udpblast raw (experiments/udpblast.c, sendmmsg batches; default) or tcpreplay "
        "(one send per frame: about 300k frames/s at most here)",
    )
    ap.add_argument("--log", type=Path, help="append the switch's output here")
    a = ap.parse_args(args)
    results = []
    for cmd in a.switch_cmd:
        results.append(
            run_benchmark(
                cmd,
                rates=a.rates,
                duration=a.duration,
                latency_count=a.latency_count,
                latency_pps=a.latency_pps,
                dst=a.dst,
                dst_mac=a.dst_mac,
                setup_cmd=a.setup_cmd,
                ready_timeout=a.ready_timeout,
                log=a.log,
                switch_cpu=a.switch_cpu,
                gen_cpu=a.gen_cpu,
                generator=a.generator,
                progress=True,
            )
        )
    write_csv(a.out, results)
    for res in results:
        for row in res.rows():
            print(", ".join(f"{k}={v}" for k, v in row.items() if v != ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

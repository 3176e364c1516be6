"""``tf-switch``: a P4Runtime-served v1model switch on Linux interfaces.

Command line compatible with BMv2's ``simple_switch_grpc`` where it applies::

    tf-switch -i 1@s1-eth1 -i 2@s1-eth2 --device-id 1 --cpu-port 255 --pcap DIR \\
              --log-console [--no-p4 | PROG.p4 | PROG.tfp4.json] -- --grpc-server-addr 127.0.0.1:9559

One data-path thread receives frames from the ports, runs ingress, queues packets in the
traffic manager, drains the queues at their configured rates through egress and transmits.
The P4Runtime server and the runtime CLI (``tf-switch-cli``, on the ``--thrift-port``) change
state from their own threads under the device lock, between batches of packets.

The loop is event-driven (like NAPI in the kernel): an idle switch sleeps in ``poll`` on its
ports' sockets (a PACKET_MMAP ring is readable once its head slot is the process's), the
control plane's wake-up pipe and the next departure of a rate-limited queue, so it costs no
CPU. A round that finds several frames means traffic is arriving faster than one wake-up per
frame is worth: the loop then sleeps ``--coalesce-us`` (a timer, not the sockets) and reads
the batch that gathered meanwhile, at most ``BATCH`` frames per round, until a round finds at
most one frame and it goes back to ``poll``. Under overload the rings fill and the kernel
drops at the ring (counted as ``rx_overrun``): the switch keeps forwarding at its own pace
instead of spending itself on frames it will drop. After a round that filled a batch the loop
gives the core to any other process waiting for it (``sched_yield``, ``--yield-when-full``):
switches that share cores then take turns batch by batch, so an overloaded first switch cannot
hold a core for a whole time slice and overrun the ring of the next switch, which would drop
frames the first one already forwarded; an overloaded fabric drops at its first hop, as one
with a core per switch would. ``--busy-poll US`` keeps spinning on the
rings for US microseconds after the last frame instead of sleeping (for a switch pinned to a
core of its own).

With a native program and PACKET_MMAP rings on every port, a round runs whole in C
(:mod:`switch.device.fastpath`: receive, pipeline, transmit, up to ``FAST_BATCH`` frames, no
Python object per packet); with one queue per port, packets that must queue wait in the port's
queue in C and leave from there at the port's rate. Packets for the CPU port or a port without
a ring, and frames the rings' slow path handles, come back to the Python path. ``--pcap``,
debug logging and ``--native off`` keep every round in Python.

With those C rounds the wait is in C too (``--c-loop on``, the default; :mod:`switch.native.loop`):
one call polls the rings and the wake-up pipe and runs rounds, coalescing sleeps and busy-polls
as described above, without returning to Python (and with the GIL released) until Python has
work: a thread that wants the device lock (:class:`switch.device.device.DeviceLock` wakes the
loop, so P4Runtime writes and reads land between rounds and read counters as they are), a
PacketOut, packets for the traffic manager or the CPU port, a frame for the rings' slow path, a
digest, a stop, or once a second. ``--c-loop off`` keeps the loop below in Python, the reference.

A rate-limited queue wakes the loop half of ``--queue-burst-us`` before its next departure; a
busy port whose packets leave late anyway catches up at most ``--queue-catchup-us`` of its
schedule (:mod:`switch.device.tm`).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import logging
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from switch.device.device import Device, Pipeline
from switch.errors import P4Error
from switch.native import NativeUnavailable, make_switch, native_reason
from switch.native import loop as native_loop
from switch.native import set_default_mode as set_native_mode
from switch.native.build import BuildError
from switch.pipeline.drops import DropReason
from switch.pipeline.extern_modules import load_extern_modules
from switch.pipeline.v1model import V1Switch

if TYPE_CHECKING:
    from switch.device.control import RuntimeCliServer
    from switch.device.fastpath import RingFastPath
    from switch.device.pcap import PcapWriter
    from switch.device.ports import PortSet
    from switch.p4rt.server import P4RuntimeServer

log = logging.getLogger("tailfabric.switch")

BATCH = 64  # frames per round at most (from all ports, fairly)
FAST_BATCH = 256  # the same for a round run whole in C (switch.device.fastpath)
COALESCE_US = 200  # default sleep between rounds while frames keep coming (microseconds)
RX_RING_FRAMES = 2048  # receive ring slots per port: 50 ms at 40k packets/s while descheduled
QUEUE_BURST_US = 200.0  # default burst allowance of rate-limited ports (microseconds)
QUEUE_CATCHUP_US = 2000.0  # how far back a late busy port may catch up (microseconds)
FINE_WAIT_S = 0.002  # waits shorter than this use select (microseconds), longer ones poll (ms)
IDLE_WAIT_S = 1.0  # the longest sleep with nothing to do (a stop or a wake-up ends it sooner)
DEFAULT_GRPC = "127.0.0.1:9559"
LOG_LEVELS = {
    "trace": logging.DEBUG,
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "off": logging.CRITICAL + 10,
}


class UsageError(Exception):
    pass


def _split_target_args(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    argv = list(argv)
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1 :]
    return argv, []


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="tf-switch",
        description="tailfabric's software P4 switch (v1model), command-line compatible with "
        "simple_switch_grpc. Target options go after '--': --grpc-server-addr ADDR, "
        "--cpu-port N, --priority-queues N.",
    )
    ap.add_argument("program", nargs="?", help="P4 program (.p4) or device config (.tfp4.json)")
    ap.add_argument(
        "-i",
        "--interface",
        action="append",
        default=[],
        metavar="PORT@IFNAME",
        help="attach a Linux interface as a switch port (repeatable)",
    )
    ap.add_argument(
        "--no-p4",
        action="store_true",
        help="start without a program and wait for SetForwardingPipelineConfig",
    )
    ap.add_argument("--device-id", type=int, default=1)
    ap.add_argument("--cpu-port", type=int, default=None)
    ap.add_argument(
        "--pcap",
        nargs="?",
        const=".",
        default=None,
        metavar="DIR",
        help="write <ifname>_in.pcap / <ifname>_out.pcap per port",
    )
    ap.add_argument("--log-console", action="store_true", help="log to the console")
    ap.add_argument("-L", "--log-level", default="info", choices=sorted(LOG_LEVELS))
    ap.add_argument("--thrift-port", type=int, default=9090, help="runtime CLI port (127.0.0.1)")
    ap.add_argument("--priority-queues", type=int, default=1)
    ap.add_argument("--queue-depth", type=int, default=64, help="egress queue depth (packets)")
    ap.add_argument(
        "--queue-rate",
        default=None,
        help="egress drain rate for every port: N (packets/s) or e.g. 100mbps",
    )
    ap.add_argument("-I", "--include", action="append", default=[], metavar="DIR")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random() extern")
    ap.add_argument(
        "--coalesce-us",
        type=int,
        default=COALESCE_US,
        metavar="US",
        help="while frames keep coming, sleep this long between rounds to read them in batches "
        f"(default {COALESCE_US}; 0: wake up for every frame)",
    )
    ap.add_argument(
        "--queue-burst-us",
        type=float,
        default=QUEUE_BURST_US,
        metavar="US",
        help="a rate-limited port may send packets up to US microseconds before their exact "
        f"departure time, so fast links are not held to one packet per round (default "
        f"{QUEUE_BURST_US:g}; the long-run rate is unchanged)",
    )
    ap.add_argument(
        "--queue-catchup-us",
        type=float,
        default=QUEUE_CATCHUP_US,
        metavar="US",
        help="a busy rate-limited port whose packets leave late (the loop woke up late: a "
        "busy core) catches up at most US microseconds of its schedule instead of losing the "
        f"gap (default {QUEUE_CATCHUP_US:g}; the long-run rate is unchanged)",
    )
    ap.add_argument(
        "--rx-ring-frames",
        type=int,
        default=RX_RING_FRAMES,
        metavar="N",
        help="receive ring slots per port: what a port holds while the switch is busy; under "
        f"overload the standing queue (latency) is N frames (default {RX_RING_FRAMES})",
    )
    ap.add_argument(
        "--busy-poll",
        type=int,
        default=0,
        metavar="US",
        help="spin on the receive rings for US microseconds after the last frame instead of "
        "sleeping (for a switch pinned to its own core; default 0: never spin)",
    )
    ap.add_argument(
        "--yield-when-full",
        choices=("on", "off"),
        default=os.environ.get("TF_YIELD_WHEN_FULL", "on"),
        help="after a round that filled a batch, give the core to any other process waiting "
        "for it before the next (default $TF_YIELD_WHEN_FULL, else on: switches that share "
        "cores take turns batch by batch, so an overloaded first hop does not fill the next "
        "one's ring with frames it then drops; costs nothing on an idle core)",
    )
    ap.add_argument(
        "--c-loop",
        choices=("on", "off"),
        default=os.environ.get("TF_C_LOOP", "on"),
        help="with the native data path, wait and run rounds in C until Python has work "
        "(switch.native.loop) instead of returning to the Python loop after every round "
        "(default $TF_C_LOOP, else on; off: the Python loop, the reference)",
    )
    ap.add_argument(
        "--native",
        choices=("auto", "on", "off"),
        default=os.environ.get("TF_NATIVE", "auto"),
        help="run programs as generated C (switch.native): auto uses it when the program "
        "is supported and a C compiler works, else Python with a warning; on fails with the "
        "reason instead; off always uses the Python executor (default $TF_NATIVE, else auto)",
    )
    ap.add_argument(
        "--load-modules",
        action="append",
        default=[],
        metavar="MOD",
        help="Python module (file or dotted name) registering the program's own extern "
        "functions, as BMv2's --load-modules (see switch/pipeline/extern_modules.py)",
    )
    ap.add_argument("--nanolog", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--notifications-addr", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--grpc-server-addr", default=None, help=argparse.SUPPRESS)
    return ap


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    own, target = _split_target_args(argv)
    args = build_parser().parse_args(own)
    tp = argparse.ArgumentParser(prog="tf-switch ... --", add_help=False)
    tp.add_argument("--grpc-server-addr", default=None)
    tp.add_argument("--cpu-port", type=int, default=None)
    tp.add_argument("--priority-queues", type=int, default=None)
    tp.add_argument("--dp-grpc-server-addr", default=None)
    targs, unknown = tp.parse_known_args(target)
    if unknown:
        raise UsageError(
            f"unknown target option(s): {' '.join(unknown)}; valid: "
            "--grpc-server-addr, --cpu-port, --priority-queues"
        )
    args.grpc_server_addr = targs.grpc_server_addr or args.grpc_server_addr or DEFAULT_GRPC
    if targs.cpu_port is not None:
        args.cpu_port = targs.cpu_port
    if targs.priority_queues is not None:
        args.priority_queues = targs.priority_queues
    if args.program and args.no_p4:
        raise UsageError("give a program or --no-p4, not both")
    if not args.program and not args.no_p4:
        raise UsageError("give a P4 program (or a .tfp4.json device config) or --no-p4")
    ports: dict[int, str] = {}
    for spec in args.interface:
        num, sep, ifname = spec.partition("@")
        if not sep or not num.isdigit() or not ifname:
            raise UsageError(f"bad interface '{spec}': write PORT@IFNAME, e.g. 1@s1-eth1")
        port = int(num)
        if port in ports:
            raise UsageError(f"port {port} is given twice")
        if not 0 <= port < 511:
            raise UsageError(f"port {port} out of range (0..510; 511 is the drop port)")
        ports[port] = ifname
    args.ports = ports
    if not 0 <= args.coalesce_us <= 100_000 or not 0 <= args.busy_poll <= 10_000_000:
        raise UsageError("--coalesce-us must be 0..100000 and --busy-poll 0..10000000 (us)")
    if args.native not in ("auto", "on", "off"):
        raise UsageError(f"TF_NATIVE={args.native!r}: use auto, on or off")
    if args.c_loop not in ("on", "off"):
        raise UsageError(f"TF_C_LOOP={args.c_loop!r}: use on or off")
    if args.yield_when_full not in ("on", "off"):
        raise UsageError(f"TF_YIELD_WHEN_FULL={args.yield_when_full!r}: use on or off")
    if not 16 <= args.rx_ring_frames <= 1 << 16:
        raise UsageError("--rx-ring-frames must be 16..65536")
    if not 0 <= args.queue_burst_us <= 1_000_000:
        raise UsageError("--queue-burst-us must be 0..1000000 (us)")
    if not 0 <= args.queue_catchup_us <= 1_000_000:
        raise UsageError("--queue-catchup-us must be 0..1000000 (us)")
    if args.cpu_port is not None and (args.cpu_port in ports or not 0 < args.cpu_port < 511):
        raise UsageError("--cpu-port must be 1..510 and not an interface port")
    return args


def load_pipeline(path: str, include_dirs: Sequence[str]) -> Pipeline:
    from switch.compile.package import load_device_config, make_device_config
    from switch.p4info import build_p4info

    data = (
        Path(path).read_bytes()
        if path.endswith(".json")
        else make_device_config(path, include_dirs)
    )
    program = load_device_config(data)
    return Pipeline(program, build_p4info(program.schema), data, 0)


class SwitchDaemon:
    """The running switch: ports, data-path loop, P4Runtime server, runtime CLI."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        # The executor of every committed program: the generated C where --native allows
        # (switch.native.make_switch), else the Python one.
        executor: Callable[..., V1Switch] = functools.partial(make_switch, mode=args.native)
        self.device = Device(
            args.device_id,
            args.cpu_port,
            priority_queues=args.priority_queues,
            queue_depth=args.queue_depth,
            seed=args.seed,
            queue_burst_us=args.queue_burst_us,
            queue_catchup_us=args.queue_catchup_us,
            executor=executor,
        )
        self.stopping = threading.Event()
        self.ports: PortSet | None = None
        self.pcaps: dict[tuple[int, str], PcapWriter] = {}
        self.grpc: P4RuntimeServer | None = None
        self.cli: RuntimeCliServer | None = None
        self.loop_thread: threading.Thread | None = None
        self.rounds = 0  # data-path rounds so far
        self.sleeps = 0  # of those, followed by a coalescing sleep
        self.polls = 0  # of those, followed by a wait in poll/select
        self.yields = 0  # of those, full ones followed by sched_yield (--yield-when-full)
        self.fast: RingFastPath | None = None  # the C rounds, when the loop uses them
        if args.queue_rate:
            from switch.device.sscli import parse_rate

            rate, unit = parse_rate(args.queue_rate)
            self.device.tm.set_rate(rate, unit=unit)  # every port, also ports made later

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        args = self.args
        if args.program:
            pipeline = load_pipeline(args.program, args.include)
            if args.native == "on":
                reason = native_reason(pipeline.program)
                if reason is not None:
                    raise NativeUnavailable(reason)
            self.device.commit(pipeline)
        self._open_ports()
        if args.c_loop == "on" and args.native != "off":
            # Built (once per machine) before the switch says it is ready, not in its data path.
            with contextlib.suppress(BuildError):
                native_loop.load()
        from switch.device.control import RuntimeCliServer
        from switch.p4rt.server import P4RuntimeServer

        self.grpc = P4RuntimeServer(self.device, args.grpc_server_addr)
        self.grpc.start()
        cli = self.cli = RuntimeCliServer(self.device, port=args.thrift_port).start()
        self.loop_thread = threading.Thread(target=self.run_loop, name="datapath", daemon=True)
        self.loop_thread.start()
        log.info(
            "tf-switch ready: device %d, ports %s, gRPC %s, runtime CLI 127.0.0.1:%d%s",
            args.device_id,
            ",".join(f"{p}@{n}" for p, n in sorted(args.ports.items())) or "-",
            args.grpc_server_addr,
            cli.port,
            "" if args.program else " (waiting for a pipeline)",
        )

    def _open_ports(self) -> None:
        from switch.device.ports import PortSet

        ports = self.ports = PortSet(rx_frames=self.args.rx_ring_frames)
        for num, ifname in sorted(self.args.ports.items()):
            try:
                ports.add(num, ifname)
            except OSError as e:
                raise OSError(e.errno, f"cannot open port {num}@{ifname}: {e.strerror}") from None
        self.device.io_drops = ports.drop_cells
        self.device.io_packets = ports.packets
        self.device.loop_stats = self.loop_stats
        if self.args.pcap is not None:
            from switch.device.pcap import PcapWriter

            d = Path(self.args.pcap)
            d.mkdir(parents=True, exist_ok=True)
            for num, ifname in self.args.ports.items():
                self.pcaps[(num, "in")] = PcapWriter(str(d / f"{ifname}_in.pcap"))
                self.pcaps[(num, "out")] = PcapWriter(str(d / f"{ifname}_out.pcap"))

    def stop(self) -> None:
        self.stopping.set()
        self.device.wakeup.set()
        if self.loop_thread is not None:
            self.loop_thread.join(timeout=2)
        for part in (self.grpc, self.cli):
            if part is not None:
                try:
                    part.stop()
                except Exception:  # noqa: BLE001 - best effort on shutdown
                    log.exception("error while stopping")
        if self.ports is not None:
            self.ports.close()
        for w in self.pcaps.values():
            w.close()
        self.pcaps.clear()

    def loop_stats(self) -> dict[str, int]:
        """The data-path loop's counters so far (``show_loop``): its rounds and how it waited;
        with the wait in C, the C calls, their rounds, frames, waits and why they returned."""
        out = {
            "rounds": self.rounds,
            "sleeps": self.sleeps,
            "polls": self.polls,
            "yields": self.yields,
        }
        fast = self.fast
        if fast is not None:
            out |= {
                "c_rounds": fast.rounds,
                "c_frames": fast.frames,
                "c_loop_calls": fast.loop_calls,
                "c_loop_sleeps": fast.loop_sleeps,
                "c_loop_polls": fast.loop_polls,
                "c_loop_yields": fast.loop_yields,
            }
            for reason, n in sorted(fast.loop_returns.items()):
                out[f"c_loop_return_{native_loop.REASON_NAMES.get(reason, str(reason))}"] = n
        return out

    # -- data path ---------------------------------------------------------------------

    def run_loop(self) -> None:
        """Receive a batch, run ingress, drain what the queues allow through egress, send.

        Between rounds: another round at once if the last one filled a batch; a sleep of
        ``--coalesce-us`` if it found more than one frame (or ``--busy-poll`` spinning while
        within its window); else ``poll`` on the ports and the wake-up pipe until a frame, a
        wake-up or the next departure of a rate-limited queue (to the microsecond: ``poll``
        for whole milliseconds, ``select`` for what is left under 2 ms).
        """
        dev = self.device
        ports = self.ports
        assert ports is not None, "start() opens the ports before the loop runs"
        pcaps = self.pcaps
        wake = dev.wakeup
        port_by_fd = {port.fileno(): port for port in ports.ports}
        poller = select.poll()
        poller.register(wake.fileno(), select.POLLIN)
        for fd in port_by_fd:
            poller.register(fd, select.POLLIN)
        select_fds = [wake.fileno(), *port_by_fd]
        attached = set(self.args.ports)
        log_packets = log.isEnabledFor(logging.DEBUG)
        rings = [p for p in ports.ports if p.rx_mode == "ring"]
        coalesce_s = self.args.coalesce_us / 1e6
        busy_s = self.args.busy_poll / 1e6 if rings else 0.0
        yield_full = self.args.yield_when_full == "on"
        early_us = dev.tm.burst_us / 2
        last_work = 0.0
        _fine_timer_slack()

        def on_error(port: int, exc: BaseException) -> None:
            log.error("packet from port %d dropped by an internal error", port, exc_info=exc)

        # A native program on PACKET_MMAP rings: rounds run whole in C where they can
        # (switch.device.fastpath); -1 from it means a Python round.
        fast = None
        if not (pcaps or log_packets or self.args.native == "off"):
            from switch.device.fastpath import RingFastPath

            fast = RingFastPath(dev, ports, c_loop=self.args.c_loop == "on")
            self.fast = fast
            if fast.loop_error is not None:
                log.warning("the switch loop stays in Python: %s", fast.loop_error)
        c_loop = fast is not None and self.args.c_loop == "on" and fast.loop_error is None
        idle_us = int(IDLE_WAIT_S * 1e6)
        hold = dev.lock.quietly
        frames: list[tuple[int, bytes]] = []
        wake_fd = wake.fileno()
        while not self.stopping.is_set():
            if c_loop and not dev.python_work:
                # Rounds and waits in C until Python has work (switch.native.loop).
                assert fast is not None
                with hold():
                    rounds = fast.rounds
                    reason = fast.loop(
                        idle_us, self.args.coalesce_us, self.args.busy_poll, yield_full
                    )
                if reason >= 0:
                    self.rounds += fast.rounds - rounds
                    if reason == native_loop.WAKE:
                        wake.clear()
                    elif reason == native_loop.PORT_ERROR:
                        errored = ports.ports[fast.loop_error_port]
                        if not errored.rx_ready():
                            errored.clear_error()  # a link went down: do not spin on it
                    continue
            self.rounds += 1
            limit = BATCH
            got = -1
            if fast is not None:
                with hold():
                    got = fast.round(FAST_BATCH)
                limit = FAST_BATCH
            if got < 0:
                limit = BATCH
                frames = ports.recv_batch(BATCH)
                got = len(frames)
                if fast is not None:
                    fast.invalidate()  # Python moved the rings' indices
            if frames and (pcaps or log_packets):
                for port, data in frames:
                    if pcaps:
                        pcaps[(port, "in")].write(data)
                    if log_packets:
                        log.debug("port %d: received %d bytes", port, len(data))
            out: list[tuple[int, bytes]] = []
            # Nothing for Python's path (no frame, nothing queued or ready in Python): no
            # second lock and no service_queues (a packet the control plane adds meanwhile
            # also sets the wake-up, so the wait below does not sleep on it).
            if frames or dev.python_work:
                with hold():
                    if frames:
                        dev.receive_batch(frames, on_error)
                    out = dev.service_queues(BATCH)
                    if out:
                        kept = [(port, data) for port, data in out if port in attached]
                        if len(kept) != len(out):
                            for port, _data in out:
                                if port not in attached:
                                    dev.drops.count(DropReason.NO_PORT, port)
                        out = kept
            if out:
                ports.send_batch(out)
                if fast is not None:
                    fast.invalidate()
                if pcaps or log_packets:
                    for port, data in out:
                        if pcaps:
                            pcaps[(port, "out")].write(data)
                        if log_packets:
                            log.debug("port %d: sent %d bytes", port, len(data))
            frames = []
            if got >= limit:
                if yield_full:  # --yield-when-full: other switches on this core take a turn
                    self.yields += 1
                    os.sched_yield()
                continue  # more are waiting, surely
            if got or out:
                last_work = time.monotonic()
            nxt = (
                dev.next_departure_us()
                if dev.python_work or (fast is not None and fast.held_total)
                else None
            )
            # A queued packet may leave up to the burst allowance before its departure time:
            # wake up half of it early, so that a late wake-up (timer slack, a busy core)
            # does not cost the port its rate; each wake-up still sends half a burst.
            wait_s = IDLE_WAIT_S if nxt is None else (nxt - early_us - dev.now_us()) / 1e6
            if wait_s <= 0:
                continue
            if busy_s and time.monotonic() - last_work < busy_s:
                continue  # --busy-poll: spin on the rings (no system call)
            if got > 1 and coalesce_s:
                # Frames arrive faster than this loop runs: let a batch gather.
                self.sleeps += 1
                time.sleep(min(coalesce_s, wait_s))
                continue
            # (A round in C that drained the rings just looked at them: ``poll`` returns at
            # once in the rare case that a frame came since.)
            if not (fast is not None and fast.drained) and any(p.rx_ready() for p in rings):
                continue
            self.polls += 1
            if wait_s >= FINE_WAIT_S:
                ready = [
                    fd
                    for fd, ev in poller.poll(int(wait_s * 1000) - 1)
                    if fd == wake_fd or ev & (select.POLLERR | select.POLLHUP)
                ]
            else:
                ready = select.select(select_fds, [], [], wait_s)[0]
            for fd in ready:
                if fd == wake_fd:
                    wake.clear()  # only when it fired: no read() per wake-up
                    continue
                errored = port_by_fd[fd]
                if not errored.rx_ready():
                    errored.clear_error()  # a link went down: do not spin on it


def _fine_timer_slack() -> None:
    """Let this thread's timed waits end within 1 us of their time (Linux: ``prctl``
    PR_SET_TIMERSLACK; the default slack of 50 us is most of a packet's time at 200 Mbit/s).
    Best effort: nothing changes where the call is not available."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(29, 1000, 0, 0, 0)  # PR_SET_TIMERSLACK, nanoseconds
    except (OSError, AttributeError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parse_args(argv)
    except UsageError as e:
        print(f"tf-switch: error: {e}", file=sys.stderr)
        return 2
    level = LOG_LEVELS[args.log_level]
    logging.basicConfig(
        level=level if args.log_console else max(level, logging.WARNING),
        format="%(asctime)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    set_native_mode(args.native)
    try:
        load_extern_modules(args.load_modules)
    except P4Error as e:
        print(f"tf-switch: error: {e.message}", file=sys.stderr)
        return 1
    daemon = SwitchDaemon(args)
    done = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        daemon.start()
    except P4Error as e:
        print(e.render(), file=sys.stderr)
        daemon.stop()
        return 1
    except NativeUnavailable as e:
        print(f"tf-switch: error: --native on: {e}", file=sys.stderr)
        daemon.stop()
        return 1
    except OSError as e:
        print(
            f"tf-switch: error: {e.strerror or e}{': ' + str(e.filename) if e.filename else ''}",
            file=sys.stderr,
        )
        daemon.stop()
        return 1
    # What exists now (the program, gRPC, the tables) lives as long as the switch: the cycle
    # collector's full passes over it cost ~10 % of a busy data path's CPU (perf).
    gc.freeze()
    try:
        while not done.wait(0.5):
            if daemon.loop_thread is not None and not daemon.loop_thread.is_alive():
                log.error("the data-path thread stopped")
                break
    finally:
        daemon.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

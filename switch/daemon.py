"""``tf-switch``: a P4Runtime-served v1model switch on Linux interfaces.

Command line compatible with BMv2's ``simple_switch_grpc`` where it applies::

    tf-switch -i 1@s1-eth1 -i 2@s1-eth2 --device-id 1 --cpu-port 255 --pcap DIR \\
              --log-console [--no-p4 | PROG.p4 | PROG.tfp4.json] -- --grpc-server-addr 127.0.0.1:9559

One data-path thread receives frames from the ports, runs ingress, queues packets in the
traffic manager, drains the queues at their configured rates through egress and transmits.
The P4Runtime server and the runtime CLI (``tf-switch-cli``, on the ``--thrift-port``) change
state from their own threads under the device lock, between batches of packets.
"""

from __future__ import annotations

import argparse
import logging
import select
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from switch.device.device import Device, Pipeline
from switch.errors import P4Error
from switch.pipeline.drops import DropReason

if TYPE_CHECKING:
    from switch.device.control import RuntimeCliServer
    from switch.device.pcap import PcapWriter
    from switch.device.ports import PortSet
    from switch.p4rt.server import P4RuntimeServer

log = logging.getLogger("tailfabric.switch")

BATCH = 64
BUSY_POLL_S = 0.0002  # keep polling the rings this long after the last packet before sleeping
WORK_GAP_GAIN = 1 / 8
FINE_WAIT_S = 0.002  # waits shorter than this use select (microseconds), longer ones poll (ms)
IDLE_WAIT_S = 0.2
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
        self.device = Device(
            args.device_id,
            args.cpu_port,
            priority_queues=args.priority_queues,
            queue_depth=args.queue_depth,
            seed=args.seed,
        )
        self.stopping = threading.Event()
        self.ports: PortSet | None = None
        self.pcaps: dict[tuple[int, str], PcapWriter] = {}
        self.grpc: P4RuntimeServer | None = None
        self.cli: RuntimeCliServer | None = None
        self.loop_thread: threading.Thread | None = None
        if args.queue_rate:
            from switch.device.sscli import parse_rate

            rate, unit = parse_rate(args.queue_rate)
            self.device.tm.set_rate(rate, unit=unit)  # every port, also ports made later

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        args = self.args
        if args.program:
            self.device.commit(load_pipeline(args.program, args.include))
        self._open_ports()
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

        ports = self.ports = PortSet()
        for num, ifname in sorted(self.args.ports.items()):
            try:
                ports.add(num, ifname)
            except OSError as e:
                raise OSError(e.errno, f"cannot open port {num}@{ifname}: {e.strerror}") from None
        self.device.io_drops = ports.drop_cells
        self.device.io_packets = ports.packets
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

    # -- data path ---------------------------------------------------------------------

    def run_loop(self) -> None:
        """Receive a batch, run ingress, drain what the queues allow through egress, send.

        Sleeps only when no frame is waiting and no queue may send yet, until the next
        departure (a rate-limited port) to the microsecond: ``poll`` for whole milliseconds,
        ``select`` for what is left under 2 ms. A PacketOut or a config change wakes it through
        ``device.wakeup``. It busy-polls the rings (no system call) for a moment after work
        only while work comes faster than that moment, i.e. at high packet rates.
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
        last_work = 0.0
        work_gap = 1.0  # running mean of the time between iterations that found work
        while not self.stopping.is_set():
            frames = ports.recv_batch(BATCH)
            with dev.lock:
                for port, data in frames:
                    if pcaps:
                        pcaps[(port, "in")].write(data)
                    if log_packets:
                        log.debug("port %d: received %d bytes", port, len(data))
                    try:
                        dev.receive(port, data)
                    except Exception:  # noqa: BLE001 - one bad packet must not stop the switch
                        log.exception("packet from port %d dropped by an internal error", port)
                        dev.drops.count(DropReason.INTERNAL_ERROR, port)
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
                if pcaps or log_packets:
                    for port, data in out:
                        if pcaps:
                            pcaps[(port, "out")].write(data)
                        if log_packets:
                            log.debug("port %d: sent %d bytes", port, len(data))
            if frames or out:
                t = time.monotonic()
                work_gap += (min(t - last_work, 1.0) - work_gap) * WORK_GAP_GAIN
                last_work = t
                continue
            nxt = dev.next_departure_us()
            wait_s = IDLE_WAIT_S if nxt is None else (nxt - dev.now_us()) / 1e6
            if wait_s <= 0 or any(p.rx_ready() for p in rings):
                continue
            # Traffic is flowing fast: watch the rings for a short while before sleeping.
            # Under bursty load near capacity, a sleep and wake-up per burst costs more CPU
            # than the bursts themselves; at low rates the spinning would be the cost.
            if rings and work_gap < BUSY_POLL_S and time.monotonic() - last_work < BUSY_POLL_S:
                continue
            if wait_s >= FINE_WAIT_S:
                ready = [
                    fd
                    for fd, ev in poller.poll(int(wait_s * 1000) - 1)
                    if ev & (select.POLLERR | select.POLLHUP)
                ]
            else:
                ready = select.select(select_fds, [], [], wait_s)[0]
            for fd in ready:
                errored = port_by_fd.get(fd)
                if errored is not None and not errored.rx_ready():
                    errored.clear_error()  # a link went down: do not spin on it
            wake.clear()


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
    except OSError as e:
        print(
            f"tf-switch: error: {e.strerror or e}{': ' + str(e.filename) if e.filename else ''}",
            file=sys.stderr,
        )
        daemon.stop()
        return 1
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

"""``tf-topo``: fabric sizes, topology JSON, and fabrics in Mininet.

::

    tf-topo scale --radix 64 --port-gbps 800 --nic-gbps 800 --planes 8
    tf-topo json --planes 2 --leaves 2 --spines 2 --hosts 2 -o topo.json
    tf-topo up [--planes 2 ...] [--target tf|bmv2]   # bring up, verify, Mininet CLI, tear down
    tf-topo up --detach                               # a background fabric (make fabric-up)
    tf-topo up --no-controller ...                    # without the controller service
    tf-topo down                                      # stop it (make fabric-down)
    tf-topo check [--pairs h1:h3] [--planes 0]        # every path of a running fabric
    tf-topo clean [--all]                             # leftovers of crashed runs (make clean)

``up`` keeps the bring-up's controller running as the fabric's one controller service (what
``tf-ctl serve`` does): every ``tf-ctl`` command goes through it, and it collects telemetry into
``results/telemetry.csv`` until ``down`` (or the CLI's exit) stops the fabric. ``up``, ``down``,
``check`` and ``clean`` need root (namespaces, veths).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from switch.device.netns import netns_of_pid
from topologies.model import Fabric, FabricSpec, TopologyError, build_fabric
from topologies.scale import ScaleSpec, format_report, scale

DETACH_TIMEOUT_S = 120.0


def _on_signal(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def add_spec_args(ap: argparse.ArgumentParser) -> None:
    d = FabricSpec()
    ap.add_argument("--planes", type=int, default=d.planes)
    ap.add_argument("--leaves", type=int, default=d.leaves, help="leaves per plane")
    ap.add_argument("--spines", type=int, default=d.spines, help="spines per plane")
    ap.add_argument("--hosts", type=int, default=d.hosts_per_leaf, help="hosts per leaf")
    ap.add_argument(
        "--link-mbps",
        type=float,
        default=d.link_mbps,
        help="emulated link capacity: every switch port's queue rate",
    )
    ap.add_argument("--queue-depth", type=int, default=d.queue_depth, help="packets per queue")


def spec_from(args: argparse.Namespace) -> FabricSpec:
    return FabricSpec(
        planes=args.planes,
        leaves=args.leaves,
        spines=args.spines,
        hosts_per_leaf=args.hosts,
        link_mbps=args.link_mbps,
        queue_depth=args.queue_depth,
    )


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="tf-topo", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)

    sc = sub.add_parser("scale", help="hosts a two-tier multi-plane Clos reaches vs a single plane")
    d = ScaleSpec()
    sc.add_argument("--radix", type=int, default=d.radix, help="physical ports per switch")
    sc.add_argument("--port-gbps", type=int, default=d.port_gbps)
    sc.add_argument("--nic-gbps", type=int, default=d.nic_gbps)
    sc.add_argument("--planes", type=int, default=d.planes)

    js = sub.add_parser("json", help="write the topology JSON")
    add_spec_args(js)
    js.add_argument("-o", "--out", default="-", help="file (default: stdout)")

    up = sub.add_parser("up", help="bring a fabric up in Mininet and verify every path")
    add_spec_args(up)
    up.add_argument("--target", default=os.environ.get("TARGET", "tf"), choices=("tf", "bmv2"))
    up.add_argument(
        "--launch",
        default="fork",
        choices=("fork", "exec"),
        help="tf-switch processes: forked from one pre-imported server, or exec'd",
    )
    up.add_argument("--results", default="results")
    up.add_argument(
        "--pcap", action="store_true", help="capture every switch port to results/fabric/pcap"
    )
    up.add_argument("--log-level", default="info", help="switch log level")
    up.add_argument("--no-cli", action="store_true", help="stay up without a CLI until SIGTERM")
    up.add_argument("--detach", action="store_true", help="run in the background (make fabric-up)")
    up.add_argument(
        "--no-controller",
        action="store_true",
        help="start no controller service (tf-ctl then connects to the switches itself)",
    )
    up.add_argument("--check-timeout", type=float, default=3.0, metavar="SECONDS")

    dn = sub.add_parser("down", help="stop the background fabric")
    dn.add_argument("--results", default="results")

    ck = sub.add_parser("check", help="probe every path of the running fabric")
    ck.add_argument("--results", default="results")
    ck.add_argument("--pairs", default="", help="SRC:DST,... (default: every ordered pair)")
    ck.add_argument("--planes", default="", help="comma-separated planes (default: all)")
    ck.add_argument("--timeout", type=float, default=2.0, metavar="SECONDS")

    cl = sub.add_parser("clean", help="remove what fabrics left behind (processes, veths, files)")
    cl.add_argument("--results", default="results")
    cl.add_argument(
        "--all",
        action="store_true",
        help="also what no state file names: every switch process and fabric host namespace "
        "on the machine, stale test namespaces (never Mininet's own clean-up: only the project's)",
    )
    return ap


# -- commands ------------------------------------------------------------------------------------


def cmd_scale(args: argparse.Namespace) -> int:
    spec = ScaleSpec(
        radix=args.radix, port_gbps=args.port_gbps, nic_gbps=args.nic_gbps, planes=args.planes
    )
    print(format_report(scale(spec)))
    return 0


def cmd_json(args: argparse.Namespace) -> int:
    fabric = build_fabric(spec_from(args))
    if args.out == "-":
        print(fabric.to_json())
    else:
        fabric.to_json(args.out)
        print(f"wrote {args.out}")
    return 0


def _running_state(results: str) -> dict[str, Any] | None:
    from topologies.emulation.cleanup import process_alive
    from topologies.emulation.fabricnet import read_state

    state = read_state(results)
    if state and isinstance(state.get("runner_pid"), int) and process_alive(state["runner_pid"]):
        return state
    return None


def _prepare(results: str) -> None:
    """Refuse to start over a live fabric; clear what a dead one left."""
    from topologies.emulation.cleanup import cleanup
    from topologies.emulation.fabricnet import read_state

    live = _running_state(results)
    if live:
        raise TopologyError(
            f"a fabric is already running (pid {live['runner_pid']}, state "
            f"{Path(results) / 'fabric' / 'state.json'}): stop it first with "
            "'make fabric-down' (or 'tf-topo down')"
        )
    if read_state(results) is not None:
        cleanup(results, remove_files=False, log=lambda s: print(f"stale fabric: {s}"))


def cmd_up(args: argparse.Namespace) -> int:
    if args.detach:
        return _detach(args)
    from topologies.emulation.bringup import bring_up, summary
    from topologies.emulation.fabricnet import FabricNetOptions
    from topologies.emulation.mnfabric import SwitchOptions

    fabric = build_fabric(spec_from(args))
    _prepare(args.results)
    run_dir = Path(args.results) / "fabric"
    sw = SwitchOptions(
        target=args.target,
        launch=args.launch,
        log_dir=str(run_dir / "logs"),
        pcap_dir=str(run_dir / "pcap") if args.pcap else None,
        log_level=args.log_level,
        link_mbps=fabric.spec.link_mbps,
        queue_depth=fabric.spec.queue_depth,
    )
    options = FabricNetOptions(switch=sw, results_dir=args.results)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    if args.no_cli:
        signal.signal(signal.SIGINT, _on_signal)
    up = bring_up(fabric, options, check_timeout_s=args.check_timeout)
    try:
        print(summary(up), flush=True)
        if args.no_cli and not up.verified:
            print("not every path works: stopping", flush=True)
            return 1
        if args.no_controller:
            if args.no_cli:
                up.close_controller()  # the switches keep their tables; others may connect now
        else:
            server = up.serve()
            print(
                f"controller service: tf-ctl commands go to 127.0.0.1:{server.port} "
                f"(pid {os.getpid()}); telemetry -> {Path(args.results) / 'telemetry.csv'}",
                flush=True,
            )
        if args.no_cli:
            print(f"fabric up (pid {os.getpid()}); stop it with 'make fabric-down'", flush=True)
            while True:
                signal.pause()
        from topologies.emulation.mncli import FabricCLI

        if not up.verified:
            print("*** warning: not every path works (see above)", flush=True)
        FabricCLI(up)
        return 0 if up.verified else 1
    finally:
        up.stop()


def _detach(args: argparse.Namespace) -> int:
    from topologies.emulation.fabricnet import read_state

    _prepare(args.results)
    run_dir = Path(args.results) / "fabric"
    run_dir.mkdir(parents=True, exist_ok=True)
    log_path = run_dir / "fabric.log"
    argv = [a for a in args.argv if a != "--detach"]
    if "--no-cli" not in argv:
        argv.append("--no-cli")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "topologies.emulation.cli", *argv],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + DETACH_TIMEOUT_S
    while time.monotonic() < deadline:
        rc = proc.poll()
        state = read_state(args.results)
        if (
            state
            and state.get("ready")
            and state.get("runner_pid") == proc.pid
            and (args.no_controller or _serving(args.results, proc.pid))
        ):
            print(log_path.read_text().rstrip())
            print(f"log: {log_path}")
            return 0
        if rc is not None:
            print(log_path.read_text().rstrip(), file=sys.stderr)
            print(f"the fabric did not come up (exit {rc}); log: {log_path}", file=sys.stderr)
            return rc or 1
        time.sleep(0.05)
    proc.terminate()
    print(
        f"the fabric did not come up within {DETACH_TIMEOUT_S:g} s; log: {log_path}",
        file=sys.stderr,
    )
    return 1


def _serving(results: str, pid: int) -> bool:
    """Whether process ``pid`` serves the controller of ``results`` (``controller.json``)."""
    from controller.client import find_server

    info = find_server(results)
    return info is not None and info.pid == pid


def cmd_down(args: argparse.Namespace) -> int:
    from topologies.emulation.cleanup import cleanup, stop_runner
    from topologies.emulation.fabricnet import read_state

    state = read_state(args.results)
    if state is None:
        print("no fabric is running")
        return 0
    stopped = stop_runner(state)
    leftovers = cleanup(args.results, remove_files=False, log=lambda s: None)
    print("fabric stopped" if stopped else "the fabric's runner was gone")
    for line in leftovers:
        print(f"  {line}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from topologies.emulation import probe
    from topologies.emulation.fabricnet import read_state

    state = _running_state(args.results) or read_state(args.results)
    if state is None:
        print("no fabric is running (make fabric-up)", file=sys.stderr)
        return 1
    fabric = Fabric.load(state["topology"])
    netns = {name: netns_of_pid(h["pid"]) for name, h in state["hosts"].items()}
    pairs = probe.parse_pairs(args.pairs, fabric) if args.pairs else None
    planes = {int(p) for p in args.planes.split(",") if p.strip()} if args.planes else None
    results = probe.check_fabric(fabric, netns, pairs=pairs, planes=planes, timeout_s=args.timeout)
    print(probe.summarize(results))
    return 0 if all(r.ok for r in results) else 1


def cmd_clean(args: argparse.Namespace) -> int:
    from topologies.emulation.cleanup import cleanup

    if not cleanup(args.results, everything=args.all):
        print("nothing to clean")
    return 0


COMMANDS = {
    "scale": cmd_scale,
    "json": cmd_json,
    "up": cmd_up,
    "down": cmd_down,
    "check": cmd_check,
    "clean": cmd_clean,
}
NEEDS_ROOT = {"up", "down", "check", "clean"}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    args.argv = argv
    if args.cmd in NEEDS_ROOT and os.geteuid() != 0:
        print(f"tf-topo {args.cmd}: needs root (network namespaces, veths)", file=sys.stderr)
        return 2
    try:
        return COMMANDS[args.cmd](args)
    except TopologyError as e:
        print(f"tf-topo {args.cmd}: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:  # FabricNetError, ProbeError, LaunchError
        print(f"tf-topo {args.cmd}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())

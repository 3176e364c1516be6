"""``tf-ctl``: the fabric controller's command line.

::

    tf-ctl serve --topology T --p4info P --config C [--no-push] [--port N] [--results DIR]
    tf-ctl [--results DIR] [--topology T] [--direct] COMMAND [ARGS...] [--json | --csv]

``serve`` connects to every switch (primary), pushes the pipeline (unless ``--no-push``),
installs routes, collects telemetry into ``results/telemetry.csv`` and serves commands on
127.0.0.1 until SIGINT/SIGTERM. Any other command goes to that server (found through
``results/fabric/controller.json``); without one (or with ``--direct``) ``tf-ctl`` connects to
the switches itself with a newer election id, applies the command against what they hold,
waits for ``loss --for`` to expire, and releases them; it says so on stderr first, since as the
switches' primary it takes their digest stream from any other standalone ``tf-ctl`` until it
ends (a ``telemetry watch`` notes it when that happens to it). ``tf-ctl help`` lists the
commands.

:func:`mininet_command` is the same for the fabric's Mininet CLI: a command line in, text out,
never an exception. Exit status: 0 done, 1 command refused or failed, 2 usage, 3 fabric or
server unreachable.
"""

from __future__ import annotations

import argparse
import logging
import shlex
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Protocol

from controller.client import ServerUnavailable, find_server, send_command
from controller.config import results_dir_default
from controller.errors import CommandError, ControllerError, FabricUnavailable
from controller.processes import FabricProcesses
from topologies.model import Fabric, TopologyError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3
GLOBAL_FLAGS = {"--results": True, "--topology": True, "--direct": False}
DEFAULT_TOPOLOGY = Path("fabric") / "topology.json"


def load_topology(path: str | Path) -> Fabric:
    try:
        return Fabric.load(path)
    except (OSError, TopologyError) as e:
        raise CommandError(f"cannot load topology {path}: {e}") from None


# -- serve ---------------------------------------------------------------------------------


def serve_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="tf-ctl serve", description="Run the fabric controller.")
    ap.add_argument("--topology", required=True, help="topology JSON (tf-topo / topologies)")
    ap.add_argument("--p4info", required=True, help="P4Info of the pipeline (text or binary)")
    ap.add_argument(
        "--config",
        required=True,
        help="device config to push (tf-p4 compile output, or p4c's BMv2 JSON)",
    )
    ap.add_argument(
        "--no-push",
        action="store_true",
        help="keep the switches' pipeline; reconcile their entries",
    )
    ap.add_argument("--port", type=int, default=0, help="command port on 127.0.0.1 (0: any)")
    ap.add_argument("--results", default=None, help="results directory (default: results)")
    ap.add_argument("-v", "--verbose", action="store_true")
    return ap


def serve(argv: Sequence[str]) -> int:
    from controller.fabric import FabricController
    from controller.server import ControlServer

    args = serve_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="tf-ctl: %(message)s"
    )
    results = args.results or results_dir_default()
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    fabric = load_topology(args.topology)
    with FabricController(
        fabric, args.p4info, args.config, results_dir=results, resume=args.no_push
    ) as ctl:
        ctl.connect()
        if not args.no_push:
            ctl.push_pipeline()
        ctl.install_routes()
        ctl.start_telemetry()
        with ControlServer(ctl, args.port, topology=str(Path(args.topology).resolve())) as srv:
            times = ", ".join(f"{k} {v:.2f} s" for k, v in ctl.timings_s.items())
            print(
                f"tf-ctl: {len(ctl.sessions)} switches ready ({times}); serving on "
                f"127.0.0.1:{srv.port}",
                flush=True,
            )
            stop.wait()
    print("tf-ctl: stopped", flush=True)
    return EXIT_OK


# -- one command ---------------------------------------------------------------------------


@dataclass(frozen=True)
class GlobalOptions:
    """The options before the command (:data:`GLOBAL_FLAGS`); an empty value counts as none."""

    results: str | None = None
    topology: str | None = None
    direct: bool = False


def split_global(argv: Sequence[str]) -> tuple[GlobalOptions, list[str]]:
    """Leading ``--results DIR``, ``--topology T``, ``--direct``; the rest is the command."""
    values: dict[str, str] = {}
    direct = False
    rest = list(argv)
    while rest and rest[0] in GLOBAL_FLAGS:
        flag = rest.pop(0)
        if GLOBAL_FLAGS[flag]:
            if not rest:
                raise CommandError(f"{flag} needs a value")
            values[flag] = rest.pop(0)
        else:
            direct = True
    opts = GlobalOptions(values.get("--results") or None, values.get("--topology") or None, direct)
    return opts, rest


def topology_for(results_dir: str, given: str | None) -> str:
    if given:
        return given
    server = find_server(results_dir)
    if server is not None and server.topology:
        return server.topology
    procs = FabricProcesses.load(results_dir)
    if procs is not None and procs.topology:
        return procs.topology
    default = Path(results_dir) / DEFAULT_TOPOLOGY
    if default.exists():
        return str(default)
    raise CommandError(
        "no running tf-ctl serve and no topology: pass --topology T (or start "
        "the fabric, which records it in results/fabric/state.json)"
    )


def run_direct(
    argv: list[str],
    results_dir: str,
    topology: str | None,
    out: Callable[[str], None] | None = None,
) -> str:
    """Run one command with a short-lived controller of our own (no server)."""
    from controller.fabric import FabricController

    fabric = load_topology(topology_for(results_dir, topology))
    with FabricController(fabric, results_dir=results_dir, resume=True) as ctl:
        missing = ctl.not_listening()
        if missing:
            where = f"{missing[0]} at {ctl.address_of(missing[0])}"
            if len(missing) == len(fabric.switches):
                raise FabricUnavailable(
                    f"no switch of the fabric answers ({where}, and {len(missing) - 1} more): "
                    "the fabric is not running (make fabric-up starts it)"
                )
            raise FabricUnavailable(
                f"{', '.join(missing)} of {len(fabric.switches)} switches do not answer "
                f"({where}): is the fabric coming up or going down?"
            )
        ctl.connect()
        ctl.install_routes()
        text = ctl.run_command(argv, out=out)
        if ctl.pending_expiries():
            if out is not None:
                out(text)
                text = ""
            ctl.wait_for_expiries()
            text = "\n".join(t for t in (text, "timed loss expired and removed") if t)
        return text


def takeover_notice(why: str) -> str:
    """What a standalone ``tf-ctl`` says before it takes the switches over."""
    return (
        f"{why}: connecting to the switches directly, as their primary controller until this "
        "command ends (a telemetry watch in another standalone tf-ctl misses the bursts "
        "meanwhile; make fabric-up or tf-ctl serve runs one controller for every tf-ctl)"
    )


def run_line(
    argv: list[str],
    results_dir: str | None = None,
    *,
    topology: str | None = None,
    direct: bool = False,
    out: Callable[[str], None] | None = None,
    notice: Callable[[str], None] | None = None,
) -> str:
    """Send ``argv`` to the running server, or run it directly when none answers.

    Args:
        notice: told (once) when the command runs directly, taking the switches over.
    """
    results = results_dir or results_dir_default()
    if argv[:1] == ["help"]:
        from controller.commands import help_text

        return help_text(argv[1:])
    from controller.commands import check

    check(argv)  # a bad command is reported before any switch is taken over
    why = "--direct"
    if not direct:
        try:
            return send_command(argv, results, out=out)
        except ServerUnavailable as e:
            why = str(e)
    if notice is not None:
        notice(takeover_notice(why))
    return run_direct(argv, results, topology, out)


class CommandRunner(Protocol):
    """What runs a command line in process (:class:`~controller.fabric.FabricController`)."""

    def run_command(self, argv: list[str]) -> str: ...


def mininet_command(
    line: str, *, results_dir: str | None = None, controller: CommandRunner | None = None
) -> str:
    """For the Mininet CLI: run ``line`` (e.g. ``"fail plane 1"``) and return the text to
    print; errors come back as ``"error: ..."`` and never raise.

    Args:
        controller: an in-process :class:`~controller.fabric.FabricController` (``make
            fabric``); None sends the line to ``tf-ctl serve`` (``make fabric-up``).
    """
    try:
        argv = shlex.split(line)
        if controller is not None:
            return controller.run_command(argv)
        return run_line(argv, results_dir)
    except ValueError as e:
        return f"error: {e}"
    except ControllerError as e:
        return f"error: {e}"


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["serve"]:
        try:
            return serve(argv[1:])
        except FabricUnavailable as e:
            print(f"tf-ctl serve: {e}", file=sys.stderr)
            return EXIT_UNREACHABLE
        except ControllerError as e:
            print(f"tf-ctl serve: {e}", file=sys.stderr)
            return EXIT_FAILED
    try:
        opts, rest = split_global(argv)
        if not rest or rest[0] in ("-h", "--help"):
            rest = ["help"]
        text = run_line(
            rest,
            opts.results,
            topology=opts.topology,
            direct=opts.direct,
            out=lambda s: print(s, flush=True),
            notice=lambda s: print(f"tf-ctl: {s}", file=sys.stderr, flush=True),
        )
    except CommandError as e:
        print(f"tf-ctl: {e}", file=sys.stderr)
        return EXIT_USAGE if str(e).startswith("usage:") else EXIT_FAILED
    except FabricUnavailable as e:
        print(f"tf-ctl: {e}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except ControllerError as e:
        print(f"tf-ctl: {e}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_FAILED
    if text:
        print(text)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())

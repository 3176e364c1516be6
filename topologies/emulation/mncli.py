"""The Mininet CLI of ``make fabric``, with the fabric's and the controller's commands.

Besides Mininet's own commands (``h1 ip -6 route``, ``nodes``, ``links``, ``exit``...):

* ``check [h1:h2,...] [plane N]`` -- every path of every (or the given) host pair, again;
* ``paths SRC DST`` -- the (plane, spine) paths and their micro-SID addresses;
* ``ctl ARGS...`` -- a controller (``tf-ctl``) command, e.g. ``ctl help``; a line whose first
  word is neither a Mininet command nor a node goes to the controller as well;
* ``fabric`` -- the bring-up summary.
"""

from __future__ import annotations

import shlex
import sys
from typing import TextIO

from mininet.cli import CLI

from topologies.emulation import probe
from topologies.emulation.bringup import BringUp, summary
from topologies.model import TopologyError


class FabricCLI(CLI):  # type: ignore[misc]
    prompt = "tailfabric> "

    def __init__(self, up: BringUp, stdin: TextIO = sys.stdin, script: str | None = None) -> None:
        self.up = up
        super().__init__(up.net.net, stdin=stdin, script=script)

    def _out(self, text: str) -> None:
        sys.stdout.write(text.rstrip("\n") + "\n")
        sys.stdout.flush()

    def do_fabric(self, line: str) -> None:
        """fabric: the bring-up summary (sizes, phase times, path check)."""
        self._out(summary(self.up))

    def do_check(self, line: str) -> None:
        """check [h1:h2,h3:h4] [plane N]: probe every path of the host pairs (default: all)."""
        words = line.split()
        planes = None
        pairs = None
        try:
            if "plane" in words:
                i = words.index("plane")
                planes = {int(words[i + 1])}
                del words[i : i + 2]
            if words:
                pairs = probe.parse_pairs(words[0], self.up.net.fabric)
            results = self.up.net.check(pairs=pairs, planes=planes)
        except (TopologyError, probe.ProbeError, ValueError, IndexError) as e:
            self._out(f"*** check: {e}")
            return
        self._out(probe.summarize(results))

    def do_paths(self, line: str) -> None:
        """paths SRC DST: the micro-SID addresses of every (plane, spine) path."""
        words = line.split()
        if len(words) != 2:
            self._out("usage: paths SRC DST   (e.g. paths h1 h3)")
            return
        try:
            paths = self.up.net.fabric.paths(words[0], words[1])
        except TopologyError as e:
            self._out(f"*** paths: {e}")
            return
        for p in paths:
            self._out(
                f"plane {p.plane} spine {p.spine}: {p.address}  via {p.src_nic}  "
                f"({' -> '.join(p.hops)})"
            )

    def do_ctl(self, line: str) -> None:
        """ctl ARGS...: run a controller (tf-ctl) command, e.g. 'ctl help'."""
        ctl = self.up.controller
        if ctl is None:
            self._out("*** no controller is connected")
            return
        try:
            out = ctl.run_command(shlex.split(line))
        except SystemExit:
            return  # argparse printed its usage
        except Exception as e:  # noqa: BLE001 - a failed command must not end the CLI
            self._out(f"*** ctl: {type(e).__name__}: {e}")
            return
        if out:
            self._out(out)

    def default(self, line: str) -> None:
        first, _args, _line = self.parseline(line)
        if first in self.mn or self.up.controller is None:
            super().default(line)
        else:
            self.do_ctl(line)

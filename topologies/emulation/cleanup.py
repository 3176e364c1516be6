"""Remove what a fabric left behind, also after a crash (``make clean``, ``tf-topo clean``).

In order:

1. the fabric's runner (``runner_pid`` in ``results/fabric/state.json``), asked to stop with
   SIGTERM, which tears its fabric down itself; then every process the state file names
   (switches, the fork server, the controller, host shells) and every process still inside a
   host's network namespace;
2. with ``everything``: every switch process on the machine (process name ``tf-switch``, a
   ``switch.daemon`` or ``topologies.emulation.swlaunch`` command line, BMv2's
   ``simple_switch_grpc``) and every ``tf-ctl serve``;
3. root-namespace interfaces named like fabric switch ports (``p<plane><l|s><index>-eth<port>``);
4. Mininet's own leftovers (``mn -c``: host shells, its interfaces) with ``everything``;
5. the fabric's directory under ``results/`` (state, logs, host scripts, pcaps).

Only root can do most of this; each step reports what it removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from switch.device.netns import netns_of_pid

SWITCH_PORT_RE = re.compile(r"^p\d+[ls]\d+-eth\d+$")
STRAY_COMMS = ("tf-switch", "simple_switch_gr")  # /proc/<pid>/comm is cut at 15 characters
STRAY_CMDLINE = (
    "switch.daemon",
    "topologies.emulation.swlaunch",
    "simple_switch_grpc",
    "tf-ctl serve",
    "controller.cli serve",
    "topologies.emulation.cli up",
)
RUNNER_GRACE_S = 20.0
KILL_GRACE_S = 2.0


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _read(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (``/proc/<pid>/stat``)."""
    stat = _read(f"/proc/{pid}/stat")
    return bool(stat) and stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _netns_inode(pid: int) -> int | None:
    try:
        return os.stat(netns_of_pid(pid)).st_ino
    except OSError:
        return None


def kill_all(pids: Iterable[int], grace_s: float = KILL_GRACE_S) -> list[int]:
    """SIGTERM, wait up to ``grace_s``, SIGKILL; returns the pids that were running."""
    me = os.getpid()
    targets = sorted({p for p in pids if p != me and p > 1 and process_alive(p)})
    for p in targets:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    left = targets
    while left and time.monotonic() < deadline:
        time.sleep(0.02)
        left = [p for p in left if process_alive(p)]
    for p in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGKILL)
    return targets


def processes_in_netns(inodes: set[int]) -> list[int]:
    """Processes whose network namespace is one of ``inodes``."""
    return [p for p in _pids() if _netns_inode(p) in inodes]


def stray_switch_processes() -> list[int]:
    """Every switch / fork server / ``tf-ctl serve`` / fabric runner process on the machine."""
    me = os.getpid()
    out = []
    for p in _pids():
        if p == me:
            continue
        comm = _read(f"/proc/{p}/comm").strip()
        cmd = _read(f"/proc/{p}/cmdline").replace("\0", " ")
        if comm in STRAY_COMMS or any(s in cmd for s in STRAY_CMDLINE):
            out.append(p)
    return out


def stop_runner(state: dict[str, Any], grace_s: float = RUNNER_GRACE_S) -> bool:
    """SIGTERM the process that owns the fabric and wait for it; True if one was running."""
    pid = state.get("runner_pid")
    if not isinstance(pid, int) or not process_alive(pid) or pid == os.getpid():
        return False
    cmd = _read(f"/proc/{pid}/cmdline")
    if "topologies" not in cmd and "tf-topo" not in cmd and "pytest" not in cmd:
        return False  # pid reused by something else
    kill_all([pid], grace_s)
    return True


def state_processes(state: dict[str, Any]) -> list[int]:
    """Pids the state file names (switches, fork server, controller, host shells)."""
    pids: list[object] = [state.get("launcher_pid")]
    pids += [s.get("pid") for s in state.get("switches", {}).values()]
    pids += [h.get("pid") for h in state.get("hosts", {}).values()]
    ctl = state.get("controller")
    if isinstance(ctl, dict):
        pids.append(ctl.get("pid"))
    return [p for p in pids if isinstance(p, int)]


def delete_switch_ports(names: Iterable[str] | None = None) -> list[str]:
    """Delete root-namespace links named like fabric switch ports (or exactly ``names``)."""
    present = [d.name for d in Path("/sys/class/net").iterdir()]
    wanted = set(names) if names is not None else None
    gone = [n for n in present if (n in wanted if wanted is not None else SWITCH_PORT_RE.match(n))]
    if gone:
        batch = "".join(f"link del dev {n}\n" for n in gone)
        subprocess.run(["ip", "-force", "-batch", "-"], input=batch, capture_output=True, text=True)
    return [n for n in gone if not Path(f"/sys/class/net/{n}").exists()]


def cleanup(
    results_dir: str = "results",
    *,
    everything: bool = False,
    remove_files: bool = True,
    log: Callable[[str], None] = print,
) -> list[str]:
    """Remove a fabric's leftovers (see the module docstring); returns what was done.

    Args:
        everything: also stray switch processes that no state file names and ``mn -c``.
        remove_files: remove ``<results_dir>/fabric`` (else only its state file).
    """
    done: list[str] = []
    fabric_dir = Path(results_dir) / "fabric"
    state: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        state = json.loads((fabric_dir / "state.json").read_text())
    if state:
        if stop_runner(state):
            done.append(f"stopped fabric runner {state['runner_pid']}")
        inodes = set()
        for h in state.get("hosts", {}).values():
            pid = h.get("pid")
            if isinstance(pid, int) and process_alive(pid):
                ino = _netns_inode(pid)
                if ino is not None and ino != _netns_inode(os.getpid()):
                    inodes.add(ino)
        victims = state_processes(state) + processes_in_netns(inodes)
        killed = kill_all(victims)
        if killed:
            done.append(f"killed {len(killed)} fabric processes: {' '.join(map(str, killed))}")
        gone = delete_switch_ports(state.get("interfaces", []))
        if gone:
            done.append(f"deleted {len(gone)} switch ports")
    if everything:
        killed = kill_all(stray_switch_processes())
        if killed:
            done.append(
                f"killed {len(killed)} stray switch/controller processes: "
                f"{' '.join(map(str, killed))}"
            )
    gone = delete_switch_ports()
    if gone:
        done.append(
            f"deleted {len(gone)} leftover switch ports: {' '.join(gone[:8])}"
            + (" ..." if len(gone) > 8 else "")
        )
    if everything and shutil.which("mn"):
        proc = subprocess.run(["mn", "-c"], capture_output=True, text=True)
        done.append("mn -c" + ("" if proc.returncode == 0 else f" (exit {proc.returncode})"))
    if remove_files and fabric_dir.exists():
        shutil.rmtree(fabric_dir, ignore_errors=True)
        done.append(f"removed {fabric_dir}")
    elif (fabric_dir / "state.json").exists():
        (fabric_dir / "state.json").unlink()
        done.append(f"removed {fabric_dir / 'state.json'}")
    for line in done:
        log(line)
    return done

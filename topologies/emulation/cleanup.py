"""Remove what a fabric left behind, also after a crash (``make clean``, ``tf-topo clean``).

Only what the project made goes; nothing is matched by a glob over a shared directory, and
Mininet's own clean-up command is never called (it deletes every ``/tmp/*.log``, ``/tmp/*.out`` and
``/tmp/vconn*`` on the machine, every ``*-eth<n>`` link and every ``mininet:`` shell). In order:

1. the fabric's runner (``runner_pid`` in ``results/fabric/state.json``), asked to stop with
   SIGTERM, which tears its fabric down itself; then every process the state file names
   (switches, the fork server, the controller, host shells) and every process still inside a
   host's network namespace;
2. with ``everything``: every switch process on the machine (process name ``tf-switch``, a
   ``switch.daemon`` or ``topologies.emulation.swlaunch`` command line, BMv2's
   ``simple_switch_grpc``), every ``tf-ctl serve`` and fabric runner;
3. with a state file or ``everything``: the fabric's host namespaces, found by their wiring
   (the rule below), with every process in them: the host shells and whatever outlived them;
   with ``everything`` also Mininet's shells of fabric switches in the root namespace
   (``bash ... mininet:p<plane><l|s><index>``);
4. root-namespace interfaces named like fabric switch ports (``p<plane><l|s><index>-eth<port>``);
5. with ``everything``: namespaces and links of :mod:`switch.device.netns` whose creator is gone
   (:func:`~switch.device.netns.cleanup_stale`: only names with the project's prefix and owner mark);
6. with ``everything``: the folders of agents' fork servers that are gone
   (:func:`host.forkserver.stale_dirs`); the fabric's directory under ``results/`` (state,
   logs, host scripts, pcaps).

**Which namespaces are a fabric's hosts.** A network namespace other than ours is one when it
holds an interface ``h<N>-eth<p>`` (a fabric host NIC, :class:`topologies.model.Nic`)
that is one end of a veth pair whose other end is in our (the root) namespace and is named like
a fabric switch port ``p<plane><l|s><index>-eth<port>``: the host NIC's peer ifindex is the
port's ifindex, the port's peer ifindex is the NIC's, and each reports its peer in another
namespace (:func:`fabric_host_wiring`). Every process in such a namespace is the fabric's:
Mininet's host shell (``bash ... mininet:h<N>``) and anything started inside the host. A
Mininet network made by someone else (plain ``mn``: hosts ``h<N>`` wired to switch ports
``s<N>-eth<n>``) matches no fabric switch port and is left alone, as is a host namespace that
lost its NICs (no wiring to prove it is ours) unless the state file names its shell.
Fabric switch shells have no namespace of their own and are known by name only: a Mininet
shell in the root namespace whose node is named like a fabric switch (``p0l0``, not ``s1``).

Only root can do most of this; each step reports what it removed. A new fabric does steps 3
and 4 itself before it builds (:func:`clear_dead_fabric`, under the machine's fabric lock), so a
killed fabric's links never stop the next one.
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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from host.forkserver import stale_dirs as stale_fork_dirs
from switch.device.netns import NetnsError, call_in_thread, cleanup_stale, join_netns, netns_of_pid

SWITCH_PORT_RE = re.compile(r"^p\d+[ls]\d+-eth\d+$")
SWITCH_NAME_RE = re.compile(r"^p\d+[ls]\d+$")
HOST_NIC_RE = re.compile(r"^h\d+-eth\d+$")
MININET_SHELL_PREFIX = (
    "mininet:"  # Mininet's node shells: bash --norc --noediting -is mininet:<node>
)
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


SHELL_ROUNDS = 3  # kill what is in a namespace again if something was forked meanwhile


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _read(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def _argv(pid: int) -> list[str]:
    return _read(f"/proc/{pid}/cmdline").split("\0")[:-1]


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (``/proc/<pid>/stat``)."""
    stat = _read(f"/proc/{pid}/stat")
    return bool(stat) and stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _netns_inode(pid: int) -> int | None:
    try:
        return os.stat(netns_of_pid(pid)).st_ino
    except OSError:
        return None


def mininet_shell_name(argv: Sequence[str]) -> str | None:
    """The node of a Mininet shell's command line (``bash --norc --noediting -is mininet:h1``
    gives ``h1``), or None for any other command line."""
    if len(argv) < 2 or os.path.basename(argv[0]) != "bash" or "-is" not in argv:
        return None
    last = argv[-1]
    return last[len(MININET_SHELL_PREFIX) :] if last.startswith(MININET_SHELL_PREFIX) else None


def kill_all(pids: Iterable[int], grace_s: float = KILL_GRACE_S) -> list[int]:
    """SIGTERM (SIGHUP to Mininet shells: an interactive bash ignores SIGTERM), wait up to
    ``grace_s``, SIGKILL; returns the pids that were running."""
    me = os.getpid()
    targets = sorted({p for p in pids if p != me and p > 1 and process_alive(p)})
    for p in targets:
        sig = signal.SIGHUP if mininet_shell_name(_argv(p)) is not None else signal.SIGTERM
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, sig)
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


# -- fabric host namespaces, found by their wiring ---------------------------------------------


@dataclass(frozen=True)
class Link:
    """One interface of a namespace, as ``ip -json link show`` reports it."""

    ifname: str
    ifindex: int
    peer_ifindex: int | None = None
    """``link_index``: a veth's peer, in the namespace ``peer_elsewhere`` says."""
    peer_elsewhere: bool = False
    """``link_netnsid`` is set: the peer lives in another namespace."""


def parse_links(ip_json: str) -> list[Link]:
    """``ip -json link show`` output as :class:`Link` records (malformed entries skipped)."""
    out = []
    for item in json.loads(ip_json or "[]"):
        name, index, peer = item.get("ifname"), item.get("ifindex"), item.get("link_index")
        if isinstance(name, str) and isinstance(index, int):
            out.append(
                Link(
                    name,
                    index,
                    peer if isinstance(peer, int) else None,
                    "link_netnsid" in item,
                )
            )
    return out


def fabric_host_wiring(
    ns_links: Iterable[Link], root_links: Mapping[int, Link]
) -> list[tuple[str, str]]:
    """``(host NIC, switch port)`` pairs that make a namespace one of a fabric's hosts.

    Args:
        ns_links: the interfaces of the namespace in question.
        root_links: the root namespace's interfaces by ifindex.

    Returns:
        Every NIC ``h<N>-eth<p>`` whose veth peer is a root-namespace interface named like a
        fabric switch port whose own peer is that NIC (see the module docstring); empty when
        the namespace is not a fabric host.
    """
    pairs = []
    for nic in ns_links:
        if not (HOST_NIC_RE.match(nic.ifname) and nic.peer_elsewhere):
            continue
        port = root_links.get(nic.peer_ifindex) if nic.peer_ifindex is not None else None
        if (
            port is not None
            and SWITCH_PORT_RE.match(port.ifname)
            and port.peer_elsewhere
            and port.peer_ifindex == nic.ifindex
        ):
            pairs.append((nic.ifname, port.ifname))
    return pairs


@dataclass(frozen=True)
class HostNamespace:
    """A fabric host's network namespace: its processes and what proved it is one."""

    inode: int
    pids: tuple[int, ...]
    wiring: tuple[tuple[str, str], ...]


def _ip_links() -> list[Link]:
    proc = subprocess.run(["ip", "-json", "link", "show"], capture_output=True, text=True)
    return parse_links(proc.stdout) if proc.returncode == 0 else []


def _links_of(pid: int) -> list[Link]:
    """The interfaces of process ``pid``'s namespace (``ip`` forked from a thread inside it)."""
    with contextlib.suppress(OSError, NetnsError, ValueError):
        return call_in_thread(
            lambda: join_netns(netns_of_pid(pid)), _ip_links, f"cleanup-netns-{pid}"
        )
    return []


def _dev_names(pid: int) -> list[str]:
    """Interface names of ``pid``'s namespace from ``/proc/<pid>/net/dev`` (no process)."""
    lines = _read(f"/proc/{pid}/net/dev").splitlines()[2:]
    return [line.split(":", 1)[0].strip() for line in lines if ":" in line]


def fabric_host_namespaces() -> list[HostNamespace]:
    """Every namespace on the machine that is a fabric host (see the module docstring)."""
    own = _netns_inode(os.getpid())
    by_inode: dict[int, list[int]] = {}
    for p in _pids():
        ino = _netns_inode(p)
        if ino is not None and ino != own:
            by_inode.setdefault(ino, []).append(p)
    root: dict[int, Link] | None = None
    found = []
    for ino, pids in sorted(by_inode.items()):
        if not any(HOST_NIC_RE.match(n) for n in _dev_names(pids[0])):
            continue  # cheap test first: only namespaces with a host-like NIC get an `ip` call
        if root is None:
            root = {link.ifindex: link for link in _ip_links()}
        wiring = fabric_host_wiring(_links_of(pids[0]), root)
        if wiring:
            found.append(HostNamespace(ino, tuple(pids), tuple(wiring)))
    return found


def kill_namespaces(inodes: set[int]) -> list[int]:
    """Kill every process in the namespaces ``inodes``, again if more appeared; returns them."""
    killed: list[int] = []
    for _ in range(SHELL_ROUNDS):
        more = kill_all(p for p in processes_in_netns(inodes) if p not in killed)
        if not more:
            break
        killed += more
    return killed


def fabric_switch_shells() -> list[int]:
    """Mininet shells of fabric switches (``mininet:p0l0``) in our (the root) namespace."""
    own = _netns_inode(os.getpid())
    out = []
    for p in _pids():
        name = mininet_shell_name(_argv(p))
        if name is not None and SWITCH_NAME_RE.match(name) and _netns_inode(p) == own:
            out.append(p)
    return out


def _describe(pids: Sequence[int]) -> str:
    """``mininet:h1 mininet:h2 + 1 other process``: the Mininet nodes among ``pids`` (read
    while they run) and how many other processes."""
    names = [mininet_shell_name(_argv(p)) for p in pids]
    parts = sorted(f"{MININET_SHELL_PREFIX}{n}" for n in names if n is not None)
    others = sum(1 for n in names if n is None)
    if others:
        noun = "process" if others == 1 else "processes"
        parts.append(f"+ {others} other {noun}" if parts else f"{others} {noun}")
    return " ".join(parts)


def delete_switch_ports(names: Iterable[str] | None = None) -> list[str]:
    """Delete root-namespace links named like fabric switch ports (or exactly ``names``)."""
    present = [d.name for d in Path("/sys/class/net").iterdir()]
    wanted = set(names) if names is not None else None
    gone = [n for n in present if (n in wanted if wanted is not None else SWITCH_PORT_RE.match(n))]
    if gone:
        batch = "".join(f"link del dev {n}\n" for n in gone)
        subprocess.run(["ip", "-force", "-batch", "-"], input=batch, capture_output=True, text=True)
    return [n for n in gone if not Path(f"/sys/class/net/{n}").exists()]


def _shorten(items: Sequence[str], n: int = 8) -> str:
    return " ".join(items[:n]) + (" ..." if len(items) > n else "")


def clear_dead_fabric() -> list[str]:
    """Remove what a fabric whose process died left in the way of a new one; returns what was done.

    Call it only holding the machine's fabric lock
    (:class:`~topologies.emulation.fabricnet.FabricLock`): a fabric holds that lock until its
    last interface is gone, so whatever fabric-named is still there belongs to one that is gone,
    typically the switch-to-switch links of a SIGKILLed runner (both ends in the root namespace,
    they outlive every process). Steps 3 and 4 of the module docstring: fabric host namespaces,
    fabric switch shells, switch ports. Nothing that is only switch-like (a standalone
    ``tf-switch``) is touched.
    """
    done: list[str] = []
    hosts = fabric_host_namespaces()
    if hosts:
        killed = kill_namespaces({h.inode for h in hosts})
        done.append(f"killed {len(killed)} processes in {len(hosts)} fabric host namespace(s)")
    shells = kill_all(fabric_switch_shells())
    if shells:
        done.append(f"killed {len(shells)} fabric switch shells")
    gone = delete_switch_ports()
    if gone:
        done.append(f"deleted {len(gone)} switch ports: {_shorten(gone)}")
    return done


def cleanup(
    results_dir: str = "results",
    *,
    everything: bool = False,
    remove_files: bool = True,
    log: Callable[[str], None] = print,
) -> list[str]:
    """Remove a fabric's leftovers (see the module docstring); returns what was done.

    Args:
        everything: also what no state file names: stray switch processes, fabric host
            namespaces and switch shells, stale :mod:`switch.device.netns` objects.
        remove_files: remove ``<results_dir>/fabric`` (else only its state file).
    """
    done: list[str] = []
    fabric_dir = Path(results_dir) / "fabric"
    state: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        state = json.loads((fabric_dir / "state.json").read_text())
    # 1. the fabric the state file names
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
    # 2. switch processes no state file names
    if everything:
        killed = kill_all(stray_switch_processes())
        if killed:
            done.append(
                f"killed {len(killed)} stray switch/controller processes: "
                f"{' '.join(map(str, killed))}"
            )
    # 3. fabric host namespaces (before step 4: their wiring to the switch ports identifies them)
    if state or everything:
        hosts = fabric_host_namespaces()
        if hosts:
            what = _describe([p for h in hosts for p in h.pids])
            wiring = [f"{nic}<->{port}" for h in hosts for nic, port in h.wiring]
            killed = kill_namespaces({h.inode for h in hosts})
            done.append(
                f"killed {what} in {len(hosts)} fabric host namespace(s) wired "
                f"{_shorten(wiring)}: pids {' '.join(map(str, killed))}"
            )
    if everything:
        shells = fabric_switch_shells()
        what = _describe(shells)
        killed = kill_all(shells)
        if killed:
            done.append(f"killed fabric switch shells {what}: pids {' '.join(map(str, killed))}")
    # 4. switch ports
    gone = delete_switch_ports()
    if gone:
        done.append(f"deleted {len(gone)} leftover switch ports: {_shorten(gone)}")
    # 5. namespaces and links of crashed tests and benchmarks
    if everything:
        stale = cleanup_stale()
        if stale:
            done.append(f"removed {len(stale)} stale test namespaces/links: {_shorten(stale)}")
    # 6. files
    if everything:
        for d in stale_fork_dirs():
            shutil.rmtree(d, ignore_errors=True)
            done.append(f"removed {d} (an agents' fork server that is gone)")
    if remove_files and fabric_dir.exists():
        shutil.rmtree(fabric_dir, ignore_errors=True)
        done.append(f"removed {fabric_dir}")
    elif (fabric_dir / "state.json").exists():
        (fabric_dir / "state.json").unlink()
        done.append(f"removed {fabric_dir / 'state.json'}")
    for line in done:
        log(line)
    return done

"""Linux network namespaces and veth pairs for tests and benchmarks (needs root).

* :class:`Netns` and :class:`VethPair` are context managers that create their object on entry
  and always delete it on exit; deleting a namespace also deletes the veths inside it.
* Names carry a short random suffix, and every object records the pid of the process that made
  it (namespace names embed it; root-namespace links carry it in their ``ifalias``), so
  :func:`cleanup_stale` removes the leftovers of crashed runs without touching live ones.
* :func:`call_in_netns` runs a function in a thread that has joined a namespace: sockets it
  opens stay in that namespace, which lets one process drive several namespaces without
  spawning ``ip netns exec`` children.
* :func:`configure_ipv6_host` turns off what makes a test host chatty or slow (DAD, router
  solicitations, RA processing).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import re
import secrets
import shutil
import subprocess
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from switch.device.offloads import disable_offloads

T = TypeVar("T")

NETNS_DIR = Path("/run/netns")
IFNAMSIZ = 16  # includes the terminating NUL: names are at most 15 characters
DEFAULT_PREFIX = "tf"
_CLONE_NEWNET = 0x40000000
_ALIAS_RE = re.compile(r"tailfabric pid=(\d+)")
_NS_RE = re.compile(r"-p(\d+)-")


class NetnsError(RuntimeError):
    """An ``ip`` command or a namespace switch failed."""


def random_suffix(n: int = 4) -> str:
    """``n`` lowercase hex characters."""
    return secrets.token_hex((n + 1) // 2)[:n]


def _ip(argv: Sequence[str], *, netns: str | None = None, check: bool = True) -> str:
    cmd = ["ip"] + (["-n", netns] if netns else []) + list(argv)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise NetnsError(f"{' '.join(cmd)}: {proc.stderr.strip()}")
    return proc.stdout


def net_unavailable_reason() -> str | None:
    """Why namespaces/veths cannot be used here, or None when they can."""
    if os.geteuid() != 0:
        return "needs root (network namespaces and veths)"
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed"
    probe = f"{DEFAULT_PREFIX}probe-p{os.getpid()}-{random_suffix()}"
    try:
        _ip(["netns", "add", probe])
    except NetnsError as exc:
        return f"`ip netns` is unavailable: {exc}"
    _ip(["netns", "del", probe], check=False)
    return None


def run_in_netns(
    ns: str | None,
    argv: Sequence[str],
    *,
    check: bool = True,
    timeout: float | None = 30.0,
    capture: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` inside namespace ``ns`` (``None``: the root namespace)."""
    cmd = (["ip", "netns", "exec", ns] if ns else []) + list(argv)
    proc = subprocess.run(cmd, capture_output=capture, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise NetnsError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr or ''}".strip())
    return proc


def netns_of_pid(pid: int) -> str:
    """The network namespace file of process ``pid`` (e.g. a Mininet host's shell)."""
    return f"/proc/{pid}/ns/net"


def join_netns(path: str | Path) -> None:
    """Move the calling thread into the network namespace file ``path`` (``/run/netns/<ns>``,
    ``/proc/<pid>/ns/net``).

    Raises:
        OSError: the file cannot be opened.
        NetnsError: ``setns`` failed.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.setns(fd, _CLONE_NEWNET) != 0:
            raise NetnsError(f"setns({path}): {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)


def call_in_thread(enter: Callable[[], None], fn: Callable[[], T], name: str) -> T:
    """``enter()`` then ``fn()`` in a fresh thread; ``fn``'s result, or what either raised.

    ``setns(CLONE_NEWNET)`` changes only the calling thread, so an ``enter`` that joins a
    namespace leaves the rest of the process where it was. Sockets created by ``fn`` keep
    working from any thread afterwards.
    """
    result: list[T] = []
    error: list[BaseException] = []

    def body() -> None:
        try:
            enter()
            result.append(fn())
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            error.append(exc)

    thread = threading.Thread(target=body, name=name, daemon=True)
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return result[0]


def call_in_netns(ns: str | None, fn: Callable[[], T]) -> T:
    """Run ``fn`` in a fresh thread that first joins namespace ``ns``; return its result."""
    if ns is None:
        return fn()
    return call_in_thread(lambda: join_netns(NETNS_DIR / ns), fn, f"netns-{ns}")


def write_sysctl(ns: str | None, key: str, value: str | int) -> bool:
    """Set ``/proc/sys/<key with dots as slashes>`` in ``ns``; False when it does not exist."""
    path = "/proc/sys/" + key.replace(".", "/")

    def write() -> bool:
        try:
            with open(path, "w") as fh:
                fh.write(str(value))
            return True
        except OSError:
            return False

    # /proc/sys/net reflects the namespace of the thread that opens it.
    return call_in_netns(ns, write)


def configure_ipv6_host(ns: str | None, ifname: str) -> None:
    """Quiet IPv6 host settings on ``ifname``: no DAD, no router solicitations, no RAs."""
    for dev in ("default", "all", ifname):
        write_sysctl(ns, f"net.ipv6.conf.{dev}.accept_dad", 0)
        write_sysctl(ns, f"net.ipv6.conf.{dev}.dad_transmits", 0)
        write_sysctl(ns, f"net.ipv6.conf.{dev}.router_solicitations", 0)
        write_sysctl(ns, f"net.ipv6.conf.{dev}.accept_ra", 0)


def disable_ipv6(ns: str | None, ifname: str) -> None:
    """Keep the kernel's IPv6 stack off ``ifname`` (switch ports: no NDP/MLD of their own)."""
    write_sysctl(ns, f"net.ipv6.conf.{ifname}.disable_ipv6", 1)


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def list_netns() -> list[str]:
    """Names of the named network namespaces (``ip netns list``)."""
    out = _ip(["netns", "list"], check=False)
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def cleanup_stale(prefix: str = DEFAULT_PREFIX, *, force: bool = False) -> list[str]:
    """Delete namespaces and root-namespace links made here whose creating process is gone.

    Only objects named ``prefix...`` that carry this module's owner mark are considered (the
    ``-p<pid>-`` in a namespace name, ``ifalias`` ``tailfabric pid=<pid>`` on a link); others
    are never touched. With ``force`` marked objects go even if their owner lives. Returns
    what was deleted.
    """
    removed: list[str] = []
    for name in list_netns():
        m = _NS_RE.search(name)
        if name.startswith(prefix) and m and (force or not pid_alive(int(m.group(1)))):
            _ip(["netns", "del", name], check=False)
            removed.append(f"netns {name}")
    for dev in sorted(Path("/sys/class/net").iterdir()):
        if not dev.name.startswith(prefix):
            continue
        try:
            alias = (dev / "ifalias").read_text().strip()
        except OSError:
            continue
        m = _ALIAS_RE.fullmatch(alias)
        if m and (force or not pid_alive(int(m.group(1)))):
            _ip(["link", "del", dev.name], check=False)
            removed.append(f"link {dev.name}")
    return removed


def netns_name(role: str, prefix: str = DEFAULT_PREFIX, suffix: str | None = None) -> str:
    """A namespace name that embeds this process's pid (see :func:`cleanup_stale`)."""
    return f"{prefix}{suffix or random_suffix()}-p{os.getpid()}-{role}"


def ifname(role: str, prefix: str = DEFAULT_PREFIX, suffix: str | None = None) -> str:
    """An interface name ``<prefix><suffix><role>`` of at most 15 characters."""
    name = f"{prefix}{suffix or random_suffix()}{role}"
    if len(name) >= IFNAMSIZ:
        raise ValueError(f"interface name {name!r} is longer than {IFNAMSIZ - 1} characters")
    return name


class Netns:
    """A named network namespace with ``lo`` up, deleted on exit (context manager)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._created = False

    def __enter__(self) -> Netns:
        self.create()
        return self

    def __exit__(self, *exc: object) -> None:
        self.delete()

    def create(self) -> None:
        _ip(["netns", "add", self.name])
        self._created = True
        _ip(["link", "set", "lo", "up"], netns=self.name)

    def delete(self) -> None:
        if self._created:
            self._created = False
            _ip(["netns", "del", self.name], check=False)

    def run(
        self,
        argv: Sequence[str],
        *,
        check: bool = True,
        timeout: float | None = 30.0,
        capture: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        """:func:`run_in_netns` in this namespace."""
        return run_in_netns(self.name, argv, check=check, timeout=timeout, capture=capture)

    def call(self, fn: Callable[[], T]) -> T:
        """:func:`call_in_netns` in this namespace."""
        return call_in_netns(self.name, fn)

    def __str__(self) -> str:
        return self.name


def _ns_name(ns: Netns | str | None) -> str | None:
    return ns.name if isinstance(ns, Netns) else ns


class VethPair:
    """A veth pair ``a``/``b``, each end optionally moved into a namespace; deleted on exit.

    Both ends come up with offloads off (no GSO/TSO/GRO, full checksums: a packet socket on the
    peer then sees wire-format frames) and, for ends in a namespace, quiet IPv6 host sysctls.
    Ends left in the root namespace get ``ifalias`` ``tailfabric pid=<pid>`` for
    :func:`cleanup_stale`. Ends named in ``ipv6_off`` get IPv6 disabled: the kernel must not
    send its own NDP/MLD out of a switch port (nor a host that should stay silent).
    """

    def __init__(
        self,
        a: str,
        b: str,
        *,
        ns_a: Netns | str | None = None,
        ns_b: Netns | str | None = None,
        mtu: int | None = None,
        mac_a: str | None = None,
        mac_b: str | None = None,
        offloads: bool = False,
        ipv6_off: Sequence[str] = (),
    ) -> None:
        for name in (a, b):
            if len(name) >= IFNAMSIZ:
                raise ValueError(f"interface name {name!r} is too long")
        self.a, self.b = a, b
        self.ns_a, self.ns_b = _ns_name(ns_a), _ns_name(ns_b)
        self.mtu, self.mac_a, self.mac_b = mtu, mac_a, mac_b
        self.offloads = offloads
        self.ipv6_off = tuple(ipv6_off)
        self._created = False

    def __enter__(self) -> VethPair:
        self.create()
        return self

    def __exit__(self, *exc: object) -> None:
        self.delete()

    def ends(self) -> list[tuple[str, str | None, str | None]]:
        """``(ifname, netns, mac)`` of both ends."""
        return [(self.a, self.ns_a, self.mac_a), (self.b, self.ns_b, self.mac_b)]

    def create(self) -> None:
        _ip(["link", "add", self.a, "type", "veth", "peer", "name", self.b])
        self._created = True
        try:
            for name, ns, mac in self.ends():
                if ns is None:
                    _ip(["link", "set", name, "alias", f"tailfabric pid={os.getpid()}"])
                else:
                    _ip(["link", "set", name, "netns", ns])
                    configure_ipv6_host(ns, name)
                if name in self.ipv6_off:
                    disable_ipv6(ns, name)
                args = ["link", "set", name]
                if mac:
                    args += ["address", mac]
                if self.mtu:
                    args += ["mtu", str(self.mtu)]
                if len(args) > 3:
                    _ip(args, netns=ns)
                if not self.offloads:
                    call_in_netns(ns, functools.partial(disable_offloads, name))
                _ip(["link", "set", name, "up"], netns=ns)
        except BaseException:
            self.delete()
            raise

    def delete(self) -> None:
        if not self._created:
            return
        self._created = False
        # Deleting either end removes the pair; an end whose namespace is gone is gone already.
        for name, ns, _mac in self.ends():
            if ns is not None and not (NETNS_DIR / ns).exists():
                continue
            if _ip(["link", "show", name], netns=ns, check=False):
                _ip(["link", "del", name], netns=ns, check=False)
                return

    def mac(self, end: str) -> str:
        """The MAC address of end ``a`` or ``b`` (by interface name)."""
        ns = self.ns_a if end == self.a else self.ns_b
        if ns is None:
            return read_sysfs_net(end, "address")
        # /sys shows the namespace of whoever mounted it, so ask ip inside the namespace
        out = _ip(["-o", "link", "show", end], netns=ns)
        m = re.search(r"link/ether ([0-9a-f:]{17})", out)
        if m is None:
            raise NetnsError(f"no MAC address for {end} in {ns}")
        return m.group(1)


def read_sysfs_net(ifname_: str, attr: str) -> str:
    """``/sys/class/net/<if>/<attr>`` as seen from the root namespace's sysfs."""
    return (Path("/sys/class/net") / ifname_ / attr).read_text().strip()


def read_if_stat(ns: str | None, ifname_: str, counter: str) -> int:
    """An interface counter (``rx_packets``, ``tx_packets``...) of ``ifname_`` in ``ns``.

    Reads ``/sys/class/net/<if>/statistics/<counter>`` inside the namespace (``ip netns exec``
    remounts sysfs for it); in the root namespace it reads the file directly.
    """
    path = f"/sys/class/net/{ifname_}/statistics/{counter}"
    if ns is None:
        return int(Path(path).read_text())
    return int(run_in_netns(ns, ["cat", path]).stdout)


def read_proc_net_dev(ns: str | None) -> dict[str, dict[str, int]]:
    """``/proc/net/dev`` of ``ns`` without a child process: ``{if: {rx_packets, ...}}``."""

    def read() -> str:
        with contextlib.suppress(FileNotFoundError):
            return Path("/proc/thread-self/net/dev").read_text()
        return Path(f"/proc/self/task/{threading.get_native_id()}/net/dev").read_text()

    text = call_in_netns(ns, read)
    names = [
        "rx_bytes",
        "rx_packets",
        "rx_errs",
        "rx_drop",
        "rx_fifo",
        "rx_frame",
        "rx_compressed",
        "rx_multicast",
        "tx_bytes",
        "tx_packets",
        "tx_errs",
        "tx_drop",
    ]
    out: dict[str, dict[str, int]] = {}
    for line in text.splitlines()[2:]:
        dev, _, rest = line.partition(":")
        values = [int(v) for v in rest.split()]
        out[dev.strip()] = dict(zip(names, values))
    return out


def add_address(ns: str | None, ifname_: str, cidr: str) -> None:
    """Add an address (``2001:db8::1/64``, ``10.0.0.1/24``) to ``ifname_``; IPv6 without DAD."""
    extra = ["nodad"] if ":" in cidr else []
    _ip(["addr", "add", cidr, "dev", ifname_, *extra], netns=ns)


def add_neighbor(ns: str | None, ifname_: str, ip: str, mac: str) -> None:
    """A permanent neighbour (ARP/NDP) entry, so hosts need no resolution through the switch."""
    _ip(["neigh", "replace", ip, "lladdr", mac, "dev", ifname_, "nud", "permanent"], netns=ns)

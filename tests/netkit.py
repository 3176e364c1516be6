"""Test helper: network namespaces and veth pairs that are always removed.

Use in a test module::

    from tests.netkit import NET_MARKS, NetKit
    pytestmark = NET_MARKS          # marker ``net`` + skip when not root / no ``ip netns``

    def test_x(netkit: NetKit) -> None:   # fixture from tests/net/conftest.py
        ns = netkit.netns("h1")
        pair = netkit.veth("s1", "h1", ns_b=ns, switch_side=True)

Everything a :class:`NetKit` made is deleted when the test ends, passes or fails, and on
Ctrl-C or SIGTERM (the handler turns it into ``SystemExit`` so ``finally`` blocks run). Names
carry a random suffix per kit and the creator's pid, so :func:`cleanup_stale` (run once per
process before the first kit) removes leftovers of crashed runs and nothing of live ones.
The building blocks live in :mod:`switch.device.netns` (the benchmark harness uses them too) and are
re-exported here.

Tests of a whole fabric (Mininet) add :data:`MININET_MARK` (skip without ``mnexec``) and the
``no_fabric_running`` fixture (skip while a fabric runs: one at a time per machine), run an
experiment's ``--quick`` form on the fabric with :func:`run_quick_on_fabric`, and check with
:func:`processes_left` that no agent process outlived them.
"""

from __future__ import annotations

import contextlib
import functools
import pathlib
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from types import FrameType

import pytest

from switch.device.netns import (
    DEFAULT_PREFIX,
    Netns,
    VethPair,
    add_address,
    add_neighbor,
    call_in_netns,
    cleanup_stale,
    configure_ipv6_host,
    ifname,
    net_unavailable_reason,
    netns_name,
    random_suffix,
    read_if_stat,
    run_in_netns,
)
from switch.device.offloads import disable_offloads

__all__ = [
    "FABRIC_RUNNING",
    "MININET_MARK",
    "NET_MARKS",
    "NetKit",
    "Netns",
    "VethPair",
    "add_address",
    "add_neighbor",
    "call_in_netns",
    "cleanup_stale",
    "configure_ipv6_host",
    "disable_offloads",
    "net_skip_reason",
    "netkit",
    "no_fabric_running",
    "processes_left",
    "run_quick_on_fabric",
    "read_if_stat",
    "run_in_netns",
]

_stale_checked = False


@functools.cache
def net_skip_reason() -> str | None:
    """Why the ``net`` tests must be skipped here (not root, no ``ip netns``), or None."""
    return net_unavailable_reason()


NET_MARKS = [
    pytest.mark.net,
    pytest.mark.skipif(net_skip_reason() is not None, reason=str(net_skip_reason())),
]


MININET_MARK = pytest.mark.skipif(
    shutil.which("mnexec") is None, reason="Mininet's mnexec is not installed"
)
FABRIC_RUNNING = pathlib.Path("/sys/class/net/p0l0-eth1")
"""A fabric's first leaf port: it exists while a fabric runs on this machine."""


@pytest.fixture
def no_fabric_running() -> None:
    """Skips the test while a fabric runs on this machine (interface names are fixed)."""
    if FABRIC_RUNNING.exists():
        pytest.skip(f"a fabric is already running on this machine ({FABRIC_RUNNING.name} exists)")


def processes_left(pattern: str) -> list[str]:
    """``pgrep -af pattern``: the processes whose command line matches (pgrep left out)."""
    out = subprocess.run(["pgrep", "-af", pattern], capture_output=True, text=True)
    return [line for line in out.stdout.splitlines() if "pgrep" not in line]


def run_quick_on_fabric(
    module: str, results: pathlib.Path, timeout_s: float
) -> subprocess.CompletedProcess[str]:
    """``python -m <module> --quick --network fabric --results <results>``, asserted to exit
    0 (the failure shows the end of its output)."""
    cmd = [sys.executable, "-m", module, "--quick", "--network", "fabric"]
    done = subprocess.run(
        [*cmd, "--results", str(results)], capture_output=True, text=True, timeout=timeout_s
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return done


def _install_sigterm_handler() -> None:
    """Make SIGTERM unwind the stack (running cleanups) instead of killing the process."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def on_term(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)


class NetKit:
    """Makes namespaces and veth pairs with one random suffix; :meth:`close` deletes them all."""

    def __init__(self, prefix: str = DEFAULT_PREFIX) -> None:
        global _stale_checked
        if not _stale_checked:
            _stale_checked = True
            cleanup_stale(prefix)
        _install_sigterm_handler()
        self.prefix = prefix
        self.suffix = random_suffix()
        self._stack = contextlib.ExitStack()

    def ifname(self, role: str) -> str:
        """``<prefix><suffix><role>``, at most 15 characters (role: up to 9)."""
        return ifname(role, self.prefix, self.suffix)

    def netns(self, role: str) -> Netns:
        """A new namespace (``lo`` up), deleted with the kit."""
        return self._stack.enter_context(Netns(netns_name(role, self.prefix, self.suffix)))

    def veth(
        self,
        role_a: str,
        role_b: str,
        *,
        ns_a: Netns | str | None = None,
        ns_b: Netns | str | None = None,
        switch_side: bool = False,
        host_ipv6: bool = True,
        mtu: int | None = None,
        mac_a: str | None = None,
        mac_b: str | None = None,
        offloads: bool = False,
    ) -> VethPair:
        """A veth pair named after the roles; ``switch_side=True``: end ``a`` is a switch port.

        Offloads are off on both ends (unless ``offloads``); ends in a namespace get quiet IPv6
        host sysctls; a switch-side end gets IPv6 disabled, and so does end ``b`` without
        ``host_ipv6`` (then it sends nothing on its own, not even MLD reports).
        """
        a, b = self.ifname(role_a), self.ifname(role_b)
        off = ([a] if switch_side else []) + ([] if host_ipv6 else [b])
        pair = VethPair(
            a,
            b,
            ns_a=ns_a,
            ns_b=ns_b,
            mtu=mtu,
            mac_a=mac_a,
            mac_b=mac_b,
            ipv6_off=off,
            offloads=offloads,
        )
        return self._stack.enter_context(pair)

    def close(self) -> None:
        """Delete everything made by this kit (idempotent)."""
        self._stack.close()

    def __enter__(self) -> NetKit:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@pytest.fixture
def netkit() -> Iterator[NetKit]:
    """A :class:`NetKit` for one test; skips when namespaces are unavailable."""
    reason = net_skip_reason()
    if reason is not None:
        pytest.skip(reason)
    with NetKit() as kit:
        yield kit

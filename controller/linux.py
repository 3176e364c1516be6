"""The Linux edges the controller touches: interfaces up/down (``--phy``) and running code in a
host's network namespace (``incast``). Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN for setns).

:func:`in_netns_of` runs a function in a new thread that has joined the network namespace of a
process (``/proc/<pid>/ns/net``, e.g. a Mininet host shell): only that thread moves, so sockets
it opens live in the host's namespace while the rest of the controller stays where it is.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from controller.errors import CommandError
from switch.device.netns import NetnsError, call_in_thread, join_netns, netns_of_pid

T = TypeVar("T")
SYS_CLASS_NET = Path("/sys/class/net")


def interface_exists(ifname: str) -> bool:
    return (SYS_CLASS_NET / ifname).exists()


def set_link(ifname: str, up: bool) -> None:
    """``ip link set IF up|down`` in the root namespace.

    Raises:
        CommandError: ``ip`` failed (no such interface, no permission).
    """
    cmd = ["ip", "link", "set", "dev", ifname, "up" if up else "down"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    if proc.returncode != 0:
        raise CommandError(f"{' '.join(cmd)}: {proc.stderr.strip() or f'exit {proc.returncode}'}")


def join_netns_of(pid: int) -> None:
    """Move the calling thread into the network namespace of process ``pid``.

    Raises:
        CommandError: no such process, or setns failed.
    """
    path = netns_of_pid(pid)
    try:
        join_netns(path)
    except OSError as e:
        raise CommandError(f"cannot open {path}: {e.strerror} (is the host running?)") from None
    except NetnsError as e:
        raise CommandError(str(e)) from None


def in_netns_of(pid: int, fn: Callable[[], T]) -> T:
    """``fn()`` run in a fresh thread inside the network namespace of ``pid``; its result."""
    return call_in_thread(lambda: join_netns_of(pid), fn, f"netns-of-{pid}")

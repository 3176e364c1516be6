"""The Linux edges the controller touches: interfaces up/down (``--phy``) and running code in a
host's network namespace (``incast``). Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN for setns).

:func:`in_netns_of` runs a function in a new thread that has joined the network namespace of a
process (``/proc/<pid>/ns/net``, e.g. a Mininet host shell): only that thread moves, so sockets
it opens live in the host's namespace while the rest of the controller stays where it is.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from controller.errors import CommandError

T = TypeVar("T")
CLONE_NEWNET = 0x40000000
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
    path = f"/proc/{pid}/ns/net"
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        raise CommandError(f"cannot open {path}: {e.strerror} (is the host running?)") from None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise CommandError(f"setns({path}): {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)


def in_netns_of(pid: int, fn: Callable[[], T]) -> T:
    """``fn()`` run in a fresh thread inside the network namespace of ``pid``; its result."""
    result: list[T] = []
    error: list[BaseException] = []

    def body() -> None:
        try:
            join_netns_of(pid)
            result.append(fn())
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            error.append(e)

    t = threading.Thread(target=body, name=f"netns-of-{pid}", daemon=True)
    t.start()
    t.join()
    if error:
        raise error[0]
    return result[0]

"""Blocking waits of the transports' thread-safe APIs: on a condition, with a deadline."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from host.errors import TransportTimeout


def wait_until(
    cv: threading.Condition,
    ready: Callable[[], bool],
    timeout: float | None,
    check: Callable[[], None],
    message: str,
) -> None:
    """Wait on ``cv`` (held by the caller) until ``ready()``.

    ``check`` runs before every wait and raises if waiting can no longer succeed (a closed
    connection); after ``timeout`` seconds :class:`TransportTimeout` carries ``message``.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    while not ready():
        check()
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise TransportTimeout(message)
        cv.wait(left)

"""An in-memory pair of message connections with programmable loss, for fast protocol tests.

:func:`mem_pair` returns two connected :class:`MemConnection` objects that implement the
transport API's ``MessageConnection`` (reliable messages in order, unreliable ones as
:class:`~host.mrc.receiver.PartialMessage` of one packet, lost ones reported empty). A
``drop`` callable decides per unreliable message whether it is lost; an end marked
``vanished`` silently swallows everything (a peer that disappeared); ``sent`` records every
message. No threads, no sockets: a message is in the peer's queue when ``send`` returns.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TypeVar

from host.api import as_bytes
from host.errors import ConnectionClosed, TransportTimeout
from host.mrc.receiver import PartialMessage
from host.mrc.sender import SendOutcome

Drop = Callable[[bytes, bool], bool]  # (message, reliable) -> lost?
_Msg = TypeVar("_Msg", bytes, PartialMessage)


class _Done:
    def __init__(self, outcome: SendOutcome) -> None:
        self._outcome = outcome

    def done(self) -> bool:
        return True

    def wait(self, timeout: float | None = None) -> SendOutcome:
        return self._outcome


class MemConnection:
    """One end of an in-memory connection (thread-safe)."""

    def __init__(self, host: int, peer: int, conn_id: int = 1) -> None:
        self.conn_id = conn_id
        self.host = host
        self.peer = peer
        self.other: MemConnection | None = None
        self.drop: Drop = lambda data, reliable: False
        self.sent: list[tuple[bytes, bool]] = []
        self.vanished = False
        """True: this end has disappeared: whatever is sent to it is silently lost."""
        self._cv = threading.Condition()
        self._ready: deque[bytes] = deque()
        self._partial: deque[PartialMessage] = deque()
        self._closed = False
        self._next_id = 0

    def send(self, data: object, *, reliable: bool = True, timeout: float | None = None) -> _Done:
        buf = as_bytes(data)
        if self._closed or self.other is None or self.other._closed:
            raise ConnectionClosed("in-memory connection closed")
        self.sent.append((buf, reliable))
        msg_id, self._next_id = self._next_id, self._next_id + 1
        lost = not reliable and self.drop(buf, reliable)
        if not self.other.vanished:
            self.other._deliver(buf, reliable, lost, msg_id)
        acked = () if lost else (0,)
        return _Done(SendOutcome(msg_id, msg_id, reliable, len(buf), 1, acked, 0.0, 0))

    def inject(self, data: bytes, *, reliable: bool = False) -> None:
        """Deliver ``data`` to this end as if the peer had sent it."""
        self._deliver(data, reliable, False, -1)

    def _deliver(self, buf: bytes, reliable: bool, lost: bool, msg_id: int) -> None:
        with self._cv:
            if reliable:
                self._ready.append(buf)
            elif lost:
                self._partial.append(PartialMessage(msg_id, b"", None, 0, 0, (), None))
            else:
                self._partial.append(
                    PartialMessage(msg_id, buf, len(buf), max(1, len(buf)), 1, (0,), True)
                )
            self._cv.notify_all()

    def recv(self, timeout: float | None = None) -> bytes:
        return self._take(self._ready, timeout)

    def recv_partial(self, timeout: float | None = None) -> PartialMessage:
        return self._take(self._partial, timeout)

    def _take(self, q: deque[_Msg], timeout: float | None) -> _Msg:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            while not q:
                if self._closed:
                    raise ConnectionClosed("in-memory connection closed")
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TransportTimeout(f"no message within {timeout} s")
                self._cv.wait(left)
            return q.popleft()

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify_all()


def mem_pair(a_host: int = 0, b_host: int = 1) -> tuple[MemConnection, MemConnection]:
    """Two connected ends (host ``a_host`` and host ``b_host``)."""
    a, b = MemConnection(a_host, b_host), MemConnection(b_host, a_host)
    a.other, b.other = b, a
    return a, b

"""One DBLP link: a transport connection, its two reader threads and the event routing.

The transport's API has two blocking receive calls (``recv`` for reliable messages,
``recv_partial`` for unreliable ones); a :class:`DblpLink` runs one daemon thread on each,
validates what arrives (:mod:`host.dblp.chunks`, :mod:`host.dblp.control`) and routes it:

* chunks and PROBEs → the *receive* queue (transfers this side receives);
* BITMAPs and STOPs → the *send* queue (transfers this side sends);
* HELLO / READY → the *setup* queue; ABORT → the link fails (every waiter raises).

Malformed messages, chunks of finished transfers (late: "wrong round"), duplicates, foreign
tensors and lost unreliable messages are counted in :attr:`DblpLink.drops`. A probe for a
transfer this side already finished is answered with STOP from the reader thread, so a
sender whose STOP was lost finishes even while the receiver computes. A failed or closed
connection, or an ABORT, turns into :class:`~host.dblp.errors.RoundFailed` for every waiter.
"""

from __future__ import annotations

import enum
import queue
import threading
import time
from collections import Counter, OrderedDict
from dataclasses import replace
from typing import Generic, TypeVar

from host.api import MessageConnection, SendHandleLike
from host.dblp.chunks import Chunk, ChunkDrop, decode_chunk, is_chunk
from host.dblp.config import DblpConfig
from host.dblp.control import Control, ControlKind, decode_control, encode_control, is_control
from host.dblp.errors import DblpError, DblpWireError, RoundFailed
from host.errors import TransportError, TransportTimeout

Event = Chunk | Control
Key = tuple[int, int]  # (round, tensor id)
READ_POLL_S = 0.2


_Item = TypeVar("_Item")


class _Closed(enum.Enum):
    """What an inbox hands out once the link failed or closed."""

    CLOSED = enum.auto()


_CLOSED = _Closed.CLOSED


class _Inbox(Generic[_Item]):
    """A queue of one kind of event; once closed, every waiter, now or later, gets _CLOSED."""

    def __init__(self) -> None:
        self._q: queue.Queue[_Item | _Closed] = queue.Queue()

    def put(self, item: _Item) -> None:
        self._q.put(item)

    def close(self) -> None:
        self._q.put(_CLOSED)

    def get(self, timeout: float) -> _Item | _Closed | None:
        """The next item, or None after ``timeout`` seconds."""
        try:
            item = self._q.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return None
        if item is _CLOSED:
            self._q.put(_CLOSED)  # later waiters see it too
        return item


class Liveness:
    """How long a transfer may hear nothing from its peer before it fails: the configured
    ``peer_timeout_s``, stretched to ``liveness_factor`` × the longest transfer this link has
    completed (progress measured on this link, so a loaded machine slows the job instead of
    failing it, while a peer that vanished is still found)."""

    def __init__(self, base_s: float, factor: float) -> None:
        self.base_s = base_s
        self.factor = factor
        self.longest_s = 0.0

    def observe(self, transfer_s: float) -> None:
        self.longest_s = max(self.longest_s, transfer_s)

    @property
    def timeout_s(self) -> float:
        return max(self.base_s, self.factor * self.longest_s)


class DblpLink:
    """DBLP's view of one connection (either end; the same class at both).

    Args:
        conn: a transport connection with an unreliable mode (MRC).
        cfg: the protocol settings (control copies, memory bounds).
        name: for error messages, e.g. ``"worker 2"``.
    """

    def __init__(
        self, conn: MessageConnection, cfg: DblpConfig | None = None, *, name: str = ""
    ) -> None:
        self.conn = conn
        self.cfg = cfg or DblpConfig()
        self.peer = conn.peer
        self.name = name or f"host {conn.peer}"
        self.drops: Counter[str] = Counter()
        self.liveness = Liveness(self.cfg.peer_timeout_s, self.cfg.liveness_factor)
        self._rx: _Inbox[Event] = _Inbox()
        self._tx: _Inbox[Control] = _Inbox()
        self._setup: _Inbox[Control] = _Inbox()
        self._pending: dict[Key, list[Event]] = {}
        self._pending_count = 0
        self._finished: OrderedDict[Key, Control] = OrderedDict()
        self._lock = threading.Lock()
        self._error: DblpError | None = None
        self._closed = False
        self._reliable_handles: list[SendHandleLike] = []
        self._threads = [
            threading.Thread(target=self._read_reliable, name=f"dblp-rel-{self.peer}", daemon=True),
            threading.Thread(
                target=self._read_partial, name=f"dblp-unrel-{self.peer}", daemon=True
            ),
        ]
        for t in self._threads:
            t.start()

    # -- sending -------------------------------------------------------------------------------

    def send_chunk(self, data: bytes) -> SendHandleLike:
        """Spray one chunk unreliably; returns the transport's send handle."""
        try:
            return self.conn.send(data, reliable=False)
        except TransportError as e:
            raise self._fail(RoundFailed(f"cannot send to {self.name}: {e}")) from e

    def send_control(
        self, ctrl: Control, *, reliable: bool = True, copies: int | None = None
    ) -> None:
        """One control message on the reliable channel (``reliable``) plus ``copies``
        unreliable copies (default ``control_copies``; at least one when not ``reliable``)."""
        data = encode_control(ctrl)
        n = self.cfg.control_copies if copies is None else copies
        if not reliable:
            n = max(1, n)
        try:
            if reliable:
                handle = self.conn.send(data)
                with self._lock:
                    self._reliable_handles = [h for h in self._reliable_handles if not h.done()]
                    self._reliable_handles.append(handle)
            for _ in range(n):
                self.conn.send(data, reliable=False)
        except TransportError as e:
            raise self._fail(RoundFailed(f"cannot send to {self.name}: {e}")) from e

    # -- receiving -----------------------------------------------------------------------------

    def next_rx(self, timeout: float) -> Event | None:
        """The next chunk or probe (None after ``timeout`` seconds)."""
        return self._get(self._rx, timeout)

    def next_tx(self, timeout: float) -> Control | None:
        """The next BITMAP or STOP (None after ``timeout`` seconds)."""
        return self._get(self._tx, timeout)

    def next_setup(self, timeout: float) -> Control | None:
        """The next HELLO or READY (None after ``timeout`` seconds)."""
        return self._get(self._setup, timeout)

    def _get(self, inbox: _Inbox[_Item], timeout: float) -> _Item | None:
        self.raise_if_failed()
        item = inbox.get(timeout)
        if item is _CLOSED:
            self.raise_if_failed()
            raise RoundFailed(f"link to {self.name} closed")
        return item

    def take_pending(self, key: Key) -> list[Event]:
        """Events of transfer ``key`` that arrived before it started; those of earlier
        transfers are dropped as late."""
        out: list[Event] = []
        for k in sorted(self._pending):
            if k < key:
                evs = self._pending.pop(k)
                self._pending_count -= len(evs)
                self.drops[ChunkDrop.WRONG_ROUND.value] += len(evs)
            elif k == key:
                evs = self._pending.pop(k)
                self._pending_count -= len(evs)
                out.extend(evs)
        return out

    def defer(self, ev: Event) -> None:
        """Keep an event of a transfer that has not started yet (bounded)."""
        if self._pending_count >= self.cfg.max_pending_events:
            self.drops[ChunkDrop.OVERFLOW.value] += 1
            return
        self._pending.setdefault(ev.key, []).append(ev)
        self._pending_count += 1

    def finished(self, stop: Control) -> None:
        """Transfer ``stop.key`` is over (this side sent ``stop``): late chunks are dropped
        and late probes answered with it."""
        with self._lock:
            self._finished[stop.key] = stop
            while len(self._finished) > self.cfg.finished_memory:
                self._finished.popitem(last=False)

    # -- failure -------------------------------------------------------------------------------

    def abort(self, reason: str) -> None:
        """Tell the peer the job stops (best effort) and fail this link."""
        try:
            self.send_control(Control(ControlKind.ABORT, body=reason.encode()[:512]))
        except DblpError:
            pass
        self._fail(RoundFailed(f"aborted: {reason}"))

    def raise_if_failed(self) -> None:
        if self._error is not None:
            raise self._error

    @property
    def failed(self) -> bool:
        return self._error is not None

    def _fail(self, error: DblpError) -> DblpError:
        with self._lock:
            if self._error is None:
                self._error = error
        for inbox in (self._rx, self._tx, self._setup):
            inbox.close()
        return self._error

    def close(self) -> None:
        """Wait (at most ``linger_s``) for the reliable control messages to be acknowledged,
        then stop the reader threads and close the connection (idempotent)."""
        if self._closed:
            return
        if self._error is None:
            deadline = time.monotonic() + self.cfg.linger_s
            with self._lock:
                handles = list(self._reliable_handles)
            for h in handles:
                try:
                    h.wait(max(0.0, deadline - time.monotonic()))
                except TransportError:
                    break
        self._closed = True
        self._fail(RoundFailed(f"link to {self.name} closed"))
        try:
            self.conn.close()
        except TransportError:
            pass
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(timeout=2.0)

    def __enter__(self) -> DblpLink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the reader threads --------------------------------------------------------------------

    def _read_reliable(self) -> None:
        while not self._closed:
            try:
                data = self.conn.recv(timeout=READ_POLL_S)
            except TransportTimeout:
                continue
            except TransportError as e:
                self._fail(RoundFailed(f"connection to {self.name} failed: {e}"))
                return
            self._route(data)

    def _read_partial(self) -> None:
        while not self._closed:
            try:
                msg = self.conn.recv_partial(timeout=READ_POLL_S)
            except TransportTimeout:
                continue
            except TransportError as e:
                self._fail(RoundFailed(f"connection to {self.name} failed: {e}"))
                return
            if msg.complete:
                self._route(msg.data)
            else:
                self.drops[ChunkDrop.LOST.value] += 1

    def _route(self, data: bytes) -> None:
        try:
            if is_chunk(data):
                chunk = decode_chunk(data)
                with self._lock:
                    late = chunk.key in self._finished
                if late:
                    self.drops[ChunkDrop.WRONG_ROUND.value] += 1
                else:
                    self._rx.put(chunk)
                return
            if not is_control(data):
                self.drops[ChunkDrop.BAD_MAGIC.value] += 1
                return
            ctrl = decode_control(data)
        except DblpWireError as e:
            self.drops[e.reason] += 1
            return
        self._route_control(ctrl)

    def _route_control(self, ctrl: Control) -> None:
        kind = ctrl.kind
        if kind is ControlKind.PROBE:
            with self._lock:
                stop = self._finished.get(ctrl.key)
            if stop is None:
                self._rx.put(ctrl)
            else:
                self.drops["late_probe"] += 1
                try:
                    self.send_control(replace(stop, seq=ctrl.seq), reliable=False)
                except DblpError:
                    pass
        elif kind in (ControlKind.BITMAP, ControlKind.STOP):
            self._tx.put(ctrl)
        elif kind in (ControlKind.HELLO, ControlKind.READY):
            self._setup.put(ctrl)
        else:  # ABORT
            self._fail(RoundFailed(f"{self.name} aborted the job: {ctrl.reason}"))

"""One worker's reliable connections to its peers: setup, reader threads and a mailbox.

:class:`Mesh` opens one transport connection per peer (any ``MessageEndpoint``: MRC over the
emulator or UDP, or the baselines). For each pair the lower rank connects and sends HELLO
with the job's fingerprint, the higher rank accepts, checks the host, the rank and the
fingerprint, and answers HELLO; a connection from an unexpected host is closed and skipped,
another job's fingerprint fails the setup (:class:`~host.train.diloco.errors.SetupFailed`).

Afterwards one reader thread per connection receives whole messages, decodes them
(:mod:`~host.train.diloco.wire`; malformed ones and ones whose sender field is not the
connection's peer are counted by :class:`~host.train.diloco.wire.DropReason` and dropped) and
files them in the :class:`Mailbox`, keyed by (kind, round, sender, tensor, part). These
threads, the transport's I/O thread and the background Mix1 thread move bytes while the
training step runs. An ABORT from a peer, or its connection failing, marks the peer failed:
whoever waits for it gets :class:`~host.train.diloco.errors.PeerFailed` at once.

Bytes are counted per round of the message, sent and received (whole messages, their
28-byte header included; the transport's packet headers are not).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from host.api import MessageConnection, MessageEndpoint, SendHandleLike
from host.errors import TransportError
from host.train.diloco.errors import PeerFailed, PeerTimeout, SetupFailed
from host.train.diloco.wire import (
    DropReason,
    Key,
    MessageError,
    MessageKind,
    TensorMessage,
    decode,
    encode,
    encode_bytes,
)

LINGER_S = 2.0
"""Closing waits at most this long for sent messages to be acknowledged (a peer still in its
last round needs them)."""
HELLO_WAIT_S = 2.0
"""An accepted connection must start with HELLO this soon (else: stale, closed, skipped)."""
ABORT_WAIT_S = 1.0
"""An ABORT waits at most this long to be acknowledged before the connections close."""


@dataclass(frozen=True)
class Arrival:
    array: np.ndarray
    at_s: float  # time.monotonic() when the reader thread filed it


class Mailbox:
    """Messages that arrived and are not taken yet; the peers that failed (thread-safe)."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._items: dict[Key, Arrival] = {}
        self._failed: dict[int, PeerFailed] = {}
        self._floors: dict[MessageKind, int] = {}
        self.drops: Counter[DropReason] = Counter()
        self.late: Counter[MessageKind] = Counter()

    def put(self, msg: TensorMessage, at_s: float) -> None:
        key = msg.key
        with self._cv:
            if msg.round < self._floors.get(msg.kind, 0):
                self.drops[DropReason.LATE] += 1
                self.late[msg.kind] += 1
                return
            if key in self._items:
                self.drops[DropReason.DUPLICATE] += 1
                return
            self._items[key] = Arrival(msg.array, at_s)
            self._cv.notify_all()

    def drop(self, reason: DropReason) -> None:
        with self._cv:
            self.drops[reason] += 1

    def fail(self, error: PeerFailed) -> None:
        """Mark a peer failed (the first reason stays); every waiter for it wakes up."""
        with self._cv:
            self._failed.setdefault(error.rank, error)
            self._cv.notify_all()

    def failed(self) -> dict[int, PeerFailed]:
        with self._cv:
            return dict(self._failed)

    def take(self, key: Key, timeout_s: float, *, watch: Iterable[int] = ()) -> Arrival:
        """Remove and return the message ``key``, waiting up to ``timeout_s``.

        Args:
            watch: other peers whose failure also ends the wait (a ring all-reduce cannot
                finish once any member is gone, whoever it waits for), unless the peer said it
                stopped in a later round than ``key``'s: it had finished this round, so it had
                sent all of its part, and what is still awaited comes from peers that live.
        Raises:
            PeerFailed: its sender (or a watched peer) failed and the message is not here.
            PeerTimeout: it did not arrive in time.
        """
        deadline = time.monotonic() + timeout_s
        watched = (key.sender, *watch)
        with self._cv:
            while key not in self._items:
                gone = next((p for p in watched if self._ends(p, key)), None)
                if gone is not None:
                    raise self._failed[gone]
                left = deadline - time.monotonic()
                if left <= 0:
                    raise PeerTimeout(
                        f"no {key.kind.name} of round {key.round} (part {key.part}) from rank "
                        f"{key.sender} within {timeout_s:g} s"
                    )
                self._cv.wait(left)
            return self._items.pop(key)

    def _ends(self, peer: int, key: Key) -> bool:
        """``peer``'s failure ends a wait for ``key`` (lock held)."""
        error = self._failed.get(peer)
        if error is None:
            return False
        return peer == key.sender or not error.round > key.round

    def gather(self, keys: Sequence[Key], deadline: float) -> dict[int, Arrival]:
        """Remove and return, by sender, those of ``keys`` that arrive before ``deadline``
        (``time.monotonic()``); a failed sender's message is not waited for."""
        with self._cv:
            while True:
                waiting = [k for k in keys if k not in self._items and k.sender not in self._failed]
                left = deadline - time.monotonic()
                if not waiting or left <= 0:
                    break
                self._cv.wait(left)
            return {k.sender: self._items.pop(k) for k in keys if k in self._items}

    def close_round(self, kind: MessageKind, round_: int) -> None:
        """Messages of ``kind`` for rounds up to ``round_`` are no longer wanted: those here
        and those arriving later are dropped as LATE."""
        with self._cv:
            self._floors[kind] = max(self._floors.get(kind, 0), round_ + 1)
            stale = [k for k in self._items if k.kind is kind and k.round <= round_]
            for k in stale:
                del self._items[k]
            self.drops[DropReason.LATE] += len(stale)
            self.late[kind] += len(stale)

    def late_count(self, kind: MessageKind) -> int:
        with self._cv:
            return self.late[kind]


class Mesh:
    """Reliable connections from worker ``rank`` to ``peers`` (context manager).

    Args:
        endpoint: this worker's transport endpoint.
        hosts: the host id of every rank.
        peers: the ranks this worker exchanges messages with (must be symmetric: p lists
            this rank iff this rank lists p).
        fingerprint: identifies the job (HELLO carries it).
    Raises:
        SetupFailed: a peer did not connect or answer in time, or runs another job.
    """

    def __init__(
        self,
        endpoint: MessageEndpoint,
        rank: int,
        hosts: Sequence[int],
        peers: Iterable[int],
        fingerprint: bytes,
        *,
        setup_timeout_s: float,
    ) -> None:
        self.endpoint = endpoint
        self.rank = rank
        self.hosts = tuple(hosts)
        self.peers = tuple(sorted(set(peers) - {rank}))
        self.fingerprint = fingerprint
        self.mailbox = Mailbox()
        self._lock = threading.Lock()
        self._sent: Counter[int] = Counter()
        self._received: Counter[int] = Counter()
        self._handles: list[SendHandleLike] = []
        self._conns: dict[int, MessageConnection] = {}
        self._readers: list[threading.Thread] = []
        self._closing = False
        try:
            self._setup(setup_timeout_s)
        except BaseException:
            self._close_connections()
            raise
        for peer, conn in self._conns.items():
            t = threading.Thread(
                target=self._read, args=(peer, conn), name=f"mesh-r{rank}-p{peer}", daemon=True
            )
            self._readers.append(t)
            t.start()

    @property
    def world(self) -> int:
        return len(self.hosts)

    @property
    def host(self) -> int:
        return self.hosts[self.rank]

    # -- setup ---------------------------------------------------------------------------------

    def _hello(self) -> bytes:
        return encode_bytes(MessageKind.HELLO, 0, self.rank, self.fingerprint)

    def _read_hello(self, conn: MessageConnection, peer: int, timeout_s: float) -> bool:
        """Whether ``conn`` starts with a valid HELLO from ``peer`` within ``timeout_s``
        (False: silent or not a HELLO, a stale connection).

        Raises:
            SetupFailed: a HELLO from another job, or claiming another rank.
        """
        try:
            msg = decode(conn.recv(timeout=max(0.0, timeout_s)))
        except (TransportError, MessageError):
            return False
        if msg.kind is MessageKind.ABORT and msg.sender == peer:
            reason = msg.array.tobytes().decode("utf-8", "replace")
            raise SetupFailed(f"rank {self.rank}: rank {peer} refused the connection: {reason}")
        if msg.kind is not MessageKind.HELLO:
            return False
        problem = ""
        if msg.sender != peer:
            problem = f"host {self.hosts[peer]} claims rank {msg.sender}, expected {peer}"
        elif msg.array.tobytes() != self.fingerprint:
            problem = f"rank {peer} (host {self.hosts[peer]}) runs another job"
        if problem:
            refusal = f"rank {self.rank} (host {self.host}): {problem}"
            try:
                conn.send(encode_bytes(MessageKind.ABORT, 0, self.rank, refusal.encode())).wait(
                    ABORT_WAIT_S
                )
            except TransportError:
                pass  # the peer times out instead
            conn.close()
            raise SetupFailed(f"rank {self.rank}: {problem}")
        return True

    def _setup(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        higher = [p for p in self.peers if p > self.rank]
        lower = {self.hosts[p]: p for p in self.peers if p < self.rank}
        connecting: dict[int, MessageConnection] = {}
        for p in higher:
            try:
                conn = self.endpoint.connect(self.hosts[p])
                conn.send(self._hello())
            except TransportError as e:
                raise SetupFailed(f"rank {self.rank}: cannot connect to rank {p}: {e}") from e
            connecting[p] = self._conns[p] = conn
        while any(p not in self._conns for p in lower.values()):
            missing = sorted(p for p in lower.values() if p not in self._conns)
            try:
                conn = self.endpoint.accept(timeout=max(0.0, deadline - time.monotonic()))
            except TransportError as e:
                raise SetupFailed(
                    f"rank {self.rank} (host {self.host}): ranks {missing} did not connect "
                    f"within {timeout_s:g} s"
                ) from e
            peer = lower.get(conn.peer)
            left = deadline - time.monotonic()
            if (
                peer is None
                or peer in self._conns
                or not self._read_hello(conn, peer, min(HELLO_WAIT_S, left))
            ):
                conn.close()  # a stale or foreign connection
                continue
            self._conns[peer] = conn
            conn.send(self._hello())
        for p, conn in connecting.items():
            if not self._read_hello(conn, p, deadline - time.monotonic()):
                raise SetupFailed(
                    f"rank {self.rank}: rank {p} (host {self.hosts[p]}) did not answer HELLO "
                    f"within {timeout_s:g} s"
                )

    # -- sending and receiving -----------------------------------------------------------------

    def send(
        self,
        peer: int,
        kind: MessageKind,
        round_: int,
        array: np.ndarray,
        *,
        tensor: int = 0,
        part: int = 0,
    ) -> tuple[int, SendHandleLike]:
        """Queue one message to ``peer``; returns (its bytes, the transport's handle).

        Raises:
            PeerFailed: the connection to the peer has ended.
        """
        data = encode(kind, round_, self.rank, array, tensor=tensor, part=part)
        try:
            handle = self._conns[peer].send(data)
        except TransportError as e:
            error = PeerFailed(peer, self.hosts[peer], -1, f"send failed: {e}")
            self.mailbox.fail(error)
            raise error from e
        with self._lock:
            self._sent[round_] += len(data)
            self._handles = [h for h in self._handles if not h.done()]
            self._handles.append(handle)
        return len(data), handle

    def take(self, key: Key, timeout_s: float, *, watch: Iterable[int] = ()) -> Arrival:
        """See :meth:`Mailbox.take`."""
        return self.mailbox.take(key, timeout_s, watch=watch)

    def failed_peers(self) -> set[int]:
        return set(self.mailbox.failed())

    def bytes_sent(self, round_: int) -> int:
        with self._lock:
            return self._sent[round_]

    def bytes_received(self, round_: int) -> int:
        with self._lock:
            return self._received[round_]

    def _read(self, peer: int, conn: MessageConnection) -> None:
        host = self.hosts[peer]
        while True:
            try:
                data = conn.recv()
            except TransportError as e:
                if not self._closing:
                    self.mailbox.fail(PeerFailed(peer, host, -1, f"connection ended: {e}"))
                return
            try:
                msg = decode(data)
            except MessageError as e:
                self.mailbox.drop(e.reason)
                continue
            if msg.sender != peer:
                self.mailbox.drop(DropReason.WRONG_SENDER)
                continue
            with self._lock:
                self._received[msg.round] += len(data)
            if msg.kind is MessageKind.ABORT:
                reason = msg.array.tobytes().decode("utf-8", "replace")
                self.mailbox.fail(PeerFailed(peer, host, msg.round, reason))
            elif msg.kind is MessageKind.HELLO:
                self.mailbox.drop(DropReason.DUPLICATE)
            else:
                self.mailbox.put(msg, time.monotonic())

    # -- ending --------------------------------------------------------------------------------

    def abort(self, round_: int, reason: str) -> None:
        """Tell every peer still there that this worker stops (best effort, bounded wait)."""
        data = encode_bytes(MessageKind.ABORT, round_, self.rank, reason.encode()[:1024])
        handles: list[SendHandleLike] = []
        for peer, conn in self._conns.items():
            if peer in self.failed_peers():
                continue
            try:
                handles.append(conn.send(data))
            except TransportError:
                continue
        deadline = time.monotonic() + ABORT_WAIT_S
        for h in handles:
            try:
                h.wait(max(0.0, deadline - time.monotonic()))
            except TransportError:
                continue

    def flush(self, timeout_s: float = LINGER_S) -> None:
        """Wait (at most ``timeout_s``) until what was sent is acknowledged."""
        with self._lock:
            handles = list(self._handles)
        deadline = time.monotonic() + timeout_s
        for h in handles:
            try:
                h.wait(max(0.0, deadline - time.monotonic()))
            except TransportError:
                continue

    def _close_connections(self) -> None:
        self._closing = True
        for conn in self._conns.values():
            conn.close()

    def close(self) -> None:
        """Flush, close every connection and stop the readers (idempotent)."""
        if self._closing:
            return
        self.flush()
        self._close_connections()
        for t in self._readers:
            t.join(timeout=5.0)

    def __enter__(self) -> Mesh:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

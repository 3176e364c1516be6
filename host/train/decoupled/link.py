"""Connections between a hub (the syncer, or the elastic coordinator) and its members.

Unlike the DiLoCo :class:`~host.train.diloco.mesh.Mesh`, whose peers connect once at the
start, members come and go: a killed learner's next incarnation opens a new connection. So
the :class:`Hub` accepts connections for as long as it runs. Each must start with the
DiLoCo wire's HELLO (:mod:`host.train.diloco.wire`): the sender field names the member, the
payload is the job's fingerprint. The hub checks the member id, that it comes from that
member's host and the fingerprint; it answers HELLO, or refuses with ABORT (the reason as
text), closes the connection and counts the :class:`Refusal`. A member's new connection
replaces its old one (closed). One reader thread per connection decodes messages and files
them, with their arrival time, in :attr:`Hub.inbox`; a malformed message or one whose sender
field is not the connection's member is counted and dropped (nothing is unpickled). When a
member's current connection ends, an :class:`Inbound` without a message says so.

:class:`Uplink` is the member's side: connect, HELLO, then a reader thread and an inbox.
"""

from __future__ import annotations

import enum
import queue
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from host.api import MessageConnection, MessageEndpoint
from host.errors import TransportError, TransportTimeout
from host.train.decoupled.errors import LinkError
from host.train.diloco.wire import (
    DropReason,
    MessageError,
    MessageKind,
    TensorMessage,
    decode,
    encode,
    encode_bytes,
)

HELLO_WAIT_S = 2.0
"""An accepted connection must start with HELLO this soon."""
POLL_S = 0.05
"""How often blocked threads look whether they should stop."""
JOIN_S = 5.0


class Refusal(enum.Enum):
    """Why a hub refused a connection or a message (counted, never merged)."""

    UNKNOWN_MEMBER = "unknown_member"  # a member id the job does not have
    WRONG_HOST = "wrong_host"  # a known member id from another host
    OTHER_JOB = "other_job"  # another job's fingerprint
    NO_HELLO = "no_hello"  # the connection did not start with HELLO in time
    MALFORMED = "malformed"  # the wire refused it (see the DropReason counters)
    WRONG_SENDER = "wrong_sender"  # the sender field is not the connection's member
    UNEXPECTED_KIND = "unexpected_kind"  # a kind this hub does not take
    UNKNOWN_FRAGMENT = "unknown_fragment"
    BAD_DTYPE = "bad_dtype"
    BAD_SHAPE = "bad_shape"
    BAD_COUNTER = "bad_counter"  # negative or absurd step, steps, tokens or incarnation
    FUTURE_VERSION = "future_version"  # claims a fragment version the syncer has not made
    NON_FINITE = "non_finite"
    STALE = "stale"  # elastic: a round or incarnation the coordinator has moved past


def by_reason(*refused: Counter[Refusal]) -> Counter[str]:
    """Refusals summed and keyed by the reason's name (as the records and summaries hold them)."""
    total: Counter[Refusal] = Counter()
    for c in refused:
        total += c
    return Counter({r.value: n for r, n in total.items()})


@dataclass(frozen=True)
class Inbound:
    """What a hub's reader filed: a member's message (None: its connection ended)."""

    member: int
    msg: TensorMessage | None
    at_s: float  # time.monotonic()
    serial: int  # which of the member's connections


class Hub:
    """The server side: member connections accepted at any time (context manager).

    Args:
        endpoint: the hub host's transport endpoint.
        me: the hub's rank (the sender field of what it sends).
        hosts: member id → its host.
        fingerprint: identifies the job (HELLO carries it).
    """

    def __init__(
        self, endpoint: MessageEndpoint, me: int, hosts: Mapping[int, int], fingerprint: bytes
    ) -> None:
        self.endpoint = endpoint
        self.me = me
        self.hosts = dict(hosts)
        self.fingerprint = fingerprint
        self.inbox: queue.Queue[Inbound] = queue.Queue()
        self.refused: Counter[Refusal] = Counter()
        self.drops: Counter[DropReason] = Counter()
        self.bytes_sent = 0
        self.bytes_received = 0
        self._lock = threading.Lock()
        self._current: dict[int, tuple[int, MessageConnection]] = {}
        self._serial = 0
        self._closing = threading.Event()
        self._threads: list[threading.Thread] = []
        self._accepter = threading.Thread(target=self._accept_loop, name=f"hub-{me}", daemon=True)
        self._accepter.start()

    def _refuse(self, conn: MessageConnection, reason: Refusal, text: str) -> None:
        with self._lock:
            self.refused[reason] += 1
        try:
            conn.send(encode_bytes(MessageKind.ABORT, 0, self.me, text.encode()[:512])).wait(1.0)
        except TransportError:
            pass  # the member times out instead
        conn.close()

    def _accept_loop(self) -> None:
        while not self._closing.is_set():
            try:
                conn = self.endpoint.accept(timeout=POLL_S)
            except TransportTimeout:
                continue
            except TransportError:
                return  # the endpoint closed
            t = threading.Thread(
                target=self._serve, args=(conn,), name=f"hub-{self.me}-conn", daemon=True
            )
            with self._lock:
                self._threads = [x for x in self._threads if x.is_alive()]
                self._threads.append(t)
            t.start()

    def _hello(self, conn: MessageConnection) -> int | None:
        """The member a new connection belongs to (None: refused and closed)."""
        try:
            msg = decode(conn.recv(timeout=HELLO_WAIT_S))
        except (TransportError, MessageError):
            self._refuse(conn, Refusal.NO_HELLO, "no HELLO")
            return None
        checks = (
            (msg.kind is MessageKind.HELLO, Refusal.NO_HELLO, f"{msg.kind.name} before HELLO"),
            (msg.sender in self.hosts, Refusal.UNKNOWN_MEMBER, f"no member {msg.sender}"),
            (
                self.hosts.get(msg.sender) == conn.peer,
                Refusal.WRONG_HOST,
                f"member {msg.sender} connects from host {conn.peer}, "
                f"expected {self.hosts.get(msg.sender)}",
            ),
            (msg.array.tobytes() == self.fingerprint, Refusal.OTHER_JOB, "another job"),
        )
        for ok, reason, text in checks:
            if not ok:
                self._refuse(conn, reason, text)
                return None
        return msg.sender

    def _serve(self, conn: MessageConnection) -> None:
        member = self._hello(conn)
        if member is None:
            return
        with self._lock:
            self._serial += 1
            serial = self._serial
            old = self._current.get(member)
            self._current[member] = (serial, conn)
        if old is not None:
            old[1].close()
        try:
            conn.send(encode_bytes(MessageKind.HELLO, 0, self.me, self.fingerprint))
        except TransportError:
            return
        hello = TensorMessage(MessageKind.HELLO, 0, member, 0, 0, np.zeros(0, np.uint8))
        self.inbox.put(Inbound(member, hello, time.monotonic(), serial))
        while True:
            try:
                data = conn.recv()
            except TransportError:
                with self._lock:
                    current = self._current.get(member, (0, conn))[0] == serial
                if current and not self._closing.is_set():
                    self.inbox.put(Inbound(member, None, time.monotonic(), serial))
                return
            try:
                msg = decode(data)
            except MessageError as e:
                with self._lock:
                    self.drops[e.reason] += 1
                    self.refused[Refusal.MALFORMED] += 1
                continue
            with self._lock:
                self.bytes_received += len(data)
                if msg.sender != member:
                    self.drops[DropReason.WRONG_SENDER] += 1
                    self.refused[Refusal.WRONG_SENDER] += 1
                    continue
            self.inbox.put(Inbound(member, msg, time.monotonic(), serial))

    def connected(self) -> set[int]:
        with self._lock:
            return set(self._current)

    def send(
        self,
        member: int,
        kind: MessageKind,
        round_: int,
        array: np.ndarray,
        *,
        tensor: int = 0,
        counters: Sequence[int] | None = None,
    ) -> bool:
        """Queue one message to ``member``'s current connection (False: it has none, or it
        has ended)."""
        with self._lock:
            entry = self._current.get(member)
        if entry is None:
            return False
        data = encode(kind, round_, self.me, array, tensor=tensor, counters=counters)
        try:
            entry[1].send(data)
        except TransportError:
            return False
        with self._lock:
            self.bytes_sent += len(data)
        return True

    def close(self) -> None:
        """Close every connection and stop the threads (idempotent)."""
        if self._closing.is_set():
            return
        self._closing.set()
        self._accepter.join(JOIN_S)
        with self._lock:
            conns = [c for _s, c in self._current.values()]
            threads = list(self._threads)
        for c in conns:
            c.close()
        for t in threads:
            t.join(JOIN_S)

    def __enter__(self) -> Hub:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Uplink:
    """A member's connection to its hub (context manager).

    Raises:
        LinkError: the hub did not answer HELLO within ``timeout_s``, or refused.
    """

    def __init__(
        self,
        endpoint: MessageEndpoint,
        me: int,
        hub_host: int,
        hub: int,
        fingerprint: bytes,
        *,
        timeout_s: float,
    ) -> None:
        self.me = me
        self.hub = hub
        self.inbox: queue.Queue[TensorMessage | None] = queue.Queue()
        self.drops: Counter[DropReason] = Counter()
        self.bytes_sent = 0
        self.bytes_received = 0
        self._closed = False
        try:
            self._conn = endpoint.connect(hub_host)
            self._conn.send(encode_bytes(MessageKind.HELLO, 0, me, fingerprint))
        except TransportError as e:
            raise LinkError(f"member {me}: cannot reach host {hub_host}: {e}") from e
        try:
            self._handshake(timeout_s)
        except BaseException:
            self._conn.close()
            raise
        self._reader = threading.Thread(target=self._read, name=f"uplink-{me}", daemon=True)
        self._reader.start()

    def _handshake(self, timeout_s: float) -> None:
        try:
            msg = decode(self._conn.recv(timeout=timeout_s))
        except (TransportError, MessageError) as e:
            raise LinkError(
                f"member {self.me}: no HELLO from the hub within {timeout_s:g} s"
            ) from e
        if msg.kind is MessageKind.ABORT:
            reason = msg.array.tobytes().decode("utf-8", "replace")
            raise LinkError(f"member {self.me}: the hub refused: {reason}")
        if msg.kind is not MessageKind.HELLO or msg.sender != self.hub:
            raise LinkError(
                f"member {self.me}: expected HELLO from {self.hub}, got {msg.kind.name}"
            )

    def _read(self) -> None:
        while True:
            try:
                data = self._conn.recv()
            except TransportError:
                self.inbox.put(None)
                return
            try:
                msg = decode(data)
            except MessageError as e:
                self.drops[e.reason] += 1
                continue
            if msg.sender != self.hub:
                self.drops[DropReason.WRONG_SENDER] += 1
                continue
            self.bytes_received += len(data)
            self.inbox.put(msg)

    def send(
        self,
        kind: MessageKind,
        round_: int,
        array: np.ndarray,
        *,
        tensor: int = 0,
        counters: Sequence[int] | None = None,
    ) -> None:
        """Queue one message to the hub.

        Raises:
            LinkError: the connection has ended.
        """
        data = encode(kind, round_, self.me, array, tensor=tensor, counters=counters)
        try:
            self._conn.send(data)
        except TransportError as e:
            raise LinkError(f"member {self.me}: connection to the hub ended: {e}") from e
        self.bytes_sent += len(data)

    def send_bytes(
        self, kind: MessageKind, round_: int, data: bytes, *, counters: Sequence[int] | None = None
    ) -> None:
        self.send(kind, round_, np.frombuffer(data, dtype=np.uint8), counters=counters)

    def recv(self, timeout_s: float) -> TensorMessage | None:
        """The next message, or None if none came within ``timeout_s``.

        Raises:
            LinkError: the connection has ended (and nothing is left to read).
        """
        try:
            msg = self.inbox.get(timeout=max(0.0, timeout_s))
        except queue.Empty:
            return None
        if msg is None:
            self.inbox.put(None)  # every later call sees the end too
            raise LinkError(f"member {self.me}: connection to the hub ended")
        return msg

    def flush(self, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) until what was sent is acknowledged."""
        flush = getattr(self._conn, "flush", None)
        if flush is not None:
            try:
                flush(timeout_s)
            except TransportError:
                pass  # ended or slow: what is lost is lost

    def close(self) -> None:
        """Close the connection (idempotent; nothing is sent: a killed process says nothing)."""
        if self._closed:
            return
        self._closed = True
        self._conn.close()
        self._reader.join(JOIN_S)

    def __enter__(self) -> Uplink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

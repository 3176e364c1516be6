"""The MRC endpoint: one I/O thread per host process, and the blocking API on top of it.

The I/O thread owns every :class:`~host.mrc.connection.ConnectionCore` of the endpoint: it
waits (epoll) on the network's sockets and a wakeup socket, decodes and dispatches
datagrams (malformed or foreign ones are counted by :class:`~host.wire.DropReason` and
dropped; nothing raised while handling one escapes the thread), runs timers on
``time.monotonic`` and lets each connection send. Application threads never touch protocol
state: ``send``, ``close`` and queries are handed to the I/O thread as commands; completions
and received messages come back through condition variables. So ordinary (torch) training
loops call a plain blocking API::

    with Endpoint(UdpNetwork(nics), host_id=0, routes=routes) as ep:
        conn = ep.connect(1)
        conn.send(tensor).wait(timeout=5)
        reply = conn.recv(timeout=5)
"""

from __future__ import annotations

import math
import random
import select
import socket
import threading
import time
import traceback
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TypeVar

from host.api import as_bytes
from host.errors import (
    ConnectionClosed,
    ConnectionFailed,
    MessageTooLarge,
    RouteError,
    TransportError,
    TransportTimeout,
)
from host.mrc.config import MrcConfig
from host.mrc.connection import ConnectionCore, ConnStats
from host.mrc.evs import EvStats
from host.mrc.health import PathHealth
from host.mrc.receiver import PartialMessage, digest_of
from host.mrc.recorder import Event, EventKind, Recorder
from host.mrc.sender import SendOutcome
from host.network import Network, Selectable
from host.paths import Ev, RouteTable
from host.waits import wait_until
from host.wire import DataPacket, DropReason, ProbePacket, WireError, decode

T = TypeVar("T")
MAX_SLEEP_S = 0.05
RECV_BATCH = 256
_Key = tuple[int, int]  # (peer host, conn id)


@dataclass(frozen=True)
class EndpointStats:
    host_id: int
    connections: int
    datagrams_in: int
    datagrams_out: int
    drops: dict[str, int]  # by DropReason value, endpoint level plus every connection
    internal_errors: int


class SendHandle:
    """The future of one sent message."""

    def __init__(self, token: int, nbytes: int) -> None:
        self.token = token
        self.nbytes = nbytes
        self._done = threading.Event()
        self._outcome: SendOutcome | None = None
        self._error: TransportError | None = None

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> SendOutcome:
        """Block until the message completed.

        Raises:
            TransportTimeout: not completed within ``timeout`` seconds.
            ConnectionClosed, ConnectionFailed: the connection ended first.
        """
        if not self._done.wait(timeout):
            raise TransportTimeout(f"message not acknowledged within {timeout} s")
        if self._error is not None:
            raise self._error
        assert self._outcome is not None
        return self._outcome

    def _resolve(self, outcome: SendOutcome | None, error: TransportError | None = None) -> None:
        self._outcome, self._error = outcome, error
        self._done.set()


class Connection:
    """The application's side of one MRC connection (thread-safe)."""

    def __init__(self, endpoint: Endpoint, peer: int, conn_id: int, evs: tuple[Ev, ...]) -> None:
        self._ep = endpoint
        self.peer = peer
        self.conn_id = conn_id
        self.evs = evs
        self._key: _Key = (peer, conn_id)
        self._cv = threading.Condition()
        self._ready: deque[bytes] = deque()
        self._partial: deque[PartialMessage] = deque()
        self._handles: dict[int, SendHandle] = {}
        self._queued_bytes = 0
        self._error: TransportError | None = None
        self._next_token = 0

    # -- sending -----------------------------------------------------------------------------

    def send(
        self, data: object, *, reliable: bool = True, timeout: float | None = None
    ) -> SendHandle:
        """Queue one message; returns at once unless ``max_send_queue_bytes`` are queued.

        Args:
            reliable: False = spray without retransmission; the handle's outcome and the
                receiver's :meth:`recv_partial` report exactly which packets arrived.
            timeout: how long to wait for room in the send queue.
        Raises:
            MessageTooLarge: larger than the peer's receive buffer.
            TransportTimeout: no room in the send queue within ``timeout``.
            ConnectionClosed, ConnectionFailed: the connection has ended.
        """
        buf = as_bytes(data)
        cfg = self._ep.config
        if len(buf) > cfg.max_message_bytes:
            raise MessageTooLarge(f"{len(buf)} bytes > max_message_bytes {cfg.max_message_bytes}")
        with self._cv:
            wait_until(
                self._cv,
                lambda: (
                    not (
                        self._queued_bytes
                        and self._queued_bytes + len(buf) > cfg.max_send_queue_bytes
                    )
                ),
                timeout,
                self._raise_if_ended,
                f"send queue full ({self._queued_bytes} bytes)",
            )
            self._raise_if_ended()
            self._queued_bytes += len(buf)
            token = self._next_token
            self._next_token += 1
            handle = self._handles[token] = SendHandle(token, len(buf))
        digest = digest_of(buf)
        self._ep._command(
            lambda core, now: core.submit(token, buf, digest, reliable, now), self._key
        )
        return handle

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every message sent so far has completed."""
        with self._cv:
            handles = list(self._handles.values())
        deadline = None if timeout is None else time.monotonic() + timeout
        for h in handles:
            h.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))

    # -- receiving ---------------------------------------------------------------------------

    def recv(self, timeout: float | None = None) -> bytes:
        """The next reliable message, in send order.

        Raises:
            TransportTimeout: none arrived within ``timeout`` seconds.
            ConnectionClosed, ConnectionFailed: the connection has ended.
        """
        msg = self._take(self._ready, timeout)
        self._release(len(msg))
        return msg

    def recv_partial(self, timeout: float | None = None) -> PartialMessage:
        """The next unreliable message as it arrived (see :class:`PartialMessage`)."""
        msg = self._take(self._partial, timeout)
        if msg.msg_len:
            self._release(msg.msg_len)
        return msg

    def _take(self, queue: deque[T], timeout: float | None) -> T:
        with self._cv:
            wait_until(
                self._cv,
                lambda: bool(queue),
                timeout,
                self._raise_if_ended,
                f"no message within {timeout} s",
            )
            return queue.popleft()

    def _release(self, nbytes: int) -> None:
        self._ep._command(lambda core, now: core.release(nbytes), self._key, quiet=True)

    # -- control and statistics --------------------------------------------------------------

    def ev_stats(self) -> tuple[EvStats, ...]:
        """Per-EV state and counters (a snapshot)."""
        return self._ep._query(self._key, lambda core, now: core.ev_stats(now))

    def stats(self) -> ConnStats:
        return self._ep._query(self._key, lambda core, now: core.stats())

    def deny_ev(self, ev_id: int) -> None:
        """The controller forbids this EV: it carries nothing and is never probed."""
        self._ep._query(self._key, lambda core, now: core.deny(ev_id, now))

    def allow_ev(self, ev_id: int) -> None:
        """Lift a denial: the EV is probed and used again once a probe comes back."""
        self._ep._query(self._key, lambda core, now: core.allow(ev_id, now))

    def close(self) -> None:
        """Forget the connection (idempotent); pending sends and receives fail."""
        self._ep._forget(self._key)
        self._end(ConnectionClosed(f"connection {self.conn_id:#x} to host {self.peer} closed"))

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- called by the I/O thread ------------------------------------------------------------

    def _deliver(self, ready: list[bytes], partial: list[PartialMessage]) -> None:
        with self._cv:
            self._ready.extend(ready)
            self._partial.extend(partial)
            self._cv.notify_all()

    def _complete(self, outcomes: list[SendOutcome]) -> None:
        with self._cv:
            done = [(self._handles.pop(o.token, None), o) for o in outcomes]
            self._queued_bytes -= sum(o.msg_len for o in outcomes)
            self._cv.notify_all()
        for handle, outcome in done:
            if handle is not None:
                handle._resolve(outcome)

    def _end(self, error: TransportError) -> None:
        with self._cv:
            if self._error is None:
                self._error = error
            handles, self._handles = list(self._handles.values()), {}
            self._cv.notify_all()
        for h in handles:
            h._resolve(None, error)

    def _raise_if_ended(self) -> None:
        if self._error is not None:
            raise self._error


class Endpoint:
    """An MRC endpoint: the host's transport instance over one :class:`Network`.

    Args:
        network: datagram I/O (UDP sockets per plane, or the emulator); closed with the endpoint.
        host_id: this host's id in the wire header (the fabric host index).
        routes: EVs to each peer host id.
        listen: accept connections that peers open (see :meth:`accept`).
        recorder: where events and per-EV samples go (a new bounded one by default).
        sample_interval_ms: per-EV samples into the recorder this often (0 = never).
    """

    def __init__(
        self,
        network: Network,
        host_id: int,
        routes: RouteTable,
        config: MrcConfig | None = None,
        *,
        listen: bool = True,
        recorder: Recorder | None = None,
        sample_interval_ms: float = 0.0,
    ) -> None:
        self.network = network
        self.host_id = host_id
        self.routes = routes
        self.config = config or MrcConfig()
        self.listen = listen
        self.recorder = recorder if recorder is not None else Recorder(capacity=20_000)
        self._sample_s = sample_interval_ms / 1e3
        self._next_sample = math.inf if self._sample_s <= 0 else 0.0
        self._cores: dict[_Key, ConnectionCore] = {}
        self._due: dict[_Key, float] = {}
        """Each core's ``next_deadline`` as of its last poll (see ``ConnectionCore.touched``)."""
        self.health = PathHealth(self.config.ev)
        """Path-timeout verdicts shared by this endpoint's connections (``share_verdicts``)."""
        self._conns: dict[_Key, Connection] = {}
        self._accept_q: deque[Connection] = deque()
        self._accept_cv = threading.Condition()
        self._commands: deque[Callable[[], object]] = deque()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._wake_pending = False
        self._closing = False
        self._closed = False
        self._drops: Counter[DropReason] = Counter()
        self._in = 0
        self._out = 0
        self._internal_errors = 0
        self._rng = random.Random()
        self._thread = threading.Thread(target=self._run, name=f"mrc-io-h{host_id}", daemon=True)
        self._thread.start()

    # -- application API ---------------------------------------------------------------------

    def connect(self, peer: int, *, conn_id: int | None = None) -> Connection:
        """Open a connection to host ``peer`` over its EVs from the route table.

        Raises:
            RouteError: no EVs to that host.
        """
        evs = self.routes.evs(peer)
        self._raise_if_closed()
        while conn_id is None or (peer, conn_id) in self._conns:
            conn_id = self._rng.getrandbits(32)
        conn = Connection(self, peer, conn_id, evs)
        key = conn._key
        self._conns[key] = conn
        self._call(lambda: self._add_core(key, evs))
        return conn

    def accept(self, timeout: float | None = None) -> Connection:
        """The next connection a peer opened (its first packet has arrived).

        Raises:
            TransportTimeout: none within ``timeout`` seconds.
        """
        with self._accept_cv:
            wait_until(
                self._accept_cv,
                lambda: bool(self._accept_q),
                timeout,
                self._raise_if_closed,
                f"no connection within {timeout} s",
            )
            return self._accept_q.popleft()

    def connections(self) -> list[Connection]:
        return list(self._conns.values())

    def stats(self) -> EndpointStats:
        def collect() -> EndpointStats:
            drops = Counter({k.value: v for k, v in self._drops.items()})
            for core in self._cores.values():
                drops.update(core.stats().drops)
            return EndpointStats(
                self.host_id,
                len(self._cores),
                self._in,
                self._out,
                dict(drops),
                self._internal_errors,
            )

        return self._run_in_loop(collect)

    def close(self) -> None:
        """Stop the I/O thread, close the network, fail what is pending (idempotent)."""
        if self._closed:
            return
        self._closing = True
        self._wake()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=5.0)
        self._closed = True
        self.network.close()
        self._wake_r.close()
        self._wake_w.close()
        err = ConnectionClosed(f"endpoint of host {self.host_id} closed")
        for conn in list(self._conns.values()):
            conn._end(err)
        with self._accept_cv:
            self._accept_cv.notify_all()

    def __enter__(self) -> Endpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- commands into the I/O thread --------------------------------------------------------

    def _call(self, fn: Callable[[], object]) -> None:
        """Queue ``fn`` for the I/O thread, which runs it and drops its result."""
        self._raise_if_closed()
        self._commands.append(fn)
        self._wake()

    def _wake(self) -> None:
        if not self._wake_pending:
            self._wake_pending = True
            try:
                self._wake_w.send(b"\0")
            except (BlockingIOError, OSError):
                pass

    def _command(
        self, fn: Callable[[ConnectionCore, float], object], key: _Key, quiet: bool = False
    ) -> None:
        def run() -> None:
            core = self._cores.get(key)
            if core is not None:
                core.touched = True
                fn(core, time.monotonic())

        if quiet and self._closed:
            return
        self._call(run)

    def _query(self, key: _Key, fn: Callable[[ConnectionCore, float], T]) -> T:
        def run() -> T:
            core = self._cores.get(key)
            if core is None:
                raise ConnectionClosed(f"no connection {key[1]:#x} to host {key[0]}")
            core.touched = True
            return fn(core, time.monotonic())

        return self._run_in_loop(run)

    def _run_in_loop(self, fn: Callable[[], T]) -> T:
        if self._closed or threading.current_thread() is self._thread:
            return fn()
        fut: Future[T] = Future()

        def run() -> None:
            try:
                fut.set_result(fn())
            except BaseException as e:  # handed to the caller's thread
                fut.set_exception(e)

        self._call(run)
        return fut.result(timeout=10.0)

    def _forget(self, key: _Key) -> None:
        self._conns.pop(key, None)
        if not self._closed:
            self._call(lambda: self._drop_core(key))

    def _drop_core(self, key: _Key) -> None:
        core = self._cores.pop(key, None)
        self._due.pop(key, None)
        if core is not None:
            core.detach()

    def _raise_if_closed(self) -> None:
        if self._closed or self._closing:
            raise ConnectionClosed(f"endpoint of host {self.host_id} is closed")

    # -- the I/O thread ----------------------------------------------------------------------

    def _add_core(self, key: _Key, evs: tuple[Ev, ...]) -> ConnectionCore:
        now = time.monotonic()
        core = ConnectionCore(
            self.config,
            local_host=self.host_id,
            peer_host=key[0],
            conn_id=key[1],
            evs=evs,
            now=now,
            recorder=self.recorder,
            health=self.health,
        )
        self._cores[key] = core
        self._due[key] = -math.inf
        self.recorder.add(
            Event(
                now, self.host_id, key[1], EventKind.CONNECT, -1, float(key[0]), f"{len(evs)} EVs"
            )
        )
        return core

    def _transmit(self, ev: Ev, data: bytes) -> bool:
        ok = self.network.send(ev.plane, ev.dest, data)
        self._out += ok
        return ok

    def _run(self) -> None:
        # epoll itself rather than ``selectors``: its wrapper's Python code ran on every
        # wakeup, and at fabric link rates a wakeup brings about one datagram
        poller = select.epoll()
        try:
            sources: dict[int, Selectable | None] = {}
            for s in self.network.selectables():
                sources[s.fileno()] = s
            sources[self._wake_r.fileno()] = None
            for fd in sources:
                poller.register(fd, select.EPOLLIN)
            max_events = len(sources)
            receive, dispatch = self.network.receive, self._dispatch
            monotonic = time.monotonic
            deadline = -math.inf
            while not self._closing:
                now = monotonic()
                timeout = deadline - now
                # epoll waits whole milliseconds: round up, as ``selectors`` does
                timeout = 0.0 if timeout <= 0 else math.ceil(min(timeout, MAX_SLEEP_S) * 1e3) * 1e-3
                ready = poller.poll(timeout, max_events)
                if ready:
                    now = monotonic()
                    for fd, _mask in ready:
                        source = sources[fd]
                        if source is None:
                            self._drain_wake()
                        else:
                            for data, _plane, ce in receive(source, RECV_BATCH):
                                dispatch(data, ce, now)
                if self._commands:
                    self._run_commands()
                deadline = self._poll_all(monotonic())
        except BaseException as e:  # the loop itself broke: fail everything, visibly
            self._internal_errors += 1
            self.recorder.add(
                Event(
                    time.monotonic(),
                    self.host_id,
                    0,
                    EventKind.ERROR,
                    -1,
                    0.0,
                    "I/O thread died: " + "".join(traceback.format_exception(e)),
                )
            )
            err = ConnectionFailed(f"I/O thread of host {self.host_id} died: {e!r}")
            for conn in list(self._conns.values()):
                conn._end(err)
        finally:
            poller.close()

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass
        self._wake_pending = False

    def _run_commands(self) -> None:
        cmds = self._commands
        while cmds:
            fn = cmds.popleft()
            try:
                fn()
            except Exception as e:  # a command must not kill the loop
                self._internal_error(0, e)

    def _dispatch(self, data: bytes, ce: bool, now: float) -> None:
        self._in += 1
        try:
            pkt = decode(data)
        except WireError as e:
            self._drops[e.reason] += 1
            return
        if pkt.dst_host != self.host_id:
            self._drops[DropReason.FOREIGN] += 1
            return
        key = (pkt.src_host, pkt.conn_id)
        core = self._cores.get(key)
        if core is None:
            core = self._maybe_accept(key, pkt)
            if core is None:
                self._drops[DropReason.UNKNOWN_CONNECTION] += 1
                return
        try:
            core.on_packet(pkt, ce, now)
        except Exception as e:  # a bug must not kill the loop; it is counted and recorded
            self._internal_error(key[1], e)

    def _maybe_accept(self, key: _Key, pkt: object) -> ConnectionCore | None:
        if (
            not self.listen
            or not isinstance(pkt, DataPacket | ProbePacket)
            or key[0] not in self.routes
            or len(self._cores) >= self.config.max_connections
        ):
            return None
        try:
            evs = self.routes.evs(key[0])
        except RouteError:
            return None
        core = self._add_core(key, evs)
        conn = Connection(self, key[0], key[1], evs)
        self._conns[key] = conn
        with self._accept_cv:
            self._accept_q.append(conn)
            self._accept_cv.notify_all()
        return core

    def _poll_all(self, now: float) -> float:
        """Poll the connections that have work (touched since their last poll, or due) and
        return when the loop must run next (``now`` or earlier: at once).

        A connection that is neither touched nor due is skipped: with no input since its last
        poll, :meth:`ConnectionCore.poll` does nothing before the deadline it reported then.
        """
        if now >= self._next_sample:
            self._next_sample = now + self._sample_s
            for core in self._cores.values():
                core.sample(now, self.recorder)
        t = self._next_sample
        due = self._due
        polled = False
        for key, core in list(self._cores.items()):
            d = due[key]
            if core.touched or d <= now:
                polled = True
                try:
                    core.poll(now, self._transmit)
                except Exception as e:
                    self._internal_error(key[1], e)
                    core.failed = core.failed or f"internal error: {e!r}"
                    core.touched = False
                self._publish(key, core)
                d = due[key] = core.next_deadline(now)
            if d < t:
                t = d
        if polled:  # a poll may have touched a connection polled before it (shared verdicts)
            for core in self._cores.values():
                if core.touched:
                    return now
        return t

    def _publish(self, key: _Key, core: ConnectionCore) -> None:
        conn = self._conns.get(key)
        if conn is None:
            return
        s, r = core.sender, core.receiver
        if s.completed:
            done, s.completed = s.completed, []
            conn._complete(done)
            for o in done:
                self.recorder.add(
                    Event(
                        time.monotonic(),
                        self.host_id,
                        key[1],
                        EventKind.MESSAGE,
                        -1,
                        o.completion_s,
                        f"{o.msg_len} B",
                    )
                )
        if r.ready or r.partial:
            ready, partial = list(r.ready), list(r.partial)
            r.ready.clear()
            r.partial.clear()
            conn._deliver(ready, partial)
        if core.failed:
            conn._end(ConnectionFailed(core.failed))

    def _internal_error(self, conn_id: int, e: BaseException) -> None:
        self._internal_errors += 1
        self._drops[DropReason.INTERNAL_ERROR] += 1
        self.recorder.add(
            Event(
                time.monotonic(),
                self.host_id,
                conn_id,
                EventKind.ERROR,
                -1,
                0.0,
                "".join(traceback.format_exception(e)),
            )
        )

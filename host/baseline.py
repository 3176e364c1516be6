"""Baselines with the MRC API, for comparisons: one hashed path per connection, and plain TCP.

* **Single path** (``single_path_config`` / :class:`SinglePathEndpoint`): the MRC endpoint with
  the HASHED EV policy: every connection stays on one EV chosen by a hash of its ids (what
  per-flow ECMP does in the switches), a loss does not move it, only a retransmission timeout
  re-hashes it to another EV (as Linux PRR does with the flow label), and the same
  reliability and congestion control run on top. On the fabric it can use the plain baseline
  addresses (``RouteTable.from_fabric(..., baseline=True)``), where the switches hash.
* **TCP** (:class:`TcpEndpoint`): messages framed on one TCP connection per peer pair, with a
  validated frame header (magic, version, type, ids, length, BLAKE2b digest, CRC-32) and an
  application-level acknowledgement so that ``SendHandle.wait`` means "delivered", as it does
  for MRC. No unreliable mode.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
import zlib
from collections import deque
from dataclasses import replace

from host.api import as_bytes
from host.errors import (
    ConnectionClosed,
    ConnectionFailed,
    MessageTooLarge,
    PeerClosed,
    RouteError,
    TransportError,
    TransportTimeout,
)
from host.mrc.config import EvPolicy, MrcConfig
from host.mrc.endpoint import Endpoint, SendHandle
from host.mrc.receiver import PartialMessage, digest_of
from host.mrc.recorder import Recorder
from host.mrc.sender import SendOutcome
from host.network import Network
from host.paths import Address, RouteTable
from host.waits import wait_until

DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024


def single_path_config(cfg: MrcConfig | None = None, *, rehash_on_rto: bool = True) -> MrcConfig:
    """``cfg`` with the HASHED (one EV per connection) policy."""
    cfg = cfg or MrcConfig()
    return replace(cfg, ev=replace(cfg.ev, policy=EvPolicy.HASHED, rehash_on_rto=rehash_on_rto))


class SinglePathEndpoint(Endpoint):
    """An MRC endpoint whose connections each use a single hashed EV."""

    def __init__(
        self,
        network: Network,
        host_id: int,
        routes: RouteTable,
        config: MrcConfig | None = None,
        *,
        rehash_on_rto: bool = True,
        listen: bool = True,
        recorder: Recorder | None = None,
        sample_interval_ms: float = 0.0,
    ) -> None:
        super().__init__(
            network,
            host_id,
            routes,
            single_path_config(config, rehash_on_rto=rehash_on_rto),
            listen=listen,
            recorder=recorder,
            sample_interval_ms=sample_interval_ms,
        )


# -- TCP ------------------------------------------------------------------------------------

TCP_MAGIC = 0x7454  # "tT"
TCP_VERSION = 1
_FRAME = struct.Struct("!HBBIIQ16sI")  # magic, version, type, host, msg_id, length, digest, crc
FRAME_BYTES = _FRAME.size
HELLO, MSG, ACK = 1, 2, 3
_FRAME_TYPES = {HELLO, MSG, ACK}


def _frame(kind: int, host: int, msg_id: int, length: int, digest: bytes = bytes(16)) -> bytes:
    head = _FRAME.pack(TCP_MAGIC, TCP_VERSION, kind, host, msg_id, length, digest, 0)
    return head[:-4] + struct.pack("!I", zlib.crc32(head[:-4]))


def _parse(head: bytes, max_len: int) -> tuple[int, int, int, int, bytes]:
    magic, version, kind, host, msg_id, length, digest, crc = _FRAME.unpack(head)
    if magic != TCP_MAGIC or version != TCP_VERSION or kind not in _FRAME_TYPES:
        raise ConnectionFailed(
            f"bad TCP frame header (magic {magic:#x}, version {version}, type {kind})"
        )
    if zlib.crc32(head[:-4]) != crc:
        raise ConnectionFailed("TCP frame header checksum mismatch")
    if length > max_len or (kind != MSG and length):
        raise ConnectionFailed(f"TCP frame of {length} bytes (limit {max_len})")
    return kind, host, msg_id, length, digest


def _read_exact(sock: socket.socket, n: int, *, frame_start: bool = False) -> bytes:
    """``n`` bytes. The peer closing before the first byte of a frame is an orderly end
    (:class:`PeerClosed`); anywhere else it cut a frame short."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            if frame_start and got == 0:
                raise PeerClosed("peer closed the TCP connection")
            raise ConnectionClosed(
                f"peer closed the TCP connection in the middle of a frame ({got} of {n} bytes)"
            )
        got += k
    return bytes(buf)


class TcpConnection:
    """One TCP connection carrying messages (same API as the MRC ``Connection``)."""

    def __init__(
        self,
        sock: socket.socket,
        host_id: int,
        peer: int,
        max_message_bytes: int,
        max_recv_buffer_bytes: int,
    ) -> None:
        self._sock = sock
        self.host_id = host_id
        self.peer = peer
        self.conn_id = sock.getsockname()[1] << 16 | (sock.getpeername()[1] & 0xFFFF)
        self._max_msg = max_message_bytes
        self._max_buf = max_recv_buffer_bytes
        self._send_lock = threading.Lock()
        self._cv = threading.Condition()
        self._ready: deque[bytes] = deque()
        self._buffered = 0
        self._handles: dict[int, tuple[SendHandle, float, int]] = {}
        self._next_id = 0
        self._error: TransportError | None = None
        self._closed = False
        self._reader = threading.Thread(target=self._read_loop, name=f"tcp-rx-{peer}", daemon=True)
        self._reader.start()

    def send(
        self, data: object, *, reliable: bool = True, timeout: float | None = None
    ) -> SendHandle:
        """Send one message; the handle completes when the peer acknowledged it.

        Raises:
            TransportError: ``reliable=False`` (TCP has no unreliable mode).
            MessageTooLarge, ConnectionClosed, ConnectionFailed.
        """
        if not reliable:
            raise TransportError("the TCP baseline has no unreliable mode")
        buf = as_bytes(data)
        if len(buf) > self._max_msg:
            raise MessageTooLarge(f"{len(buf)} bytes > {self._max_msg}")
        with self._cv:
            self._raise_if_ended()
            msg_id = self._next_id
            self._next_id += 1
            handle = SendHandle(msg_id, len(buf))
            self._handles[msg_id] = (handle, time.monotonic(), len(buf))
        head = _frame(MSG, self.host_id, msg_id, len(buf), digest_of(buf))
        try:  # blocks while TCP pushes back (``timeout`` is not applied: the socket is shared)
            with self._send_lock:
                self._sock.sendall(head)
                self._sock.sendall(buf)
        except OSError as e:
            self._end(ConnectionFailed(f"TCP send failed: {e}"))
            raise ConnectionFailed(f"TCP send failed: {e}") from e
        return handle

    def recv(self, timeout: float | None = None) -> bytes:
        with self._cv:
            wait_until(
                self._cv,
                lambda: bool(self._ready),
                timeout,
                self._raise_if_ended,
                f"no message within {timeout} s",
            )
            msg = self._ready.popleft()
            self._buffered -= len(msg)
            self._cv.notify_all()
            return msg

    def recv_partial(self, timeout: float | None = None) -> PartialMessage:
        raise TransportError("the TCP baseline has no unreliable mode")

    def _read_loop(self) -> None:
        try:
            while True:
                head = _read_exact(self._sock, FRAME_BYTES, frame_start=True)
                kind, _host, msg_id, length, digest = _parse(head, self._max_msg)
                if kind == ACK:
                    self._acked(msg_id)
                    continue
                if kind != MSG:
                    raise ConnectionFailed(f"unexpected TCP frame type {kind}")
                with self._cv:  # bounded memory: stop reading (TCP pushes back) when full
                    while self._buffered and self._buffered + length > self._max_buf:
                        if self._closed:
                            return
                        self._cv.wait(0.5)
                data = _read_exact(self._sock, length)
                if digest_of(data) != digest:
                    raise ConnectionFailed(f"message {msg_id}: digest mismatch")
                with self._cv:
                    self._ready.append(data)
                    self._buffered += length
                    self._cv.notify_all()
                with self._send_lock:
                    self._sock.sendall(_frame(ACK, self.host_id, msg_id, 0))
        except TransportError as e:
            self._end(e)
        except OSError as e:
            self._end(ConnectionFailed(f"TCP connection to host {self.peer}: {e}"))

    def _acked(self, msg_id: int) -> None:
        with self._cv:
            entry = self._handles.pop(msg_id, None)
        if entry is not None:
            handle, t0, n = entry
            handle._resolve(SendOutcome(msg_id, msg_id, True, n, 1, (0,), time.monotonic() - t0, 0))

    def _end(self, error: TransportError) -> None:
        with self._cv:
            if self._error is None:
                self._error = error
            handles, self._handles = [h for h, _, _ in self._handles.values()], {}
            self._cv.notify_all()
        for h in handles:
            h._resolve(None, error)

    def _raise_if_ended(self) -> None:
        if self._error is not None:
            raise self._error

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._end(ConnectionClosed(f"TCP connection to host {self.peer} closed"))
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        if threading.current_thread() is not self._reader:
            self._reader.join(timeout=2.0)

    def __enter__(self) -> TcpConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TcpEndpoint:
    """Message transport over TCP: listens on ``listen`` and connects to ``peers``.

    Args:
        listen: address to accept connections on (port 0: any; see :attr:`address`).
        peers: host id → address of that host's TCP endpoint.
    """

    def __init__(
        self,
        host_id: int,
        listen: Address = ("::1", 0),
        peers: dict[int, Address] | None = None,
        *,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        max_recv_buffer_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        self.host_id = host_id
        self.peers = dict(peers or {})
        self._max_msg = max_message_bytes
        self._max_buf = max_recv_buffer_bytes
        family = socket.AF_INET6 if ":" in listen[0] else socket.AF_INET
        self._lsock = socket.socket(family, socket.SOCK_STREAM)
        self._lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._lsock.bind(listen)
        self._lsock.listen(64)
        self._conns: list[TcpConnection] = []
        self._closed = False

    @property
    def address(self) -> Address:
        host, port = self._lsock.getsockname()[:2]
        return (host, port)

    def connect(self, peer: int) -> TcpConnection:
        """Raises: RouteError (unknown peer), ConnectionFailed (refused)."""
        if peer not in self.peers:
            raise RouteError(f"no TCP address for host {peer}; known: {sorted(self.peers)}")
        try:
            sock = socket.create_connection(self.peers[peer], timeout=5.0)
        except OSError as e:
            raise ConnectionFailed(
                f"cannot connect to host {peer} at {self.peers[peer]}: {e}"
            ) from e
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(None)
        sock.sendall(_frame(HELLO, self.host_id, 0, 0))
        return self._add(TcpConnection(sock, self.host_id, peer, self._max_msg, self._max_buf))

    def accept(self, timeout: float | None = None) -> TcpConnection:
        self._lsock.settimeout(timeout)
        try:
            sock, _ = self._lsock.accept()
        except TimeoutError as e:
            raise TransportTimeout(f"no connection within {timeout} s") from e
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(10.0)
        kind, host, _, _, _ = _parse(_read_exact(sock, FRAME_BYTES), 0)
        if kind != HELLO:
            sock.close()
            raise ConnectionFailed("TCP peer did not start with HELLO")
        sock.settimeout(None)
        return self._add(TcpConnection(sock, self.host_id, host, self._max_msg, self._max_buf))

    def _add(self, conn: TcpConnection) -> TcpConnection:
        self._conns.append(conn)
        return conn

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for c in self._conns:
            c.close()
        self._lsock.close()

    def __enter__(self) -> TcpEndpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

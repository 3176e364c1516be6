"""A small typed P4Runtime client: one device, one ``StreamChannel``, plain ``p4.v1`` protobufs.

Usage::

    with P4RuntimeClient("127.0.0.1:50001", ClientOptions(device_id=1)) as c:
        c.connect()                              # channel, stream thread, arbitration
        c.set_pipeline(p4info, device_config)    # VERIFY_AND_COMMIT
        c.write([update, ...])                   # P4RuntimeError with per-update errors
        entities = c.read([wildcard, ...])

* **Arbitration.** ``connect()`` opens the stream and sends a ``MasterArbitrationUpdate`` with
  the election id of the options -- by default the current time in nanoseconds, so the newest
  controller becomes primary. Every arbitration update the server sends is kept
  (:attr:`arbitration`) and passed to ``on_arbitration``; :meth:`arbitrate` sends a new id
  (a server that lost its primary is taken back this way).
* **Errors.** Every RPC failure becomes :class:`~controller.errors.P4RuntimeError` naming the
  operation and the device; a failed ``Write`` carries one
  :class:`~controller.errors.UpdateError` per update, decoded from the
  ``grpc-status-details-bin`` trailer (``google.rpc.Status`` of ``Any(p4.v1.Error)``).
* **Stream messages.** Packet-ins and digest lists go to ``on_packet_in`` / ``on_digest``
  (called on the stream thread: keep them short); :meth:`ack_digest` acknowledges a list;
  :meth:`packet_out` sends a frame. Nothing here knows a program: ids come from the caller's
  P4Info (see :mod:`controller.schema`).

``close()`` ends the stream (releasing primary) and the channel; it is idempotent.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol, cast

import grpc
from google.rpc import status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from controller.errors import NOT_FOUND, OK, UNKNOWN, FabricUnavailable, P4RuntimeError, UpdateError

DETAILS_KEY = "grpc-status-details-bin"
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
_U64 = (1 << 64) - 1

Update = p4runtime_pb2.Update
INSERT, MODIFY, DELETE = Update.INSERT, Update.MODIFY, Update.DELETE
PipelineAction = p4runtime_pb2.SetForwardingPipelineConfigRequest.Action
GetResponseType = p4runtime_pb2.GetForwardingPipelineConfigRequest.ResponseType


def new_election_id() -> int:
    """A fresh election id: nanoseconds since the epoch (later controllers get higher ids)."""
    return time.time_ns()


def uint128(value: int) -> p4runtime_pb2.Uint128:
    return p4runtime_pb2.Uint128(high=value >> 64 & _U64, low=value & _U64)


@dataclass(frozen=True)
class ClientOptions:
    """How to reach and arbitrate for one device."""

    device_id: int
    """The P4Runtime device id (``--device-id`` of the switch)."""
    election_id: int | None = None
    """The 128-bit election id; None: :func:`new_election_id` at each connect."""
    connect_timeout_s: float = 10.0
    """How long to wait for the gRPC channel and the first arbitration answer."""
    rpc_timeout_s: float = 30.0
    """Deadline of one unary RPC."""


@dataclass(frozen=True)
class Arbitration:
    """The server's latest word on arbitration for this stream."""

    primary: bool
    code: int  # OK: primary; ALREADY_EXISTS: backup of another primary; NOT_FOUND: no primary
    highest_election_id: int | None
    message: str = ""

    @property
    def no_primary(self) -> bool:
        return self.code == NOT_FOUND


def decode_details(err: grpc.RpcError) -> tuple[UpdateError, ...]:
    """The per-update errors of a failed RPC (empty without a details trailer)."""
    trailers = err.trailing_metadata() if hasattr(err, "trailing_metadata") else None
    # grpc-stubs types the entries as objects with .key and .value; grpc gives (key, value)
    # tuples (named tuples at most): unpack them as the tuples they are.
    metadata = cast("Sequence[tuple[str, str | bytes]]", trailers or ())
    for key, value in metadata:
        if key != DETAILS_KEY:
            continue
        status = status_pb2.Status()
        try:
            status.ParseFromString(value)
        except Exception:  # noqa: BLE001 - a garbled trailer is reported as no details
            return ()
        out = []
        for i, detail in enumerate(status.details):
            e = p4runtime_pb2.Error()
            if detail.Unpack(e):
                out.append(UpdateError(i, e.canonical_code, e.message, e.space))
            else:
                out.append(UpdateError(i, UNKNOWN, f"detail of type {detail.type_url}"))
        return tuple(out)
    return ()


def rpc_error(operation: str, err: grpc.RpcError) -> P4RuntimeError:
    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    details = err.details() if hasattr(err, "details") else str(err)
    return P4RuntimeError(
        operation, code.name if code else "UNKNOWN", details or "", decode_details(err)
    )


class StreamCall(Protocol):
    """A ``StreamChannel`` call: the server's messages, and a way to end it."""

    def __iter__(self) -> Iterator[p4runtime_pb2.StreamMessageResponse]: ...

    def cancel(self) -> bool: ...


class P4RuntimeClient:
    """A P4Runtime client for one device (see the module docstring)."""

    def __init__(self, address: str, options: ClientOptions, *, name: str = "") -> None:
        self.address = address
        self.options = options
        self.name = name or address
        self.election_id: int | None = options.election_id
        self.on_packet_in: Callable[[p4runtime_pb2.PacketIn], None] | None = None
        self.on_digest: Callable[[p4runtime_pb2.DigestList], None] | None = None
        self.on_arbitration: Callable[[Arbitration], None] | None = None
        self.on_stream_end: Callable[[str], None] | None = None
        self.arbitration: Arbitration | None = None
        self._channel: grpc.Channel | None = None
        self._stub: p4runtime_pb2_grpc.P4RuntimeStub | None = None
        self._requests: queue.Queue[p4runtime_pb2.StreamMessageRequest | None] | None = None
        self._call: StreamCall | None = None
        self._thread: threading.Thread | None = None
        self._cond = threading.Condition()
        self._arb_seq = 0
        self._stream_open = False
        self._closed = False

    # -- lifecycle ------------------------------------------------------------------------

    def open(self) -> None:
        """Open the gRPC channel and wait until it is ready.

        Raises:
            FabricUnavailable: nothing answers at the address within the connect timeout.
        """
        if self._channel is not None:
            return
        if self._closed:
            raise FabricUnavailable(f"{self.name}: client is closed")
        channel = grpc.insecure_channel(
            self.address,
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ],
        )
        try:
            grpc.channel_ready_future(channel).result(timeout=self.options.connect_timeout_s)
        except grpc.FutureTimeoutError:
            channel.close()
            raise FabricUnavailable(
                f"{self.name}: no P4Runtime server at {self.address} "
                f"within {self.options.connect_timeout_s:g} s"
            ) from None
        if self._is_closed():  # closed while waiting (a reconnect racing close())
            channel.close()
            raise FabricUnavailable(f"{self.name}: client is closed")
        self._channel = channel
        self._stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)

    def _is_closed(self) -> bool:
        return self._closed

    def connect(self) -> Arbitration:
        """Open the channel and the stream, and arbitrate (see :meth:`arbitrate`)."""
        self.open()
        return self.arbitrate(self.election_id)

    def arbitrate(self, election_id: int | None = None) -> Arbitration:
        """Send a ``MasterArbitrationUpdate`` (opening the stream if needed); the answer.

        Raises:
            FabricUnavailable: no answer within the connect timeout, or the stream ended.
        """
        self.open()
        self.election_id = new_election_id() if election_id is None else election_id
        self._open_stream()
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = self.options.device_id
        req.arbitration.election_id.CopyFrom(uint128(self.election_id))
        with self._cond:
            seen = self._arb_seq
        self._send(req)
        with self._cond:
            ok = self._cond.wait_for(
                lambda: self._arb_seq > seen or not self._stream_open,
                timeout=self.options.connect_timeout_s,
            )
            if not ok or self.arbitration is None or self._arb_seq == seen:
                raise FabricUnavailable(f"{self.name}: no arbitration answer from {self.address}")
            return self.arbitration

    @property
    def connected(self) -> bool:
        """Whether the stream is open."""
        return self._stream_open

    @property
    def is_primary(self) -> bool:
        return self.arbitration is not None and self.arbitration.primary and self._stream_open

    def _open_stream(self) -> None:
        if self._stream_open:
            return
        assert self._stub is not None
        requests: queue.Queue[p4runtime_pb2.StreamMessageRequest | None] = queue.Queue()
        self._requests = requests
        self._call = self._stub.StreamChannel(iter(requests.get, None))
        self._stream_open = True
        self._thread = threading.Thread(
            target=self._receive, args=(self._call,), name=f"p4rt-stream-{self.name}", daemon=True
        )
        self._thread.start()

    def _send(self, msg: p4runtime_pb2.StreamMessageRequest) -> None:
        if not self._stream_open or self._requests is None:
            raise FabricUnavailable(f"{self.name}: the stream to {self.address} is closed")
        self._requests.put(msg)

    def _receive(self, call: StreamCall) -> None:
        reason = "stream ended"
        try:
            for msg in call:
                self._dispatch(msg)
        except grpc.RpcError as e:
            reason = f"{e.code().name if e.code() else 'UNKNOWN'}: {e.details()}"
        finally:
            with self._cond:
                current = self._call is call  # not a stream that reopen() replaced
                if current:
                    self._stream_open = False
                self._cond.notify_all()
            if current and self.on_stream_end is not None and not self._closed:
                self.on_stream_end(reason)

    def _dispatch(self, msg: p4runtime_pb2.StreamMessageResponse) -> None:
        match msg.WhichOneof("update"):
            case "arbitration":
                upd = msg.arbitration
                highest = (
                    (upd.election_id.high << 64) | upd.election_id.low
                    if upd.HasField("election_id")
                    else None
                )
                arb = Arbitration(
                    upd.status.code == OK, upd.status.code, highest, upd.status.message
                )
                with self._cond:
                    self.arbitration = arb
                    self._arb_seq += 1
                    self._cond.notify_all()
                if self.on_arbitration is not None:
                    self.on_arbitration(arb)
            case "packet":
                if self.on_packet_in is not None:
                    self.on_packet_in(msg.packet)
            case "digest":
                if self.on_digest is not None:
                    self.on_digest(msg.digest)
            case _:
                pass  # idle-timeout notifications, errors, other: not used

    def reopen(self, election_id: int | None = None) -> Arbitration:
        """After the stream ended (the switch restarted): drop the old channel, open a new one
        and a new stream, and arbitrate (a fresh channel, so gRPC's reconnect back-off, which
        grows to minutes, does not delay the switch's return).

        Raises:
            FabricUnavailable: the switch does not answer yet, or this client is closed.
        """
        if self._closed:
            raise FabricUnavailable(f"{self.name}: client is closed")
        self._drop()
        return self.arbitrate(election_id)

    def _drop(self) -> None:
        """Forget the channel and the stream (not closing the client)."""
        requests, call, thread, channel = self._requests, self._call, self._thread, self._channel
        self._requests = self._call = self._thread = None
        self._channel = self._stub = None
        if requests is not None:
            requests.put(None)
        if call is not None:
            call.cancel()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=2.0)
        if channel is not None:
            channel.close()
        with self._cond:
            self._stream_open = False
            self.arbitration = None

    def close(self) -> None:
        """End the stream (giving up primary) and the channel; idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._requests is not None:
            self._requests.put(None)
        if self._call is not None:
            self._call.cancel()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        if self._channel is not None:
            self._channel.close()
        self._stream_open = False

    def __enter__(self) -> P4RuntimeClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- RPCs -----------------------------------------------------------------------------

    @property
    def stub(self) -> p4runtime_pb2_grpc.P4RuntimeStub:
        if self._stub is None:
            raise FabricUnavailable(f"{self.name}: not connected")
        return self._stub

    def _election(self) -> p4runtime_pb2.Uint128:
        if self.election_id is None:
            raise FabricUnavailable(f"{self.name}: not arbitrated (call connect() first)")
        return uint128(self.election_id)

    def set_pipeline(
        self,
        p4info: p4info_pb2.P4Info,
        device_config: bytes,
        *,
        cookie: int | None = None,
        action: int = PipelineAction.VERIFY_AND_COMMIT,
    ) -> None:
        """``SetForwardingPipelineConfig`` (needs primary)."""
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest(
            device_id=self.options.device_id, election_id=self._election(), action=action
        )
        req.config.p4info.CopyFrom(p4info)
        req.config.p4_device_config = device_config
        if cookie is not None:
            req.config.cookie.cookie = cookie
        try:
            self.stub.SetForwardingPipelineConfig(req, timeout=self.options.rpc_timeout_s)
        except grpc.RpcError as e:
            raise rpc_error(f"{self.name}: SetForwardingPipelineConfig", e) from None

    def get_pipeline(
        self, response_type: int = GetResponseType.ALL, *, timeout_s: float | None = None
    ) -> p4runtime_pb2.ForwardingPipelineConfig | None:
        """The device's pipeline (None when it has none)."""
        req = p4runtime_pb2.GetForwardingPipelineConfigRequest(
            device_id=self.options.device_id, response_type=response_type
        )
        try:
            rep = self.stub.GetForwardingPipelineConfig(
                req, timeout=timeout_s if timeout_s is not None else self.options.rpc_timeout_s
            )
        except grpc.RpcError as e:
            raise rpc_error(f"{self.name}: GetForwardingPipelineConfig", e) from None
        if not rep.HasField("config") or (
            not rep.config.HasField("p4info") and not rep.config.HasField("cookie")
        ):
            return None
        return rep.config

    def write(
        self,
        updates: Sequence[p4runtime_pb2.Update],
        *,
        atomicity: int = p4runtime_pb2.WriteRequest.CONTINUE_ON_ERROR,
    ) -> None:
        """One ``Write`` of ``updates`` (needs primary).

        Raises:
            P4RuntimeError: with ``errors`` holding one entry per update when the server
                reported them.
        """
        if not updates:
            return
        req = p4runtime_pb2.WriteRequest(
            device_id=self.options.device_id, election_id=self._election(), atomicity=atomicity
        )
        req.updates.extend(updates)
        try:
            self.stub.Write(req, timeout=self.options.rpc_timeout_s)
        except grpc.RpcError as e:
            raise rpc_error(f"{self.name}: Write", e) from None

    def read(self, entities: Sequence[p4runtime_pb2.Entity]) -> list[p4runtime_pb2.Entity]:
        """One ``Read``; fields left unset in ``entities`` are wildcards."""
        req = p4runtime_pb2.ReadRequest(device_id=self.options.device_id)
        req.entities.extend(entities)
        try:
            return [
                e
                for rep in self.stub.Read(req, timeout=self.options.rpc_timeout_s)
                for e in rep.entities
            ]
        except grpc.RpcError as e:
            raise rpc_error(f"{self.name}: Read", e) from None

    def packet_out(self, packet: p4runtime_pb2.PacketOut) -> None:
        """Send a frame through the switch's CPU port (needs primary)."""
        req = p4runtime_pb2.StreamMessageRequest()
        req.packet.CopyFrom(packet)
        self._send(req)

    def ack_digest(self, digest_id: int, list_id: int) -> None:
        req = p4runtime_pb2.StreamMessageRequest()
        req.digest_ack.digest_id = digest_id
        req.digest_ack.list_id = list_id
        self._send(req)


def update(kind: int, entity: p4runtime_pb2.Entity) -> p4runtime_pb2.Update:
    return p4runtime_pb2.Update(type=kind, entity=entity)

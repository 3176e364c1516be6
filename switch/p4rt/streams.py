"""``StreamChannel`` sessions: one outgoing queue per stream, and the stream message handlers.

The gRPC handler of a stream only drains its session's queue; a reader thread consumes the
client's messages and dispatches them by kind (one handler per ``StreamMessageRequest`` oneof
field): arbitration updates go to the :class:`~switch.p4rt.arbitration.Arbiter` (an error ends
the stream with its code), ``PacketOut`` messages from the primary enter the device on its CPU
port, ``DigestListAck`` messages go to the digest engine. A malformed or unauthorised message is
answered with a ``StreamError`` (and counted) and never ends the stream.
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from dataclasses import dataclass

from google.protobuf import any_pb2
from p4.v1 import p4runtime_pb2

MAX_QUEUED = 4096  # responses a slow stream may have pending before packet-ins/digests drop


@dataclass(frozen=True)
class Abort:
    """End the stream with this google.rpc code."""

    code: int
    message: str


CLOSE = object()


class StreamSession:
    """One ``StreamChannel``: what is still to be sent to the client."""

    def __init__(self, peer: str = "", max_queued: int = MAX_QUEUED) -> None:
        self.peer = peer
        self.max_queued = max_queued
        self.queue: queue.Queue[object] = queue.Queue()
        self.closed = False
        self.dropped = 0

    def send(self, msg: p4runtime_pb2.StreamMessageResponse, droppable: bool = False) -> bool:
        """Queue a response; ``droppable`` ones (packet-ins, digests) drop when the queue is full."""
        if self.closed:
            return False
        if droppable and self.queue.qsize() >= self.max_queued:
            self.dropped += 1
            return False
        self.queue.put(msg)
        return True

    def abort(self, code: int, message: str) -> None:
        self.queue.put(Abort(code, message))

    def close(self) -> None:
        self.queue.put(CLOSE)


def stream_error(
    code: int, message: str, request: p4runtime_pb2.StreamMessageRequest
) -> p4runtime_pb2.StreamMessageResponse:
    """A ``StreamError`` naming the kind of message (and the message) that caused it."""
    msg = p4runtime_pb2.StreamMessageResponse()
    err = msg.error
    err.canonical_code = code
    err.message = message
    kind = request.WhichOneof("update")
    if kind == "packet":
        err.packet_out.packet_out.CopyFrom(request.packet)
    elif kind == "digest_ack":
        err.digest_list_ack.digest_list_ack.CopyFrom(request.digest_ack)
    else:
        other = any_pb2.Any()
        if kind == "other":
            other.CopyFrom(request.other)
        err.other.other.CopyFrom(other)
    return msg


StreamHandler = Callable[[StreamSession, p4runtime_pb2.StreamMessageRequest], None]

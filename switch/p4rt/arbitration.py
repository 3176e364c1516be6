"""Client arbitration: which ``StreamChannel`` is the primary for each (device_id, role).

Implements "Rules for Handling MasterArbitrationUpdate Messages" and "Client Arbitration
Notifications" of the P4Runtime specification:

* A stream's first update names the device (NOT_FOUND for another device), and a later update may
  not change its device or role (FAILED_PRECONDITION). An election id already used by another live
  stream of the same (device, role) is INVALID_ARGUMENT; more than ``max_streams`` streams per
  (device, role) is RESOURCE_EXHAUSTED. These end the stream.
* A stream whose election id is at least the highest ever seen for its (device, role) becomes (or
  stays) primary and that id becomes the highest; any other stream is a backup, and a stream
  without an election id never becomes primary. When a primary leaves (its stream closes or it
  lowers its id) there is no primary until a stream sends an id at least as high as the highest.
* Notifications carry the device, role, the role config of the latest primary and the highest
  election id (unset while there has never been a primary), with status OK for the primary,
  ALREADY_EXISTS for backups while there is a primary and NOT_FOUND when there is none. Every
  stream of the role is told when the primary changes; otherwise only the sender is answered.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Protocol

from google.protobuf import any_pb2
from google.rpc import status_pb2
from p4.v1 import p4runtime_pb2

from switch.p4rt.status import (
    ALREADY_EXISTS,
    FAILED_PRECONDITION,
    INVALID_ARGUMENT,
    NOT_FOUND,
    OK,
    RESOURCE_EXHAUSTED,
    P4RTError,
)

DEFAULT_ROLE = ""
MAX_STREAMS_PER_ROLE = 16


class StreamSink(Protocol):
    """Where a stream's responses go (the stream's outgoing queue)."""

    def send(self, msg: p4runtime_pb2.StreamMessageResponse, droppable: bool = False) -> bool: ...


def election_id(
    msg: p4runtime_pb2.MasterArbitrationUpdate
    | p4runtime_pb2.WriteRequest
    | p4runtime_pb2.SetForwardingPipelineConfigRequest,
) -> int | None:
    """The 128-bit election id of a message, or None when it is unset."""
    if not msg.HasField("election_id"):
        return None
    high: int = msg.election_id.high
    low: int = msg.election_id.low
    return (high << 64) | low


@dataclass(eq=False)
class Controller:
    """One arbitrated stream."""

    sink: StreamSink
    device_id: int
    role: str
    election_id: int | None
    role_given: bool


@dataclass
class RoleState:
    """The arbitration state of one (device, role)."""

    highest: int | None = None  # the highest election id a primary ever had
    primary: Controller | None = None
    controllers: list[Controller] = field(default_factory=list)
    config: any_pb2.Any | None = None


class Arbiter:
    """Arbitration for the streams of one device."""

    def __init__(self, device_id: int, max_streams: int = MAX_STREAMS_PER_ROLE) -> None:
        self.device_id = device_id
        self.max_streams = max_streams
        self._lock = threading.Lock()
        self._roles: dict[str, RoleState] = {}
        self._by_sink: dict[int, Controller] = {}

    # ----- stream side

    def arbitrate(self, sink: StreamSink, upd: p4runtime_pb2.MasterArbitrationUpdate) -> None:
        """Handle an arbitration update of a stream; :class:`P4RTError` ends the stream."""
        eid = election_id(upd)
        role = upd.role.name if upd.HasField("role") else DEFAULT_ROLE
        config = upd.role.config if upd.HasField("role") and upd.role.HasField("config") else None
        with self._lock:
            ctl = self._by_sink.get(id(sink))
            if ctl is None:
                if upd.device_id != self.device_id:
                    raise P4RTError(NOT_FOUND, f"unknown device id {upd.device_id}")
                rs = self._roles.setdefault(role, RoleState())
                self._check_unique(rs, eid, None)
                if len(rs.controllers) >= self.max_streams:
                    raise P4RTError(
                        RESOURCE_EXHAUSTED,
                        f"too many streams for role '{role}' ({self.max_streams})",
                    )
                ctl = Controller(sink, upd.device_id, role, eid, upd.HasField("role"))
                rs.controllers.append(ctl)
                self._by_sink[id(sink)] = ctl
                was_primary = False
            else:
                if upd.device_id != ctl.device_id:
                    raise P4RTError(
                        FAILED_PRECONDITION, f"this stream is for device {ctl.device_id}"
                    )
                if role != ctl.role:
                    raise P4RTError(
                        FAILED_PRECONDITION,
                        f"this stream is for role '{ctl.role}'; open a new stream to change role",
                    )
                rs = self._roles[role]
                self._check_unique(rs, eid, ctl)
                was_primary = rs.primary is ctl
                ctl.election_id = eid
            if eid is not None and (rs.highest is None or eid >= rs.highest):
                rs.primary = ctl
                rs.highest = eid
                rs.config = config
                self._notify(rs, [c for c in rs.controllers if c is not ctl] + [ctl])
            elif was_primary:
                rs.primary = None
                self._notify(rs, rs.controllers)
            else:
                self._notify(rs, [ctl])

    @staticmethod
    def _check_unique(rs: RoleState, eid: int | None, me: Controller | None) -> None:
        if eid is None:
            return
        for c in rs.controllers:
            if c is not me and c.election_id == eid:
                raise P4RTError(
                    INVALID_ARGUMENT, f"election id {eid} is used by another stream of this role"
                )

    def remove(self, sink: StreamSink) -> None:
        """The stream closed: forget it, and tell the others if it was the primary."""
        with self._lock:
            ctl = self._by_sink.pop(id(sink), None)
            if ctl is None:
                return
            rs = self._roles[ctl.role]
            rs.controllers.remove(ctl)
            if rs.primary is ctl:
                rs.primary = None
                self._notify(rs, rs.controllers)

    def _notify(self, rs: RoleState, targets: list[Controller]) -> None:
        for c in targets:
            msg = p4runtime_pb2.StreamMessageResponse()
            upd = msg.arbitration
            upd.device_id = c.device_id
            if c.role_given:
                upd.role.name = c.role
                if rs.config is not None:
                    upd.role.config.CopyFrom(rs.config)
            if rs.highest is not None:
                upd.election_id.high = rs.highest >> 64
                upd.election_id.low = rs.highest & ((1 << 64) - 1)
            if rs.primary is c:
                upd.status.CopyFrom(status_pb2.Status(code=OK, message="primary"))
            elif rs.primary is not None:
                upd.status.CopyFrom(status_pb2.Status(code=ALREADY_EXISTS, message="backup"))
            else:
                upd.status.CopyFrom(
                    status_pb2.Status(code=NOT_FOUND, message="backup; there is no primary")
                )
            c.sink.send(msg)

    # ----- queries

    def controller(self, sink: StreamSink) -> Controller | None:
        with self._lock:
            return self._by_sink.get(id(sink))

    def is_primary_stream(self, sink: StreamSink) -> bool:
        with self._lock:
            ctl = self._by_sink.get(id(sink))
            return ctl is not None and self._roles[ctl.role].primary is ctl

    def is_primary(self, role: str, eid: int | None) -> bool:
        """Whether a request with this role and election id comes from the primary."""
        with self._lock:
            rs = self._roles.get(role)
            return (
                eid is not None
                and rs is not None
                and rs.primary is not None
                and rs.primary.election_id == eid
            )

    def knows_role(self, role: str) -> bool:
        with self._lock:
            return role == DEFAULT_ROLE or role in self._roles

    def primary_sink(self, role: str = DEFAULT_ROLE) -> StreamSink | None:
        with self._lock:
            rs = self._roles.get(role)
            return None if rs is None or rs.primary is None else rs.primary.sink

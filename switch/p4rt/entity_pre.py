"""Entity handler of the packet replication engine: multicast groups and clone sessions.

Ids are non-zero in writes and 0 is the wildcard of reads. A replica's port may be given as the
deprecated ``egress_port`` number or as a ``port`` bytestring; reads answer with ``egress_port``,
which is what p4runtime-shell reads. Multicast replicas are read back in the order they were
written, with the group's ``metadata``; clone sessions keep their class of service (0..7, the
v1model priority range) and truncation length.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator

from p4.v1 import p4runtime_pb2

from switch.p4rt.bytestrings import decode_uint
from switch.p4rt.status import INVALID_ARGUMENT, NOT_FOUND, P4RTError
from switch.p4rt.target import Target
from switch.pipeline.pre import CloneSession, Replica

INSERT = p4runtime_pb2.Update.INSERT
MODIFY = p4runtime_pb2.Update.MODIFY
DELETE = p4runtime_pb2.Update.DELETE

MAX_INSTANCE = 0xFFFF
MAX_CLASS_OF_SERVICE = 7
MAX_METADATA_BYTES = 65536


def _replicas(replicas: Iterable[p4runtime_pb2.Replica], owner: str) -> tuple[Replica, ...]:
    out = []
    for r in replicas:
        if r.WhichOneof("port_kind") == "port":
            port = decode_uint(r.port, 32, f"{owner}: replica port")
        else:
            port = r.egress_port
        if r.instance > MAX_INSTANCE:
            raise P4RTError(
                INVALID_ARGUMENT, f"{owner}: instance {r.instance} is above {MAX_INSTANCE}"
            )
        out.append(Replica(port, r.instance))
    return tuple(out)


def _encode_replicas(replicas: Iterable[Replica]) -> list[p4runtime_pb2.Replica]:
    return [p4runtime_pb2.Replica(egress_port=r.egress_port, instance=r.instance) for r in replicas]


class ReplicationEntries:
    """``PacketReplicationEngineEntry``: ``multicast_group_entry`` or ``clone_session_entry``."""

    def write(
        self, target: Target, update_type: int, msg: p4runtime_pb2.PacketReplicationEngineEntry
    ) -> None:
        kind = msg.WhichOneof("type")
        if kind == "multicast_group_entry":
            self._write_group(target, update_type, msg.multicast_group_entry)
        elif kind == "clone_session_entry":
            self._write_session(target, update_type, msg.clone_session_entry)
        else:
            raise P4RTError(INVALID_ARGUMENT, "PacketReplicationEngineEntry is empty")

    def _write_group(
        self, target: Target, update_type: int, e: p4runtime_pb2.MulticastGroupEntry
    ) -> None:
        gid = e.multicast_group_id
        owner = f"multicast group {gid}"
        if gid == 0:
            raise P4RTError(INVALID_ARGUMENT, "multicast group id 0 is not valid in a write")
        pre = target.state.pre
        if update_type == DELETE:
            pre.delete_group(gid)
            target.extras.multicast.pop(gid, None)
            return
        if len(e.metadata) > MAX_METADATA_BYTES:
            raise P4RTError(INVALID_ARGUMENT, f"{owner}: metadata is too long")
        replicas = _replicas(e.replicas, owner)
        if update_type == INSERT:
            pre.insert_group(gid, replicas)
        else:
            pre.modify_group(gid, replicas)
        target.extras.multicast[gid] = (replicas, e.metadata)

    def _write_session(
        self, target: Target, update_type: int, e: p4runtime_pb2.CloneSessionEntry
    ) -> None:
        sid = e.session_id
        owner = f"clone session {sid}"
        if sid == 0:
            raise P4RTError(INVALID_ARGUMENT, "clone session id 0 is not valid in a write")
        pre = target.state.pre
        if update_type == DELETE:
            pre.delete_clone_session(sid)
            return
        if e.class_of_service > MAX_CLASS_OF_SERVICE:
            raise P4RTError(
                INVALID_ARGUMENT,
                f"{owner}: class of service {e.class_of_service} is above {MAX_CLASS_OF_SERVICE}",
            )
        if e.packet_length_bytes < 0:
            raise P4RTError(INVALID_ARGUMENT, f"{owner}: negative packet_length_bytes")
        session = CloneSession(
            sid, _replicas(e.replicas, owner), e.class_of_service, e.packet_length_bytes
        )
        if update_type == INSERT:
            pre.insert_clone_session(session)
        else:
            pre.modify_clone_session(session)

    def read(
        self, target: Target, msg: p4runtime_pb2.PacketReplicationEngineEntry
    ) -> Iterator[p4runtime_pb2.Entity]:
        kind = msg.WhichOneof("type")
        pre = target.state.pre
        if kind == "multicast_group_entry":
            gid = msg.multicast_group_entry.multicast_group_id
            if gid and gid not in pre.groups:
                raise P4RTError(NOT_FOUND, f"multicast group {gid} does not exist")
            for g in [gid] if gid else sorted(pre.groups):
                replicas: tuple[Replica, ...] = tuple(pre.get_group(g))
                metadata = b""
                saved = target.extras.multicast.get(g)
                if saved is not None and Counter(saved[0]) == Counter(replicas):
                    replicas, metadata = saved
                out = p4runtime_pb2.MulticastGroupEntry(
                    multicast_group_id=g, metadata=metadata, replicas=_encode_replicas(replicas)
                )
                yield p4runtime_pb2.Entity(
                    packet_replication_engine_entry={"multicast_group_entry": out}
                )
        elif kind == "clone_session_entry":
            sid = msg.clone_session_entry.session_id
            if sid and sid not in pre.sessions:
                raise P4RTError(NOT_FOUND, f"clone session {sid} does not exist")
            for s in [sid] if sid else sorted(pre.sessions):
                session = pre.sessions[s]
                out_s = p4runtime_pb2.CloneSessionEntry(
                    session_id=s,
                    replicas=_encode_replicas(session.replicas),
                    class_of_service=session.class_of_service,
                    packet_length_bytes=session.packet_length_bytes,
                )
                yield p4runtime_pb2.Entity(
                    packet_replication_engine_entry={"clone_session_entry": out_s}
                )
        else:
            raise P4RTError(INVALID_ARGUMENT, "PacketReplicationEngineEntry is empty")

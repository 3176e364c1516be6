"""The packet replication engine: multicast groups and clone (mirroring) sessions.

Multicast follows BMv2's ``simple_pre`` node model: a node holds a replication id (rid) and a
set of ports; a group lists its associated nodes in association order and replicates to every
port of each node in ascending port order. Node handles are the lowest free integers, so the
first ``mc_node_create`` returns 0 as simple_switch_CLI does. The P4Runtime view (group id ->
replicas of (egress_port, instance)) is built on top: one node per distinct instance, as PI's
BMv2 back-end does.

Clone sessions map a session id to replicas, a class of service and a truncation length
(``packet_length_bytes``, 0 = whole packet); BMv2's ``mirroring_add_mc`` sessions replicate
through a multicast group instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from switch.pipeline.errors import Code, StateError, unknown
from switch.pipeline.validate import invalid

MAX_PORTS = 512  # BMv2's PortMap size: ports 0..511
MAX_GROUP_ID = 0xFFFF  # v1model's mcast_grp is bit<16>


@dataclass(frozen=True)
class Replica:
    """One copy of a packet: its egress port and instance (BMv2's rid, v1model's egress_rid)."""

    egress_port: int
    instance: int = 0


@dataclass
class McNode:
    handle: int
    rid: int
    ports: tuple[int, ...]  # ascending, unique
    group: int | None = None  # the group it is associated with


@dataclass(frozen=True)
class CloneSession:
    session_id: int
    replicas: tuple[Replica, ...] = ()
    class_of_service: int = 0
    packet_length_bytes: int = 0  # 0: no truncation
    group: int | None = None  # BMv2 mirroring_add_mc: replicate through this multicast group


class PacketReplicationEngine:
    def __init__(self) -> None:
        self.groups: dict[int, list[int]] = {}  # group id -> associated node handles
        self.nodes: dict[int, McNode] = {}
        self.sessions: dict[int, CloneSession] = {}
        self._cache: dict[int, tuple[tuple[int, int], ...]] = {}

    # ----- checks

    @staticmethod
    def _check_group_id(group: int, allow_zero: bool = True) -> int:
        low = 0 if allow_zero else 1
        if not isinstance(group, int) or not low <= group <= MAX_GROUP_ID:
            raise invalid(f"multicast group id {group!r} is outside {low}..{MAX_GROUP_ID}")
        return group

    @staticmethod
    def _check_ports(ports: Iterable[int]) -> tuple[int, ...]:
        out = set()
        for p in ports:
            if not isinstance(p, int) or not 0 <= p < MAX_PORTS:
                raise invalid(f"port {p!r} is outside 0..{MAX_PORTS - 1}")
            out.add(p)
        return tuple(sorted(out))

    def _group(self, group: int) -> list[int]:
        try:
            return self.groups[group]
        except KeyError:
            raise unknown("multicast group", group) from None

    def _node(self, handle: int) -> McNode:
        try:
            return self.nodes[handle]
        except KeyError:
            raise unknown("multicast node handle", handle) from None

    # ----- BMv2 node model (simple_switch_CLI mc_* commands)

    def mc_mgrp_create(self, group: int) -> None:
        self._check_group_id(group)
        if group in self.groups:
            raise StateError(Code.ALREADY_EXISTS, f"multicast group {group} already exists")
        self.groups[group] = []
        self._cache.pop(group, None)

    def mc_mgrp_destroy(self, group: int) -> None:
        for handle in self._group(group):
            self.nodes[handle].group = None
        del self.groups[group]
        self._cache.pop(group, None)

    def mc_node_create(self, rid: int, ports: Iterable[int]) -> int:
        """Create a node; return its handle (the lowest free one)."""
        if not isinstance(rid, int) or not 0 <= rid <= 0xFFFF:
            raise invalid(f"replication id {rid!r} is outside 0..65535")
        checked = self._check_ports(ports)
        handle = 0
        while handle in self.nodes:
            handle += 1
        self.nodes[handle] = McNode(handle, rid, checked)
        return handle

    def mc_node_update(self, handle: int, ports: Iterable[int]) -> None:
        node = self._node(handle)
        node.ports = self._check_ports(ports)
        if node.group is not None:
            self._cache.pop(node.group, None)

    def mc_node_associate(self, group: int, handle: int) -> None:
        members = self._group(group)
        node = self._node(handle)
        if node.group is not None:
            raise StateError(
                Code.FAILED_PRECONDITION,
                f"node {handle} is already associated with group {node.group}",
            )
        members.append(handle)
        node.group = group
        self._cache.pop(group, None)

    def mc_node_dissociate(self, group: int, handle: int) -> None:
        members = self._group(group)
        node = self._node(handle)
        if node.group != group:
            raise StateError(
                Code.FAILED_PRECONDITION, f"node {handle} is not associated with group {group}"
            )
        members.remove(handle)
        node.group = None
        self._cache.pop(group, None)

    def mc_node_destroy(self, handle: int) -> None:
        node = self._node(handle)
        if node.group is not None:
            self.mc_node_dissociate(node.group, handle)
        del self.nodes[handle]

    # ----- P4Runtime view (MulticastGroupEntry)

    def _create_nodes(self, group: int, replicas: Iterable[Replica]) -> None:
        by_rid: dict[int, list[int]] = {}
        seen: set[Replica] = set()
        for r in replicas:
            if r in seen:
                raise invalid(f"multicast group {group}: duplicate replica {r}")
            seen.add(r)
            by_rid.setdefault(r.instance, []).append(r.egress_port)
        for rid, ports in by_rid.items():
            self._check_ports(ports)
            if not 0 <= rid <= 0xFFFF:
                raise invalid(f"multicast group {group}: instance {rid} is outside 0..65535")
        for rid, ports in by_rid.items():
            self.mc_node_associate(group, self.mc_node_create(rid, ports))

    def insert_group(self, group: int, replicas: Iterable[Replica]) -> None:
        self._check_group_id(group, allow_zero=False)
        if group in self.groups:
            raise StateError(Code.ALREADY_EXISTS, f"multicast group {group} already exists")
        replicas = list(replicas)
        self.groups[group] = []
        try:
            self._create_nodes(group, replicas)
        except StateError:
            self.delete_group(group)
            raise

    def modify_group(self, group: int, replicas: Iterable[Replica]) -> None:
        self._group(group)
        replicas = list(replicas)
        old = self.get_group(group)
        self._destroy_nodes(group)
        try:
            self._create_nodes(group, replicas)
        except StateError:
            self._destroy_nodes(group)
            self._create_nodes(group, old)
            raise

    def delete_group(self, group: int) -> None:
        self._group(group)
        self._destroy_nodes(group)
        del self.groups[group]
        self._cache.pop(group, None)

    def _destroy_nodes(self, group: int) -> None:
        for handle in list(self.groups[group]):
            self.mc_node_destroy(handle)

    def get_group(self, group: int) -> list[Replica]:
        self._group(group)
        return [Replica(p, rid) for p, rid in self.replicas(group)]

    # ----- data plane

    def replicas(self, group: int) -> tuple[tuple[int, int], ...]:
        """(egress_port, rid) copies for a multicast group; none for an unknown group."""
        hit = self._cache.get(group)
        if hit is not None:
            return hit
        handles = self.groups.get(group)
        if handles is None:
            return ()
        out = tuple((port, self.nodes[h].rid) for h in handles for port in self.nodes[h].ports)
        self._cache[group] = out
        return out

    def clone_replicas(self, session_id: int) -> tuple[tuple[int, int], ...] | None:
        """(egress_port, instance) copies for a clone session; None if the session is unset."""
        s = self.sessions.get(session_id)
        if s is None:
            return None
        out = tuple((r.egress_port, r.instance) for r in s.replicas)
        if s.group is not None:
            out += self.replicas(s.group)
        return out

    # ----- clone sessions

    def _check_session(self, session: CloneSession) -> CloneSession:
        if not isinstance(session.session_id, int) or session.session_id < 0:
            raise invalid(f"bad clone session id {session.session_id!r}")
        self._check_ports(r.egress_port for r in session.replicas)
        if len(set(session.replicas)) != len(session.replicas):
            raise invalid(f"clone session {session.session_id}: duplicate replicas")
        if session.packet_length_bytes < 0:
            raise invalid(f"clone session {session.session_id}: negative packet_length_bytes")
        if session.group is not None:
            self._check_group_id(session.group)
        return session

    def insert_clone_session(self, session: CloneSession) -> None:
        self._check_session(session)
        if session.session_id in self.sessions:
            raise StateError(
                Code.ALREADY_EXISTS, f"clone session {session.session_id} already exists"
            )
        self.sessions[session.session_id] = session

    def modify_clone_session(self, session: CloneSession) -> None:
        self.get_clone_session(session.session_id)
        self.sessions[session.session_id] = self._check_session(session)

    def delete_clone_session(self, session_id: int) -> None:
        self.get_clone_session(session_id)
        del self.sessions[session_id]

    def get_clone_session(self, session_id: int) -> CloneSession:
        try:
            return self.sessions[session_id]
        except KeyError:
            raise unknown("clone session", session_id) from None

    # BMv2 mirroring_* commands: add replaces an existing session, as simple_switch does.

    def mirroring_add(self, session_id: int, port: int) -> None:
        s = CloneSession(session_id, (Replica(port, 0),))
        self.sessions[session_id] = self._check_session(s)

    def mirroring_add_mc(self, session_id: int, group: int) -> None:
        s = CloneSession(session_id, (), group=group)
        self.sessions[session_id] = self._check_session(s)

    def mirroring_delete(self, session_id: int) -> None:
        self.delete_clone_session(session_id)

    def mirroring_get(self, session_id: int) -> CloneSession:
        return self.get_clone_session(session_id)

    def reset(self) -> None:
        self.groups.clear()
        self.nodes.clear()
        self.sessions.clear()
        self._cache.clear()

"""A model of fabric.p4's forwarding over computed (or read-back) entries -- for checking routes.

:func:`send` walks one packet from a host NIC through the switches the way ``p4/fabric.p4``
forwards it: ``my_sid`` (uN: shift the carrier, uA: shift and leave by the SID's port; argument
zero: the packet is for the switch), hop limit, ``routes``, then ``ecmp_routes`` (every member
of the group is explored, so the result is the set of possible outcomes), then ``port_state``,
then the link to the next switch or host. Only the entities are read, so the same code checks
what the controller computed and what a switch reports on read-back.

Things it does not model: SRH processing (End, PSP, srh_insert), loss, queues.
"""

from __future__ import annotations

import enum
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from controller import program as fp
from controller.entries import Entity, EntityMap, Exact, Group, Lpm, Member, TableEntry
from controller.wiring import Wiring
from topologies.model import Path

ARG_MASK = (1 << 80) - 1  # the carrier's argument: DA bits 79..0
MAX_HOPS = 16
DEFAULT_HOP_LIMIT = 64


class Verdict(enum.StrEnum):
    """How a walk ended."""

    DELIVERED = "delivered"
    NO_ROUTE = "no route"
    PORT_DOWN = "port down"
    PUNTED = "to the switch CPU"
    HOP_LIMIT = "hop limit"
    NO_LINK = "port without a link"
    LOOP = "loop"


@dataclass(frozen=True)
class Outcome:
    """One way a packet can end: where, why, and the switch ports it left through."""

    verdict: Verdict
    hops: tuple[str, ...]  # "switch:port" per hop, in order
    at: str  # the switch (or host) where it ended
    address: int  # the destination address at that point
    plane: int | None = None  # the plane of the NIC it reached (delivered only)

    def describe(self) -> str:
        if self.verdict is Verdict.DELIVERED:
            return (
                f"delivered to {self.at} NIC {self.plane} as {ipaddress.IPv6Address(self.address)}"
            )
        return f"{self.verdict.value} at {self.at}"


class SwitchView:
    """Lookups over one switch's entities (LPM by longest prefix, exact by value)."""

    def __init__(self, entities: Iterable[Entity]) -> None:
        self.lpm: dict[str, list[tuple[int, int, TableEntry]]] = {}
        self.exact: dict[tuple[str, int], TableEntry] = {}
        self.members: dict[int, Member] = {}
        self.groups: dict[int, Group] = {}
        for e in entities:
            if isinstance(e, Member):
                self.members[e.member_id] = e
            elif isinstance(e, Group):
                self.groups[e.group_id] = e
            elif len(e.match) == 1 and isinstance(e.match[0], Lpm):
                m = e.match[0]
                self.lpm.setdefault(e.table, []).append((m.prefix_len, m.value, e))
            elif len(e.match) == 1 and isinstance(e.match[0], Exact):
                self.exact[(e.table, e.match[0].value)] = e
        for rows in self.lpm.values():
            rows.sort(key=lambda r: -r[0])

    def lookup(self, table: str, address: int) -> TableEntry | None:
        for plen, value, entry in self.lpm.get(table, ()):
            if plen == 0 or address >> (128 - plen) == value >> (128 - plen):
                return entry
        return None

    def ports_of(self, entry: TableEntry) -> list[int]:
        """The egress ports an entry can choose (one, or each member of its group)."""
        if entry.action is not None:
            return [entry.action.param("port")]
        group = self.groups.get(entry.group_id or 0)
        if group is None:
            return []
        return [self.members[m].action.param("port") for m in group.members if m in self.members]


def shift(address: int) -> int:
    """The uN/uA shift: block ++ argument ++ 16 zero bits."""
    return (address >> 96) << 96 | (address & ARG_MASK) << 16


def views(tables: Mapping[str, EntityMap | Iterable[Entity]]) -> dict[str, SwitchView]:
    return {
        name: SwitchView(t.values() if isinstance(t, dict) else t) for name, t in tables.items()
    }


def at_switch(
    wiring: Wiring,
    sws: Mapping[str, SwitchView],
    switch: str,
    address: int,
    *,
    hop_limit: int = DEFAULT_HOP_LIMIT,
    extra_down: frozenset[tuple[str, int]] = frozenset(),
    hops: tuple[str, ...] = (),
) -> list[Outcome]:
    """Every outcome of a packet to ``address`` entering ``switch``."""
    if len(hops) >= MAX_HOPS:
        return [Outcome(Verdict.LOOP, hops, switch, address)]
    view = sws[switch]
    sid = view.lookup(fp.MY_SID, address)
    ua_port = None
    if sid is not None and sid.action is not None:
        if sid.action.name in (fp.USID_UN, fp.USID_UA) and address & ARG_MASK:
            if hop_limit > 1:
                address = shift(address)
            if sid.action.name == fp.USID_UA:
                ua_port = sid.action.param("port")
        else:
            return [Outcome(Verdict.PUNTED, hops, switch, address)]
    if hop_limit <= 1:
        return [Outcome(Verdict.HOP_LIMIT, hops, switch, address)]
    if ua_port is not None:
        ports = [ua_port]
    else:
        route = view.lookup(fp.ROUTES, address) or view.lookup(fp.ECMP_ROUTES, address)
        ports = view.ports_of(route) if route is not None else []
    if not ports:
        return [Outcome(Verdict.NO_ROUTE, hops, switch, address)]
    out: list[Outcome] = []
    for port in ports:
        here = (*hops, f"{switch}:{port}")
        if (fp.PORT_STATE, port) in view.exact or (switch, port) in extra_down:
            out.append(Outcome(Verdict.PORT_DOWN, here, switch, address))
            continue
        end = wiring.peer(switch, port)
        if end is None:
            out.append(Outcome(Verdict.NO_LINK, here, switch, address))
        elif end.nic is not None:
            out.append(Outcome(Verdict.DELIVERED, here, end.name, address, end.nic.plane))
        else:
            out += at_switch(
                wiring,
                sws,
                end.name,
                address,
                hop_limit=hop_limit - 1,
                extra_down=extra_down,
                hops=here,
            )
    return out


def send(
    wiring: Wiring,
    sws: Mapping[str, SwitchView],
    host: str,
    plane: int,
    address: str | int,
    *,
    extra_down: Iterable[tuple[str, int]] = (),
) -> list[Outcome]:
    """The outcomes of ``host`` sending to ``address`` out of its NIC on ``plane``."""
    nic = wiring.hosts[host].nics[plane]
    value = int(ipaddress.IPv6Address(address)) if isinstance(address, str) else address
    return at_switch(wiring, sws, nic.leaf, value, extra_down=frozenset(extra_down))


def path_delivers(
    wiring: Wiring,
    sws: Mapping[str, SwitchView],
    src: str,
    dst: str,
    path: Path,
    *,
    extra_down: Iterable[tuple[str, int]] = (),
) -> tuple[bool, list[Outcome]]:
    """Whether every outcome of ``path`` reaches ``dst``'s NIC on the path's plane, addressed to
    that NIC's own address."""
    outcomes = send(wiring, sws, src, path.plane, path.address, extra_down=extra_down)
    nic = wiring.hosts[dst].nics[path.plane]
    want = int(ipaddress.IPv6Address(nic.address))
    ok = bool(outcomes) and all(
        o.verdict is Verdict.DELIVERED
        and o.at == dst
        and o.plane == path.plane
        and o.address == want
        for o in outcomes
    )
    return ok, outcomes


def working_paths(
    wiring: Wiring,
    sws: Mapping[str, SwitchView],
    src: str,
    dst: str,
    *,
    extra_down: Iterable[tuple[str, int]] = (),
) -> list[Path]:
    """The micro-SID paths from ``src`` to ``dst`` that deliver."""
    down = frozenset(extra_down)
    return [
        p
        for p in wiring.fabric.paths(src, dst)
        if path_delivers(wiring, sws, src, dst, p, extra_down=down)[0]
    ]

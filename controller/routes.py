"""Route computation: the table entries every switch of a fabric should hold -- pure functions.

:func:`desired_entities` maps (topology, config, conditions) to ``{switch: {key: entity}}``.
Per switch (plane ``p``; ``B`` is the block ``fcbb:bb00::/32``):

======== =================== ===============================================================
role     table               entries
======== =================== ===============================================================
any      ``my_sid``          ``B:<own uSID>::/48`` -> ``usid_un``; ``B:e0<port>::/48`` ->
                             ``usid_ua(port)`` for each port (uA, End.X)
leaf     ``routes``          ``B:<spine uSID>::/48`` -> uplink; ``B:<local NIC uSID>::/48`` and
                             the NIC's baseline ``2001:db8:<p>:<h>::/64`` -> host port
leaf     ``ecmp_routes``     every remote host's baseline /64 -> the group of its leaf
leaf     ``ecmp_selector``   member ``port`` = ``set_egress_port(port)`` per uplink; group
                             ``r + 1`` per remote leaf ``r``: the uplinks through spines that
                             still reach ``r`` (all of them without failures)
spine    ``routes``          ``B:<leaf uSID>::/48`` and the baseline /64 of each host of that
                             leaf -> the downlink to the leaf
any      ``port_mac``        per port: ``set_macs(own MAC, peer MAC)`` (host NIC or switch)
any      ``burst_config``    per port: ``track_bursts(high, low)``
any      ``ecn_config``      per port: ``set_ecn_threshold(k)`` (unless ECN is off)
any      ``trim_config``     per port: ``set_trim(k, MRC DATA header bytes, 0)`` (when on)
any      ``port_state``      ``port_down`` per port taken down by a (non-phy) fault
any      ``loss_inject``     ``inject_loss(threshold)`` per lossy egress port (any destination)
======== =================== ===============================================================

A micro-SID path ``B:<leaf a>:<spine>:<leaf b>:<nic b>::`` then needs nothing else: each hop
matches its own /48 in ``my_sid``, shifts, and finds the next uSID in ``routes``.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable

from controller import program as fp
from controller.conditions import Conditions
from controller.config import ControllerConfig
from controller.entries import (
    ActionCall,
    Entity,
    EntityMap,
    Exact,
    Group,
    Lpm,
    Member,
    TableEntry,
    index,
    mac_int,
)
from controller.wiring import Wiring
from topologies.model import Fabric, Switch, usid_address

UA_BASE = 0xE000  # uA micro-SID = 0xe000 | port (p4/fabric.p4)
USID_PREFIX_LEN = 48  # block (32) + one micro-SID (16)
BASELINE_PREFIX_LEN = 64


@functools.lru_cache(maxsize=65536)
def usid_prefix(usid: int) -> Lpm:
    """``fcbb:bb00:<usid>::/48`` as an LPM on the destination address."""
    return Lpm(fp.DST_ADDR, int(usid_address(usid)), USID_PREFIX_LEN)


@functools.lru_cache(maxsize=65536)
def baseline_prefix(address: str) -> Lpm:
    net = ipaddress.IPv6Network(f"{address}/{BASELINE_PREFIX_LEN}", strict=False)
    return Lpm(fp.DST_ADDR, int(net.network_address), BASELINE_PREFIX_LEN)


def _port_entry(
    table: str, field: str, port: int, action: str, *params: tuple[str, int]
) -> TableEntry:
    return TableEntry(table, (Exact(field, port),), ActionCall(action, tuple(params)))


def _route(match: Lpm, port: int) -> TableEntry:
    return TableEntry(fp.ROUTES, (match,), ActionCall(fp.SET_EGRESS_PORT, (("port", port),)))


def sid_entries(sw: Switch, config: ControllerConfig) -> list[Entity]:
    """``my_sid``: the switch's uN /48 and (optionally) one uA /48 per port."""
    out: list[Entity] = [TableEntry(fp.MY_SID, (usid_prefix(sw.usid),), ActionCall(fp.USID_UN))]
    if config.uA_sids:
        out += [
            TableEntry(
                fp.MY_SID, (usid_prefix(UA_BASE | port),), ActionCall(fp.USID_UA, (("port", port),))
            )
            for port in sorted(sw.ports)
        ]
    return out


def leaf_routes(wiring: Wiring, sw: Switch) -> list[Entity]:
    out: list[Entity] = []
    for port in sorted(sw.ports):
        end = wiring.peer(sw.name, port)
        assert end is not None
        if end.nic is not None:
            out.append(_route(usid_prefix(end.nic.usid), port))
            out.append(_route(baseline_prefix(end.nic.baseline_address), port))
        else:
            out.append(_route(usid_prefix(wiring.switches[end.name].usid), port))
    return out


def spine_routes(wiring: Wiring, sw: Switch) -> list[Entity]:
    out: list[Entity] = []
    for port in sorted(sw.ports):
        end = wiring.peer(sw.name, port)
        assert end is not None and end.nic is None
        leaf = wiring.switches[end.name]
        out.append(_route(usid_prefix(leaf.usid), port))
        for host in wiring.fabric.hosts:
            if host.leaf_index == leaf.index:
                out.append(_route(baseline_prefix(host.nics[sw.plane].baseline_address), port))
    return out


def ecmp_entries(
    wiring: Wiring, sw: Switch, down: set[tuple[str, int]], config: ControllerConfig
) -> list[Entity]:
    """The leaf's baseline ECMP: members per uplink, a group per remote leaf, a route per host.

    With ``config.ecmp_reroute`` a group holds only the uplinks whose two hops (leaf -> spine,
    spine -> remote leaf) are up; when none is, it keeps all of them (the entries stay valid and
    ``port_state`` drops the traffic).
    """
    spines = {
        p: end
        for p in sorted(sw.ports)
        if (end := wiring.peer(sw.name, p)) is not None and not end.is_host
    }  # uplink -> the spine's end
    uplinks = list(spines)
    if not uplinks:
        return []
    out: list[Entity] = [
        Member(fp.ECMP_SELECTOR, port, ActionCall(fp.SET_EGRESS_PORT, (("port", port),)))
        for port in uplinks
    ]
    leaves = [
        s
        for s in wiring.fabric.switches
        if s.role == "leaf" and s.plane == sw.plane and s.name != sw.name
    ]
    for remote in leaves:
        members = []
        for port, end in spines.items():
            assert end.port is not None
            down_port = wiring.port_toward(end.name, remote.name)
            if down_port is None:
                continue
            alive = (sw.name, port) not in down and (end.name, down_port) not in down
            if alive or not config.ecmp_reroute:
                members.append(port)
        if not members:
            members = [
                p
                for p, end in spines.items()
                if wiring.port_toward(end.name, remote.name) is not None
            ]
        group_id = remote.index + 1
        out.append(Group(fp.ECMP_SELECTOR, group_id, tuple(members), max_size=len(uplinks)))
        for host in wiring.fabric.hosts:
            if host.leaf_index == remote.index:
                out.append(
                    TableEntry(
                        fp.ECMP_ROUTES,
                        (baseline_prefix(host.nics[sw.plane].baseline_address),),
                        group_id=group_id,
                    )
                )
    return out


def port_entries(
    wiring: Wiring, sw: Switch, config: ControllerConfig, conditions: Conditions
) -> list[Entity]:
    """``port_mac``, ``burst_config``, ``ecn_config`` and ``trim_config`` for every port of the
    switch (the last two unless ECN / trimming is off)."""
    out: list[Entity] = []
    for port in sorted(sw.ports):
        out.append(
            _port_entry(
                fp.PORT_MAC,
                fp.EGRESS_PORT,
                port,
                fp.SET_MACS,
                ("src", mac_int(sw.mac)),
                ("dst", mac_int(wiring.peer_mac(sw.name, port))),
            )
        )
        out.append(
            _port_entry(
                fp.BURST_CONFIG,
                fp.EGRESS_PORT,
                port,
                fp.TRACK_BURSTS,
                ("high", config.burst_high_pkts),
                ("low", config.burst_low_pkts),
            )
        )
        if conditions.ecn_threshold_pkts is not None:
            out.append(
                _port_entry(
                    fp.ECN_CONFIG,
                    fp.EGRESS_PORT,
                    port,
                    fp.SET_ECN_THRESHOLD,
                    ("k", conditions.ecn_threshold_pkts),
                )
            )
        if conditions.trim_threshold_pkts is not None:
            # one priority queue (priority 0): a trimmed header waits behind the queue it
            # found, but never fills it (the tail-drop depth is above any useful threshold)
            out.append(
                _port_entry(
                    fp.TRIM_CONFIG,
                    fp.EGRESS_SPEC,
                    port,
                    fp.SET_TRIM,
                    ("threshold", conditions.trim_threshold_pkts),
                    ("keep_bytes", config.trim_keep_bytes),
                    ("priority", 0),
                )
            )
    return out


def condition_entries(
    sw: Switch, conditions: Conditions, down: set[tuple[str, int]]
) -> list[Entity]:
    """``port_state`` for ports marked down and ``loss_inject`` for lossy ports."""
    out: list[Entity] = [
        _port_entry(fp.PORT_STATE, fp.EGRESS_SPEC, port, fp.PORT_DOWN)
        for (name, port) in sorted(down)
        if name == sw.name
    ]
    out += [
        _port_entry(
            fp.LOSS_INJECT, fp.EGRESS_PORT, e.port, fp.INJECT_LOSS, ("threshold", e.threshold)
        )
        for e in conditions.losses
        if e.switch == sw.name
    ]
    return out


def switch_entities(
    wiring: Wiring, sw: Switch, config: ControllerConfig, conditions: Conditions
) -> EntityMap:
    """Everything one switch should hold."""
    marked = conditions.down_ends(wiring, phy=False)
    every_down = conditions.down_ends(wiring)
    entities = sid_entries(sw, config)
    if sw.role == "leaf":
        entities += leaf_routes(wiring, sw)
        entities += ecmp_entries(wiring, sw, every_down, config)
    else:
        entities += spine_routes(wiring, sw)
    entities += port_entries(wiring, sw, config, conditions)
    entities += condition_entries(sw, conditions, marked)
    return index(entities)


def desired_entities(
    fabric: Fabric | Wiring,
    config: ControllerConfig | None = None,
    conditions: Conditions | None = None,
    only: Iterable[str] | None = None,
) -> dict[str, EntityMap]:
    """``{switch name: {key: entity}}`` for the whole fabric (or the switches ``only`` names)."""
    wiring = fabric if isinstance(fabric, Wiring) else Wiring(fabric)
    config = config or ControllerConfig()
    if conditions is None:
        conditions = Conditions(ecn_threshold_pkts=config.ecn_threshold_pkts)
    wanted = None if only is None else set(only)
    return {
        sw.name: switch_entities(wiring, sw, config, conditions)
        for sw in wiring.fabric.switches
        if wanted is None or sw.name in wanted
    }


def affected_switches(
    wiring: Wiring, config: ControllerConfig, old: Conditions, new: Conditions
) -> set[str]:
    """The switches whose entities can differ between ``old`` and ``new`` (a superset; every
    other switch's :func:`switch_entities` are the same under both), so a command computes and
    writes only those:

    * ECN or trim threshold changed: every switch (one entry per port);
    * ``port_state``: the switches owning a port marked down in one and not the other;
    * ``loss_inject``: the switches whose lossy ports or thresholds differ;
    * ECMP groups (``ecmp_reroute``): every leaf of a plane where some port went down or up
      (a leaf's group toward a remote leaf depends on its uplinks and the plane's spine
      downlinks).
    """
    if (old.ecn_threshold_pkts, old.trim_threshold_pkts) != (
        new.ecn_threshold_pkts,
        new.trim_threshold_pkts,
    ):
        return {sw.name for sw in wiring.fabric.switches}
    out = {name for name, _ in old.down_ends(wiring, phy=False) ^ new.down_ends(wiring, phy=False)}
    losses_old = {(e.switch, e.port, e.threshold) for e in old.losses}
    losses_new = {(e.switch, e.port, e.threshold) for e in new.losses}
    out |= {switch for switch, _, _ in losses_old ^ losses_new}
    changed = old.down_ends(wiring) ^ new.down_ends(wiring)
    planes = {wiring.switches[name].plane for name, _ in changed}
    if planes:
        out |= {
            sw.name for sw in wiring.fabric.switches if sw.role == "leaf" and sw.plane in planes
        }
    return out

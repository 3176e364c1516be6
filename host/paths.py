"""EVs (entropy values = explicit paths) from the topology model, and the local plane NICs.

On the fabric an EV is the micro-SID destination address of one (plane, spine) path
(``fcbb:bb00:<leaf>:<spine>:<leaf>:<nic>::``) plus the plane NIC that must send it; the UDP
destination port is :data:`MRC_UDP_PORT`. EV ids are the index of the path in
``Fabric.paths(src, dst)`` order (plane-major, then spine), so host a's EV k towards b and
host b's EV k towards a are the same (plane, spine) pair in opposite directions: receivers send
acknowledgements back on the EV id the data came in on.

On loopback a "plane NIC" is a UDP socket on ``::1`` and every EV of a plane is the peer's
socket of that plane: the EVs of one plane differ only in the EV id the header carries (there
is no spine to tell them apart), so loopback exercises the protocol, not path diversity.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from host.errors import RouteError
from host.wire import MAX_EVS
from topologies.model import Fabric, leaf_name, leaf_usid, nic_usid, usid_address

MRC_UDP_PORT = 4793
LOOPBACK_ADDRESS = "::1"

Address = tuple[str, int]  # (IPv6 address, UDP port)


@dataclass(frozen=True)
class Ev:
    """One path to a peer."""

    ev_id: int
    plane: int
    spine: int
    dest: Address  # where datagrams on this EV are sent: the path's address and port
    src_address: str  # the local plane NIC's address
    ifname: str  # the local plane NIC's interface ("" on loopback)
    hops: tuple[str, ...] = ()  # switch names along the path, for logs and plots


@dataclass(frozen=True)
class LocalNic:
    """One local plane NIC: where the endpoint binds its UDP socket for that plane."""

    plane: int
    address: str
    port: int
    ifname: str = ""  # bind to this device (SO_BINDTODEVICE) when set


def fabric_evs(
    fabric: Fabric,
    src: str,
    dst: str,
    *,
    port: int = MRC_UDP_PORT,
    planes: Iterable[int] | None = None,
    leaf_local: bool = False,
) -> tuple[Ev, ...]:
    """Every (plane NIC, spine) micro-SID path from host ``src`` to host ``dst`` as EVs.

    Args:
        planes: restrict to these planes (EV ids stay those of the full path list).
        leaf_local: between two hosts of the same leaf, one path per plane that turns at the
            leaf (``fcbb:bb00:<leaf>:<NIC>::``, ``spine`` -1) instead of the P×S paths over
            the spines: those take two spine links per packet that other hosts' traffic
            needs (what a ToR does with traffic between two of its ports).
    Raises:
        RouteError: more paths than the wire format's EV id can number.
    """
    host = fabric.host(src)
    keep = None if planes is None else set(planes)
    peer = fabric.host(dst)
    if leaf_local and host.leaf_index == peer.leaf_index and src != dst:
        return tuple(
            Ev(
                p,
                p,
                -1,
                (str(usid_address(leaf_usid(p, host.leaf_index), nic_usid(peer.index, p))), port),
                host.nics[p].address,
                host.nics[p].ifname,
                (leaf_name(p, host.leaf_index),),
            )
            for p in range(fabric.spec.planes)
            if keep is None or p in keep
        )
    paths = fabric.paths(src, dst)
    if len(paths) > MAX_EVS:
        raise RouteError(f"{len(paths)} paths from {src} to {dst}; at most {MAX_EVS} EVs")
    return tuple(
        Ev(i, p.plane, p.spine, (p.address, port), host.nics[p.plane].address, p.src_nic, p.hops)
        for i, p in enumerate(paths)
        if keep is None or p.plane in keep
    )


def fabric_baseline_evs(
    fabric: Fabric, src: str, dst: str, *, port: int = MRC_UDP_PORT
) -> tuple[Ev, ...]:
    """One EV per plane to the peer's plain (non micro-SID) address; switches hash (ECMP)."""
    a, b = fabric.host(src), fabric.host(dst)
    return tuple(
        Ev(
            p,
            p,
            -1,
            (b.nics[p].baseline_address, port),
            a.nics[p].baseline_address,
            a.nics[p].ifname,
        )
        for p in range(fabric.spec.planes)
    )


def fabric_nics(
    fabric: Fabric, host: str, *, port: int = MRC_UDP_PORT, baseline: bool = False
) -> tuple[LocalNic, ...]:
    """The local plane NICs of ``host`` (bind addresses of the per-plane sockets)."""
    return tuple(
        LocalNic(n.plane, n.baseline_address if baseline else n.address, port, n.ifname)
        for n in fabric.host(host).nics
    )


def host_id(fabric: Fabric, host: str) -> int:
    """The wire format's host id of a fabric host: its 0-based index."""
    return fabric.host(host).index


def loopback_nics(planes: int, ports: Sequence[int] | None = None) -> tuple[LocalNic, ...]:
    """Plane sockets on ``::1``; port 0 lets the kernel choose (read them back after binding)."""
    ports = ports if ports is not None else [0] * planes
    return tuple(LocalNic(p, LOOPBACK_ADDRESS, ports[p]) for p in range(planes))


def loopback_evs(peer_ports: Sequence[int], spines: int = 1) -> tuple[Ev, ...]:
    """EVs to a loopback peer whose plane p listens on ``peer_ports[p]``: planes × spines."""
    return tuple(
        Ev(p * spines + s, p, s, (LOOPBACK_ADDRESS, port), LOOPBACK_ADDRESS, "")
        for p, port in enumerate(peer_ports)
        for s in range(spines)
    )


class RouteTable:
    """Peer host id → EVs; what an endpoint consults on connect and on accept."""

    def __init__(self, routes: Mapping[int, Sequence[Ev]] | None = None) -> None:
        self._routes: dict[int, tuple[Ev, ...]] = {}
        for peer, evs in (routes or {}).items():
            self.add(peer, evs)

    def add(self, peer: int, evs: Sequence[Ev]) -> None:
        if not evs:
            raise RouteError(f"no EVs for peer {peer}")
        ids = [e.ev_id for e in evs]
        if len(set(ids)) != len(ids) or not all(0 <= i < MAX_EVS for i in ids):
            raise RouteError(f"EV ids to peer {peer} must be distinct and below {MAX_EVS}: {ids}")
        self._routes[peer] = tuple(evs)

    def evs(self, peer: int) -> tuple[Ev, ...]:
        try:
            return self._routes[peer]
        except KeyError:
            known = ", ".join(str(p) for p in sorted(self._routes)) or "none"
            raise RouteError(f"no route to host {peer}; known peers: {known}") from None

    def __contains__(self, peer: object) -> bool:
        return peer in self._routes

    @classmethod
    def from_fabric(
        cls, fabric: Fabric, host: str, *, port: int = MRC_UDP_PORT, baseline: bool = False
    ) -> RouteTable:
        """Routes from ``host`` to every other host of the fabric (ids = host indices)."""
        table = cls()
        for other in fabric.hosts:
            if other.name != host:
                evs = (
                    fabric_baseline_evs(fabric, host, other.name, port=port)
                    if baseline
                    else fabric_evs(fabric, host, other.name, port=port)
                )
                table.add(other.index, evs)
        return table

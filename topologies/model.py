"""Multi-plane two-tier Clos fabrics as pure data: names, ports, micro-SIDs and addresses.

A fabric has P planes; each plane is an independent leaf–spine network of L leaves and S spines;
each leaf has H hosts; every host has P NICs, NIC p on plane p. Everything derives
deterministically from (plane, role, index), so the controller, the Mininet builder and the host
agents agree without talking to each other: they all read the JSON this module writes.

Address plan (F3216 micro-SIDs, RFC 9800): a 32-bit locator block ``fcbb:bb00::/32`` and 16-bit
micro-SIDs::

    leaf  (plane p, index l)   0x1000 | p << 8 | l        p < 16, l < 256
    spine (plane p, index s)   0x2000 | p << 8 | s        p < 16, s < 256
    NIC   (host h, plane p)    0x8000 | h << 4 | p        h < 512

A path from host a to host b through plane p and spine s is the destination address
``block | leaf(a) | spine(s) | leaf(b) | nic(b, p)``; every switch shifts its own micro-SID out,
and the last leaf delivers ``block | nic(b, p)`` (``fcbb:bb00:<nic>::``, the NIC's own address)
to the host port. The per-flow ECMP baseline uses ordinary prefixes ``2001:db8:<p>:<h>::/64``.

Nothing here starts a process: this module imports nothing else from the project and is tested
without root.
"""

from __future__ import annotations

import ipaddress
import json
import pathlib
from dataclasses import asdict, dataclass, field
from typing import Any

BLOCK = 0xFCBBBB00  # fcbb:bb00::/32
BLOCK_BITS = 32
USID_BITS = 16
MAX_PLANES = 16
MAX_SWITCHES_PER_TIER = 256
MAX_HOSTS = 512  # NIC micro-SIDs stay in 0x8000-0x9fff (0xe000- is uA, see p4/fabric.p4)
SCHEMA_VERSION = 1
GRPC_BASE_PORT = 50001
THRIFT_BASE_PORT = 9091


class TopologyError(ValueError):
    """An impossible fabric (zero planes, more hosts than leaf ports, micro-SID overflow...)."""


def leaf_usid(plane: int, index: int) -> int:
    return 0x1000 | plane << 8 | index


def spine_usid(plane: int, index: int) -> int:
    return 0x2000 | plane << 8 | index


def nic_usid(host: int, plane: int) -> int:
    return 0x8000 | host << 4 | plane


def usid_address(*usids: int) -> ipaddress.IPv6Address:
    """``block | usid1 | usid2 | ...`` left-aligned in 128 bits (the rest zero)."""
    if len(usids) > (128 - BLOCK_BITS) // USID_BITS:
        raise TopologyError(f"{len(usids)} micro-SIDs do not fit in one address")
    value = BLOCK
    for u in usids:
        value = value << USID_BITS | u
    value <<= 128 - BLOCK_BITS - USID_BITS * len(usids)
    return ipaddress.IPv6Address(value)


def baseline_address(host: int, plane: int) -> ipaddress.IPv6Address:
    """The NIC's address in the per-flow ECMP baseline: ``2001:db8:<p>:<h>::1``."""
    return ipaddress.IPv6Address(f"2001:db8:{plane:x}:{host:x}::1")


def _mac(kind: int, a: int, b: int) -> str:
    return f"02:{kind:02x}:{a >> 8 & 0xFF:02x}:{a & 0xFF:02x}:{b >> 8 & 0xFF:02x}:{b & 0xFF:02x}"


@dataclass(frozen=True)
class FabricSpec:
    """What the user asks for; see :func:`build_fabric`."""

    planes: int = 2
    leaves: int = 2  # per plane
    spines: int = 2  # per plane
    hosts_per_leaf: int = 2
    link_mbps: float = 100.0  # emulated link capacity (switch queue drain rate)
    queue_depth: int = 64  # packets
    radix: int = 64  # switch ports available

    def validate(self) -> None:
        for name in ("planes", "leaves", "spines", "hosts_per_leaf"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise TopologyError(f"{name} must be a positive integer, got {v!r}")
        if self.planes > MAX_PLANES:
            raise TopologyError(
                f"{self.planes} planes: the micro-SID plan allows at most {MAX_PLANES}"
            )
        for name, n in (("leaves", self.leaves), ("spines", self.spines)):
            if n > MAX_SWITCHES_PER_TIER:
                raise TopologyError(
                    f"{n} {name} per plane: the micro-SID plan allows at most "
                    f"{MAX_SWITCHES_PER_TIER}"
                )
        if self.hosts_per_leaf * self.leaves > MAX_HOSTS:
            raise TopologyError(
                f"{self.hosts_per_leaf * self.leaves} hosts: the micro-SID plan "
                f"allows at most {MAX_HOSTS}"
            )
        if self.hosts_per_leaf + self.spines > self.radix:
            raise TopologyError(
                f"a leaf needs {self.hosts_per_leaf} host ports + {self.spines} "
                f"spine ports but has only {self.radix}"
            )
        if self.leaves > self.radix:
            raise TopologyError(f"a spine needs {self.leaves} leaf ports but has only {self.radix}")
        if self.link_mbps <= 0 or self.queue_depth < 1:
            raise TopologyError("link_mbps and queue_depth must be positive")


@dataclass(frozen=True)
class Nic:
    plane: int
    ifname: str  # on the host, e.g. h1-eth0
    usid: int
    address: str  # fcbb:bb00:<nic>::  (micro-SID NIC address)
    baseline_address: str  # 2001:db8:<p>:<h>::1
    mac: str
    leaf: str  # switch name
    leaf_port: int


@dataclass(frozen=True)
class Host:
    name: str  # h1..hN
    index: int  # 0-based, global
    leaf_index: int
    nics: tuple[Nic, ...]


@dataclass(frozen=True)
class Switch:
    name: str  # p0l0, p0s1 ...
    role: str  # 'leaf' | 'spine'
    plane: int
    index: int
    usid: int
    device_id: int
    grpc_port: int
    thrift_port: int
    ports: dict[int, str]  # port number -> peer ("h1" or switch name)
    mac: str


@dataclass(frozen=True)
class Link:
    a: str
    a_port: int  # 0 for a host end (the NIC is named by the plane)
    b: str
    b_port: int
    plane: int


@dataclass(frozen=True)
class Path:
    """One (plane, spine) path between two hosts."""

    plane: int
    spine: int
    address: str  # the destination address that encodes the path
    src_nic: str  # the sender's interface for this plane
    hops: tuple[str, ...]  # switch names in order


@dataclass
class Fabric:
    spec: FabricSpec
    hosts: list[Host] = field(default_factory=list)
    switches: list[Switch] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)

    # -- lookups -----------------------------------------------------------------------

    def host(self, name: str) -> Host:
        for h in self.hosts:
            if h.name == name:
                return h
        raise TopologyError(
            f"unknown host '{name}'; hosts: {', '.join(h.name for h in self.hosts)}"
        )

    def switch(self, name: str) -> Switch:
        for s in self.switches:
            if s.name == name:
                return s
        raise TopologyError(
            f"unknown switch '{name}'; switches: {', '.join(s.name for s in self.switches)}"
        )

    def leaf(self, plane: int, index: int) -> Switch:
        return self.switch(leaf_name(plane, index))

    def spine(self, plane: int, index: int) -> Switch:
        return self.switch(spine_name(plane, index))

    def paths(self, src: str, dst: str, planes: set[int] | None = None) -> list[Path]:
        """Every (plane, spine) micro-SID path from ``src`` to ``dst``: P×S of them."""
        a, b = self.host(src), self.host(dst)
        out = []
        for p in range(self.spec.planes):
            if planes is not None and p not in planes:
                continue
            la, lb = leaf_usid(p, a.leaf_index), leaf_usid(p, b.leaf_index)
            for s in range(self.spec.spines):
                addr = usid_address(la, spine_usid(p, s), lb, nic_usid(b.index, p))
                hops = (leaf_name(p, a.leaf_index), spine_name(p, s), leaf_name(p, b.leaf_index))
                out.append(Path(p, s, str(addr), a.nics[p].ifname, hops))
        return out

    # -- JSON --------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "block": str(usid_address()) + "/32",
            "usid_bits": USID_BITS,
            "spec": asdict(self.spec),
            "hosts": [asdict(h) for h in self.hosts],
            "switches": [asdict(s) for s in self.switches],
            "links": [asdict(link) for link in self.links],
        }

    def to_json(self, path: str | pathlib.Path | None = None) -> str:
        text = json.dumps(self.to_dict(), indent=1)
        if path is not None:
            pathlib.Path(path).write_text(text + "\n")
        return text

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Fabric:
        if d.get("schema_version") != SCHEMA_VERSION:
            raise TopologyError(
                f"topology schema version {d.get('schema_version')!r} is not {SCHEMA_VERSION}"
            )
        spec = FabricSpec(**d["spec"])
        fab = build_fabric(spec)
        if json.loads(fab.to_json()) != d:
            raise TopologyError("topology JSON does not match its own spec (edited by hand?)")
        return fab

    @classmethod
    def load(cls, path: str | pathlib.Path) -> Fabric:
        try:
            return cls.from_dict(json.loads(pathlib.Path(path).read_text()))
        except (KeyError, TypeError, json.JSONDecodeError) as e:
            raise TopologyError(f"{path}: not a tailfabric topology ({e})") from None


def leaf_name(plane: int, index: int) -> str:
    return f"p{plane}l{index}"


def port_ifname(switch: str, port: int) -> str:
    """The Linux interface of switch port ``port`` in the Mininet build: ``p0l0-eth3``."""
    return f"{switch}-eth{port}"


def spine_name(plane: int, index: int) -> str:
    return f"p{plane}s{index}"


def build_fabric(spec: FabricSpec) -> Fabric:
    """The fabric for ``spec``: hosts h1..hN, leaves ``p<p>l<l>``, spines ``p<p>s<s>``.

    Leaf ports 1..H face hosts, H+1..H+S face spines 0..S-1; spine ports 1..L face leaves.
    """
    spec.validate()
    fab = Fabric(spec)
    H, L, S, P = spec.hosts_per_leaf, spec.leaves, spec.spines, spec.planes
    n = 0
    for p in range(P):
        for lidx in range(L):
            ports = {1 + h: f"h{lidx * H + h + 1}" for h in range(H)}
            ports.update({H + 1 + s: spine_name(p, s) for s in range(S)})
            fab.switches.append(
                _switch(leaf_name(p, lidx), "leaf", p, lidx, leaf_usid(p, lidx), n, ports)
            )
            n += 1
        for s in range(S):
            ports = {1 + lidx: leaf_name(p, lidx) for lidx in range(L)}
            fab.switches.append(
                _switch(spine_name(p, s), "spine", p, s, spine_usid(p, s), n, ports)
            )
            n += 1
    for lidx in range(L):
        for h in range(H):
            idx = lidx * H + h
            name = f"h{idx + 1}"
            nics = tuple(
                Nic(
                    p,
                    f"{name}-eth{p}",
                    nic_usid(idx, p),
                    str(usid_address(nic_usid(idx, p))),
                    str(baseline_address(idx, p)),
                    _mac(0x10 + p, idx, 0),
                    leaf_name(p, lidx),
                    1 + h,
                )
                for p in range(P)
            )
            fab.hosts.append(Host(name, idx, lidx, nics))
            for nic in nics:
                fab.links.append(Link(name, 0, nic.leaf, nic.leaf_port, nic.plane))
    for p in range(P):
        for lidx in range(L):
            for s in range(S):
                fab.links.append(Link(leaf_name(p, lidx), H + 1 + s, spine_name(p, s), 1 + lidx, p))
    return fab


def _switch(
    name: str, role: str, plane: int, index: int, usid: int, n: int, ports: dict[int, str]
) -> Switch:
    return Switch(
        name,
        role,
        plane,
        index,
        usid,
        n + 1,
        GRPC_BASE_PORT + n,
        THRIFT_BASE_PORT + n,
        ports,
        _mac(0x01 if role == "leaf" else 0x02, plane, index),
    )

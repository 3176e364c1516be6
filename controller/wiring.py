"""Who is on the other end of each switch port: lookups over the topology, computed once.

The topology (:mod:`topologies.model`) lists each switch's ports as ``port -> peer name``; this
module adds the reverse direction (the peer's port, the host NIC on a plane) and the names the
controller's commands accept, with "did you mean" errors.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

from controller.errors import CommandError
from topologies.model import Fabric, Host, Nic, Switch


@dataclass(frozen=True)
class Endpoint:
    """The far end of a switch port: a switch port, or a host NIC (``port`` is None)."""

    name: str
    port: int | None
    nic: Nic | None = None

    @property
    def is_host(self) -> bool:
        return self.nic is not None


def suggest(key: str, candidates: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` or ``""``."""
    close = difflib.get_close_matches(key, list(candidates), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def unknown(kind: str, key: str, valid: Iterable[str]) -> CommandError:
    """An error that names the closest valid name and lists them all."""
    names = list(valid)
    return CommandError(f"unknown {kind} '{key}'{suggest(key, names)} (valid: {', '.join(names)})")


class Wiring:
    """Port-level adjacency of a :class:`Fabric`."""

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric
        self.switches: dict[str, Switch] = {s.name: s for s in fabric.switches}
        self.hosts: dict[str, Host] = {h.name: h for h in fabric.hosts}
        self._peer: dict[tuple[str, int], Endpoint] = {}
        self._toward: dict[tuple[str, str], int] = {}
        for sw in fabric.switches:
            for port, peer in sw.ports.items():
                self._toward[(sw.name, peer)] = port
        for sw in fabric.switches:
            for port, peer in sw.ports.items():
                if peer in self.hosts:
                    nic = self.hosts[peer].nics[sw.plane]
                    self._peer[(sw.name, port)] = Endpoint(peer, None, nic)
                else:
                    self._peer[(sw.name, port)] = Endpoint(peer, self._toward[(peer, sw.name)])

    # -- ports ----------------------------------------------------------------------------

    def peer(self, switch: str, port: int) -> Endpoint | None:
        """The far end of ``switch``'s ``port``; None for a port without a link."""
        return self._peer.get((switch, port))

    def port_toward(self, switch: str, neighbour: str) -> int | None:
        """The port of ``switch`` that faces ``neighbour`` (a switch or a host), or None."""
        return self._toward.get((switch, neighbour))

    def peer_mac(self, switch: str, port: int) -> str:
        end = self._peer[(switch, port)]
        return end.nic.mac if end.nic is not None else self.switches[end.name].mac

    def link_ends(self, a: str, b: str) -> list[tuple[str, int]]:
        """The switch ends ``(switch, port)`` of the link between ``a`` and ``b``.

        Raises:
            CommandError: a name is unknown, or the two are not linked.
        """
        for name in (a, b):
            self.check_node(name)
        ends = [
            (x, p)
            for x, y in ((a, b), (b, a))
            if x in self.switches
            for p in [self._toward.get((x, y))]
            if p is not None
        ]
        if not ends:
            near = (
                [self.switches[a].ports[p] for p in self.switches[a].ports]
                if a in self.switches
                else [n.leaf for n in self.hosts[a].nics]
            )
            raise CommandError(
                f"'{a}' and '{b}' are not linked ('{a}' is linked to {', '.join(near)})"
            )
        return ends

    def switch_ports(self, switch: str) -> list[int]:
        return sorted(self.switches[switch].ports)

    def plane_ends(self, plane: int) -> list[tuple[str, int]]:
        """Every port of every switch of ``plane``."""
        return [
            (s.name, p) for s in self.fabric.switches if s.plane == plane for p in sorted(s.ports)
        ]

    def switch_and_neighbour_ends(self, switch: str) -> list[tuple[str, int]]:
        """Every port of ``switch`` and every neighbour port that faces it."""
        ends = [(switch, p) for p in self.switch_ports(switch)]
        for p in self.switch_ports(switch):
            end = self._peer[(switch, p)]
            if end.port is not None:
                ends.append((end.name, end.port))
        return ends

    # -- names ----------------------------------------------------------------------------

    def check_switch(self, name: str) -> Switch:
        if name not in self.switches:
            raise unknown("switch", name, self.switches)
        return self.switches[name]

    def check_host(self, name: str) -> Host:
        if name not in self.hosts:
            raise unknown("host", name, self.hosts)
        return self.hosts[name]

    def check_node(self, name: str) -> None:
        if name not in self.switches and name not in self.hosts:
            raise unknown("switch or host", name, [*self.switches, *self.hosts])

    def check_plane(self, text: str) -> int:
        planes = [str(p) for p in range(self.fabric.spec.planes)]
        if text not in planes:
            raise unknown("plane", text, planes)
        return int(text)

    def parse_port(self, text: str) -> tuple[str, int]:
        """``p0l0:3`` or Mininet's ``p0l0-eth3`` -> ``(switch, port)``."""
        if ":" in text:
            name, _, num = text.partition(":")
        elif "-eth" in text:
            name, _, num = text.rpartition("-eth")
        else:
            raise CommandError(f"'{text}' is not a port (SWITCH:PORT or SWITCH-ethPORT)")
        sw = self.check_switch(name)
        if not num.isdigit() or int(num) not in sw.ports:
            raise CommandError(
                f"switch {name} has no port '{num}' (its ports: "
                f"{', '.join(str(p) for p in sorted(sw.ports))})"
            )
        return name, int(num)

"""How far a two-tier multi-plane Clos reaches, against a single-plane Clos of the same switches.

A multi-plane fabric splits every host's NIC bandwidth ``nic_gbps`` into ``planes`` lanes of
``nic_gbps / planes`` and every switch port of ``port_gbps`` into ``port_gbps / lane`` breakout
lanes, so a switch with ``radix`` physical ports becomes a switch with ``k = radix * breakout``
lane-rate ports. Each plane is an independent two-tier Clos of those ``k``-port switches (``k``
leaves with ``k/2`` hosts and ``k/2`` uplinks each, ``k/2`` spines with ``k`` downlinks), and
each host has one lane in every plane: ``k * k / 2`` hosts at the full NIC rate. With 64 x 800G
switches, 800G NICs and 8 planes: ``k = 512`` and 131,072 hosts, 3 switch hops between any two.

The single-plane comparison uses the same switches with ``port_gbps / nic_gbps`` hosts per port
(one host per port when the rates are equal): a folded Clos (fat tree) of ``t`` tiers with
``k1``-port switches reaches ``2 * (k1/2) ** t`` hosts; sized for ``N`` hosts every lower tier
has ``N / (k1/2)`` switches and the top tier ``N / k1``; ``t * N`` host-rate links; ``2t - 1``
switch hops worst case.

Optics are counted as transceivers: one per physical switch port in use plus one per host NIC
port (a breakout port needs one transceiver for all its lanes). Pure arithmetic; no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from topologies.model import TopologyError


@dataclass(frozen=True)
class ScaleSpec:
    """The switch and NIC building blocks."""

    radix: int = 64  # physical ports per switch
    port_gbps: int = 800  # rate of one physical switch port
    nic_gbps: int = 800  # rate of one host (all its planes together)
    planes: int = 8  # multi-plane: lanes per NIC, one per plane

    def validate(self) -> None:
        for name in ("radix", "port_gbps", "nic_gbps", "planes"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise TopologyError(f"{name} must be a positive integer, got {v!r}")
        if self.radix % 2:
            raise TopologyError(
                f"radix {self.radix} is odd: a Clos switch splits its ports half down, half up"
            )
        if self.nic_gbps % self.planes:
            raise TopologyError(
                f"a {self.nic_gbps}G NIC does not split into {self.planes} equal plane lanes"
            )
        lane = self.nic_gbps // self.planes
        if self.port_gbps % lane:
            raise TopologyError(
                f"a {self.port_gbps}G port does not break out into {lane}G plane lanes"
            )
        if self.nic_gbps > self.port_gbps:
            raise TopologyError(
                f"a {self.nic_gbps}G NIC is faster than a {self.port_gbps}G "
                "switch port: the single-plane fabric cannot attach it"
            )
        if self.port_gbps % self.nic_gbps:
            raise TopologyError(
                f"a {self.port_gbps}G port does not break out into {self.nic_gbps}G host ports"
            )

    @property
    def lane_gbps(self) -> int:
        """The link rate inside one plane."""
        return self.nic_gbps // self.planes

    @property
    def plane_radix(self) -> int:
        """Lane-rate ports per switch once every physical port is broken out."""
        return self.radix * (self.port_gbps // self.lane_gbps)

    @property
    def single_radix(self) -> int:
        """Host-rate ports per switch in the single-plane fabric."""
        return self.radix * (self.port_gbps // self.nic_gbps)


@dataclass(frozen=True)
class FabricScale:
    """One fabric's size."""

    name: str
    planes: int
    link_gbps: int  # rate of one link inside a plane
    switch_radix: int  # ports per switch at link_gbps
    tiers: int
    hosts: int
    leaves: int  # over all planes
    spines: int  # over all planes, every tier above the leaves
    links: int  # point-to-point links at link_gbps, host links included
    optics: int  # transceivers: physical switch ports in use + host NIC ports
    hops: int  # switches on the longest shortest path

    @property
    def switches(self) -> int:
        return self.leaves + self.spines


def max_hosts(radix: int, tiers: int) -> int:
    """Hosts a non-blocking folded Clos of ``tiers`` tiers of ``radix``-port switches reaches."""
    return 2 * int((radix // 2) ** tiers)  # int ** int is typed Any (a negative power is a float)


def tiers_for(hosts: int, radix: int) -> int:
    """The fewest tiers (at least two) whose folded Clos of ``radix``-port switches holds ``hosts``."""
    if radix < 2:
        raise TopologyError(f"radix {radix} cannot build a Clos")
    t = 2
    while max_hosts(radix, t) < hosts:
        if radix == 2:
            raise TopologyError("2-port switches cannot grow a Clos")
        t += 1
    return t


def clos(
    name: str,
    hosts: int,
    radix: int,
    tiers: int,
    *,
    planes: int,
    link_gbps: int,
    breakout: int,
    nic_ports: int,
) -> FabricScale:
    """A ``tiers``-tier folded Clos per plane for ``hosts`` hosts (each with one link per plane).

    Args:
        radix: lane-rate ports per switch.
        breakout: lanes per physical switch port (transceivers = ports in use / breakout).
        nic_ports: physical NIC ports (transceivers) per host.
    Raises:
        TopologyError: ``hosts`` do not fit in ``tiers`` tiers.
    """
    if hosts > max_hosts(radix, tiers):
        raise TopologyError(
            f"{hosts:,} hosts do not fit in {tiers} tiers of {radix}-port "
            f"switches (at most {max_hosts(radix, tiers):,})"
        )
    half = radix // 2
    leaves = math.ceil(hosts / half)
    middle = (tiers - 2) * leaves  # tiers between leaves and the top carry N/(k/2) each
    top = math.ceil(hosts / radix)
    links = tiers * hosts  # one tier of host links + (tiers - 1) tiers of fabric links
    switch_lanes = 2 * links - hosts  # every link has two switch ends, except host links
    optics_per_plane = math.ceil(switch_lanes / breakout)
    return FabricScale(
        name,
        planes,
        link_gbps,
        radix,
        tiers,
        hosts,
        planes * leaves,
        planes * (middle + top),
        planes * links,
        planes * optics_per_plane + hosts * nic_ports,
        2 * tiers - 1,
    )


@dataclass(frozen=True)
class ScaleReport:
    spec: ScaleSpec
    multi_plane: FabricScale  # two tiers per plane, as large as the switches allow
    single_two_tier: FabricScale  # single plane, two tiers, as large as they allow
    single_same_hosts: FabricScale  # single plane sized for the multi-plane host count


def scale(spec: ScaleSpec) -> ScaleReport:
    """The three fabrics of ``tf-topo scale``.

    Raises:
        TopologyError: the rates do not divide (see :meth:`ScaleSpec.validate`).
    """
    spec.validate()
    k = spec.plane_radix
    hosts = max_hosts(k, 2)
    multi = clos(
        f"{spec.planes}-plane, 2 tiers",
        hosts,
        k,
        2,
        planes=spec.planes,
        link_gbps=spec.lane_gbps,
        breakout=spec.port_gbps // spec.lane_gbps,
        nic_ports=1,
    )
    k1 = spec.single_radix
    one = dict(
        planes=1, link_gbps=spec.nic_gbps, breakout=spec.port_gbps // spec.nic_gbps, nic_ports=1
    )
    two = clos("1 plane, 2 tiers", max_hosts(k1, 2), k1, 2, **one)
    t = tiers_for(hosts, k1)
    same = clos(f"1 plane, {t} tiers", hosts, k1, t, **one)
    return ScaleReport(spec, multi, two, same)


def format_report(r: ScaleReport) -> str:
    """The table ``tf-topo scale`` prints."""
    s = r.spec
    lines = [
        f"switch: {s.radix} x {s.port_gbps}G ports; host NIC: {s.nic_gbps}G",
        f"{s.planes} planes: each NIC is {s.planes} x {s.lane_gbps}G lanes, each switch port "
        f"{s.port_gbps // s.lane_gbps} x {s.lane_gbps}G, so a switch has "
        f"{s.plane_radix} x {s.lane_gbps}G ports",
        "",
    ]
    head = ("fabric", "hosts", "tiers", "switches", "leaves", "spines", "links", "optics", "hops")
    rows = [head]
    for f in (r.multi_plane, r.single_two_tier, r.single_same_hosts):
        rows.append(
            (
                f"{f.name} ({f.switch_radix} x {f.link_gbps}G)",
                f"{f.hosts:,}",
                str(f.tiers),
                f"{f.switches:,}",
                f"{f.leaves:,}",
                f"{f.spines:,}",
                f"{f.links:,}",
                f"{f.optics:,}",
                str(f.hops),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    for i, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:])]
        lines.append("  ".join(cells))
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    m, one = r.multi_plane, r.single_same_hosts
    lines += [
        "",
        f"{m.hosts:,} hosts at {s.nic_gbps}G: the {s.planes}-plane fabric needs {m.tiers} tiers, "
        f"{m.switches:,} switches and {m.optics:,} optics; a single plane needs {one.tiers} tiers, "
        f"{one.switches:,} switches and {one.optics:,} optics ({m.hops} vs {one.hops} switch hops "
        f"worst case). Two single-plane tiers stop at {r.single_two_tier.hosts:,} hosts.",
        "links: point-to-point links at the plane's link rate, host links included; optics: "
        "transceivers (switch ports in use + NIC ports)",
    ]
    return "\n".join(lines)

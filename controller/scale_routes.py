"""Route computation for fabrics far beyond Mininet: 131,072 GPUs (8 planes of 512-port
switches, :mod:`topologies.scale`), as arrays -- computation only.

The per-entity route computation (:mod:`controller.routes`) builds one Python object per table
entry: right for an emulated fabric, but a 131,072-host fabric's leaves would hold about 10^9
of them (each leaf a baseline route per remote host). The routing *decisions* are far smaller
and are what this module computes, for every switch of every plane, under failures:

* each leaf's ECMP group toward every remote leaf of its plane: the uplinks whose two hops
  (leaf -> spine, spine -> remote leaf) are up; all uplinks when none is (``port_state`` then
  drops the traffic), exactly :func:`controller.routes.ecmp_entries`' rule;
* each switch's micro-SID next hops: a leaf's spine uSID -> uplink and local NIC uSID -> host
  port, a spine's leaf uSID -> downlink (fixed by the wiring; ports marked down are what
  ``port_state`` holds).

Leaf ``l`` of a plane uses ports ``1..H`` for its hosts and ``H+1+s`` for spine ``s``; spine
``s`` uses port ``1+l`` for leaf ``l`` (the layout of :mod:`topologies.model`). Groups are kept
as packed 64-bit words (one bit per spine), so a plane of 512 leaves and 256 spines is 8 MiB.
:func:`changed_planes` says which planes a change of failures touches: a failure is recomputed
in its plane only. ``tests/unit/test_controller_scale_routes.py`` checks the groups against
:mod:`controller.routes` on emulated fabrics; ``make bench-controller`` times 131,072 GPUs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from topologies.model import FabricSpec
from topologies.scale import ScaleSpec

BoolArray = npt.NDArray[np.bool_]
I32Array = npt.NDArray[np.int32]
U64Array = npt.NDArray[np.uint64]


@dataclass(frozen=True)
class ClosShape:
    """Planes of two-tier Clos: ``leaves`` leaves with ``hosts_per_leaf`` hosts and one
    uplink per spine, ``spines`` spines with one downlink per leaf."""

    planes: int
    leaves: int
    spines: int
    hosts_per_leaf: int

    @classmethod
    def from_scale(cls, spec: ScaleSpec) -> ClosShape:
        """The multi-plane fabric of ``spec``: ``k`` leaves of ``k/2`` hosts, ``k/2`` spines."""
        spec.validate()
        k = spec.plane_radix
        return cls(spec.planes, k, k // 2, k // 2)

    @classmethod
    def from_fabric(cls, spec: FabricSpec) -> ClosShape:
        return cls(spec.planes, spec.leaves, spec.spines, spec.hosts_per_leaf)

    @property
    def hosts(self) -> int:
        return self.leaves * self.hosts_per_leaf

    @property
    def switches(self) -> int:
        return self.planes * (self.leaves + self.spines)


@dataclass(frozen=True)
class ScaleFailures:
    """Switch ports down: whole planes (every port), leaf uplinks ``(plane, leaf, spine)`` and
    spine downlinks ``(plane, spine, leaf)``; what ``fail plane / link / switch`` mark on
    leaf-spine links."""

    planes: frozenset[int] = frozenset()
    uplinks: frozenset[tuple[int, int, int]] = frozenset()
    downlinks: frozenset[tuple[int, int, int]] = frozenset()

    @staticmethod
    def of(
        shape: ClosShape,
        *,
        planes: Iterable[int] = (),
        links: Iterable[tuple[int, int, int]] = (),
        spines: Iterable[tuple[int, int]] = (),
        leaves: Iterable[tuple[int, int]] = (),
    ) -> ScaleFailures:
        """Failures as the commands name them: planes, links ``(plane, leaf, spine)`` (both
        ends), spines and leaves ``(plane, index)`` (their ports and the ports facing them)."""
        up: set[tuple[int, int, int]] = set()
        down: set[tuple[int, int, int]] = set()
        for p, leaf, s in links:
            up.add((p, leaf, s))
            down.add((p, s, leaf))
        for p, s in spines:
            up |= {(p, leaf, s) for leaf in range(shape.leaves)}
            down |= {(p, s, leaf) for leaf in range(shape.leaves)}
        for p, leaf in leaves:
            up |= {(p, leaf, s) for s in range(shape.spines)}
            down |= {(p, s, leaf) for s in range(shape.spines)}
        return ScaleFailures(frozenset(planes), frozenset(up), frozenset(down))


@dataclass
class PlaneRoutes:
    """One plane's routing decisions."""

    plane: int
    groups: U64Array  # [leaf, remote leaf, words] packed bits: ECMP members (spines)
    group_sizes: I32Array  # [leaf, remote leaf]: members (0 on the diagonal: no group)
    leaf_usid_ports: I32Array  # [leaf, spines + hosts]: port of each spine uSID, then each NIC
    spine_usid_ports: I32Array  # [spine, leaves]: port of each leaf uSID
    rerouted: int = field(default=0)  # groups that lost a member to a failure

    def members(self, leaf: int, remote: int, spines: int) -> list[int]:
        bits = np.unpackbits(self.groups[leaf, remote].view(np.uint8), count=spines)
        return [int(s) for s in np.flatnonzero(bits)]


def _usable(shape: ClosShape, plane: int, failures: ScaleFailures) -> tuple[BoolArray, BoolArray]:
    """``uplink[leaf, spine]``, ``downlink[spine, leaf]``: the port is not marked down."""
    uplink = np.ones((shape.leaves, shape.spines), dtype=np.bool_)
    downlink = np.ones((shape.spines, shape.leaves), dtype=np.bool_)
    if plane in failures.planes:
        uplink[:], downlink[:] = False, False
        return uplink, downlink
    for p, leaf, s in failures.uplinks:
        if p == plane:
            uplink[leaf, s] = False
    for p, s, leaf in failures.downlinks:
        if p == plane:
            downlink[s, leaf] = False
    return uplink, downlink


def _words(bits: BoolArray) -> U64Array:
    """Rows of bits packed into 64-bit words (bit ``i`` of a row: byte ``i // 8``, MSB first)."""
    packed = np.packbits(bits, axis=1)
    pad = -packed.shape[1] % 8
    if pad:
        packed = np.pad(packed, ((0, 0), (0, pad)))
    return np.ascontiguousarray(packed).view(np.uint64)


def compute_plane(
    shape: ClosShape, plane: int, failures: ScaleFailures = ScaleFailures(), reroute: bool = True
) -> PlaneRoutes:
    """Every leaf's ECMP group toward every remote leaf, and the micro-SID next hops, of one
    plane (``reroute`` False: groups keep failed uplinks, as ``ecmp_reroute`` off)."""
    uplink, downlink = _usable(shape, plane, failures)
    if not reroute:
        uplink[:], downlink[:] = True, True
    up = _words(uplink)  # [leaf, words]
    reach = _words(downlink.T)  # [remote leaf, words]: the spines that still reach it
    groups = up[:, None, :] & reach[None, :, :]  # one AND per (leaf, remote leaf, 64 spines)
    sizes = np.bitwise_count(groups).sum(axis=2, dtype=np.int32)
    empty = sizes == 0  # no working two-hop path: every uplink (port_state drops)
    if empty.any():
        groups[empty] = _words(np.ones((1, shape.spines), dtype=np.bool_))[0]
        sizes[empty] = shape.spines
    sizes[np.arange(shape.leaves), np.arange(shape.leaves)] = 0  # no group toward itself
    rerouted = int(np.count_nonzero((sizes > 0) & (sizes < shape.spines)))
    h = shape.hosts_per_leaf
    uplink_ports = h + 1 + np.arange(shape.spines, dtype=np.int32)
    host_ports = 1 + np.arange(h, dtype=np.int32)
    leaf_ports = np.tile(np.concatenate([uplink_ports, host_ports]), (shape.leaves, 1))
    spine_ports = np.tile(1 + np.arange(shape.leaves, dtype=np.int32), (shape.spines, 1))
    return PlaneRoutes(plane, groups, sizes, leaf_ports, spine_ports, rerouted)


def compute_fabric(
    shape: ClosShape,
    failures: ScaleFailures = ScaleFailures(),
    planes: Iterable[int] | None = None,
    reroute: bool = True,
) -> dict[int, PlaneRoutes]:
    """:func:`compute_plane` for every plane (or those ``planes`` names)."""
    wanted = range(shape.planes) if planes is None else sorted(set(planes))
    return {p: compute_plane(shape, p, failures, reroute) for p in wanted}


def changed_planes(old: ScaleFailures, new: ScaleFailures) -> set[int]:
    """The planes whose routes a change from ``old`` to ``new`` can change."""
    return (
        set(old.planes ^ new.planes)
        | {p for p, _, _ in old.uplinks ^ new.uplinks}
        | {p for p, _, _ in old.downlinks ^ new.downlinks}
    )


def entities_per_switch(shape: ClosShape, ua_sids: bool = True) -> dict[str, int]:
    """How many entities :mod:`controller.routes` would install on a leaf and on a spine
    (without failures, loss, trimming; ECN on): what the arrays stand for."""
    leaf_ports = shape.hosts_per_leaf + shape.spines
    spine_ports = shape.leaves
    remote_hosts = (shape.leaves - 1) * shape.hosts_per_leaf

    def per_port(ports: int) -> int:
        return ports * 3  # port_mac, burst_config, ecn_config

    leaf = (
        1
        + (leaf_ports if ua_sids else 0)  # my_sid
        + shape.spines
        + 2 * shape.hosts_per_leaf  # routes
        + shape.spines  # ecmp_selector members
        + (shape.leaves - 1)  # ecmp_selector groups
        + remote_hosts  # ecmp_routes
        + per_port(leaf_ports)
    )
    spine = (
        1
        + (spine_ports if ua_sids else 0)
        + shape.leaves * (1 + shape.hosts_per_leaf)
        + per_port(spine_ports)
    )
    return {"leaf": leaf, "spine": spine}

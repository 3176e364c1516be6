"""The scale calculator: multi-plane vs single-plane Clos sizes from switch and NIC rates."""

from __future__ import annotations

import pytest

from topologies.emulation.cli import main
from topologies.model import TopologyError
from topologies.scale import ScaleSpec, clos, max_hosts, scale, tiers_for


def test_eight_planes_of_64x800g_switches_reach_131072_hosts() -> None:
    r = scale(ScaleSpec(radix=64, port_gbps=800, nic_gbps=800, planes=8))
    m = r.multi_plane
    assert (r.spec.lane_gbps, r.spec.plane_radix) == (100, 512)
    assert m.hosts == 131_072
    assert (m.tiers, m.hops) == (2, 3)
    assert (m.leaves, m.spines, m.switches) == (8 * 512, 8 * 256, 6_144)
    assert m.links == 8 * 2 * 131_072  # host links + leaf-spine links, in every plane
    # transceivers: 3 lanes per host per plane on switches, 8 lanes per port, plus one per NIC
    assert m.optics == 8 * (3 * 131_072 // 8) + 131_072 == 524_288


def test_single_plane_of_the_same_switches() -> None:
    r = scale(ScaleSpec(radix=64, port_gbps=800, nic_gbps=800, planes=8))
    two = r.single_two_tier
    assert (two.hosts, two.tiers, two.leaves, two.spines, two.hops) == (2_048, 2, 64, 32, 3)
    same = r.single_same_hosts
    assert same.hosts == 131_072
    assert same.tiers == 4  # 3 tiers of 64-port switches stop at 65,536 hosts
    assert same.hops == 7
    assert same.leaves == 131_072 // 32
    assert same.spines == 2 * (131_072 // 32) + 131_072 // 64
    assert same.switches == 14_336
    assert same.links == 4 * 131_072
    assert same.optics == 8 * 131_072  # 7 switch ends + 1 NIC per host, no breakout


@pytest.mark.parametrize(
    ("radix", "tiers", "hosts"), [(64, 2, 2_048), (64, 3, 65_536), (512, 2, 131_072), (4, 3, 16)]
)
def test_max_hosts_of_a_folded_clos(radix: int, tiers: int, hosts: int) -> None:
    assert max_hosts(radix, tiers) == hosts


def test_tiers_for_grows_until_the_hosts_fit() -> None:
    assert tiers_for(2_048, 64) == 2
    assert tiers_for(2_049, 64) == 3
    assert tiers_for(65_537, 64) == 4


def test_partial_fabric_rounds_switches_up() -> None:
    f = clos("x", 100, 64, 2, planes=1, link_gbps=800, breakout=1, nic_ports=1)
    assert (f.leaves, f.spines) == (4, 2)
    with pytest.raises(TopologyError, match="do not fit in 2 tiers"):
        clos("x", 2_049, 64, 2, planes=1, link_gbps=800, breakout=1, nic_ports=1)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (ScaleSpec(planes=0), "planes must be a positive integer"),
        (ScaleSpec(radix=63), "odd"),
        (ScaleSpec(nic_gbps=800, planes=3), "does not split into 3"),
        (ScaleSpec(port_gbps=400, nic_gbps=800, planes=3), "does not split"),
        (ScaleSpec(port_gbps=150, nic_gbps=800, planes=8), "does not break out into 100G"),
        (ScaleSpec(port_gbps=400, nic_gbps=800, planes=8), "faster than"),
    ],
)
def test_impossible_rates_are_rejected_clearly(spec: ScaleSpec, message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        scale(spec)


def test_tf_topo_scale_prints_both_fabrics(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["scale", "--radix", "64", "--port-gbps", "800", "--nic-gbps", "800", "--planes", "8"])
        == 0
    )
    out = capsys.readouterr().out
    assert "131,072" in out and "2,048" in out
    assert "8-plane, 2 tiers (512 x 100G)" in out
    assert "1 plane, 4 tiers (64 x 800G)" in out


def test_tf_topo_scale_reports_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scale", "--planes", "3"]) == 2
    assert "does not split into 3" in capsys.readouterr().err

"""Host addressing and routing of the fabric, and the switches' command lines (no root)."""

from __future__ import annotations

import ipaddress

import pytest

from topologies.emulation.mnfabric import (
    FabricNetError,
    SwitchOptions,
    check_names,
    port_mac,
    switch_argv,
)
from topologies.hostconf import (
    GATEWAY,
    HOST_SYSCTLS,
    baseline_prefix,
    host_config,
    ip_batch,
    plane_prefix,
    shell_script,
)
from topologies.model import FabricSpec, build_fabric, port_ifname


@pytest.mark.parametrize(
    ("plane", "prefix"),
    [(0, "fcbb:bb00:1000::/40"), (1, "fcbb:bb00:1100::/40"), (15, "fcbb:bb00:1f00::/40")],
)
def test_plane_prefix_covers_exactly_that_planes_leaves(plane: int, prefix: str) -> None:
    assert plane_prefix(plane) == prefix
    net = ipaddress.IPv6Network(prefix)
    fabric = build_fabric(FabricSpec(planes=16, leaves=3))
    for h in fabric.hosts[:2]:
        for other in fabric.hosts:
            if other is h:
                continue
            for path in fabric.paths(h.name, other.name):
                inside = ipaddress.IPv6Address(path.address) in net
                assert inside == (path.plane == plane)


def test_baseline_prefix_per_plane() -> None:
    assert baseline_prefix(0) == "2001:db8::/48"
    assert baseline_prefix(10) == "2001:db8:a::/48"


def test_every_nic_gets_its_addresses_next_hop_and_plane_route() -> None:
    fabric = build_fabric(FabricSpec(planes=2, leaves=2, spines=2, hosts_per_leaf=2))
    cfg = host_config(fabric, "h3")
    h3 = fabric.host("h3")
    assert cfg.ifnames == ("h3-eth0", "h3-eth1")
    assert ("h3-eth0", "fcbb:bb00:8020::/128") in cfg.addresses
    assert ("h3-eth1", "2001:db8:1:2::1/64") in cfg.addresses
    for nic in h3.nics:
        neigh = [n for n in cfg.neighbours if n.ifname == nic.ifname]
        assert len(neigh) == 1 and neigh[0].address == GATEWAY
        assert neigh[0].mac == fabric.switch(nic.leaf).mac  # the plane's leaf, p<p>l1
        routes = {r.prefix for r in cfg.routes if r.ifname == nic.ifname}
        assert plane_prefix(nic.plane) in routes
        assert baseline_prefix(nic.plane) in routes
        # the other hosts' NIC addresses of this plane, not this host's own
        assert f"{fabric.host('h1').nics[nic.plane].address}/48" in routes
        assert f"{nic.address}/48" not in routes
    assert all(r.via == GATEWAY for r in cfg.routes)


def test_every_path_address_has_exactly_one_route_out_of_its_planes_nic() -> None:
    fabric = build_fabric(FabricSpec(planes=3, leaves=2, spines=2, hosts_per_leaf=2))
    cfg = host_config(fabric, "h1")
    nets = [(ipaddress.IPv6Network(r.prefix), r.ifname) for r in cfg.routes]
    for other in fabric.hosts[1:]:
        for path in fabric.paths("h1", other.name):
            best = max(
                (n for n in nets if ipaddress.IPv6Address(path.address) in n[0]),
                key=lambda n: n[0].prefixlen,
            )
            assert best[1] == path.src_nic


def test_sysctls_cover_all_default_and_each_nic() -> None:
    cfg = host_config(build_fabric(FabricSpec()), "h1")
    keys = dict(cfg.sysctls)
    for dev in ("all", "default", "h1-eth0", "h1-eth1"):
        for name, value in HOST_SYSCTLS:
            assert keys[f"net.ipv6.conf.{dev}.{name}"] == value
    assert keys["net.ipv6.conf.h1-eth0.accept_dad"] == 0
    assert keys["net.ipv6.conf.h1-eth0.router_solicitations"] == 0


def test_ip_batch_orders_addresses_then_neighbours_then_routes() -> None:
    lines = ip_batch(host_config(build_fabric(FabricSpec()), "h2")).splitlines()
    kinds = [line.split()[0] for line in lines]
    assert kinds == sorted(kinds, key=["link", "addr", "neigh", "route"].index)
    assert lines[0] == "link set dev lo up"
    assert "addr add fcbb:bb00:8010::/128 dev h2-eth0 nodad" in lines
    assert "neigh replace fe80::1 lladdr 02:01:00:00:00:00 dev h2-eth0 nud permanent" in lines
    assert "route replace fcbb:bb00:1100::/40 via fe80::1 dev h2-eth1" in lines


def test_shell_script_stops_on_errors_and_leaves_offloads_to_the_emulation() -> None:
    text = shell_script(host_config(build_fabric(FabricSpec()), "h1"))
    assert text.startswith("set -e\n")
    assert "echo 0 > /proc/sys/net/ipv6/conf/h1-eth0/accept_dad" in text
    assert "ethtool" not in text
    assert "ip -batch - <<'EOF'" in text and text.rstrip().endswith("EOF")


# -- switch command lines ---------------------------------------------------------------------


def test_tf_switch_command_line_is_simple_switch_grpc_compatible() -> None:
    fabric = build_fabric(FabricSpec())
    leaf = fabric.switch("p0l1")
    argv = switch_argv(leaf, SwitchOptions(link_mbps=100, queue_depth=64))
    assert argv[:8] == [
        "-i",
        "1@p0l1-eth1",
        "-i",
        "2@p0l1-eth2",
        "-i",
        "3@p0l1-eth3",
        "-i",
        "4@p0l1-eth4",
    ]
    assert argv[argv.index("--device-id") + 1] == str(leaf.device_id)
    assert argv[argv.index("--thrift-port") + 1] == str(leaf.thrift_port)
    assert argv[argv.index("--queue-rate") + 1] == "100mbps"
    assert argv[argv.index("--queue-depth") + 1] == "64"
    assert "--no-p4" in argv and "--pcap" not in argv
    sep = argv.index("--")
    assert argv[sep + 1 :] == [
        "--grpc-server-addr",
        f"127.0.0.1:{leaf.grpc_port}",
        "--cpu-port",
        "255",
    ]


def test_tf_switch_parses_the_command_line() -> None:
    from switch.daemon import parse_args

    fabric = build_fabric(FabricSpec())
    spine = fabric.switch("p1s0")
    args = parse_args(switch_argv(spine, SwitchOptions(pcap_dir="/tmp/x")))
    assert args.ports == {1: "p1s0-eth1", 2: "p1s0-eth2"}
    assert args.cpu_port == 255 and args.no_p4 and args.pcap == "/tmp/x"
    assert args.grpc_server_addr == f"127.0.0.1:{spine.grpc_port}"
    assert args.queue_rate == "100mbps"


def test_bmv2_command_line_leaves_queues_to_the_cli() -> None:
    fabric = build_fabric(FabricSpec())
    argv = switch_argv(fabric.switch("p0s0"), SwitchOptions(target="bmv2"))
    assert "--queue-rate" not in argv and "--no-p4" in argv
    assert argv[argv.index("--") + 1 :][:2] == ["--grpc-server-addr", "127.0.0.1:50003"]


def test_bmv2_target_without_the_binary_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(FabricNetError, match="TARGET=bmv2 needs BMv2's simple_switch_grpc on PATH"):
        SwitchOptions(target="bmv2").validate()
    with pytest.raises(FabricNetError, match="unknown target 'ovs'"):
        SwitchOptions(target="ovs").validate()


def test_switch_port_names_and_macs_are_unique() -> None:
    fabric = build_fabric(FabricSpec(planes=4, leaves=4, spines=4, hosts_per_leaf=4))
    check_names(fabric)
    names = [port_ifname(s.name, p) for s in fabric.switches for p in s.ports]
    macs = [port_mac(s, p) for s in fabric.switches for p in s.ports]
    assert len(set(names)) == len(names) and len(set(macs)) == len(macs)
    assert all(len(n) <= 15 for n in names)

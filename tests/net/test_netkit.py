"""tests.netkit / switch.device.netns: namespaces and veths are made as asked and always removed."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from switch.device.netns import IFNAMSIZ, list_netns, read_proc_net_dev
from tests.netkit import (
    NET_MARKS,
    NetKit,
    call_in_netns,
    cleanup_stale,
    read_if_stat,
    run_in_netns,
)

pytestmark = NET_MARKS


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _links() -> set[str]:
    return {p.name for p in Path("/sys/class/net").iterdir()}


def test_kit_makes_and_removes_everything_even_on_error() -> None:
    with pytest.raises(RuntimeError, match="boom"), NetKit() as kit:
        ns = kit.netns("h1")
        pair = kit.veth("s1", "h1", ns_b=ns, switch_side=True)
        assert pair.a in _links() and ns.name in list_netns()
        assert len(pair.a) < IFNAMSIZ and len(pair.b) < IFNAMSIZ
        raise RuntimeError("boom")
    assert pair.a not in _links()
    assert ns.name not in list_netns()


def test_host_side_settings(netkit: NetKit) -> None:
    ns = netkit.netns("h")
    pair = netkit.veth("s1", "h1", ns_b=ns, switch_side=True, mtu=9000)
    out = run_in_netns(ns.name, ["ip", "-o", "link", "show", pair.b]).stdout
    assert "mtu 9000" in out and "UP" in out

    def sysctl(key: str) -> str:
        return Path("/proc/sys/net/ipv6/conf", pair.b, key).read_text().strip()

    assert call_in_netns(ns.name, lambda: sysctl("accept_dad")) == "0"
    assert call_in_netns(ns.name, lambda: sysctl("accept_ra")) == "0"
    assert call_in_netns(ns.name, lambda: sysctl("router_solicitations")) == "0"
    assert Path(f"/proc/sys/net/ipv6/conf/{pair.a}/disable_ipv6").read_text().strip() == "1"
    mtu = run_in_netns(ns.name, ["cat", f"/sys/class/net/{pair.b}/mtu"]).stdout.strip()
    assert mtu == "9000"
    before = read_if_stat(ns.name, pair.b, "rx_packets")
    frame = b"\xff" * 6 + bytes.fromhex("020000000a01") + b"\x88\xb5" + bytes(46)
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as s:
        s.bind((pair.a, 0))
        for _ in range(5):
            s.send(frame)
    assert read_if_stat(ns.name, pair.b, "rx_packets") == before + 5
    assert read_proc_net_dev(ns.name)[pair.b]["rx_packets"] == before + 5
    assert pair.b not in read_proc_net_dev(None)


def test_offloads_are_off(netkit: NetKit) -> None:
    from switch.device.offloads import active_features

    ns = netkit.netns("h")
    pair = netkit.veth("s1", "h1", ns_b=ns)
    for feats in (active_features(pair.a), call_in_netns(ns.name, lambda: active_features(pair.b))):
        assert not feats["tx-checksum-ip-generic"]
        assert not feats["tx-generic-segmentation"]
        assert not feats["tx-tcp-segmentation"]
        assert not feats["rx-gro"]


def test_cleanup_stale_removes_only_dead_owners(netkit: NetKit) -> None:
    dead = _dead_pid()
    stale_ns = f"tf{netkit.suffix}-p{dead}-old"
    stale_if = netkit.ifname("old")
    foreign_if = netkit.ifname("frn")
    subprocess.run(["ip", "netns", "add", stale_ns], check=True)
    subprocess.run(
        ["ip", "link", "add", stale_if, "type", "veth", "peer", "name", netkit.ifname("oldp")],
        check=True,
    )
    subprocess.run(["ip", "link", "set", stale_if, "alias", f"tailfabric pid={dead}"], check=True)
    subprocess.run(
        ["ip", "link", "add", foreign_if, "type", "veth", "peer", "name", netkit.ifname("frnp")],
        check=True,
    )  # no owner mark
    try:
        live = netkit.netns("live")
        live_pair = netkit.veth("lv", "lw", ns_b=live)
        removed = cleanup_stale(f"tf{netkit.suffix}")
        assert f"netns {stale_ns}" in removed and f"link {stale_if}" in removed
        assert stale_ns not in list_netns() and stale_if not in _links()
        assert live.name in list_netns() and live_pair.a in _links()
        assert foreign_if in _links()
        assert str(os.getpid()) in live.name
    finally:
        subprocess.run(["ip", "netns", "del", stale_ns], capture_output=True)
        for name in (stale_if, foreign_if):
            subprocess.run(["ip", "link", "del", name], capture_output=True)


def test_sigterm_still_cleans_up(tmp_path: Path) -> None:
    script = tmp_path / "victim.py"
    script.write_text(
        "import sys, time\n"
        "from tests.netkit import NetKit\n"
        "with NetKit() as kit:\n"
        "    ns = kit.netns('v')\n"
        "    pair = kit.veth('va', 'vb', ns_b=ns)\n"
        "    print(ns.name, pair.a, flush=True)\n"
        "    time.sleep(60)\n"
    )
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert proc.stdout is not None
    ns_name, link = proc.stdout.readline().split()
    assert ns_name in list_netns() and link in _links()
    proc.terminate()
    proc.wait(10)
    assert ns_name not in list_netns() and link not in _links()


def test_mac_of_an_end_inside_a_namespace(netkit: NetKit) -> None:
    ns = netkit.netns("macns")
    pair = netkit.veth("mca", "mcb", ns_b=ns, mac_b="02:00:00:00:ab:cd")
    assert pair.mac(pair.b) == "02:00:00:00:ab:cd"
    assert len(pair.mac(pair.a)) == 17

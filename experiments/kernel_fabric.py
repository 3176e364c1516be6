"""The fabric's topology built from Linux routers: the physical reference of the throughput bench.

Every switch of the topology model becomes a network namespace that forwards in the kernel,
every host a namespace configured exactly as in the emulated fabric
(:func:`topologies.hostconf.shell_script`), every link a veth pair with the model's MACs:

* a leaf or spine routes its own micro-SID ``fcbb:bb00:<usid>::/48`` with ``seg6local action
  End flavors next-csid lblen 32 nflen 16`` (RFC 9800 uN: shift the carrier, look up again),
  as ``p4/fabric.p4``'s uN does;
* a leaf routes each spine's ``/48`` to that spine and each of its hosts' NIC ``/48`` to the
  host; a spine routes each leaf's ``/48`` to that leaf;
* next hops are link-local with permanent neighbour entries (no neighbour discovery): leaf
  ports are ``fe80::1`` (the hosts' gateway, with the leaf's MAC), spine ports ``fe80::2``,
  and a host NIC is reached through ``fe80::3`` with the NIC's MAC.

Namespaces are named ``tfk<4 hex>-<node>``; :func:`kernel_network` deletes them all on exit.
"""

from __future__ import annotations

import contextlib
import secrets
import subprocess
from collections.abc import Iterator, Sequence

from topologies.hostconf import host_config, shell_script
from topologies.model import Fabric, FabricSpec, build_fabric, usid_address

LEAF_LL, SPINE_LL, HOST_LL = "fe80::1", "fe80::2", "fe80::3"
ROUTER_SYSCTLS = (
    "net.ipv6.conf.all.forwarding=1",
    "net.ipv6.conf.all.accept_dad=0",
    "net.ipv6.conf.default.accept_dad=0",
    "net.ipv6.conf.all.accept_ra=0",
    "net.ipv6.conf.default.accept_ra=0",
    "net.ipv6.conf.all.seg6_enabled=1",
    "net.ipv6.conf.default.seg6_enabled=1",
)


class KernelFabricError(RuntimeError):
    """The Linux-router fabric cannot be built (the message says which command failed)."""


def _run(argv: Sequence[str], stdin: str | None = None) -> None:
    proc = subprocess.run(list(argv), input=stdin, capture_output=True, text=True)
    if proc.returncode:
        raise KernelFabricError(f"{' '.join(argv)}: {proc.stderr.strip()}")


def router_batch(fabric: Fabric, name: str) -> str:
    """``ip -batch`` input configuring switch ``name`` as a Linux SRv6 router (pure data)."""
    sw = fabric.switch(name)
    own = f"{usid_address(sw.usid)}/48"
    first = min(sw.ports)
    lines = [f"link set dev e{port} up" for port in sorted(sw.ports)]
    my_ll = LEAF_LL if sw.role == "leaf" else SPINE_LL
    lines += [f"addr add {my_ll}/64 dev e{port} nodad" for port in sorted(sw.ports)]
    lines.append(
        f"route replace {own} encap seg6local action End flavors next-csid lblen 32 nflen 16 "
        f"dev e{first}"
    )
    for port, peer in sorted(sw.ports.items()):
        if peer in {h.name for h in fabric.hosts}:
            nic = fabric.host(peer).nics[sw.plane]
            via, mac, prefix = HOST_LL, nic.mac, f"{nic.address}/48"
        else:
            other = fabric.switch(peer)
            via = LEAF_LL if other.role == "leaf" else SPINE_LL
            mac, prefix = other.mac, f"{usid_address(other.usid)}/48"
        lines.append(f"neigh replace {via} lladdr {mac} dev e{port} nud permanent")
        lines.append(f"route replace {prefix} via {via} dev e{port}")
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def kernel_fabric(fabric: Fabric) -> Iterator[dict[str, str]]:
    """Build ``fabric`` from namespaces; yields every node's namespace name by node name."""
    tag = "tfk" + secrets.token_hex(2)
    ns = {
        n: f"{tag}-{n}" for n in [h.name for h in fabric.hosts] + [s.name for s in fabric.switches]
    }
    made: list[str] = []
    try:
        for name in ns.values():
            _run(["ip", "netns", "add", name])
            made.append(name)
            _run(["ip", "-n", name, "link", "set", "lo", "up"])
        for sw in fabric.switches:
            _run(["ip", "netns", "exec", ns[sw.name], "sysctl", "-q", "-w", *ROUTER_SYSCTLS])
        for link in fabric.links:
            if link.a_port == 0:  # host NIC - leaf port
                host = fabric.host(link.a)
                nic = host.nics[link.plane]
                a_if, a_mac = nic.ifname, nic.mac
            else:
                a_if, a_mac = f"e{link.a_port}", fabric.switch(link.a).mac
            b_if, b_mac = f"e{link.b_port}", fabric.switch(link.b).mac
            _run(
                ["ip", "link", "add", a_if, "netns", ns[link.a], "address", a_mac, "type", "veth"]
                + ["peer", "name", b_if, "netns", ns[link.b], "address", b_mac]
            )
        for sw in fabric.switches:
            _run(["ip", "-n", ns[sw.name], "-batch", "-"], router_batch(fabric, sw.name))
        for host in fabric.hosts:
            _run(
                ["ip", "netns", "exec", ns[host.name], "sh", "-s"],
                shell_script(host_config(fabric, host.name)),
            )
        yield ns
    finally:
        for name in reversed(made):
            subprocess.run(["ip", "netns", "del", name], capture_output=True)


def build(spec: FabricSpec) -> Fabric:
    """The topology model of ``spec`` (the emulated fabric's)."""
    return build_fabric(spec)

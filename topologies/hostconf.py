"""What every fabric host's network stack looks like: addresses, routes, neighbours, sysctls.

Pure data from the topology model (no I/O), rendered into one shell script per host that the
Mininet build runs inside the host's namespace. For NIC ``p`` of host ``h`` (``h1-eth<p>``):

* addresses ``fcbb:bb00:<nic usid>::/128`` (where micro-SID paths end) and the baseline
  ``2001:db8:<p>:<h>::1/64``, both without DAD;
* one next hop, the link-local :data:`GATEWAY` with a permanent neighbour entry holding the
  plane-``p`` leaf's MAC (the switches do not answer neighbour solicitations);
* ``fcbb:bb00:1p00::/40`` via that next hop: every micro-SID path whose first micro-SID is a
  plane-``p`` leaf (``0x1p00``-``0x1pff``) leaves through NIC ``p``;
* ``2001:db8:<p>::/48`` via that next hop (the ECMP baseline), and the other hosts' plane-``p``
  NIC addresses ``fcbb:bb00:<nic>::/48`` (plain forwarding to NIC addresses: the fabric routes
  them when the controller installs NIC routes beyond the local leaf);
* no DAD, no router solicitations, no RAs, no forwarding;
* offloads off on every NIC (:attr:`HostConfig.ifnames`): a software switch on packet sockets
  must see finished checksums and MTU-sized frames. The script does not do this: the emulation
  turns them off with an ioctl from a thread inside the host's namespace
  (:func:`topologies.emulation.mnfabric.configure_hosts`), and may turn receive GRO back on
  (it gives a veth NAPI receive); with ``threaded_napi`` the script then sets each NIC's
  ``/sys/class/net/<nic>/threaded`` to 1, so the host's receive stack runs in a kernel thread
  of its own instead of inside the leaf switch's send.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from topologies.model import BLOCK_BITS, Fabric, leaf_usid, usid_address

GATEWAY = "fe80::1"  # the leaf as every NIC's next hop (a static neighbour entry)
HOST_SYSCTLS = (
    ("accept_dad", 0),
    ("dad_transmits", 0),
    ("router_solicitations", 0),
    ("accept_ra", 0),
    ("forwarding", 0),
    ("disable_ipv6", 0),
)


@dataclass(frozen=True)
class Route:
    prefix: str
    ifname: str
    via: str = GATEWAY


@dataclass(frozen=True)
class Neighbour:
    ifname: str
    address: str
    mac: str


@dataclass(frozen=True)
class HostConfig:
    """The network configuration of one host, in the order it is applied."""

    host: str
    ifnames: tuple[str, ...]  # the NICs: brought up, and their offloads turned off
    sysctls: tuple[tuple[str, int], ...]  # (dotted key, value)
    addresses: tuple[tuple[str, str], ...]  # (ifname, cidr)
    neighbours: tuple[Neighbour, ...]
    routes: tuple[Route, ...]


def plane_prefix(plane: int) -> str:
    """The prefix of every micro-SID path that enters plane ``plane``: ``fcbb:bb00:1p00::/40``."""
    return f"{usid_address(leaf_usid(plane, 0))}/{BLOCK_BITS + 8}"


def baseline_prefix(plane: int) -> str:
    """The baseline addresses of plane ``plane``: ``2001:db8:<p>::/48``."""
    return str(ipaddress.IPv6Network(f"2001:db8:{plane:x}::/48"))


def host_config(fabric: Fabric, name: str) -> HostConfig:
    """Addresses, routes, neighbours and sysctls of host ``name``.

    Raises:
        TopologyError: unknown host (with the valid names).
    """
    host = fabric.host(name)
    sysctls: list[tuple[str, int]] = []
    for dev in ("all", "default", *(n.ifname for n in host.nics)):
        sysctls += [(f"net.ipv6.conf.{dev}.{key}", value) for key, value in HOST_SYSCTLS]
    addresses: list[tuple[str, str]] = []
    neighbours: list[Neighbour] = []
    routes: list[Route] = []
    for nic in host.nics:
        addresses.append((nic.ifname, f"{nic.address}/128"))
        addresses.append((nic.ifname, f"{nic.baseline_address}/64"))
        neighbours.append(Neighbour(nic.ifname, GATEWAY, fabric.switch(nic.leaf).mac))
        routes.append(Route(plane_prefix(nic.plane), nic.ifname))
        routes.append(Route(baseline_prefix(nic.plane), nic.ifname))
        for peer in fabric.hosts:
            if peer.name != host.name:
                routes.append(Route(f"{peer.nics[nic.plane].address}/48", nic.ifname))
    return HostConfig(
        host.name,
        tuple(n.ifname for n in host.nics),
        tuple(sysctls),
        tuple(addresses),
        tuple(neighbours),
        tuple(routes),
    )


def ip_batch(cfg: HostConfig) -> str:
    """``ip -batch`` input (the family follows each address): links up (``lo`` too: a new
    namespace's loopback is down, and programs on a host reach their own listeners through
    it), addresses, neighbours, routes."""
    lines = ["link set dev lo up"] + [f"link set dev {ifname} up" for ifname in cfg.ifnames]
    lines += [f"addr add {cidr} dev {ifname} nodad" for ifname, cidr in cfg.addresses]
    lines += [
        f"neigh replace {n.address} lladdr {n.mac} dev {n.ifname} nud permanent"
        for n in cfg.neighbours
    ]
    lines += [f"route replace {r.prefix} via {r.via} dev {r.ifname}" for r in cfg.routes]
    return "\n".join(lines) + "\n"


def napi_threaded_path(ifname: str) -> str:
    """The sysfs attribute that moves ``ifname``'s NAPI receive into a kernel thread."""
    return f"/sys/class/net/{ifname}/threaded"


def shell_script(cfg: HostConfig, threaded_napi: bool = False) -> str:
    """A ``sh`` script that applies ``cfg`` inside the host's namespace (one ``ip`` process):
    sysctls, then links, addresses, neighbours and routes; with ``threaded_napi``, threaded
    NAPI on every NIC (``/sys`` there must be the namespace's own, as in a Mininet host).
    Offloads are not in it (see the module docstring).

    Sysctls are written with shell redirections (no child process); a failing step stops the
    script with a non-zero status and the failing command on stderr.
    """
    lines = ["set -e"]
    lines += [f"echo {value} > /proc/sys/{key.replace('.', '/')}" for key, value in cfg.sysctls]
    lines += ["ip -batch - <<'EOF'", ip_batch(cfg).rstrip("\n"), "EOF"]
    if threaded_napi:
        lines += [  # absent before 5.12, refused without NAPI: the emulation checks the threads
            f"if [ -e {napi_threaded_path(ifname)} ]; then "
            f"echo 1 > {napi_threaded_path(ifname)} 2>/dev/null || true; fi"
            for ifname in cfg.ifnames
        ]
    return "\n".join(lines) + "\n"

"""Hosts of a job on one machine: MRC endpoints over the in-process emulated fabric.

:class:`EmuCluster` builds the fabric model (the default one unless told otherwise), an
:class:`~host.linkemu.EmuNetwork` with every micro-SID path, and one MRC endpoint per host,
all in this process. Tests, the training tests and ``--network emu`` experiments use it; the
fabric runs the same code with one :class:`~host.network.UdpNetwork` per host process
(:mod:`host.train_agent`). :func:`job_mrc_config` is the MRC setting DBLP jobs use on both.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from host.dblp.config import DblpConfig
from host.linkemu import EmuNetwork, LinkProfile
from host.mrc import Endpoint, MrcConfig, fabric_config
from host.paths import RouteTable
from topologies.model import Fabric, FabricSpec, build_fabric


@dataclass(frozen=True)
class NetworkProfile:
    """The MRC and DBLP timers that suit a network (Python hosts: millisecond timers)."""

    rto_min_ms: float
    rto_initial_ms: float
    rto_max_ms: float
    settle_timeout_s: float
    probe_interval_s: float
    probe_grace_s: float
    """How long a receiver waits for chunks a probe overtook before it answers with a bitmap:
    about a queue's worth of delay on this network."""
    control_copies: int
    cc_enabled: bool
    """False: a fixed window of ``window_bytes`` and no congestion control (DBLP sends
    without pacing, as in the paper); True: MRC's delay/ECN window."""
    window_bytes: int


NETWORK_PROFILES: dict[str, NetworkProfile] = {
    # in-process emulator: sub-millisecond RTTs
    "emu": NetworkProfile(
        rto_min_ms=5.0,
        rto_initial_ms=20.0,
        rto_max_ms=100.0,
        settle_timeout_s=0.01,
        probe_interval_s=0.01,
        probe_grace_s=0.002,
        control_copies=2,
        cc_enabled=False,
        window_bytes=256 * 1024,
    ),
    # Mininet fabric of Python P4 switches: RTTs of milliseconds, few packets to spare
    "fabric": NetworkProfile(
        rto_min_ms=20.0,
        rto_initial_ms=50.0,
        rto_max_ms=300.0,
        settle_timeout_s=0.2,
        probe_interval_s=0.02,
        probe_grace_s=0.03,
        control_copies=2,
        cc_enabled=False,
        window_bytes=24 * 1024,
    ),
}


JOB_PEER_TIMEOUT_S = 30.0
"""How long a DBLP job's peer may stay silent before it counts as gone: the job's own timeout
and its MRC connections' (a 90 % loss burst on a loaded machine silenced a live parameter
server for over 10 s, MRC's default, and failed the quick demo)."""


def job_mrc_config(network: str) -> MrcConfig:
    """MRC settings of DBLP jobs on ``network`` ("emu" or "fabric"): fabric MTU, short RTOs,
    :data:`JOB_PEER_TIMEOUT_S` as the connections' dead-peer timeout."""
    p = NETWORK_PROFILES[network]
    base = fabric_config(
        rto_min_ms=p.rto_min_ms, rto_initial_ms=p.rto_initial_ms, rto_max_ms=p.rto_max_ms
    )
    return replace(
        base,
        cc=replace(base.cc, enabled=p.cc_enabled, initial_cwnd_bytes=p.window_bytes),
        dead_peer_timeout_s=JOB_PEER_TIMEOUT_S,
    )


def job_dblp_config(network: str, *, peer_timeout_s: float = JOB_PEER_TIMEOUT_S) -> DblpConfig:
    """DBLP settings of jobs on ``network``: one chunk per MRC packet, the network's timers."""
    p = NETWORK_PROFILES[network]
    return DblpConfig(
        packet_bytes=job_mrc_config(network).payload_bytes,
        settle_timeout_s=p.settle_timeout_s,
        probe_interval_s=p.probe_interval_s,
        probe_grace_s=p.probe_grace_s,
        control_copies=p.control_copies,
        peer_timeout_s=peer_timeout_s,
    )


class EmuCluster:
    """Every host of a fabric as an MRC endpoint over one emulated network (context manager).

    Args:
        fabric: the topology (default: the default ``FabricSpec``: 2 planes, 4 hosts).
        profile: impairments of every path.
        config: the endpoints' MRC settings (default: :func:`job_mrc_config` ("emu")).
    """

    def __init__(
        self,
        fabric: Fabric | None = None,
        profile: LinkProfile | None = None,
        *,
        config: MrcConfig | None = None,
        seed: int = 1,
    ) -> None:
        self.fabric = fabric or build_fabric(FabricSpec())
        self.profile = profile or LinkProfile()
        self.emu = EmuNetwork.for_fabric(self.fabric, self.profile, seed=seed)
        cfg = config or job_mrc_config("emu")
        self.endpoints: list[Endpoint] = []
        try:
            for h in self.fabric.hosts:
                self.endpoints.append(
                    Endpoint(
                        self.emu.port(h.index),
                        h.index,
                        RouteTable.from_fabric(self.fabric, h.name),
                        cfg,
                    )
                )
        except BaseException:
            self.close()
            raise

    @property
    def hosts(self) -> int:
        return len(self.endpoints)

    def set_loss(self, loss: float) -> None:
        """Uniform loss probability on every path from now on (both directions)."""
        self.emu.set_profile(replace(self.profile, loss=loss))

    def fail_plane(self, plane: int) -> None:
        self.emu.fail(plane)

    def restore_plane(self, plane: int) -> None:
        self.emu.restore(plane)

    def close(self) -> None:
        for ep in self.endpoints:
            ep.close()
        self.emu.close()

    def __enter__(self) -> EmuCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

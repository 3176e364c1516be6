"""Configuration of an MRC endpoint: frozen dataclasses, units in the field names.

Defaults suit Python hosts (a loop iteration costs tens of microseconds, so RTTs are
hundreds of microseconds at best and timers are millisecond-grained); ``fabric_config`` and
``loopback_config`` give the two settings the tools use.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from typing import Any

from host.wire import DATA_HEADER_BYTES, MAX_PAYLOAD_BYTES, MAX_SACK_BITS

FABRIC_MTU_BYTES = 1500
IPV6_UDP_OVERHEAD_BYTES = 48  # 40 (IPv6) + 8 (UDP)
FABRIC_PAYLOAD_BYTES = FABRIC_MTU_BYTES - IPV6_UDP_OVERHEAD_BYTES - DATA_HEADER_BYTES  # 1384
LOOPBACK_PAYLOAD_BYTES = 8192


class EvPolicy(enum.Enum):
    """How packets are put on EVs."""

    SPRAY = "spray"
    """MRC: every packet on the next usable EV, weighted by per-EV signals; a loss marks the
    EV ASSUMED_BAD at once and probes bring it back."""
    HASHED = "hashed"
    """Baseline (ECMP-like): one EV per connection chosen by a hash of its ids; losses do not
    move traffic; optionally re-hash after a retransmission timeout (like Linux PRR/PLB)."""


@dataclass(frozen=True)
class CcConfig:
    """Delay-based congestion window in the spirit of Ultra Ethernet NSCC."""

    enabled: bool = True
    """False: a fixed window of ``initial_cwnd_bytes`` (tests, comparisons)."""
    initial_cwnd_bytes: int = 256 * 1024
    min_cwnd_bytes: int = 8 * 1024
    max_cwnd_bytes: int = 2 * 1024 * 1024
    base_rtt_us: float = 0.0
    """Unloaded RTT; 0 = the smallest RTT sample seen."""
    target_qdelay_us: float = 2_000.0
    """Queuing delay (RTT minus base RTT) the window aims at."""
    ecn_enabled: bool = True
    """With ECN (NSCC): decrease only when CE *and* delay above target. Without (loopback, no
    marking switch): a delay above target alone decreases the window."""
    gamma: float = 0.8
    """Multiplicative decrease strength: cwnd *= 1 - gamma * (delay - target) / delay."""
    max_md_fraction: float = 0.5
    """At most this fraction of the window goes in one decrease."""
    fair_increase_bytes: float = 16 * 1024
    """Additive increase per window's worth of acknowledged bytes (about per RTT)."""
    proportional_gain: float = 1.0
    """Extra growth per acknowledged byte at zero queuing delay, scaled by the headroom."""
    validated_fraction: float = 0.5
    """Window validation (in the spirit of RFC 7661): the window grows only while at least this
    fraction of it is in flight. A connection that the application keeps below its window
    would otherwise grow it without bound while nothing tests it, and flood the network with
    all of it the moment it has more to send (or a plane fails and the rest gets its load)."""
    qa_threshold_us: float = 20_000.0
    """Quick adapt: above this queuing delay the window drops to what was delivered in the
    last window (at most once per base RTT + target)."""
    noise_target_gain: float = 0.0
    """ECN only: for samples that no switch marked, the delay target is at least this many
    times the mean deviation of their RTTs (an RFC 6298-style estimator, per connection).
    RTT that varies while no marking queue holds the packets is the hosts' jitter, not
    queueing; a queue that stands still does not raise the deviation. CE-marked samples keep
    ``target_qdelay_us``. 0: off (NSCC's fixed target)."""
    qa_needs_ce: bool = False
    """ECN only: a queuing delay above ``qa_threshold_us`` quick-adapts only if a packet of
    the same measurement window was CE-marked (a queue that deep at a marking switch marks);
    a retransmission timeout still quick-adapts and a NACK still takes its bytes off."""


@dataclass(frozen=True)
class EvConfig:
    """EV selection, per-EV signals, states and probes."""

    policy: EvPolicy = EvPolicy.SPRAY
    min_active: int = 0
    """``ev_min_active``: never mark more EVs ASSUMED_BAD than would leave fewer GOOD ones
    than this. 0 = ``ceil(min_active_fraction * number of EVs)``, at least 1."""
    min_active_fraction: float = 0.25
    probe_interval_ms: float = 5.0
    """First probe of an ASSUMED_BAD EV after this long; doubles per failed probe."""
    probe_max_interval_ms: float = 200.0
    probe_timeout_ms: float = 50.0
    ecn_penalty: float = 1.0
    nack_penalty: float = 4.0
    loss_penalty: float = 8.0
    """Penalty of a loss that the floor did not let mark the EV ASSUMED_BAD."""
    penalty_half_life_ms: float = 20.0
    reweight_interval_ms: float = 2.0
    """Weights are recomputed at most this often (state changes apply at once)."""
    min_weight_fraction: float = 0.1
    rehash_on_rto: bool = True
    """HASHED only: move the connection to another EV after a retransmission timeout."""
    hash_seed: int = 0
    share_verdicts: bool = False
    """SPRAY only: the endpoint's connections share their path-timeout verdicts (an EV silent
    while the connection's other EVs deliver; :mod:`host.mrc.health`): once silent paths
    through ``share_plane_after`` different spines of a plane are current, every connection
    stops using that plane at once (or, with ``share_single_paths``, each silent
    (plane, spine)). NACKs, losses overtaken on their own EV, whole-connection timeouts and
    silences of an EV that echoed ECN or a NACK lately (within about
    ``penalty_half_life_ms``) stay with the connection that saw them. Off by default: on the
    fabric (bench-collectives' failover, 5 runs per rate) it took a host's connections off a
    failed plane 19-27 ms after the host's first verdict instead of 56-78 ms, but the stalled
    all-reduce waits for the slowest host's first verdict, which sharing within a host does
    not hasten: the extra stall did not shrink beyond the run-to-run spread."""
    share_single_paths: bool = False
    """Also pass on one path's verdict (its (plane, spine)) at once. Off: only a plane's, once
    verdicts on ``share_plane_after`` different paths of it are current (what they have in
    common is the plane's local leaf or this host's link to it): one congested path, whose
    silence a single connection took for a failure, is no verdict for the others. On the
    fabric at 20 Mbit/s, single-path sharing passed on 23 congestion silences in one 1 MiB
    sweep without any failure."""
    share_min_losses: int = 2
    """A path timeout is shared only if at least this many packets on the silent EV were
    overtaken (sent before the latest acknowledged one, none of them acknowledged)."""
    share_hold_ms: float = 0.0
    """How long a shared verdict stays current (for connections opened meanwhile and for
    ``share_plane_after``); 0 = ``probe_timeout_ms``. A probe that comes back ends it."""
    share_plane_after: int = 2
    """Current verdicts on this many different spines of one plane (or a spine and the
    plane's leaf-local path) take the whole plane out for every connection: what those paths
    share is the local leaf. 0 = never."""

    def __post_init__(self) -> None:
        if self.share_hold_ms < 0 or self.share_plane_after < 0 or self.share_min_losses < 1:
            raise ValueError(
                "share_hold_ms and share_plane_after must not be negative, share_min_losses >= 1"
            )


@dataclass(frozen=True)
class MrcConfig:
    """One endpoint's transport settings (both ends of a connection should agree)."""

    payload_bytes: int = FABRIC_PAYLOAD_BYTES
    """Message bytes per packet (the packet ``stride``)."""
    window_packets: int = 4096
    """Largest PSN span in flight: the receiver's out-of-order tracking window (MRC's MPR)."""
    sack_bits: int = 2048
    """SACK bitmap bits per ACK (PSNs above cum+1)."""
    ack_every_packets: int = 8
    ack_delay_ms: float = 1.0
    ack_on_reorder: bool = True
    """ACK a packet that arrives out of order at once (a hint of loss on one path). Where
    every packet is sprayed reordering is the norm, and the next delayed ACK's SACK bitmap
    carries the same news: turning this off saves an ACK per sprayed packet."""
    ack_every_ce: bool = True
    """Echo every CE-marked packet in its own ACK at once. Off: a mark rides on the next
    coalesced ACK (which then echoes the marked packet, so the mark keeps its EV; further marks
    before it are not echoed). On slow links where most packets are marked, an ACK per mark
    takes a noticeable share of the reverse links."""
    max_recv_buffer_bytes: int = 64 * 1024 * 1024
    """Receive memory per connection: messages being reassembled or waiting for ``recv``."""
    max_send_queue_bytes: int = 64 * 1024 * 1024
    """``send`` blocks while this many bytes are queued and not yet acknowledged."""
    max_burst_packets: int = 64
    """Packets sent per connection per loop iteration before reading input again."""
    pacing_gain: float = 0.0
    """Pace data at this multiple of ``cwnd / srtt``, in bursts of ``pacing_burst_packets``
    (0: no pacing: what the window allows goes out at once, up to ``max_burst_packets``)."""
    pacing_burst_packets: int = 4
    rto_initial_ms: float = 100.0
    rto_min_ms: float = 10.0
    rto_max_ms: float = 2_000.0
    reorder_min_ms: float = 1.0
    """RACK reorder window floor: a packet is lost when a later one was acknowledged and its
    EV's smoothed RTT plus this window (or a quarter RTT, or 2 RTT deviations) has passed."""
    persist_interval_ms: float = 50.0
    """Probe a peer that closed its window (or answers nothing) this often."""
    dead_peer_timeout_s: float = 10.0
    """Fail the connection when nothing arrives for this long while data is outstanding..."""
    dead_peer_stretch: float = 10.0
    """...or for this many times the longest silence the peer has already come back from,
    if that is longer: a loss burst or a loaded machine makes a live peer's silences longer
    (and a job slower, not failed), while a peer that vanished is still found."""
    max_connections: int = 1024
    ev: EvConfig = field(default_factory=EvConfig)
    cc: CcConfig = field(default_factory=CcConfig)

    def __post_init__(self) -> None:
        if not 0 < self.payload_bytes <= min(MAX_PAYLOAD_BYTES, 0xFFFF):
            raise ValueError(f"payload_bytes must be in 1..{MAX_PAYLOAD_BYTES}")
        if not 0 < self.sack_bits <= MAX_SACK_BITS or self.sack_bits % 8:
            raise ValueError(f"sack_bits must be a multiple of 8 in 8..{MAX_SACK_BITS}")
        if self.pacing_gain < 0 or self.pacing_burst_packets < 1:
            raise ValueError("pacing_gain must not be negative and pacing_burst_packets >= 1")
        if self.window_packets < 16:
            raise ValueError("window_packets must be at least 16")
        if not self.dead_peer_timeout_s > 0 or self.dead_peer_stretch < 0:
            raise ValueError("dead_peer_timeout_s must be positive and dead_peer_stretch >= 0")

    @property
    def max_message_bytes(self) -> int:
        return self.max_recv_buffer_bytes

    def with_policy(self, policy: EvPolicy) -> MrcConfig:
        return replace(self, ev=replace(self.ev, policy=policy))


def fabric_config(**overrides: Any) -> MrcConfig:
    """Settings for hosts on the emulated fabric: 1500-byte MTU, ECN from the switches.

    Args:
        overrides: :class:`MrcConfig` fields to replace (checked by ``dataclasses.replace``).
    """
    return replace(MrcConfig(payload_bytes=FABRIC_PAYLOAD_BYTES), **overrides)


def loopback_config(**overrides: Any) -> MrcConfig:
    """Settings for loopback runs: large datagrams, no ECN (nothing marks), delay-based CC.

    Args:
        overrides: :class:`MrcConfig` fields to replace (checked by ``dataclasses.replace``).
    """
    base = MrcConfig(
        payload_bytes=LOOPBACK_PAYLOAD_BYTES,
        cc=CcConfig(
            ecn_enabled=False,
            target_qdelay_us=5_000.0,
            initial_cwnd_bytes=512 * 1024,
            max_cwnd_bytes=2 * 1024 * 1024,
        ),
    )
    return replace(base, **overrides)

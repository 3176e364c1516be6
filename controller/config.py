"""The controller's settings: one frozen dataclass, units in the names, defaults that fit the
emulated fabric (64-packet queues, 100 Mb/s links). Environment variable names are constants
here; nothing is read at import.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

#: Where results go when ``--results`` is not given.
RESULTS_ENV = "TF_RESULTS"
DEFAULT_RESULTS = "results"


def results_dir_default() -> str:
    return os.environ.get(RESULTS_ENV, DEFAULT_RESULTS)


@dataclass(frozen=True)
class ControllerConfig:
    """What the controller installs besides routes, and how it talks to switches."""

    burst_high_pkts: int = 16
    """A departure that leaves at least this many packets queued starts a microburst."""
    burst_low_pkts: int = 4
    """A departure that leaves at most this many packets queued ends it (< ``burst_high_pkts``)."""
    ecn_threshold_pkts: int | None = 20
    """CE-mark ECT packets that find at least this many packets queued; None: no marking."""
    trim_keep_bytes: int = 68
    """Packet trimming (``trim K``) keeps this many bytes of UDP payload: the MRC DATA header
    (``host.wire.DATA_HEADER_BYTES``), so the receiver can NACK the packet."""
    ecmp_reroute: bool = True
    """Drop failed uplinks from the baseline's ECMP groups (False: hash flows onto them)."""
    uA_sids: bool = True
    """Install the node-local uA (End.X) SIDs ``fcbb:bb00:e0<port>::/48`` on every switch."""
    connect_timeout_s: float = 10.0
    """How long to wait for each switch's gRPC server and arbitration."""
    rpc_timeout_s: float = 30.0
    """Deadline of one RPC (a pipeline push included)."""
    write_batch: int = 500
    """Updates per Write request."""
    digest_max_timeout_ns: int = 5_000_000
    """DigestEntry: the longest a digest message waits on the switch before it is sent."""
    digest_max_list_size: int = 64
    """DigestEntry: at most this many messages per DigestList."""
    digest_ack_timeout_ns: int = 1_000_000_000
    """DigestEntry: how long the switch suppresses a duplicate of an unacknowledged message."""
    telemetry_flush_s: float = 0.5
    """Every this many seconds, a packet-out to the drop port (511) makes each switch's ingress
    emit a burst record that ended after the last data packet (0: never), while someone watches
    telemetry or bursts were reported lately (:class:`controller.telemetry.FlushPacer`)."""
    telemetry_idle_flush_s: float = 4.0
    """With no watcher and no burst reported for this long, the flush interval doubles up to
    this: a quiet fabric's switches are woken less; the last burst before a quiet spell may be
    reported this late (``telemetry recent`` and ``incast`` flush on their own)."""
    recent_bursts: int = 10_000
    """Burst records kept in memory for ``incast`` and ``telemetry``."""

    def __post_init__(self) -> None:
        if not 0 <= self.burst_low_pkts < self.burst_high_pkts:
            raise ValueError("need 0 <= burst_low_pkts < burst_high_pkts")
        if self.ecn_threshold_pkts is not None and self.ecn_threshold_pkts < 1:
            raise ValueError("ecn_threshold_pkts must be at least 1 (or None)")
        if self.write_batch < 1:
            raise ValueError("write_batch must be positive")

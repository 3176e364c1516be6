"""MRC's settings for the emulated fabric: ``fabric_config()`` with its times in packet times.

The switches of the emulated fabric run at a few Mbit/s, where one full packet takes
milliseconds; :func:`emulated_fabric_config` scales ``fabric_config()``'s timers and windows to
the link rate. The constants below are in packet times (or packets) and say why each has its
value.
"""

from __future__ import annotations

from dataclasses import replace

from host.mrc.config import FABRIC_PAYLOAD_BYTES, MrcConfig, fabric_config
from host.wire import DATA_HEADER_BYTES

TARGET_QDELAY_PACKETS = 24
"""Window target: this many packet times of queuing delay along the path (three switch queues,
and up to :data:`ACK_DELAY_PACKETS` of it is the receiver holding its ACK)."""
BASE_RTT_PACKETS = 3.5
"""The unloaded RTT every connection measures its queuing delay from: a DATA packet's three
switch hops and its ACK's way back. Configured, as in NSCC, not the smallest sample: a
connection that happened to see an empty fabric would otherwise count more delay than one
that started into full queues, and back off more (the latecomer's advantage)."""
MD_GAMMA = 0.5
MAX_MD_FRACTION = 0.25
"""Multiplicative decrease: gentler than ``fabric_config``'s (0.8, at most half). A decrease
reacts to one ACK's delay sample, which on a sprayed connection comes from one of its paths;
with windows of a few tens of packets, halving on one path's sample drains every queue."""
PROPORTIONAL_GAIN = 0.25
"""Growth per acknowledged byte below the target (scaled by the headroom); lower than
``fabric_config``'s 1.0 so that additive increase, which shares fairly, dominates."""
FAIR_INCREASE_PACKETS = 2
"""Additive increase per window of acknowledged bytes (about per RTT)."""
QA_THRESHOLD_PACKETS = 64
"""Quick adapt above this many packet times of queuing delay (a full switch queue)."""
PROBE_TIMEOUT_PACKETS = 128
"""An EV probe waits this many packet times for its answer (it queues behind data)."""
INITIAL_WINDOW_PACKETS = 16
ACK_DELAY_PACKETS = 4
"""A receiver holds an ACK at most this many packet times (or until 8 packets arrived)."""
RTO_INITIAL_PACKETS = 40
"""The retransmission timeout before the first RTT sample: a first window queued along the
three switch hops of a path, the ACK delay and the way back, with room to spare. Shorter, and
every connection starting at once times out, resends its whole first window and marks its EVs
bad."""


def packet_time_us(link_mbps: float) -> float:
    """Serialization time of one full DATA packet on a link of ``link_mbps``."""
    wire_bytes = FABRIC_PAYLOAD_BYTES + DATA_HEADER_BYTES + 64  # + Ethernet, IPv6, UDP
    return wire_bytes * 8 / link_mbps


def emulated_fabric_config(link_mbps: float, *, host_rtt_ms: float = 0.0) -> MrcConfig:
    """``fabric_config()`` with its time constants in packet times of the emulated links.

    ``fabric_config`` is sized for fast links: 2 ms of target queuing delay, quick adapt at
    20 ms, a 256 KB first window growing by 16 KB per RTT, EV probes given up after 50 ms,
    ACKs held at most 1 ms. On the emulated fabric a 1,500-byte packet takes 2.4 ms at
    5 Mbit/s (24 ms at 0.5), so the target is less than one packet, a loaded path's RTT is
    longer than the probe timeout (an ASSUMED_BAD EV then never comes back), the first window
    overflows every queue, and every data packet gets its own ACK (about 10 % of a link).
    Here, in packet times: target :data:`TARGET_QDELAY_PACKETS`, quick adapt
    :data:`QA_THRESHOLD_PACKETS`, probe timeout :data:`PROBE_TIMEOUT_PACKETS`, ACK delay
    :data:`ACK_DELAY_PACKETS`, first retransmission timeout :data:`RTO_INITIAL_PACKETS`; in
    packets: first window :data:`INITIAL_WINDOW_PACKETS`,
    increase :data:`FAIR_INCREASE_PACKETS`. The time constants are never shorter than
    ``fabric_config``'s, the window sizes never larger. Sprayed packets mostly arrive out of
    order and, on loaded slow links, mostly CE-marked: neither gets an ACK at once
    (``ack_on_reorder`` and ``ack_every_ce`` off), or ACKs outnumber data packets and take
    about 8 % of every link.

    ``host_rtt_ms`` is RTT that the emulation adds beyond the links and that does not grow
    with a queue: Python hosts and switches on shared cores take their turns. It is added to
    the base RTT, so that the delay target and the quick-adapt threshold count queueing only.
    At 20 Mbit/s a packet time is 0.6 ms and the target 14 ms, while the ring's connections
    measured RTTs of 14-34 ms (10th-90th percentile) with under 3 % of packets CE-marked (the
    switch queues below their marking threshold): 59-78 % of the delay samples were above the
    target and a sample above the quick-adapt threshold (38 ms) cut the window 28-52 times in
    6 s. 0 (the default) keeps the base RTT at :data:`BASE_RTT_PACKETS`.
    """
    if host_rtt_ms < 0:
        raise ValueError("host_rtt_ms must not be negative")
    cfg = fabric_config()
    pkt_us = packet_time_us(link_mbps)
    cc = replace(
        cfg.cc,
        target_qdelay_us=max(cfg.cc.target_qdelay_us, TARGET_QDELAY_PACKETS * pkt_us),
        qa_threshold_us=max(cfg.cc.qa_threshold_us, QA_THRESHOLD_PACKETS * pkt_us),
        initial_cwnd_bytes=min(
            cfg.cc.initial_cwnd_bytes, INITIAL_WINDOW_PACKETS * cfg.payload_bytes
        ),
        fair_increase_bytes=min(
            cfg.cc.fair_increase_bytes, FAIR_INCREASE_PACKETS * cfg.payload_bytes
        ),
        base_rtt_us=BASE_RTT_PACKETS * pkt_us + host_rtt_ms * 1e3,
        gamma=MD_GAMMA,
        max_md_fraction=MAX_MD_FRACTION,
        proportional_gain=PROPORTIONAL_GAIN,
    )
    ev = replace(
        cfg.ev,
        probe_timeout_ms=max(cfg.ev.probe_timeout_ms, PROBE_TIMEOUT_PACKETS * pkt_us / 1e3),
        probe_max_interval_ms=max(
            cfg.ev.probe_max_interval_ms, PROBE_TIMEOUT_PACKETS * pkt_us / 1e3
        ),
    )
    ack_delay_ms = max(cfg.ack_delay_ms, ACK_DELAY_PACKETS * pkt_us / 1e3)
    rto_initial_ms = max(cfg.rto_initial_ms, RTO_INITIAL_PACKETS * pkt_us / 1e3)
    return replace(
        cfg,
        cc=cc,
        ev=ev,
        ack_delay_ms=ack_delay_ms,
        rto_initial_ms=rto_initial_ms,
        ack_on_reorder=False,
        ack_every_ce=False,
    )

"""MRC, the multipath reliable connection: per-packet spraying over EVs with per-EV states,
SACK/NACK selective retransmission and a delay-based window; an unreliable mode for
bounded-loss users.

``config`` (settings), ``emulated`` (the settings for the emulated fabric's slow links),
``evs`` (EV states, weights, probes), ``cc`` (congestion window), ``sender`` / ``receiver``
(the two halves of a connection), ``connection`` (the pure state machine), ``endpoint`` (the
I/O thread and the blocking API), ``recorder`` (events and per-EV samples for experiments),
``sim`` (two connection cores in virtual time, for tests).
"""

from host.mrc.config import CcConfig, EvConfig, EvPolicy, MrcConfig, fabric_config, loopback_config
from host.mrc.endpoint import Connection, Endpoint, EndpointStats, SendHandle
from host.mrc.evs import EvState, EvStats
from host.mrc.receiver import PartialMessage
from host.mrc.recorder import Event, EventKind, EvSample, Recorder
from host.mrc.sender import SendOutcome

__all__ = [
    "CcConfig",
    "Connection",
    "Endpoint",
    "EndpointStats",
    "EvConfig",
    "EvPolicy",
    "EvSample",
    "EvState",
    "EvStats",
    "Event",
    "EventKind",
    "MrcConfig",
    "PartialMessage",
    "Recorder",
    "SendHandle",
    "SendOutcome",
    "fabric_config",
    "loopback_config",
]

"""DBLP settings: the loss-bound policies, the phase detector and the protocol's timers.

Frozen dataclasses with units in the field names; the named policies are an enum and every
policy's bound rule is one row of :data:`host.dblp.phase.BOUND_RULES`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from host.dblp.chunks import CHUNK_HEADER_BYTES
from host.mrc.config import FABRIC_PAYLOAD_BYTES


class LossPolicy(enum.Enum):
    """How the loss bound P of a round is chosen."""

    DBLP = "dblp"
    """Phase-aware: P_low while a critical learning regime (CLR) is detected, P_high =
    P_low + k otherwise."""
    FIXED = "fixed"
    """The paper's baseline (MLT without switch support): P = P_low in every round."""
    RELIABLE = "reliable"
    """P = 0: the receiver stops only once every chunk arrived."""

    @classmethod
    def parse(cls, text: str) -> LossPolicy:
        """The policy named ``text`` (its value), with the valid names in the error."""
        try:
            return cls(text)
        except ValueError:
            names = ", ".join(p.value for p in cls)
            raise ValueError(f"unknown loss policy '{text}'; valid: {names}") from None


class StopRule(enum.Enum):
    """When the receiver sends STOP (DBLP allows both: the paper's probe-time answer and the
    authors' prototype's unprompted "S on its own")."""

    ON_PROBE = "on_probe"
    """Answer a probe with STOP once the received fraction is at least 1 − P (every chunk of
    the attempt that survived the network counts); unprompted only when every chunk is in."""
    ON_ARRIVAL = "on_arrival"
    """Also STOP unprompted as soon as 1 − P has arrived: the tail of the attempt still in
    flight is discarded (shorter calm rounds, up to P of the data lost even without loss)."""


@dataclass(frozen=True)
class PhaseConfig:
    """The loss bounds and the CLR detector (relative change of the gradient norm)."""

    p_low: float = 0.008
    """P inside a CLR (and the fixed baseline's P): 0.8 % as in the paper's Table I."""
    k: float = 0.40
    """P_high = P_low + k outside a CLR (the paper's k = 40 pp)."""
    eta: float = 0.5
    """A CLR is detected when |‖G_prev‖ − ‖G_curr‖| / ‖G_prev‖ ≥ eta."""
    check_every_rounds: int = 10
    """N: the detector compares the mean gradient norm of the last N rounds with the N
    before, every N rounds (the paper checks per epoch: pass the epoch's round count)."""
    start_in_clr: bool = True
    """The first window counts as critical ("the start of training is indisputably
    critical"): P = P_low until the first check."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.p_low < 1.0 or not 0.0 <= self.k or self.p_low + self.k >= 1.0:
            raise ValueError(
                f"need 0 <= p_low < 1, k >= 0 and p_low + k < 1 (p_low={self.p_low}, k={self.k})"
            )
        if self.eta <= 0.0:
            raise ValueError(f"eta must be positive, got {self.eta}")
        if self.check_every_rounds < 1:
            raise ValueError(f"check_every_rounds must be >= 1, got {self.check_every_rounds}")

    @property
    def p_high(self) -> float:
        return self.p_low + self.k


@dataclass(frozen=True)
class DblpConfig:
    """Chunking and timers of the per-round protocol (both ends should agree on chunking)."""

    packet_bytes: int = FABRIC_PAYLOAD_BYTES
    """Bytes of one chunk message: header + payload. Set it to the transport's packet
    payload (MRC ``payload_bytes``) so that a chunk is exactly one sprayed packet."""
    stop_rule: StopRule = StopRule.ON_PROBE
    settle_timeout_s: float = 0.05
    """After sending an attempt's chunks, wait at most this long for the transport to report
    each one acknowledged or abandoned before probing (avoids resending chunks in flight)."""
    probe_interval_s: float = 0.02
    """Re-probe this often while no answer to the current attempt has come."""
    probe_grace_s: float = 0.002
    """Before answering a probe with a BITMAP, wait this long for chunks still on their way
    through the other channel (a probe may overtake its attempt's last chunks)."""
    control_copies: int = 2
    """Each control message goes once on the reliable channel plus this many unreliable
    copies (sprayed on other paths): under a 90 % loss burst one reliable message takes
    about ten retransmission timeouts, a copy gets through far sooner. 0 = reliable only."""
    reprobe_copies_max: int = 8
    """Re-probe i of an attempt sends min(2^i, this) unreliable probes (distinct sequence
    numbers, each answered): the longer the silence, the more redundancy."""
    peer_timeout_s: float = 10.0
    """A transfer fails (:class:`~host.dblp.errors.RoundFailed`) when nothing of it has come
    from the peer for this long, or for ``liveness_factor`` times the longest transfer the
    link has completed, whichever is longer (:class:`~host.dblp.link.Liveness`): a machine
    that gets slower stretches the timeout instead of failing the job."""
    liveness_factor: float = 10.0
    linger_s: float = 2.0
    """Closing a link waits at most this long for its reliable control messages (the last
    STOP above all) to be acknowledged, so a peer still waiting for them finishes."""
    max_pending_events: int = 65_536
    """Chunks and probes of transfers not started yet that a link keeps (more are dropped)."""
    finished_memory: int = 64
    """Finished receive transfers a link remembers to answer late probes with STOP."""

    def __post_init__(self) -> None:
        if self.packet_bytes < CHUNK_HEADER_BYTES + 8:
            raise ValueError(f"packet_bytes must be at least {CHUNK_HEADER_BYTES + 8}")
        if self.probe_grace_s < 0:
            raise ValueError("probe_grace_s must be >= 0")
        for name in ("settle_timeout_s", "probe_interval_s", "peer_timeout_s", "liveness_factor"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if self.control_copies < 0 or self.reprobe_copies_max < 1:
            raise ValueError("need control_copies >= 0 and reprobe_copies_max >= 1")

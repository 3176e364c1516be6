"""Per-connection EV table: states, signals, weights, the spraying schedule and probes.

States follow the OCP MRC API: GOOD (carries data), ASSUMED_BAD (the sender saw a loss on it:
no data until a probe comes back), DENIED (the controller forbids it: never used, never
probed). Transitions are a table of (state, signal) → state. ``ev_min_active`` is a floor:
a loss never marks an EV ASSUMED_BAD if fewer GOOD EVs than the floor would remain (it is
penalised instead).

Among GOOD EVs the next packet's EV comes from a smooth weighted round-robin schedule, rebuilt
when a state changes or (at most every ``reweight_interval_ms``) when signals changed the
weights: weight = RTT factor (fastest EV's smoothed RTT / this EV's, floored) / (1 + penalty),
where ECN echoes and NACKs (trims) add decaying penalties.
"""

from __future__ import annotations

import enum
import math
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from host.mrc.config import EvConfig, EvPolicy
from host.mrc.health import covers
from host.mrc.recorder import EventKind
from host.mrc.rtt import RttEstimator
from host.paths import Ev


class EvState(enum.Enum):
    GOOD = "good"
    ASSUMED_BAD = "assumed_bad"
    DENIED = "denied"


class EvSignal(enum.Enum):
    LOSS = "loss"
    PROBE_OK = "probe_ok"
    DENY = "deny"
    ALLOW = "allow"


TRANSITIONS: dict[tuple[EvState, EvSignal], EvState] = {
    (EvState.GOOD, EvSignal.LOSS): EvState.ASSUMED_BAD,
    (EvState.GOOD, EvSignal.PROBE_OK): EvState.GOOD,
    (EvState.GOOD, EvSignal.DENY): EvState.DENIED,
    (EvState.GOOD, EvSignal.ALLOW): EvState.GOOD,
    (EvState.ASSUMED_BAD, EvSignal.LOSS): EvState.ASSUMED_BAD,
    (EvState.ASSUMED_BAD, EvSignal.PROBE_OK): EvState.GOOD,
    (EvState.ASSUMED_BAD, EvSignal.DENY): EvState.DENIED,
    (EvState.ASSUMED_BAD, EvSignal.ALLOW): EvState.ASSUMED_BAD,
    (EvState.DENIED, EvSignal.LOSS): EvState.DENIED,
    (EvState.DENIED, EvSignal.PROBE_OK): EvState.DENIED,
    (EvState.DENIED, EvSignal.DENY): EvState.DENIED,
    (EvState.DENIED, EvSignal.ALLOW): EvState.ASSUMED_BAD,  # probed before it carries data
}


@dataclass(frozen=True)
class PolicyBehaviour:
    sprays: bool  # every packet on the next EV of the schedule (else one EV per connection)
    loss_marks_bad: bool  # the GOOD/ASSUMED_BAD state machine runs
    rehash_on_rto: bool  # move to another EV after a retransmission timeout


BEHAVIOURS: dict[EvPolicy, PolicyBehaviour] = {
    EvPolicy.SPRAY: PolicyBehaviour(sprays=True, loss_marks_bad=True, rehash_on_rto=False),
    EvPolicy.HASHED: PolicyBehaviour(sprays=False, loss_marks_bad=False, rehash_on_rto=True),
}


@dataclass(frozen=True)
class EvStats:
    """A snapshot of one EV of one connection."""

    ev_id: int
    plane: int
    spine: int
    state: EvState
    weight: float
    penalty: float
    srtt_us: float
    min_rtt_us: float
    packets_sent: int
    bytes_sent: int
    retransmits_sent: int
    packets_acked: int
    bytes_acked: int
    losses: int
    nacks: int
    ecn_marks: int
    probes_sent: int
    probes_ok: int
    probes_lost: int
    state_changes: int


class EvPath(RttEstimator):
    """Mutable per-EV state (owned by the I/O thread); ``srtt`` and ``rttvar`` are the EV's."""

    __slots__ = (
        "ev",
        "state",
        "penalty",
        "penalty_t",
        "min_rtt",
        "packets_sent",
        "bytes_sent",
        "retransmits_sent",
        "packets_acked",
        "bytes_acked",
        "losses",
        "nacks",
        "ecn_marks",
        "probes_sent",
        "probes_ok",
        "probes_lost",
        "state_changes",
        "probe_seq",
        "probe_deadline",
        "next_probe",
        "probe_interval",
        "weight",
    )

    def __init__(self, ev: Ev) -> None:
        super().__init__()
        self.ev = ev
        self.state = EvState.GOOD
        self.penalty = 0.0
        self.penalty_t = 0.0
        self.min_rtt = math.inf
        self.packets_sent = self.bytes_sent = self.retransmits_sent = 0
        self.packets_acked = self.bytes_acked = self.losses = self.nacks = self.ecn_marks = 0
        self.probes_sent = self.probes_ok = self.probes_lost = self.state_changes = 0
        self.probe_seq = -1  # outstanding probe
        self.probe_deadline = math.inf
        self.next_probe = math.inf
        self.probe_interval = 0.0
        self.weight = 1.0


Notify = Callable[[EventKind, int, float, str], None]  # kind, ev id, value, detail
PathHook = Callable[["EvPath", float], None]  # an EV, now


class EvTable:
    """The EVs of one connection and how the next packet picks one.

    Args:
        evs: the paths to the peer (ids need not be contiguous).
        notify: called on state changes and floor hits (the connection's event recorder).
        hash_key: the connection's identity, for the HASHED policy's choice.
    """

    def __init__(
        self,
        evs: Sequence[Ev],
        cfg: EvConfig,
        *,
        notify: Notify | None = None,
        hash_key: bytes = b"",
    ) -> None:
        if not evs:
            raise ValueError("a connection needs at least one EV")
        self.cfg = cfg
        self.behaviour = BEHAVIOURS[cfg.policy]
        self.paths = [EvPath(e) for e in evs]
        self.by_id = {p.ev.ev_id: p for p in self.paths}
        n = len(self.paths)
        self.min_active = min(n, cfg.min_active or max(1, math.ceil(cfg.min_active_fraction * n)))
        self._notify = notify
        self._schedule: list[EvPath] = []
        self._cursor = 0
        self._dirty = True
        self._rebuilt_at = -math.inf
        self._half_life_s = cfg.penalty_half_life_ms / 1e3
        self._hash = zlib.crc32(hash_key + cfg.hash_seed.to_bytes(8, "big"))
        self._rehashes = 0
        self._probe_seq = 0
        self.shares = self.behaviour.loss_marks_bad and cfg.share_verdicts
        """Path-timeout verdicts go to, and come from, the endpoint's other connections."""
        self.on_verdict: PathHook | None = None
        """Called when a shareable loss took an EV out (the endpoint tells the others)."""
        self.on_probe_ok: PathHook | None = None
        """Called when a probe brought an EV back."""

    # -- choosing ------------------------------------------------------------------------

    def pick(self, now: float, exclude: int = -1) -> EvPath | None:
        """The EV for the next packet (not ``exclude`` if another is usable), or None."""
        if self._dirty and now - self._rebuilt_at >= self.cfg.reweight_interval_ms / 1e3:
            self._rebuild(now)
        sched = self._schedule
        n = len(sched)
        if n == 0:
            return None
        for _ in range(n):
            p = sched[self._cursor % n]
            self._cursor += 1
            if p.state is EvState.GOOD and p.ev.ev_id != exclude:
                return p
        return next((p for p in sched if p.state is EvState.GOOD), None)

    def for_reply(self, ev_id: int, now: float) -> EvPath | None:
        """The EV for an ACK or probe reply to a packet that came in on ``ev_id``: the same
        path back when this side may use it, else the next usable one."""
        p = self.by_id.get(ev_id)
        if p is not None and p.state is EvState.GOOD:
            return p
        return self.pick(now) or (p if p is not None and p.state is not EvState.DENIED else None)

    def pick_other_plane(self, plane: int, now: float) -> EvPath | None:
        """The next usable EV of another plane than ``plane`` (None if there is none)."""
        for _ in range(len(self._schedule)):
            p = self.pick(now)
            if p is not None and p.ev.plane != plane:
                return p
        return None

    def usable(self) -> list[EvPath]:
        return [p for p in self.paths if p.state is EvState.GOOD]

    def _rebuild(self, now: float) -> None:
        self._dirty = False
        self._rebuilt_at = now
        good = self.usable()
        if not self.behaviour.sprays:
            self._schedule = self._hashed_choice(good)
            return
        rtts = [p.srtt for p in good if p.srtt > 0]
        fastest = min(rtts) if rtts else 0.0
        floor = self.cfg.min_weight_fraction
        for p in good:
            rtt_factor = max(floor, fastest / p.srtt) if p.srtt > 0 and fastest > 0 else 1.0
            p.weight = max(floor, rtt_factor / (1.0 + self._penalty(p, now)))
        self._schedule = _smooth_wrr(good, max(16, 4 * len(good)))
        self._dirty = any(p.penalty > 0 for p in good)  # keep reweighting while they decay

    def _hashed_choice(self, good: list[EvPath]) -> list[EvPath]:
        if not good:
            return []
        return [good[(self._hash + self._rehashes) % len(good)]]

    def _penalty(self, p: EvPath, now: float) -> float:
        if p.penalty and self._half_life_s > 0:
            p.penalty *= 0.5 ** ((now - p.penalty_t) / self._half_life_s)
            if p.penalty < 0.01:
                p.penalty = 0.0
        p.penalty_t = now
        return p.penalty

    def _add_penalty(self, p: EvPath, amount: float, now: float) -> None:
        p.penalty = self._penalty(p, now) + amount
        self._dirty = True

    # -- signals -------------------------------------------------------------------------

    def on_sent(self, p: EvPath, nbytes: int, retransmit: bool) -> None:
        p.packets_sent += 1
        p.bytes_sent += nbytes
        if retransmit:
            p.retransmits_sent += 1

    def on_acked(self, ev_id: int, nbytes: int) -> None:
        p = self.by_id.get(ev_id)
        if p is not None:
            p.packets_acked += 1
            p.bytes_acked += nbytes

    def on_rtt(self, ev_id: int, rtt_s: float) -> None:
        p = self.by_id.get(ev_id)
        if p is None:
            return
        p.update_rtt(rtt_s)
        p.min_rtt = min(p.min_rtt, rtt_s)
        self._dirty = True

    def on_ce(self, ev_id: int, now: float) -> None:
        p = self.by_id.get(ev_id)
        if p is not None:
            p.ecn_marks += 1
            self._add_penalty(p, self.cfg.ecn_penalty, now)

    def on_nack(self, ev_id: int, now: float) -> None:
        p = self.by_id.get(ev_id)
        if p is not None:
            p.nacks += 1
            self._add_penalty(p, self.cfg.nack_penalty, now)

    def on_loss(self, ev_id: int, now: float, why: str = "", *, shareable: bool = False) -> bool:
        """A packet sent on ``ev_id`` was lost: ASSUMED_BAD at once, unless the floor forbids.
        True when this loss took the EV out of service (it was GOOD). ``shareable``: a path
        timeout, which :attr:`on_verdict` passes on to the endpoint's other connections."""
        p = self.by_id.get(ev_id)
        if p is None:
            return False
        p.losses += 1
        if not self.behaviour.loss_marks_bad or p.state is not EvState.GOOD:
            return False
        if len(self.usable()) - 1 < self.min_active:
            self._add_penalty(p, self.cfg.loss_penalty, now)
            self._emit(EventKind.FLOOR, p.ev.ev_id, float(self.min_active), why)
            return False
        # a path that signalled congestion lately (an ECN echo or a NACK within about a
        # penalty half-life) may be silent because of its queue: that verdict stays here
        congested = self.cfg.ecn_penalty > 0 and self._penalty(p, now) >= self.cfg.ecn_penalty / 2
        self._signal(p, EvSignal.LOSS, now, why)
        if shareable and not congested and self.shares and self.on_verdict is not None:
            self.on_verdict(p, now)
        return True

    def on_shared(self, plane: int, spine: int, now: float) -> list[int]:
        """Another connection of the endpoint found the path (plane, spine) silent (spine
        :data:`~host.mrc.health.ANY_SPINE`: every path of the plane): its GOOD EVs there go
        ASSUMED_BAD as on a loss of their own, while the floor allows and while GOOD EVs on
        another plane remain (the last plane in use carries everything, and its queues are
        the likeliest cause of another connection's silence there: this connection finds out
        for itself). Returns the EV ids taken out (their in-flight packets are the sender's
        to resend)."""
        if not self.shares:
            return []
        out: list[int] = []
        for p in self.paths:
            if p.state is not EvState.GOOD or not covers(plane, spine, p.ev.plane, p.ev.spine):
                continue
            if len(self.usable()) - 1 < self.min_active:
                self._emit(EventKind.FLOOR, p.ev.ev_id, float(self.min_active), "shared")
                continue
            if not any(q.state is EvState.GOOD and q.ev.plane != p.ev.plane for q in self.paths):
                self._emit(EventKind.FLOOR, p.ev.ev_id, float(self.min_active), "shared last plane")
                continue
            self._signal(p, EvSignal.LOSS, now, "shared")
            out.append(p.ev.ev_id)
        return out

    def on_rto(self, now: float) -> None:
        if self.behaviour.rehash_on_rto and self.cfg.rehash_on_rto:
            self._rehashes += 1
            self._rebuild(now)
            chosen = self._schedule[0].ev.ev_id if self._schedule else -1
            self._emit(EventKind.REHASH, chosen, float(self._rehashes), "")

    def deny(self, ev_id: int, now: float) -> None:
        self._signal(self._get(ev_id), EvSignal.DENY, now, "controller")

    def allow(self, ev_id: int, now: float) -> None:
        self._signal(self._get(ev_id), EvSignal.ALLOW, now, "controller")

    def _get(self, ev_id: int) -> EvPath:
        p = self.by_id.get(ev_id)
        if p is None:
            raise KeyError(f"no EV {ev_id}; EVs: {sorted(self.by_id)}")
        return p

    def _signal(self, p: EvPath, signal: EvSignal, now: float, why: str) -> None:
        new = TRANSITIONS[(p.state, signal)]
        if new is p.state:
            return
        old, p.state = p.state, new
        p.state_changes += 1
        self._dirty = True
        self._rebuilt_at = -math.inf  # state changes apply at once
        if new is EvState.ASSUMED_BAD:
            p.probe_interval = self.cfg.probe_interval_ms / 1e3
            p.next_probe = now + p.probe_interval
            p.probe_seq, p.probe_deadline = -1, math.inf
        else:
            p.next_probe, p.probe_seq, p.probe_deadline = math.inf, -1, math.inf
        if new is EvState.GOOD:
            p.penalty = 0.0
        self._emit(EventKind.EV_STATE, p.ev.ev_id, 0.0, f"{old.value}->{new.value} {why}".rstrip())

    def _emit(self, kind: EventKind, ev_id: int, value: float, detail: str) -> None:
        if self._notify is not None:
            self._notify(kind, ev_id, value, detail)

    # -- probes --------------------------------------------------------------------------

    def probes_due(self, now: float) -> list[tuple[EvPath, int]]:
        """ASSUMED_BAD EVs to probe now, with the probe's sequence number; also expires
        unanswered probes (doubling that EV's interval)."""
        out: list[tuple[EvPath, int]] = []
        for p in self.paths:
            if p.state is not EvState.ASSUMED_BAD:
                continue
            if p.probe_seq >= 0 and now >= p.probe_deadline:
                p.probes_lost += 1
                p.probe_seq, p.probe_deadline = -1, math.inf
                p.probe_interval = min(p.probe_interval * 2, self.cfg.probe_max_interval_ms / 1e3)
                p.next_probe = now + p.probe_interval
            if p.probe_seq < 0 and now >= p.next_probe:
                p.probe_seq = self.next_probe_seq()
                p.probe_deadline = now + self.cfg.probe_timeout_ms / 1e3
                p.probes_sent += 1
                out.append((p, p.probe_seq))
        return out

    def next_probe_seq(self) -> int:
        self._probe_seq += 1
        return self._probe_seq

    def on_probe_ack(self, ev_id: int, seq: int, rtt_s: float, now: float) -> bool:
        """A probe reply; True if it answered this EV's outstanding probe (EV now GOOD)."""
        p = self.by_id.get(ev_id)
        if p is None or p.probe_seq != seq or seq < 0:
            return False
        p.probes_ok += 1
        self.on_rtt(ev_id, rtt_s)
        self._signal(p, EvSignal.PROBE_OK, now, "probe")
        if self.shares and self.on_probe_ok is not None:
            self.on_probe_ok(p, now)
        return True

    def next_deadline(self) -> float:
        t = math.inf
        for p in self.paths:
            if p.state is EvState.ASSUMED_BAD:
                t = min(t, p.probe_deadline if p.probe_seq >= 0 else p.next_probe)
        return t

    # -- export --------------------------------------------------------------------------

    def expected_rtt(self, ev_id: int, default_s: float) -> tuple[float, float]:
        """(smoothed RTT, RTT deviation) of an EV, or ``default_s`` before its first sample."""
        p = self.by_id.get(ev_id)
        if p is None or p.srtt == 0.0:
            return default_s, default_s / 2
        return p.srtt, p.rttvar

    def snapshot(self, now: float) -> tuple[EvStats, ...]:
        return tuple(
            EvStats(
                p.ev.ev_id,
                p.ev.plane,
                p.ev.spine,
                p.state,
                p.weight if p.state is EvState.GOOD else 0.0,
                self._penalty(p, now),
                p.srtt * 1e6,
                p.min_rtt * 1e6 if p.min_rtt < math.inf else 0.0,
                p.packets_sent,
                p.bytes_sent,
                p.retransmits_sent,
                p.packets_acked,
                p.bytes_acked,
                p.losses,
                p.nacks,
                p.ecn_marks,
                p.probes_sent,
                p.probes_ok,
                p.probes_lost,
                p.state_changes,
            )
            for p in self.paths
        )


def _smooth_wrr(paths: list[EvPath], slots: int) -> list[EvPath]:
    """A schedule of ``slots`` picks that interleaves EVs in proportion to their weights."""
    if not paths:
        return []
    total = sum(p.weight for p in paths)
    current = [0.0] * len(paths)
    out: list[EvPath] = []
    for _ in range(slots):
        for i, p in enumerate(paths):
            current[i] += p.weight
        best = max(range(len(paths)), key=current.__getitem__)
        current[best] -= total
        out.append(paths[best])
    return out

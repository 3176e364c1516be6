"""Operating conditions of the fabric: failures, loss events and the ECN threshold, as data.

The controller's whole mutable state is one immutable :class:`Conditions` value. A command
computes a new value from the old one (pure functions here); the controller turns
(topology, config, conditions) into the wanted table entries and writes the difference. So a
command repeated is a no-op, and a command rejected changes nothing.

* :class:`Fault` -- a plane, a link or a switch taken down, by the ``port_state`` table or,
  with ``phy``, by setting the Linux interfaces down.
* :class:`LossEvent` -- random loss on one egress port (``loss_inject``), optionally expiring.

:meth:`Conditions.to_json` / :meth:`Conditions.from_json` keep it in
``results/fabric/conditions.json`` so a one-shot ``tf-ctl`` and a restarted ``serve`` agree.
"""

from __future__ import annotations

import enum
import json
import time
from dataclasses import dataclass, replace

from controller.wiring import Wiring

LOSS_SCALE = 65536  # inject_loss(threshold): drop when random bit<16> < threshold
MAX_LOSS_THRESHOLD = LOSS_SCALE - 1


class FaultKind(enum.StrEnum):
    """What a fault takes down."""

    PLANE = "plane"  # every port of every switch of the plane
    LINK = "link"  # the switch end(s) of one link
    SWITCH = "switch"  # every port of the switch and every neighbour port facing it


@dataclass(frozen=True, order=True)
class Fault:
    """One failure; ``target`` is ``("1",)``, ``("p0l0", "p0s1")`` (sorted) or ``("p0s0",)``."""

    kind: FaultKind
    target: tuple[str, ...]
    phy: bool = False

    def describe(self) -> str:
        how = " (phy)" if self.phy else ""
        return f"{self.kind.value} {' '.join(self.target)}{how}"

    def ends(self, wiring: Wiring) -> list[tuple[str, int]]:
        """The switch ports this fault takes down."""
        match self.kind:
            case FaultKind.PLANE:
                return wiring.plane_ends(int(self.target[0]))
            case FaultKind.LINK:
                return wiring.link_ends(*self.target)
            case FaultKind.SWITCH:
                return wiring.switch_and_neighbour_ends(self.target[0])
        raise AssertionError(self.kind)


def link_target(a: str, b: str) -> tuple[str, str]:
    """The canonical (sorted) target of a link fault."""
    return (a, b) if a <= b else (b, a)


@dataclass(frozen=True, order=True)
class LossEvent:
    """Random loss on ``switch``'s egress ``port``: probability ``threshold / 65536``."""

    switch: str
    port: int
    threshold: int
    expires_unix_s: float | None = None

    @property
    def percent(self) -> float:
        return 100.0 * self.threshold / LOSS_SCALE

    def expired(self, now_unix_s: float) -> bool:
        return self.expires_unix_s is not None and now_unix_s >= self.expires_unix_s


def loss_threshold(percent: float) -> int:
    """``inject_loss`` threshold of a loss percentage (0 < percent <= 100; 100 -> 65535)."""
    return max(1, min(MAX_LOSS_THRESHOLD, round(percent / 100.0 * LOSS_SCALE)))


@dataclass(frozen=True)
class Conditions:
    """Failures, loss events, the ECN threshold and the trimming threshold in force."""

    faults: frozenset[Fault] = frozenset()
    losses: tuple[LossEvent, ...] = ()
    ecn_threshold_pkts: int | None = None
    trim_threshold_pkts: int | None = None
    """Trim UDP packets that find at least this many packets queued; None: no trimming."""

    # -- transformations ------------------------------------------------------------------

    def with_fault(self, fault: Fault) -> Conditions:
        kept = {f for f in self.faults if (f.kind, f.target) != (fault.kind, fault.target)}
        return replace(self, faults=frozenset(kept | {fault}))

    def without_fault(self, kind: FaultKind, target: tuple[str, ...]) -> Conditions:
        return replace(
            self, faults=frozenset(f for f in self.faults if (f.kind, f.target) != (kind, target))
        )

    def fault(self, kind: FaultKind, target: tuple[str, ...]) -> Fault | None:
        for f in self.faults:
            if (f.kind, f.target) == (kind, target):
                return f
        return None

    def with_losses(self, events: list[LossEvent]) -> Conditions:
        """Set (replace) the loss on each event's port."""
        keys = {(e.switch, e.port) for e in events}
        kept = [e for e in self.losses if (e.switch, e.port) not in keys]
        return replace(self, losses=tuple(sorted(kept + events)))

    def without_losses(self, ports: list[tuple[str, int]]) -> Conditions:
        keys = set(ports)
        return replace(self, losses=tuple(e for e in self.losses if (e.switch, e.port) not in keys))

    def expire(self, now_unix_s: float | None = None) -> Conditions:
        """Without the loss events whose time is up."""
        now = time.time() if now_unix_s is None else now_unix_s
        return replace(self, losses=tuple(e for e in self.losses if not e.expired(now)))

    def with_ecn(self, k: int | None) -> Conditions:
        return replace(self, ecn_threshold_pkts=k)

    def with_trim(self, k: int | None) -> Conditions:
        return replace(self, trim_threshold_pkts=k)

    def cleared(self) -> Conditions:
        """No faults, no loss; the ECN and trimming thresholds stay."""
        return replace(self, faults=frozenset(), losses=())

    # -- derived --------------------------------------------------------------------------

    def down_ends(self, wiring: Wiring, *, phy: bool | None = None) -> set[tuple[str, int]]:
        """Switch ports taken down: by ``port_state`` (phy=False), by Linux (True) or both."""
        out: set[tuple[str, int]] = set()
        for f in self.faults:
            if phy is None or f.phy == phy:
                out.update(f.ends(wiring))
        return out

    # -- JSON -----------------------------------------------------------------------------

    def to_json(self) -> str:
        doc = {
            "version": 1,
            "faults": [
                {"kind": f.kind.value, "target": list(f.target), "phy": f.phy}
                for f in sorted(self.faults)
            ],
            "losses": [
                {
                    "switch": e.switch,
                    "port": e.port,
                    "threshold": e.threshold,
                    "expires_unix_s": e.expires_unix_s,
                }
                for e in self.losses
            ],
            "ecn_threshold_pkts": self.ecn_threshold_pkts,
            "trim_threshold_pkts": self.trim_threshold_pkts,
        }
        return json.dumps(doc, indent=1)

    @classmethod
    def from_json(cls, text: str) -> Conditions:
        """Parse what :meth:`to_json` wrote.

        Raises:
            ValueError: the text is not such a document.
        """
        try:
            doc = json.loads(text)
            faults = frozenset(
                Fault(FaultKind(f["kind"]), tuple(str(t) for t in f["target"]), bool(f["phy"]))
                for f in doc["faults"]
            )
            losses = tuple(
                LossEvent(
                    str(e["switch"]),
                    int(e["port"]),
                    int(e["threshold"]),
                    None if e["expires_unix_s"] is None else float(e["expires_unix_s"]),
                )
                for e in doc["losses"]
            )
            ecn = doc["ecn_threshold_pkts"]
            trim = doc.get("trim_threshold_pkts")  # absent in documents older than trimming
            return cls(
                faults,
                losses,
                None if ecn is None else int(ecn),
                None if trim is None else int(trim),
            )
        except (KeyError, TypeError, ValueError, json.JSONDecodeError) as e:
            raise ValueError(f"not a conditions document: {e}") from None

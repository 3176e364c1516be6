"""An endpoint's shared view of path health: one connection's path-failure verdict for all.

Every connection of an endpoint sprays over EVs, and an EV is a static path: (plane, spine)
names the elements it crosses besides the two hosts' links (on a leaf-local path, spine -1:
the leaf itself). Each connection finds a failed path on its own, from its own packets;
connections of one host whose EVs cross the same failed element would keep sending into it
until each had lost a packet there and waited out its own RACK path timeout.

:class:`PathHealth` collects *path timeouts*: a connection marked an EV ASSUMED_BAD because
packets on it were not acknowledged while packets sent later on other EVs were, and none of
its own EV delivered since (a silent path, not a congestion drop, which shows as a NACK, a
loss overtaken on its own EV, or a timeout of the whole connection). When verdicts on
``share_plane_after`` different paths of one plane are current (two spines, or a spine and
the plane's leaf-local path), what they have in common is the plane's local leaf (or this
host's link to it), and every connection of the endpoint takes its EVs of that plane out of
service at once: ASSUMED_BAD (the ``ev_min_active`` floor still holds, and the last plane a
connection has in use stays), their in-flight packets there resent on other EVs, probes
bring them back as for any ASSUMED_BAD EV. With ``share_single_paths`` one path's verdict
goes to the others at once too (only for their EVs on that (plane, spine)).

A verdict is current for ``share_hold_ms`` (0: the probe timeout, the time a probe needs
to show the path alive) and ends earlier when a probe on that (plane, spine) comes back.
Nothing here does I/O or reads a clock.
"""

from __future__ import annotations

from collections.abc import Callable

from host.mrc.config import EvConfig

ANY_SPINE = -2
"""The spine of a plane-wide verdict (every EV of the plane)."""

Subscriber = Callable[[int, int, float], None]  # plane, spine (or ANY_SPINE), now


class PathHealth:
    """Path-failure verdicts of one endpoint's connections, and who to tell.

    Args:
        cfg: ``share_hold_ms``, ``share_plane_after`` (and the probe timeout) of the EVs.
    """

    def __init__(self, cfg: EvConfig) -> None:
        self.cfg = cfg
        self.hold_s = (cfg.share_hold_ms or cfg.probe_timeout_ms) / 1e3
        self._verdicts: dict[tuple[int, int], float] = {}  # (plane, spine) -> when
        self._subscribers: dict[int, Subscriber] = {}
        self.reports = 0
        self.plane_verdicts = 0

    def subscribe(self, key: int, fn: Subscriber, now: float) -> None:
        """``fn`` hears every verdict passed on from now on (and the current ones, at once)."""
        self._subscribers[key] = fn
        for (plane, spine), t in list(self._verdicts.items()):
            if now - t < self.hold_s and (spine == ANY_SPINE or self.cfg.share_single_paths):
                fn(plane, spine, now)

    def unsubscribe(self, key: int) -> None:
        self._subscribers.pop(key, None)

    def report(self, origin: int, plane: int, spine: int, now: float) -> None:
        """Subscriber ``origin`` saw the path (plane, spine) time out: with
        ``share_single_paths``, tell the others; when the plane's current verdicts now cover
        ``share_plane_after`` spines, tell everyone (the origin too) that the whole plane is
        suspect."""
        self.reports += 1
        self._expire(now)
        self._verdicts[(plane, spine)] = now
        if self.cfg.share_single_paths:
            for key, fn in list(self._subscribers.items()):
                if key != origin:
                    fn(plane, spine, now)
        after = self.cfg.share_plane_after
        spines = {s for (p, s) in self._verdicts if p == plane and s != ANY_SPINE}
        if after > 0 and len(spines) >= after and (plane, ANY_SPINE) not in self._verdicts:
            self._verdicts[(plane, ANY_SPINE)] = now
            self.plane_verdicts += 1
            for fn in list(self._subscribers.values()):
                fn(plane, ANY_SPINE, now)

    def clear(self, plane: int, spine: int) -> None:
        """A probe on (plane, spine) came back: that path, and so its plane, works."""
        self._verdicts.pop((plane, spine), None)
        self._verdicts.pop((plane, ANY_SPINE), None)

    def suspect(self, plane: int, spine: int, now: float) -> bool:
        """Whether a current verdict covers the path (plane, spine)."""
        self._expire(now)
        return (plane, spine) in self._verdicts or (plane, ANY_SPINE) in self._verdicts

    def _expire(self, now: float) -> None:
        old = [k for k, t in self._verdicts.items() if now - t >= self.hold_s]
        for k in old:
            del self._verdicts[k]


def covers(plane: int, spine: int, ev_plane: int, ev_spine: int) -> bool:
    """Whether a verdict on (plane, spine) covers an EV on (ev_plane, ev_spine)."""
    return ev_plane == plane and (spine == ANY_SPINE or ev_spine == spine)

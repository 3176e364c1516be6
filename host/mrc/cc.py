"""A delay-based congestion window per connection, in the spirit of Ultra Ethernet's NSCC.

Every ACK carries one RTT sample (of the packet it echoes) and whether that packet was
CE-marked. Queuing delay = RTT - base RTT. The reaction is a table keyed by
(CE, delay at or above target), as in NSCC's four quadrants:

    no CE, delay < target   proportional increase (more the further below target) + fair increase
    no CE, delay >= target  fair increase only (the queue may be someone else's)
    CE,    delay >= target  multiplicative decrease, at most once per base RTT + target
    CE,    delay < target   nothing (a transient mark; the EV selector steers away instead)

Without ECN (``ecn_enabled=False``: loopback, or switches that do not mark) the delay alone
decides: above target is a decrease. A NACK (trimmed packet) takes its bytes off the window;
a queuing delay above ``qa_threshold_us`` or a retransmission timeout triggers *quick adapt*:
the window drops to the bytes delivered during the last window. The window grows only
while the connection uses it (``validated_fraction`` of it in flight).

Two options for hosts whose RTT jitters without any queue (``noise_target_gain``,
``qa_needs_ce``; ECN only, off by default): the switches' CE marks say where a queue is, so an
unmarked sample is measured against a target of at least ``noise_target_gain`` times the mean
deviation of unmarked RTTs, and a delay above the quick-adapt threshold cuts the window only
when a packet of the same window was marked.
"""

from __future__ import annotations

from collections.abc import Callable

from host.mrc.config import CcConfig
from host.mrc.rtt import RttEstimator

Reaction = Callable[["NsccWindow", float, int, float], None]  # self, now, acked bytes, delay


class NsccWindow:
    """The congestion window (bytes) of one connection."""

    def __init__(self, cfg: CcConfig) -> None:
        self.cfg = cfg
        self.cwnd = float(cfg.initial_cwnd_bytes)
        self.base_rtt = cfg.base_rtt_us / 1e6 if cfg.base_rtt_us > 0 else 0.0
        self._target = cfg.target_qdelay_us / 1e6
        self._qa_threshold = cfg.qa_threshold_us / 1e6
        self._last_md = -1e9
        self._qa_window_end = 0.0
        self._achieved = 0
        self._validated = True
        self.decreases = 0
        self.quick_adapts = 0
        self.delay_samples = 0
        self.above_target = 0
        """RTT samples, and those whose queuing delay was at or above the target."""
        self.min_rtt = 0.0
        """The smallest RTT sample seen (whatever ``base_rtt`` is configured to)."""
        self._table = REACTIONS_ECN if cfg.ecn_enabled else REACTIONS_DELAY_ONLY
        self._noise_gain = cfg.noise_target_gain if cfg.ecn_enabled else 0.0
        self._qa_needs_ce = cfg.qa_needs_ce and cfg.ecn_enabled
        self._ce_seen = False
        self._unmarked = RttEstimator(first_var=0.0)
        self.target = self._target
        """The delay target (s) the last sample was measured against."""

    @property
    def rtt_dev(self) -> float:
        """Mean deviation (s) of the unmarked RTT samples (with ``noise_target_gain``)."""
        return self._unmarked.rttvar

    @property
    def window_bytes(self) -> int:
        return int(self.cwnd) if self.cfg.enabled else self.cfg.initial_cwnd_bytes

    def on_ack(
        self,
        now: float,
        acked_bytes: int,
        rtt_s: float | None,
        ce: bool,
        inflight_bytes: int | None = None,
    ) -> None:
        """Newly acknowledged bytes, with the ACK's RTT sample (None if it had none) and the
        bytes that were in flight when it arrived (None: assume the window was in use)."""
        self._achieved += acked_bytes
        if not self.cfg.enabled or rtt_s is None:
            return
        self._validated = (
            inflight_bytes is None or inflight_bytes >= self.cfg.validated_fraction * self.cwnd
        )
        if self.cfg.base_rtt_us <= 0 and (self.base_rtt == 0.0 or rtt_s < self.base_rtt):
            self.base_rtt = rtt_s
        if self.min_rtt == 0.0 or rtt_s < self.min_rtt:
            self.min_rtt = rtt_s
        delay = max(0.0, rtt_s - self.base_rtt)
        self.target = self._target
        if self._noise_gain > 0.0 and not ce:
            self.target = max(self._target, self._noise_gain * self._track_noise(rtt_s))
        above = delay >= self.target
        self.delay_samples += 1
        self.above_target += above
        self._ce_seen = self._ce_seen or ce
        trigger = delay > self._qa_threshold and (self._ce_seen or not self._qa_needs_ce)
        if self._roll_window(now, trigger=trigger):
            return
        self._table[(ce, above)](self, now, acked_bytes, delay)
        self._clamp()

    def _track_noise(self, rtt_s: float) -> float:
        """Fold an unmarked RTT sample into the deviation estimate; return the deviation."""
        self._unmarked.update_rtt(rtt_s)
        return self._unmarked.rttvar

    def on_nack(self, now: float, nacked_bytes: int) -> None:
        if self.cfg.enabled:
            self.cwnd -= nacked_bytes
            self._clamp()

    def on_rto(self, now: float) -> None:
        if self.cfg.enabled:
            self._roll_window(now, trigger=True, force=True)

    # -- reactions -----------------------------------------------------------------------

    def _proportional_increase(self, now: float, acked: int, delay: float) -> None:
        if not self._validated:
            return
        headroom = (self.target - delay) / self.target if self.target > 0 else 0.0
        self.cwnd += self.cfg.proportional_gain * headroom * acked
        self._fair_increase(now, acked, delay)

    def _fair_increase(self, now: float, acked: int, delay: float) -> None:
        if not self._validated:
            return
        self.cwnd += self.cfg.fair_increase_bytes * acked / max(self.cwnd, 1.0)

    def _multiplicative_decrease(self, now: float, acked: int, delay: float) -> None:
        if now - self._last_md < self.base_rtt + self._target or delay <= 0:
            return
        excess = (delay - self._target) / delay
        self.cwnd *= max(1.0 - self.cfg.gamma * excess, 1.0 - self.cfg.max_md_fraction)
        self._last_md = now
        self.decreases += 1

    def _hold(self, now: float, acked: int, delay: float) -> None:
        pass

    def _roll_window(self, now: float, *, trigger: bool, force: bool = False) -> bool:
        """Close the quick-adapt window when it has ended (or ``force``); cut the window to
        the bytes delivered during it when ``trigger``. True if the window was cut."""
        if now < self._qa_window_end and not force:
            return False
        achieved, self._achieved = self._achieved, 0
        self._ce_seen = False
        started = self._qa_window_end > 0.0
        self._qa_window_end = now + self.base_rtt + self._target
        if trigger and (started or force) and achieved < self.cwnd:
            self.cwnd = float(achieved)
            self.quick_adapts += 1
            self._clamp()
            return True
        return False

    def _clamp(self) -> None:
        self.cwnd = min(max(self.cwnd, self.cfg.min_cwnd_bytes), self.cfg.max_cwnd_bytes)


REACTIONS_ECN: dict[tuple[bool, bool], Reaction] = {
    (False, False): NsccWindow._proportional_increase,
    (False, True): NsccWindow._fair_increase,
    (True, True): NsccWindow._multiplicative_decrease,
    (True, False): NsccWindow._hold,
}
REACTIONS_DELAY_ONLY: dict[tuple[bool, bool], Reaction] = {
    (False, False): NsccWindow._proportional_increase,
    (False, True): NsccWindow._multiplicative_decrease,
    (True, True): NsccWindow._multiplicative_decrease,
    (True, False): NsccWindow._hold,
}

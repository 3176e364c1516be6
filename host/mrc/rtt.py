"""The RFC 6298 smoothed RTT and RTT variation, in one place.

``srtt += (rtt - srtt) / 8`` and ``rttvar += (|srtt - rtt| - rttvar) / 4`` (the deviation
measured against the old ``srtt``); the first sample sets ``srtt`` and ``rttvar`` = that sample
times ``first_var`` (RFC 6298: 1/2). The sender's retransmission timeout, each EV's expected
RTT (RACK's deadlines, the spraying weights) and NSCC's optional noise target use it.
"""

from __future__ import annotations

RTT_GAIN = 1 / 8
RTTVAR_GAIN = 1 / 4


class RttEstimator:
    """Smoothed RTT and mean deviation in seconds; ``srtt`` 0 until the first sample.

    Args:
        first_var: ``rttvar`` after the first sample, as a fraction of it.
    """

    __slots__ = ("srtt", "rttvar", "_first_var")

    def __init__(self, first_var: float = 0.5) -> None:
        self.srtt = 0.0
        self.rttvar = 0.0
        self._first_var = first_var

    def update_rtt(self, rtt_s: float) -> None:
        """Fold one RTT sample (seconds) in."""
        if self.srtt == 0.0:
            self.srtt, self.rttvar = rtt_s, rtt_s * self._first_var
        else:
            self.rttvar += RTTVAR_GAIN * (abs(self.srtt - rtt_s) - self.rttvar)
            self.srtt += RTT_GAIN * (rtt_s - self.srtt)

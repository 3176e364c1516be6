"""The two-rate three-colour marker (RFC 2698) behind meters, computed exactly as BMv2 does.

BMv2 keeps one token bucket per rate, checked from the peak rate down: a packet that does not fit
the PIR bucket is RED (nothing is taken), one that fits PIR but not CIR is YELLOW (PIR tokens
taken), otherwise GREEN (both taken). Buckets start full; tokens accrue as
``int(now_us * rate)`` since time 0, capped at the burst size. Rates are in bytes (or packets)
per microsecond, bursts in bytes (or packets).
"""

from __future__ import annotations

from dataclasses import dataclass

from switch.pipeline.errors import Code, StateError

GREEN = 0
YELLOW = 1
RED = 2


@dataclass(frozen=True)
class MeterConfig:
    """Committed and peak rates (units per microsecond) and burst sizes (units)."""

    cir: float
    cburst: int
    pir: float
    pburst: int

    @classmethod
    def per_second(cls, cir: int, cburst: int, pir: int, pburst: int) -> MeterConfig:
        """From P4Runtime's units (rates per second), as PI's BMv2 back-end converts them."""
        return cls(cir / 1e6, cburst, pir / 1e6, pburst)

    def rates_per_second(self) -> tuple[int, int, int, int]:
        """(cir, cburst, pir, pburst) with rates per second, for P4Runtime reads."""
        return (round(self.cir * 1e6), self.cburst, round(self.pir * 1e6), self.pburst)


def check_config(owner: str, config: MeterConfig) -> MeterConfig:
    """INVALID_ARGUMENT unless rates and bursts are non-negative and CIR <= PIR."""
    if min(config.cir, config.pir) < 0 or min(config.cburst, config.pburst) < 0:
        raise StateError(Code.INVALID_ARGUMENT, f"{owner}: meter rates and bursts must be >= 0")
    if config.cir > config.pir:
        raise StateError(
            Code.INVALID_ARGUMENT,
            f"{owner}: committed rate {config.cir} exceeds peak rate {config.pir}",
        )
    return config


class _Bucket:
    __slots__ = ("rate", "burst", "tokens", "last", "colour")

    def __init__(self, rate: float, burst: int, colour: int) -> None:
        self.rate = rate
        self.burst = burst
        self.tokens = burst
        self.last = 0
        self.colour = colour


class MeterCell:
    """One configured meter instance: two buckets, PIR (RED on miss) then CIR (YELLOW)."""

    __slots__ = ("config", "_buckets")

    def __init__(self, config: MeterConfig) -> None:
        self.config = config
        self._buckets = (
            _Bucket(config.pir, config.pburst, RED),
            _Bucket(config.cir, config.cburst, YELLOW),
        )

    def execute(self, now_us: int, amount: int) -> int:
        """Colour of a packet of ``amount`` units (bytes, or 1 for packet meters) at ``now_us``."""
        for b in self._buckets:
            since = int(now_us * b.rate)
            if since > b.last:
                b.tokens = min(b.tokens + since - b.last, b.burst)
                b.last = since
            if b.tokens < amount:
                return b.colour
            b.tokens -= amount
        return GREEN

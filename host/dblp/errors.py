"""The DBLP layer's exceptions: one base class, one subclass per kind of failure."""

from __future__ import annotations


class DblpError(Exception):
    """Base class of every error the DBLP protocol and the collectives raise."""


class DblpWireError(DblpError):
    """A chunk or control message failed validation; ``reason`` names the check."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


class RoundFailed(DblpError):
    """A round could not complete: a peer stopped answering (timeout), its connection
    failed, or a peer aborted the round. The message names the round, the peer and why."""


class JobMismatch(DblpError):
    """A peer runs a different job (its HELLO carries another job fingerprint or rank)."""

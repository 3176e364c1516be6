"""The exceptions of DiLoCo jobs: one base class, one subclass per kind of failure."""

from __future__ import annotations

from typing import Any


class DilocoError(Exception):
    """Base class of every error the DiLoCo package raises."""


class ConfigError(DilocoError, ValueError):
    """A job configuration that cannot run; raised before anything starts (the message names
    the setting and what would be valid)."""


class ExchangeError(DilocoError):
    """Communication with a peer failed."""


class PeerFailed(ExchangeError):
    """A peer announced that it stopped (ABORT), or its connection failed.

    Attributes:
        rank, host: the peer.
        round: the round the peer was in when it stopped (-1: unknown).
    """

    def __init__(self, rank: int, host: int, round_: int, reason: str) -> None:
        super().__init__(f"peer rank {rank} (host {host}) stopped in round {round_}: {reason}")
        self.rank, self.host, self.round, self.reason = rank, host, round_, reason


class PeerTimeout(ExchangeError):
    """A message a blocking step needs did not arrive within the peer timeout."""


class SetupFailed(ExchangeError):
    """The connections of a worker could not be set up (a peer missing, another job)."""


class InjectedFault(DilocoError):
    """A fault the job's configuration asked for (a worker killed at a given round)."""


class WorkerFailed(DilocoError):
    """A worker of a job died or stopped; the first failure (the cause) names the worker.

    Attributes:
        rank, host: the worker.
        last_round: the last round it completed (-1: none).
        result: the whole job's partial result (every worker's records and outcome).
    """

    def __init__(self, rank: int, host: int, last_round: int, message: str, result: Any) -> None:
        super().__init__(message)
        self.rank, self.host, self.last_round, self.result = rank, host, last_round, result

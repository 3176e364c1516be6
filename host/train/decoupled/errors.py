"""The exceptions of Decoupled DiLoCo and elastic data-parallel jobs: one base class (a
:class:`~host.train.diloco.errors.DilocoError`, so callers of either package catch both), one
subclass per kind of failure."""

from __future__ import annotations

from host.train.diloco.errors import ConfigError as DilocoConfigError
from host.train.diloco.errors import DilocoError


class DecoupledError(DilocoError):
    """Base class of every error this package raises."""


class ConfigError(DecoupledError, DilocoConfigError):
    """A configuration that cannot run; raised before anything starts (the message names the
    setting and what would be valid)."""


class LinkError(DecoupledError):
    """A learner's or worker's connection to its syncer or coordinator could not be set up
    (nobody answered, the other side runs another job, or it refused this member)."""


class Killed(DecoupledError):
    """The incarnation of an emulated process was killed (chaos) or stopped at the end of the
    job; raised inside its own thread at the next point it looks."""


class RunFailed(DecoupledError):
    """A run's thread ended with an error of its own (not a chaos kill); the message names it
    and the error is chained."""


class CheckpointError(DecoupledError):
    """A checkpoint file that cannot be read back, or does not fit the model (the message
    names the file and why)."""

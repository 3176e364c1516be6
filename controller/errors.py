"""The controller's exceptions: one base class, one subclass per way things go wrong.

* :class:`CommandError` -- a bad ``tf-ctl`` command (unknown name, bad number); nothing was
  changed. The message lists the valid choices.
* :class:`SchemaError` -- a name or value that the P4Info does not allow.
* :class:`P4RuntimeError` -- an RPC failed; per-update errors of a Write (or Read) decoded from
  ``grpc-status-details-bin`` into :class:`UpdateError` values.
* :class:`FabricUnavailable` -- a switch or the ``tf-ctl serve`` process cannot be reached.
"""

from __future__ import annotations

from dataclasses import dataclass

from google.rpc import code_pb2

# google.rpc has no type information: the status codes the controller tells apart, as ints.
OK: int = code_pb2.OK
UNKNOWN: int = code_pb2.UNKNOWN
NOT_FOUND: int = code_pb2.NOT_FOUND
ALREADY_EXISTS: int = code_pb2.ALREADY_EXISTS


class ControllerError(Exception):
    """Base class of every error the controller raises on purpose."""


class CommandError(ControllerError):
    """A command that cannot run as given; the fabric is unchanged."""


class SchemaError(ControllerError, KeyError):
    """A table, action, field or value the pipeline's P4Info does not have or allow."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class FabricUnavailable(ControllerError):
    """A switch, or the controller server, does not answer."""


def code_name(code: int) -> str:
    """``ALREADY_EXISTS`` for 6; the number for codes google.rpc does not name."""
    return str(code_pb2.Code.Name(code)) if code in code_pb2.Code.values() else str(code)


@dataclass(frozen=True)
class UpdateError:
    """The outcome of one update of a batch (``code`` 0: it succeeded)."""

    index: int
    code: int
    message: str = ""
    space: str = ""

    @property
    def ok(self) -> bool:
        return self.code == OK

    def __str__(self) -> str:
        return f"#{self.index}: {code_name(self.code)}: {self.message}"


class P4RuntimeError(ControllerError):
    """A failed P4Runtime RPC, naming the operation and the switch.

    ``errors`` holds one :class:`UpdateError` per update of a failed Write (successes
    included, code 0), as the server reported them; empty when it sent no details.
    """

    def __init__(
        self, operation: str, code: str, message: str, errors: tuple[UpdateError, ...] = ()
    ) -> None:
        self.operation = operation
        self.code = code
        self.message = message
        self.errors = errors
        failed = self.failed
        text = f"{operation}: {code}: {message}"
        if failed:
            shown = "; ".join(str(e) for e in failed[:5])
            more = f" (+{len(failed) - 5} more)" if len(failed) > 5 else ""
            text = f"{operation}: {len(failed)} of {len(errors)} updates failed: {shown}{more}"
        super().__init__(text)

    @property
    def failed(self) -> tuple[UpdateError, ...]:
        return tuple(e for e in self.errors if not e.ok)

    def only(self, code: int) -> bool:
        """Whether every failed update failed with ``code`` (and at least one did)."""
        return bool(self.failed) and all(e.code == code for e in self.failed)

    @property
    def is_already_exists_only(self) -> bool:
        return self.only(ALREADY_EXISTS)

    @property
    def is_not_found_only(self) -> bool:
        return self.only(NOT_FOUND)

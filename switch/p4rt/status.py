"""P4Runtime error values: one failed update or read request, and the google.rpc.Status of a batch.

A handler raises :class:`P4RTError` with a google.rpc code; the server turns the errors of a
batch into the format of the P4Runtime specification ("Error Reporting Messages"): the RPC fails
with ``UNKNOWN`` and the ``grpc-status-details-bin`` trailer holds a ``google.rpc.Status`` whose
``details`` are one ``Any(p4.v1.Error)`` per update, in order, ``OK`` for those that succeeded.
"""

from __future__ import annotations

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2

from switch.errors import P4Error
from switch.p4info import P4InfoLookupError
from switch.pipeline.errors import StateError

OK = code_pb2.OK
UNKNOWN = code_pb2.UNKNOWN
INVALID_ARGUMENT = code_pb2.INVALID_ARGUMENT
NOT_FOUND = code_pb2.NOT_FOUND
ALREADY_EXISTS = code_pb2.ALREADY_EXISTS
PERMISSION_DENIED = code_pb2.PERMISSION_DENIED
RESOURCE_EXHAUSTED = code_pb2.RESOURCE_EXHAUSTED
FAILED_PRECONDITION = code_pb2.FAILED_PRECONDITION
OUT_OF_RANGE = code_pb2.OUT_OF_RANGE
UNIMPLEMENTED = code_pb2.UNIMPLEMENTED
INTERNAL = code_pb2.INTERNAL

#: The ``space`` of the ``p4.v1.Error`` messages this target reports.
ERROR_SPACE = "tailfabric-v1model"

DETAILS_KEY = "grpc-status-details-bin"

_GRPC_CODES = {sc.value[0]: sc for sc in grpc.StatusCode}


def grpc_code(code: int) -> grpc.StatusCode:
    """The ``grpc.StatusCode`` of a google.rpc code number."""
    return _GRPC_CODES.get(code, grpc.StatusCode.UNKNOWN)


def code_name(code: int) -> str:
    return str(code_pb2.Code.Name(code)) if code in code_pb2.Code.values() else str(code)


class P4RTError(Exception):
    """A request (or one update of it) that the server refuses, with its google.rpc code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{code_name(self.code)}: {self.message}"


def as_p4rt_error(exc: BaseException) -> P4RTError:
    """The P4Runtime view of an exception raised while serving a request."""
    if isinstance(exc, P4RTError):
        return exc
    if isinstance(exc, StateError):
        return P4RTError(int(exc.code), exc.message)
    if isinstance(exc, P4InfoLookupError):
        return P4RTError(INVALID_ARGUMENT, exc.message)
    if isinstance(exc, P4Error):
        return P4RTError(INVALID_ARGUMENT, exc.message)
    return P4RTError(INTERNAL, f"internal error: {type(exc).__name__}: {exc}")


def p4_error(error: P4RTError | None) -> p4runtime_pb2.Error:
    """The ``p4.v1.Error`` of one update: ``OK`` (and nothing else) when it succeeded."""
    if error is None:
        return p4runtime_pb2.Error(canonical_code=OK)
    return p4runtime_pb2.Error(canonical_code=error.code, message=error.message, space=ERROR_SPACE)


def batch_status(errors: list[P4RTError | None], what: str) -> status_pb2.Status:
    """``UNKNOWN`` with one detail per element of the batch (``what``: "Write" or "Read")."""
    failed = [e for e in errors if e is not None]
    summary = f"{what} failure: {len(failed)} of {len(errors)} failed"
    if failed:
        summary += f" (first: {failed[0]})"
    status = status_pb2.Status(code=UNKNOWN, message=summary)
    for e in errors:
        detail = any_pb2.Any()
        detail.Pack(p4_error(e))
        status.details.append(detail)
    return status

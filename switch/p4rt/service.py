"""The ``p4.v1.P4Runtime`` gRPC service of one :class:`~switch.device.device.Device`.

RPC-level checks follow the specification, in its order: an unknown ``device_id`` is NOT_FOUND
(as is a role no stream ever arbitrated for); a ``Write`` or ``SetForwardingPipelineConfig`` from
anyone but the primary of its (role, election id) is PERMISSION_DENIED; a ``Write`` or ``Read``
before any pipeline is FAILED_PRECONDITION ("No forwarding pipeline config set"); write
atomicity other than CONTINUE_ON_ERROR is UNIMPLEMENTED. Within a batch every update (or read
request) is tried; if any fails the RPC fails with UNKNOWN and the ``grpc-status-details-bin``
trailer carries one ``p4.v1.Error`` per update, in order (OK for the others), the format
p4runtime-shell parses. Every request runs with ``device.lock`` held, so a batch never interleaves
with a packet.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from switch.device.device import Device, Pipeline
from switch.p4rt.arbitration import Arbiter, election_id
from switch.p4rt.digests import DigestEngine
from switch.p4rt.entities import apply_update, read_entity
from switch.p4rt.idle import DEFAULT_POLL_S, IdleTimeoutEngine
from switch.p4rt.packet_io import packet_in_message, packet_out_values
from switch.p4rt.pipeline_config import PipelineConfigurator
from switch.p4rt.pipeline_view import PipelineMismatch, PipelineView, build_view
from switch.p4rt.status import (
    DETAILS_KEY,
    FAILED_PRECONDITION,
    INTERNAL,
    INVALID_ARGUMENT,
    NOT_FOUND,
    PERMISSION_DENIED,
    UNIMPLEMENTED,
    P4RTError,
    as_p4rt_error,
    batch_status,
    grpc_code,
)
from switch.p4rt.streams import CLOSE, Abort, StreamHandler, StreamSession, stream_error
from switch.p4rt.target import Extras, Target
from switch.pipeline.state import SwitchState

log = logging.getLogger(__name__)

#: The P4Runtime version this server implements (what PI's BMv2 server reports too).
P4RUNTIME_API_VERSION = "1.3.0"
READ_CHUNK = 1000  # entities per ReadResponse message
NO_PIPELINE = "No forwarding pipeline config set"


class _RpcStatus(
    collections.namedtuple("_RpcStatus", ("code", "details", "trailing_metadata")), grpc.Status
):
    """A final status with trailing metadata, for ``context.abort_with_status``."""


@dataclass
class ServiceStats:
    """What the service did and refused, for diagnostics and tests."""

    packet_outs: int = 0
    packet_out_errors: int = 0
    packet_ins: int = 0
    packet_in_drops: int = 0  # no primary, or its stream was full
    stream_errors: int = 0
    write_updates: int = 0
    write_errors: int = 0


class _EndStream(Exception):
    """The stream was aborted; stop reading it."""


class P4RuntimeService(p4runtime_pb2_grpc.P4RuntimeServicer):  # type: ignore[misc]
    """All RPCs of the P4Runtime service for one device."""

    def __init__(
        self, device: Device, *, digest_poll_s: float = 0.002, idle_poll_s: float = DEFAULT_POLL_S
    ) -> None:
        self.device = device
        self.arbiter = Arbiter(device.device_id)
        self.extras = Extras()
        self.stats = ServiceStats()
        self.digests = DigestEngine(device, self.arbiter, self.current_view, digest_poll_s)
        self.idle = IdleTimeoutEngine(device, self.arbiter, self.current_view, idle_poll_s)
        self.configurator = PipelineConfigurator(device, self._committed)
        self._view_lock = threading.Lock()
        self._view: tuple[Pipeline, PipelineView] | None = None
        self._sessions_lock = threading.Lock()
        self._sessions: set[StreamSession] = set()
        self._stopping = False
        self._stream_handlers: dict[str | None, StreamHandler] = {
            "arbitration": self._on_arbitration,
            "packet": self._on_packet_out,
            "digest_ack": self._on_digest_ack,
            "other": self._on_other,
            None: self._on_other,
        }

    # ----- pipeline views

    def view_for(self, pipeline: Pipeline) -> PipelineView:
        with self._view_lock:
            if self._view is not None and self._view[0] is pipeline:
                return self._view[1]
            try:
                view = build_view(pipeline.p4info, pipeline.program.schema)
            except PipelineMismatch as err:
                raise P4RTError(INTERNAL, f"the running pipeline is inconsistent: {err}") from None
            self._view = (pipeline, view)
            return view

    def current_view(self) -> PipelineView | None:
        pipeline = self.device.pipeline
        if pipeline is None:
            return None
        try:
            return self.view_for(pipeline)
        except P4RTError:
            return None

    def _committed(self, pipeline: Pipeline, view: PipelineView, kept_state: bool) -> None:
        """After a commit through P4Runtime (called with ``device.lock`` held)."""
        with self._view_lock:
            self._view = (pipeline, view)
        if self.device.state is not None:
            self.extras.bind(self.device.state, carry=kept_state)
            self.idle.bind(self.device.state)  # carried entries' idle timers start now

    def _target(self) -> Target:
        """The running pipeline as handlers see it (call with ``device.lock`` held)."""
        pipeline = self.device.pipeline
        state: SwitchState | None = self.device.state
        if pipeline is None or state is None:
            raise P4RTError(FAILED_PRECONDITION, NO_PIPELINE)
        self.extras.bind(state)  # a state committed by someone else starts without extras
        self.idle.bind(state)
        return Target(
            state,
            self.view_for(pipeline),
            self.extras,
            self.digests.config_changed,
            self.device.drop_cells,
            self.device.packet_totals,
            self.device.now_us,
        )

    # ----- checks shared by RPCs

    def _check_device(self, device_id: int) -> None:
        if device_id != self.device.device_id:
            raise P4RTError(
                NOT_FOUND,
                f"unknown device id {device_id} (this server serves "
                f"device {self.device.device_id})",
            )

    def _check_primary(self, request: Any) -> None:
        self._check_device(request.device_id)
        role = request.role
        if not self.arbiter.knows_role(role):
            raise P4RTError(NOT_FOUND, f"unknown role '{role}'")
        if not self.arbiter.is_primary(role, election_id(request)):
            raise P4RTError(PERMISSION_DENIED, "not the primary client for this device and role")

    @staticmethod
    def _abort(context: grpc.ServicerContext, err: P4RTError) -> None:
        context.abort(grpc_code(err.code), err.message)

    @staticmethod
    def _abort_batch(
        context: grpc.ServicerContext, errors: list[P4RTError | None], what: str
    ) -> None:
        status = batch_status(errors, what)
        context.abort_with_status(
            _RpcStatus(
                grpc.StatusCode.UNKNOWN,
                status.message,
                ((DETAILS_KEY, status.SerializeToString()),),
            )
        )

    # ----- unary RPCs

    def Capabilities(
        self, request: p4runtime_pb2.CapabilitiesRequest, context: grpc.ServicerContext
    ) -> p4runtime_pb2.CapabilitiesResponse:
        return p4runtime_pb2.CapabilitiesResponse(p4runtime_api_version=P4RUNTIME_API_VERSION)

    def SetForwardingPipelineConfig(
        self,
        request: p4runtime_pb2.SetForwardingPipelineConfigRequest,
        context: grpc.ServicerContext,
    ) -> p4runtime_pb2.SetForwardingPipelineConfigResponse:
        try:
            self._check_primary(request)
            self.configurator.set(request)
        except Exception as exc:
            self._abort(context, self._logged(exc))
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def GetForwardingPipelineConfig(
        self,
        request: p4runtime_pb2.GetForwardingPipelineConfigRequest,
        context: grpc.ServicerContext,
    ) -> p4runtime_pb2.GetForwardingPipelineConfigResponse:
        try:
            self._check_device(request.device_id)
            return self.configurator.get(request)
        except Exception as exc:
            self._abort(context, self._logged(exc))
            raise  # unreachable: abort raises

    def Write(
        self, request: p4runtime_pb2.WriteRequest, context: grpc.ServicerContext
    ) -> p4runtime_pb2.WriteResponse:
        errors: list[P4RTError | None] = []
        try:
            self._check_primary(request)
            if request.atomicity != p4runtime_pb2.WriteRequest.CONTINUE_ON_ERROR:
                raise P4RTError(UNIMPLEMENTED, "only CONTINUE_ON_ERROR batches are implemented")
            with self.device.lock:
                target = self._target()
                for update in request.updates:
                    try:
                        apply_update(target, update)
                        errors.append(None)
                    except Exception as exc:
                        errors.append(self._logged(exc))
        except Exception as exc:
            self._abort(context, self._logged(exc))
        self.stats.write_updates += len(errors)
        failed = sum(e is not None for e in errors)
        if failed:
            self.stats.write_errors += failed
            self._abort_batch(context, errors, "Write")
        return p4runtime_pb2.WriteResponse()

    def Read(
        self, request: p4runtime_pb2.ReadRequest, context: grpc.ServicerContext
    ) -> Iterator[p4runtime_pb2.ReadResponse]:
        entities: list[p4runtime_pb2.Entity] = []
        errors: list[P4RTError | None] = []
        try:
            self._check_device(request.device_id)
            with self.device.lock:
                target = self._target()
                for entity in request.entities:
                    try:
                        entities.extend(read_entity(target, entity))
                        errors.append(None)
                    except Exception as exc:
                        errors.append(self._logged(exc))
        except Exception as exc:
            self._abort(context, self._logged(exc))
        for start in range(0, max(len(entities), 1), READ_CHUNK):
            yield p4runtime_pb2.ReadResponse(entities=entities[start : start + READ_CHUNK])
        if any(e is not None for e in errors):
            self._abort_batch(context, errors, "Read")

    @staticmethod
    def _logged(exc: BaseException) -> P4RTError:
        err = as_p4rt_error(exc)
        if err.code == INTERNAL:
            log.error("P4Runtime request failed", exc_info=exc)
        return err

    # ----- StreamChannel

    def StreamChannel(
        self,
        request_iterator: Iterator[p4runtime_pb2.StreamMessageRequest],
        context: grpc.ServicerContext,
    ) -> Iterator[p4runtime_pb2.StreamMessageResponse]:
        session = StreamSession(context.peer())
        with self._sessions_lock:
            if self._stopping:
                context.abort(grpc.StatusCode.UNAVAILABLE, "the server is stopping")
            self._sessions.add(session)
        context.add_callback(session.close)
        reader = threading.Thread(
            target=self._read_stream,
            args=(session, request_iterator),
            name="p4rt-stream-reader",
            daemon=True,
        )
        reader.start()
        try:
            while True:
                item = session.queue.get()
                if item is CLOSE:
                    return
                if isinstance(item, Abort):
                    context.abort(grpc_code(item.code), item.message)
                yield item
        finally:
            session.closed = True
            self.arbiter.remove(session)
            with self._sessions_lock:
                self._sessions.discard(session)

    def _read_stream(
        self, session: StreamSession, requests: Iterator[p4runtime_pb2.StreamMessageRequest]
    ) -> None:
        try:
            for req in requests:
                if session.closed:
                    break
                handler = self._stream_handlers.get(req.WhichOneof("update"), self._on_other)
                try:
                    handler(session, req)
                except _EndStream:
                    return
                except Exception as exc:
                    err = self._logged(exc)
                    self.stats.stream_errors += 1
                    session.send(stream_error(err.code, err.message, req))
        except Exception:  # the client went away or cancelled: nothing to answer
            pass
        session.close()

    def _on_arbitration(
        self, session: StreamSession, req: p4runtime_pb2.StreamMessageRequest
    ) -> None:
        try:
            self.arbiter.arbitrate(session, req.arbitration)
        except P4RTError as err:
            session.abort(err.code, err.message)
            raise _EndStream from None

    def _on_packet_out(
        self, session: StreamSession, req: p4runtime_pb2.StreamMessageRequest
    ) -> None:
        try:
            if not self.arbiter.is_primary_stream(session):
                raise P4RTError(PERMISSION_DENIED, "only the primary client may send packets")
            if self.device.cpu_port is None:  # fixed at start: refused without the lock,
                # which would wake the data path for nothing
                raise P4RTError(FAILED_PRECONDITION, "the device has no CPU port")
            with self.device.lock:
                pipeline = self.device.pipeline
                if pipeline is None or self.device.state is None:
                    raise P4RTError(FAILED_PRECONDITION, NO_PIPELINE)
                values = packet_out_values(self.view_for(pipeline), req.packet)
                self.device.packet_out(req.packet.payload, values)
            self.device.wakeup.set()
            self.stats.packet_outs += 1
        except Exception as exc:
            err = self._logged(exc)
            self.stats.packet_out_errors += 1
            self.stats.stream_errors += 1
            session.send(stream_error(err.code, err.message, req))

    def _on_digest_ack(
        self, session: StreamSession, req: p4runtime_pb2.StreamMessageRequest
    ) -> None:
        ack = req.digest_ack
        if not self.digests.ack(ack.digest_id, ack.list_id):
            self.stats.stream_errors += 1
            session.send(stream_error(INVALID_ARGUMENT, f"unknown digest id {ack.digest_id}", req))

    def _on_other(self, session: StreamSession, req: p4runtime_pb2.StreamMessageRequest) -> None:
        self.stats.stream_errors += 1
        what = (
            "an empty stream message"
            if req.WhichOneof("update") is None
            else f"stream message '{req.other.type_url}'"
        )
        session.send(stream_error(UNIMPLEMENTED, f"{what} is not supported", req))

    # ----- packet-in (called by the data path)

    def on_packet_in(self, payload: bytes, values: dict[int, int]) -> None:
        sink = self.arbiter.primary_sink()
        view = self.current_view()
        if sink is None or view is None:
            self.stats.packet_in_drops += 1
            return
        if sink.send(packet_in_message(view, payload, values), droppable=True):
            self.stats.packet_ins += 1
        else:
            self.stats.packet_in_drops += 1

    # ----- lifecycle

    def shutdown(self) -> None:
        """End every stream and stop the digest and idle-timeout threads."""
        with self._sessions_lock:
            self._stopping = True
            sessions = list(self._sessions)
        for s in sessions:
            s.close()
        self.digests.stop()
        self.idle.stop()

"""``SetForwardingPipelineConfig`` and ``GetForwardingPipelineConfig`` for one device.

The ``p4_device_config`` of this target is the JSON envelope of :mod:`switch.compile.package`
(the P4 source); verifying a config compiles it (errors are INVALID_ARGUMENT with the
``file:line:col`` message), checks that the given P4Info describes the compiled program (its ids
may be the controller's own) and builds a switch from it. Actions:

* VERIFY: only that.
* VERIFY_AND_SAVE: keep it as ``device.saved``; the running pipeline is untouched.
* VERIFY_AND_COMMIT: run it with empty forwarding state.
* COMMIT: run the saved config, keeping the forwarding state that is still valid in it (that is
  the specification's "replay of the writes since the save"); NOT_FOUND without a saved config,
  INVALID_ARGUMENT if the request carries a config.
* RECONCILE_AND_COMMIT: run it, keeping the forwarding state that is still valid in it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from switch.compile import CompiledProgram
from switch.compile.package import load_device_config
from switch.device.device import Device, Pipeline
from switch.errors import P4Error
from switch.p4rt.pipeline_view import PipelineMismatch, PipelineView, build_view
from switch.p4rt.status import INVALID_ARGUMENT, NOT_FOUND, P4RTError, as_p4rt_error
from switch.pipeline.v1model import V1Switch

Request: TypeAlias = p4runtime_pb2.SetForwardingPipelineConfigRequest
GetRequest: TypeAlias = p4runtime_pb2.GetForwardingPipelineConfigRequest


def verify(config: p4runtime_pb2.ForwardingPipelineConfig) -> tuple[Pipeline, PipelineView]:
    """Compile and check a config; INVALID_ARGUMENT says what is wrong with it."""
    if not config.HasField("p4info"):
        raise P4RTError(INVALID_ARGUMENT, "the config has no P4Info")
    if not config.p4_device_config:
        raise P4RTError(INVALID_ARGUMENT, "the config has no p4_device_config")
    try:
        program: CompiledProgram = load_device_config(config.p4_device_config)
    except P4Error as err:
        raise P4RTError(INVALID_ARGUMENT, err.render()) from None
    try:
        view = build_view(config.p4info, program.schema)
    except PipelineMismatch as err:
        raise P4RTError(INVALID_ARGUMENT, str(err)) from None
    try:
        V1Switch(program)
    except Exception as err:  # the pipeline refuses the program (e.g. an unsupported table)
        e = as_p4rt_error(err)
        raise P4RTError(INVALID_ARGUMENT, f"the program cannot run: {e.message}") from None
    p4info = p4info_pb2.P4Info()
    p4info.CopyFrom(config.p4info)
    cookie = config.cookie.cookie if config.HasField("cookie") else 0
    return Pipeline(program, p4info, bytes(config.p4_device_config), cookie), view


class PipelineConfigurator:
    """The two pipeline RPCs; ``on_commit(pipeline, view, kept_state)`` follows every commit."""

    def __init__(
        self, device: Device, on_commit: Callable[[Pipeline, PipelineView, bool], None]
    ) -> None:
        self.device = device
        self.on_commit = on_commit
        self._saved_view: tuple[Pipeline, PipelineView] | None = None

    def set(self, request: Request) -> None:
        action = request.action
        if action == Request.COMMIT:
            self._commit_saved(request)
            return
        if action not in (
            Request.VERIFY,
            Request.VERIFY_AND_SAVE,
            Request.VERIFY_AND_COMMIT,
            Request.RECONCILE_AND_COMMIT,
        ):
            raise P4RTError(
                INVALID_ARGUMENT, f"unknown SetForwardingPipelineConfig action {action}"
            )
        if not request.HasField("config"):
            raise P4RTError(INVALID_ARGUMENT, "the request has no config")
        pipeline, view = verify(request.config)
        if action == Request.VERIFY:
            return
        if action == Request.VERIFY_AND_SAVE:
            with self.device.lock:
                self.device.saved = pipeline
                self._saved_view = (pipeline, view)
            return
        self._commit(pipeline, view, keep=action == Request.RECONCILE_AND_COMMIT)

    def _commit(self, pipeline: Pipeline, view: PipelineView, *, keep: bool) -> None:
        # Device.commit takes the device lock itself and calls its on_pipeline_change hook
        # without it, so it is not called with the lock held here.
        self.device.commit(pipeline, keep_state=keep)
        with self.device.lock:
            if self.device.saved is pipeline or not keep:
                self.device.saved = None
                self._saved_view = None
            self.on_commit(pipeline, view, keep)

    def _commit_saved(self, request: Request) -> None:
        if request.HasField("config"):
            raise P4RTError(INVALID_ARGUMENT, "COMMIT takes no config; it commits the saved one")
        with self.device.lock:
            saved = self.device.saved
            known = self._saved_view
        if saved is None:
            raise P4RTError(
                NOT_FOUND, "there is no saved config to commit (VERIFY_AND_SAVE one first)"
            )
        if known is not None and known[0] is saved:
            view = known[1]
        else:
            try:
                view = build_view(saved.p4info, saved.program.schema)
            except PipelineMismatch as err:
                raise P4RTError(INVALID_ARGUMENT, str(err)) from None
        self._commit(saved, view, keep=True)

    def get(self, request: GetRequest) -> p4runtime_pb2.GetForwardingPipelineConfigResponse:
        rtype = request.response_type
        if rtype not in (
            GetRequest.ALL,
            GetRequest.COOKIE_ONLY,
            GetRequest.P4INFO_AND_COOKIE,
            GetRequest.DEVICE_CONFIG_AND_COOKIE,
        ):
            raise P4RTError(INVALID_ARGUMENT, f"unknown response_type {rtype}")
        rep = p4runtime_pb2.GetForwardingPipelineConfigResponse()
        with self.device.lock:
            pipeline = self.device.pipeline
        if pipeline is None:
            return rep  # no pipeline: the config field stays unset, as the specification says
        config = rep.config
        config.cookie.cookie = pipeline.cookie
        if rtype in (GetRequest.ALL, GetRequest.P4INFO_AND_COOKIE):
            config.p4info.CopyFrom(pipeline.p4info)
        if rtype in (GetRequest.ALL, GetRequest.DEVICE_CONFIG_AND_COOKIE):
            config.p4_device_config = pipeline.device_config
        return rep

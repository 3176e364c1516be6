"""SetForwardingPipelineConfig / GetForwardingPipelineConfig / Capabilities over gRPC."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2
from p4rt_helpers import (
    DEVICE_ID,
    INSERT,
    Harness,
    exact_entry,
    full_config,
    full_p4info,
    packet,
    running,
    tid,
    uint128,
    update,
)

from switch.compile.package import load_device_config, make_device_config
from switch.device.device import Pipeline
from switch.p4info import build_p4info

SFP = p4runtime_pb2.SetForwardingPipelineConfigRequest
GFP = p4runtime_pb2.GetForwardingPipelineConfigRequest
ERRORS = Path(__file__).resolve().parents[1] / "p4err"


def rpc_error(fn: object, *args: object) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as err:
        fn(*args)  # type: ignore[operator]
    return err.value


def get(h: Harness, rtype: int = GFP.ALL) -> p4runtime_pb2.GetForwardingPipelineConfigResponse:
    return h.stub.GetForwardingPipelineConfig(GFP(device_id=DEVICE_ID, response_type=rtype))


def n_entries(h: Harness) -> int:
    return len(
        h.read(
            p4runtime_pb2.Entity(
                table_entry=p4runtime_pb2.TableEntry(table_id=tid("MyIngress.t_exact"))
            )
        )
    )


def test_capabilities() -> None:
    with running(primary=False, pipeline=False) as h:
        rep = h.stub.Capabilities(p4runtime_pb2.CapabilitiesRequest())
        assert rep.p4runtime_api_version == "1.3.0"


def test_get_honours_response_type() -> None:
    with running(pipeline=False) as h:
        assert not get(h).HasField("config")  # nothing committed yet
        h.set_pipeline(cookie=42)
        full = get(h).config
        assert full.p4info == full_p4info() and full.p4_device_config and full.cookie.cookie == 42
        cookie = get(h, GFP.COOKIE_ONLY).config
        assert cookie.cookie.cookie == 42 and not cookie.HasField("p4info")
        assert not cookie.p4_device_config
        p4info = get(h, GFP.P4INFO_AND_COOKIE).config
        assert p4info.HasField("p4info") and not p4info.p4_device_config
        dev = get(h, GFP.DEVICE_CONFIG_AND_COOKIE).config
        assert dev.p4_device_config and not dev.HasField("p4info")
        bad = rpc_error(h.stub.GetForwardingPipelineConfig, GFP(device_id=DEVICE_ID + 1))
        assert bad.code() == grpc.StatusCode.NOT_FOUND


def test_compile_errors_are_invalid_argument_with_a_position() -> None:
    with running(pipeline=False) as h:
        cfg = make_device_config(ERRORS / "unknown_variable.p4")
        err = rpc_error(h.set_pipeline, 1, SFP.VERIFY_AND_COMMIT, None, cfg)
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "unknown_variable.p4:" in (err.details() or "")
        bmv2 = json.dumps({"header_types": [], "pipelines": []}).encode()
        err = rpc_error(h.set_pipeline, 1, SFP.VERIFY_AND_COMMIT, None, bmv2)
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "BMv2 JSON" in (err.details() or "") and "tf-p4 compile" in (err.details() or "")
        assert h.device.pipeline is None


def test_p4info_must_match_the_program() -> None:
    with running(pipeline=False) as h:
        wrong_width = full_p4info()
        wrong_width.tables[0].match_fields[0].bitwidth = 9
        err = rpc_error(h.set_pipeline, 1, SFP.VERIFY, wrong_width)
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "hdr.h.kind" in (err.details() or "")
        unknown = full_p4info()
        unknown.tables[0].preamble.name = "MyIngress.nope"
        assert (
            rpc_error(h.set_pipeline, 1, SFP.VERIFY, unknown).code()
            == grpc.StatusCode.INVALID_ARGUMENT
        )
        params = full_p4info()
        next(a for a in params.actions if a.params).params[0].bitwidth = 10
        assert (
            rpc_error(h.set_pipeline, 1, SFP.VERIFY, params).code()
            == grpc.StatusCode.INVALID_ARGUMENT
        )
        h.set_pipeline(action=SFP.VERIFY)
        assert h.device.pipeline is None  # VERIFY changes nothing


def _renumbered(info: p4info_pb2.P4Info) -> p4info_pb2.P4Info:
    """The same P4Info with every object id, match field id and parameter id changed."""
    out = p4info_pb2.P4Info()
    out.CopyFrom(info)
    mapping: dict[int, int] = {}
    for kind in (
        "tables",
        "actions",
        "action_profiles",
        "counters",
        "direct_counters",
        "meters",
        "direct_meters",
        "controller_packet_metadata",
        "value_sets",
        "registers",
        "digests",
    ):
        for obj in getattr(out, kind):
            old = obj.preamble.id
            mapping[old] = (old & 0xFF000000) | ((old + 0x123) & 0xFFFFFF)
            obj.preamble.id = mapping[old]
    assert len(set(mapping.values())) == len(mapping)
    for t in out.tables:
        for mf in t.match_fields:
            mf.id += 10
        for ref in t.action_refs:
            ref.id = mapping[ref.id]
        if t.const_default_action_id:
            t.const_default_action_id = mapping[t.const_default_action_id]
        t.initial_default_action.action_id = mapping[t.initial_default_action.action_id]
        if t.implementation_id:
            t.implementation_id = mapping[t.implementation_id]
        t.direct_resource_ids[:] = [mapping[i] for i in t.direct_resource_ids]
    for a in out.actions:
        for p in a.params:
            p.id += 20
    for ap in out.action_profiles:
        ap.table_ids[:] = [mapping[i] for i in ap.table_ids]
    for d in list(out.direct_counters) + list(out.direct_meters):
        d.direct_table_id = mapping[d.direct_table_id]
    for cpm in out.controller_packet_metadata:
        for md in cpm.metadata:
            md.id += 30
    return out


def test_the_controllers_own_ids_are_used() -> None:
    with running(pipeline=False) as h:
        info = _renumbered(full_p4info())
        h.set_pipeline(p4info=info)
        table = next(t for t in info.tables if t.preamble.name == "MyIngress.t_exact")
        action = next(a for a in info.actions if a.preamble.name == "MyIngress.fwd")
        te = p4runtime_pb2.TableEntry(table_id=table.preamble.id)
        te.match.add(field_id=11, exact={"value": b"\x04"})
        te.action.action.action_id = action.preamble.id
        te.action.action.params.add(param_id=21, value=b"\x09")
        h.write(update(INSERT, table_entry=te))
        [got] = h.read(
            p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(table_id=table.preamble.id))
        )
        assert got.table_entry == te
        with pytest.raises(grpc.RpcError):  # the program's own ids are not the controller's
            h.write(update(INSERT, table_entry=exact_entry(5, "MyIngress.drop")))
        with h.device.lock:
            h.device.receive(1, packet(kind=4))
            [(port, _)] = h.device.service_queues()
        assert port == 9


def test_commit_variants_and_forwarding_state() -> None:
    with running() as h:
        h.write(update(INSERT, table_entry=exact_entry(1, "MyIngress.drop")))
        h.set_pipeline(action=SFP.VERIFY_AND_SAVE, cookie=7)
        assert n_entries(h) == 1 and get(h).config.cookie.cookie == 0
        h.stub.SetForwardingPipelineConfig(
            SFP(device_id=DEVICE_ID, election_id=uint128(1), action=SFP.COMMIT)
        )
        assert get(h).config.cookie.cookie == 7
        assert n_entries(h) == 1  # COMMIT keeps what is still valid
        err = rpc_error(
            h.stub.SetForwardingPipelineConfig,
            SFP(device_id=DEVICE_ID, election_id=uint128(1), action=SFP.COMMIT),
        )
        assert err.code() == grpc.StatusCode.NOT_FOUND  # nothing saved any more
        h.set_pipeline(action=SFP.RECONCILE_AND_COMMIT)
        assert n_entries(h) == 1
        h.set_pipeline(action=SFP.VERIFY_AND_COMMIT)
        assert n_entries(h) == 0  # VERIFY_AND_COMMIT clears the forwarding state
        with_config = SFP(device_id=DEVICE_ID, election_id=uint128(1), action=SFP.COMMIT)
        with_config.config.cookie.cookie = 1
        assert (
            rpc_error(h.stub.SetForwardingPipelineConfig, with_config).code()
            == grpc.StatusCode.INVALID_ARGUMENT
        )
        for bad in (
            SFP(device_id=DEVICE_ID, election_id=uint128(1), action=SFP.VERIFY_AND_COMMIT),
            SFP(device_id=DEVICE_ID, election_id=uint128(1), action=SFP.UNSPECIFIED),
        ):
            assert (
                rpc_error(h.stub.SetForwardingPipelineConfig, bad).code()
                == grpc.StatusCode.INVALID_ARGUMENT
            )


def test_only_the_primary_sets_the_pipeline() -> None:
    with running(pipeline=False) as h:
        assert rpc_error(h.set_pipeline, 2).code() == grpc.StatusCode.PERMISSION_DENIED
        backup = h.stream()
        assert backup.arbitrate(0).status.code != 0
        assert rpc_error(h.set_pipeline, 0).code() == grpc.StatusCode.PERMISSION_DENIED
        no_id = SFP(device_id=DEVICE_ID, action=SFP.VERIFY)
        no_id.config.p4info.CopyFrom(full_p4info())
        assert (
            rpc_error(h.stub.SetForwardingPipelineConfig, no_id).code()
            == grpc.StatusCode.PERMISSION_DENIED
        )


def test_a_pipeline_committed_without_p4runtime_is_served() -> None:
    with running(pipeline=False) as h:
        program = load_device_config(full_config())
        h.device.commit(Pipeline(program, build_p4info(program.schema), full_config(), 9))
        h.write(update(INSERT, table_entry=exact_entry(1, "MyIngress.drop")))
        assert n_entries(h) == 1
        assert get(h, GFP.COOKIE_ONLY).config.cookie.cookie == 9

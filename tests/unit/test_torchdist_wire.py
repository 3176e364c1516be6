"""The ``tailfabric`` backend's message header: round trips, and every malformed message
refused with a reason (nothing from the wire is trusted, nothing is unpickled)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from host.torchdist.mesh import MeshConfig
from host.torchdist.wire import (
    HEADER,
    HEADER_BYTES,
    MAGIC,
    Header,
    Kind,
    Op,
    WireError,
    decode_header,
    encode,
)


def test_header_round_trips_with_its_payload() -> None:
    h = Header(
        Kind.COLLECTIVE,
        3,
        4,
        seq=2**40,
        step=5,
        piece=1,
        op=Op.ALLREDUCE,
        dtype=4,
        redop=2,
        total=999,
    )
    msg = encode(h, b"abc")
    got = decode_header(msg)
    assert got == Header(**{**h.__dict__, "nbytes": 3})
    assert msg[HEADER_BYTES:] == b"abc"


def _raw(**over: int | bytes) -> bytes:
    fields = dict(
        magic=MAGIC,
        version=1,
        kind=2,
        op=1,
        dtype=1,
        redop=0,
        src=0,
        world=2,
        seq=0,
        step=0,
        piece=0,
        nbytes=0,
        total=0,
    )
    fields.update(over)
    return HEADER.pack(*fields.values())


@pytest.mark.parametrize(
    ("msg", "reason"),
    [
        (b"TFPG", "shorter than"),
        (_raw(magic=b"XXXX"), "bad magic"),
        (_raw(version=9), "version 9"),
        (_raw(kind=77), "unknown message kind"),
        (_raw(op=99), "unknown collective"),
        (_raw(dtype=200), "unknown dtype"),
        (_raw(nbytes=5), "payload bytes"),
    ],
)
def test_malformed_headers_are_refused_with_a_reason(msg: bytes, reason: str) -> None:
    with pytest.raises(WireError, match=reason):
        decode_header(msg)


@given(st.binary(max_size=120))
def test_random_bytes_decode_or_raise_wire_error(data: bytes) -> None:
    try:
        decode_header(data)
    except WireError:
        pass


@given(st.binary(max_size=60))
def test_random_payload_after_a_valid_header_decodes_when_lengths_agree(data: bytes) -> None:
    h = decode_header(_raw(nbytes=len(data)) + data)
    assert h.nbytes == len(data)


@pytest.mark.parametrize(
    ("env", "reason"),
    [
        ({"TAILFABRIC_TOPOLOGY": "t.json"}, "set both"),
        ({"TAILFABRIC_PEER_TIMEOUT_S": "soon"}, "number of seconds"),
        ({"TAILFABRIC_PEER_TIMEOUT_S": "-1"}, "> 0"),
        ({"TAILFABRIC_PLANES": "9"}, "1..8"),
        ({"TAILFABRIC_HOST_RTT_MS": "fast"}, "milliseconds"),
        ({"TAILFABRIC_HOST_RTT_MS": "-5"}, "0..1000"),
        ({"TAILFABRIC_RING_PIECE_KIB": "0"}, "1..4096"),
        ({"TAILFABRIC_RING_PIECE_KIB": "1.5"}, "integers"),
        ({"TAILFABRIC_QA_MS": "-1"}, "0..60000"),
        ({"TAILFABRIC_PACING": "x"}, "TAILFABRIC_PACING and TAILFABRIC_CC_NOISE numbers"),
        ({"TAILFABRIC_CC_NOISE": "-1"}, "0..100"),
        ({"TAILFABRIC_QA_CE": "yes"}, "TAILFABRIC_QA_CE 0 or 1"),
        ({"TAILFABRIC_SHARE_VERDICTS": "on"}, "TAILFABRIC_SHARE_VERDICTS 0 or 1"),
    ],
)
def test_bad_settings_in_the_environment_are_refused(env: dict[str, str], reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        MeshConfig.from_env(env)


def test_settings_from_the_environment() -> None:
    cfg = MeshConfig.from_env({"TAILFABRIC_PEER_TIMEOUT_S": "2.5", "TAILFABRIC_PLANES": "3"})
    assert (cfg.peer_timeout_s, cfg.loopback_planes, cfg.topology) == (2.5, 3, None)
    cfg = MeshConfig.from_env({"TAILFABRIC_HOST_RTT_MS": "7.5", "TAILFABRIC_RING_PIECE_KIB": "16"})
    assert (cfg.host_rtt_ms, cfg.ring_piece_bytes) == (7.5, 16 * 1024)
    cfg = MeshConfig.from_env({"TAILFABRIC_QA_MS": "500", "TAILFABRIC_PACING": "2"})
    assert (cfg.qa_threshold_ms, cfg.pacing_gain) == (500.0, 2.0)
    cfg = MeshConfig.from_env({"TAILFABRIC_CC_NOISE": "0", "TAILFABRIC_QA_CE": "0"})
    assert (cfg.noise_target_gain, cfg.qa_needs_ce) == (0.0, False)
    assert not MeshConfig.from_env({}).share_verdicts
    assert MeshConfig.from_env({"TAILFABRIC_SHARE_VERDICTS": "1"}).share_verdicts

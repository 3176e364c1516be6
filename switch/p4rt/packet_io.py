"""Packet I/O messages: ``PacketOut`` metadata to header values, header values to ``PacketIn``.

The device numbers the fields of a controller header 1..n in declaration order; the controller's
P4Info may give them other ids, so both directions go through the pipeline view. A ``PacketOut``
must carry exactly one value per ``packet_out`` metadata field, each fitting its width ("Packet
I/O" section of the specification); anything else is refused with INVALID_ARGUMENT (or
OUT_OF_RANGE for a value that does not fit) and the packet is dropped.
"""

from __future__ import annotations

from p4.v1 import p4runtime_pb2

from switch.p4rt.bytestrings import decode_uint, encode_uint
from switch.p4rt.pipeline_view import PipelineView
from switch.p4rt.status import INVALID_ARGUMENT, P4RTError

MAX_PAYLOAD_BYTES = 65536


def packet_out_values(view: PipelineView, pkt: p4runtime_pb2.PacketOut) -> dict[int, int]:
    """The ``packet_out`` header values (field number -> value) of a ``PacketOut``."""
    if len(pkt.payload) > MAX_PAYLOAD_BYTES:
        raise P4RTError(INVALID_ARGUMENT, f"payload is longer than {MAX_PAYLOAD_BYTES} bytes")
    pmv = view.packet_out
    if pmv is None:
        if len(pkt.metadata):
            raise P4RTError(INVALID_ARGUMENT, "the P4Info has no packet_out metadata")
        return {}
    values: dict[int, int] = {}
    for md in pkt.metadata:
        hit = pmv.by_id.get(md.metadata_id)
        if hit is None:
            raise P4RTError(INVALID_ARGUMENT, f"unknown packet_out metadata id {md.metadata_id}")
        number, width = hit
        if number in values:
            raise P4RTError(
                INVALID_ARGUMENT, f"packet_out metadata id {md.metadata_id} is given twice"
            )
        values[number] = decode_uint(md.value, width, f"packet_out metadata {md.metadata_id}")
    missing = sorted(mid for n, mid in pmv.ids.items() if n not in values)
    if missing:
        raise P4RTError(INVALID_ARGUMENT, f"packet_out metadata id(s) {missing} are missing")
    return values


def packet_in_message(
    view: PipelineView, payload: bytes, values: dict[int, int]
) -> p4runtime_pb2.StreamMessageResponse:
    """The ``PacketIn`` for a frame the device sent to its CPU port."""
    msg = p4runtime_pb2.StreamMessageResponse()
    msg.packet.payload = payload
    pmv = view.packet_in
    if pmv is not None:
        for number in sorted(values):
            mid = pmv.ids.get(number)
            if mid is not None:
                msg.packet.metadata.add(metadata_id=mid, value=encode_uint(values[number]))
    return msg

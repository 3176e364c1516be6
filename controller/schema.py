"""Names to ids and back: controller entities <-> P4Runtime messages, through a P4Info.

:class:`Schema` wraps a P4Info (read from a file by :func:`load_p4info`, or fetched from a
switch) and encodes :mod:`controller.entries` values into ``p4.v1`` messages and decodes
read-back messages into them. Every name is resolved in the P4Info (by full name or alias,
with a "did you mean" on failure) and every value is checked against its bit width, so an
id is never written down anywhere in the controller.

Byte strings are sent padded to the full width of their field (``ceil(bitwidth / 8)`` bytes),
which P4Runtime servers accept whether they want canonical strings or not (BMv2's PI has long
asked for the padded form); replies are decoded as integers, so either form reads back the same.
An LPM field with prefix length 0 is left out of the match (the P4Runtime wildcard).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from google.protobuf import json_format, text_format
from google.protobuf.message import DecodeError
from p4.config.v1 import p4info_pb2
from p4.v1 import p4data_pb2, p4runtime_pb2

from controller.entries import ActionCall, Entity, Exact, Group, Lpm, Member, TableEntry
from controller.errors import SchemaError
from switch.p4info import P4InfoIndex

TEXT_SUFFIXES = (".txt", ".txtpb", ".pb.txt", ".txtproto", ".prototxt")
MatchField = p4info_pb2.MatchField


def load_p4info(path: str | Path) -> p4info_pb2.P4Info:
    """A P4Info from a text-format (``.txt``/``.txtpb``), JSON (``.json``) or binary file.

    Raises:
        SchemaError: the file is missing or holds no P4Info.
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise SchemaError(f"cannot read P4Info {p}: {e.strerror}") from None
    info = p4info_pb2.P4Info()
    try:
        if p.name.endswith(".json"):
            json_format.Parse(data.decode(), info)
        elif p.name.endswith(TEXT_SUFFIXES):
            text_format.Parse(data.decode(), info)
        else:
            try:
                info.ParseFromString(data)
            except DecodeError:
                text_format.Parse(data.decode(), info)
    except (text_format.ParseError, json_format.ParseError, DecodeError, UnicodeDecodeError) as e:
        raise SchemaError(f"{p}: not a P4Info ({e})") from None
    if not info.tables and not info.actions:
        raise SchemaError(f"{p}: the P4Info has no tables and no actions")
    return info


def pipeline_cookie(p4info: p4info_pb2.P4Info, device_config: bytes) -> int:
    """A 64-bit cookie that identifies (P4Info, device config): the pushed pipeline's name."""
    h = hashlib.sha256(p4info.SerializeToString(deterministic=True) + device_config)
    return int.from_bytes(h.digest()[:8], "big")


def _bytes(value: int, width: int, what: str) -> bytes:
    if value < 0 or value >> width:
        raise SchemaError(f"{what}: {value} does not fit in {width} bits")
    return value.to_bytes(max(1, (width + 7) // 8), "big")


def _int(data: bytes) -> int:
    return int.from_bytes(data, "big")


class Schema:
    """Encoding and decoding for one pipeline's P4Info."""

    def __init__(self, p4info: p4info_pb2.P4Info) -> None:
        self.p4info = p4info
        self.index = P4InfoIndex(p4info)

    def _get(self, kind: str, key: str | int) -> Any:
        try:
            return self.index.get(kind, key)
        except KeyError as e:
            raise SchemaError(str(e.args[0]) if e.args else str(e)) from None

    # -- lookups --------------------------------------------------------------------------

    def table(self, name: str | int) -> p4info_pb2.Table:
        return self._get("tables", name)

    def action(self, name: str | int) -> p4info_pb2.Action:
        return self._get("actions", name)

    def action_profile(self, name: str | int) -> p4info_pb2.ActionProfile:
        return self._get("action_profiles", name)

    def counter(self, name: str | int) -> p4info_pb2.Counter:
        return self._get("counters", name)

    def digest(self, name: str | int) -> p4info_pb2.Digest:
        return self._get("digests", name)

    def packet_metadata(self, name: str | int) -> p4info_pb2.ControllerPacketMetadata:
        return self._get("controller_packet_metadata", name)

    def table_id(self, name: str) -> int:
        return int(self.table(name).preamble.id)

    def profile_id(self, name: str) -> int:
        return int(self.action_profile(name).preamble.id)

    def counter_id(self, name: str) -> int:
        return int(self.counter(name).preamble.id)

    def digest_id(self, name: str) -> int:
        return int(self.digest(name).preamble.id)

    @staticmethod
    def _member(items: Iterable[Any], key: str | int, what: str) -> Any:
        items = list(items)
        for m in items:
            if m.name == key or m.id == key:
                return m
        names = ", ".join(m.name for m in items)
        raise SchemaError(f"{what} has no '{key}' (it has: {names})")

    # -- actions --------------------------------------------------------------------------

    def encode_action(self, call: ActionCall) -> p4runtime_pb2.Action:
        info = self.action(call.name)
        given = dict(call.params)
        if len(given) != len(call.params):
            raise SchemaError(f"action {call.name}: a parameter is given twice")
        out = p4runtime_pb2.Action(action_id=info.preamble.id)
        for p in info.params:
            if p.name not in given:
                raise SchemaError(f"action {info.preamble.name}: parameter '{p.name}' is missing")
            out.params.add(
                param_id=p.id,
                value=_bytes(given.pop(p.name), p.bitwidth, f"{info.preamble.name}({p.name})"),
            )
        if given:
            names = ", ".join(p.name for p in info.params) or "none"
            raise SchemaError(
                f"action {info.preamble.name} has no parameter "
                f"'{next(iter(given))}' (its parameters: {names})"
            )
        return out

    def decode_action(self, msg: p4runtime_pb2.Action) -> ActionCall:
        info = self.action(msg.action_id)
        by_id = {p.id: p.name for p in info.params}
        params = {by_id[p.param_id]: _int(p.value) for p in msg.params if p.param_id in by_id}
        return ActionCall(
            info.preamble.name, tuple((p.name, params.get(p.name, 0)) for p in info.params)
        )

    # -- table entries --------------------------------------------------------------------

    def encode_table_entry(self, e: TableEntry) -> p4runtime_pb2.TableEntry:
        t = self.table(e.table)
        out = p4runtime_pb2.TableEntry(table_id=t.preamble.id, priority=e.priority)
        for m in e.match:
            f = self._member(t.match_fields, m.field, f"table {t.preamble.name}")
            what = f"{t.preamble.name} {f.name}"
            if isinstance(m, Exact):
                if f.match_type != MatchField.EXACT:
                    raise SchemaError(f"{what} is not an exact match")
                out.match.add(
                    field_id=f.id,
                    exact=p4runtime_pb2.FieldMatch.Exact(value=_bytes(m.value, f.bitwidth, what)),
                )
            else:
                if f.match_type != MatchField.LPM:
                    raise SchemaError(f"{what} is not an LPM match")
                if not 0 <= m.prefix_len <= f.bitwidth:
                    raise SchemaError(f"{what}: prefix length {m.prefix_len} out of range")
                if m.value & ((1 << (f.bitwidth - m.prefix_len)) - 1):
                    raise SchemaError(f"{what}: value has bits beyond /{m.prefix_len}")
                if m.prefix_len:
                    out.match.add(
                        field_id=f.id,
                        lpm=p4runtime_pb2.FieldMatch.LPM(
                            value=_bytes(m.value, f.bitwidth, what), prefix_len=m.prefix_len
                        ),
                    )
        if e.action is not None:
            ids = {r.id for r in t.action_refs}
            action = self.encode_action(e.action)
            if action.action_id not in ids:
                names = ", ".join(self.action(i).preamble.name for i in ids)
                raise SchemaError(
                    f"action {e.action.name} is not an action of table "
                    f"{t.preamble.name} (its actions: {names})"
                )
            out.action.action.CopyFrom(action)
        else:
            if not t.implementation_id:
                raise SchemaError(f"table {t.preamble.name} has no action profile for groups")
            out.action.action_profile_group_id = e.group_id or 0
        return out

    def decode_table_entry(self, msg: p4runtime_pb2.TableEntry) -> TableEntry:
        t = self.table(msg.table_id)
        fields = {f.id: f for f in t.match_fields}
        match: list[Exact | Lpm] = []
        for fm in msg.match:
            f = fields.get(fm.field_id)
            if f is None:
                raise SchemaError(f"table {t.preamble.name} has no match field id {fm.field_id}")
            kind = fm.WhichOneof("field_match_type")
            if kind == "exact":
                match.append(Exact(f.name, _int(fm.exact.value)))
            elif kind == "lpm":
                match.append(Lpm(f.name, _int(fm.lpm.value), fm.lpm.prefix_len))
            else:
                raise SchemaError(f"table {t.preamble.name}: {kind} matches are not used here")
        which = msg.action.WhichOneof("type")
        if which == "action":
            return TableEntry(
                t.preamble.name,
                tuple(match),
                self.decode_action(msg.action.action),
                priority=msg.priority,
            )
        if which == "action_profile_group_id":
            return TableEntry(
                t.preamble.name,
                tuple(match),
                group_id=msg.action.action_profile_group_id,
                priority=msg.priority,
            )
        raise SchemaError(f"table {t.preamble.name}: entry with a {which} action is not used here")

    # -- action profiles ------------------------------------------------------------------

    def encode_member(self, m: Member) -> p4runtime_pb2.ActionProfileMember:
        return p4runtime_pb2.ActionProfileMember(
            action_profile_id=self.profile_id(m.profile),
            member_id=m.member_id,
            action=self.encode_action(m.action),
        )

    def encode_group(self, g: Group) -> p4runtime_pb2.ActionProfileGroup:
        out = p4runtime_pb2.ActionProfileGroup(
            action_profile_id=self.profile_id(g.profile), group_id=g.group_id, max_size=g.max_size
        )
        for mid in g.members:
            out.members.add(member_id=mid, weight=1)
        return out

    def decode_member(self, msg: p4runtime_pb2.ActionProfileMember) -> Member:
        return Member(
            self.action_profile(msg.action_profile_id).preamble.name,
            msg.member_id,
            self.decode_action(msg.action),
        )

    def decode_group(self, msg: p4runtime_pb2.ActionProfileGroup) -> Group:
        return Group(
            self.action_profile(msg.action_profile_id).preamble.name,
            msg.group_id,
            tuple(m.member_id for m in msg.members),
            msg.max_size,
        )

    # -- entities -------------------------------------------------------------------------

    def encode(self, e: Entity) -> p4runtime_pb2.Entity:
        if isinstance(e, TableEntry):
            return p4runtime_pb2.Entity(table_entry=self.encode_table_entry(e))
        if isinstance(e, Member):
            return p4runtime_pb2.Entity(action_profile_member=self.encode_member(e))
        return p4runtime_pb2.Entity(action_profile_group=self.encode_group(e))

    def decode(self, msg: p4runtime_pb2.Entity) -> Entity:
        kind = msg.WhichOneof("entity")
        if kind == "table_entry":
            return self.decode_table_entry(msg.table_entry)
        if kind == "action_profile_member":
            return self.decode_member(msg.action_profile_member)
        if kind == "action_profile_group":
            return self.decode_group(msg.action_profile_group)
        raise SchemaError(f"{kind} entities are not controller entities")

    def read_all(
        self, tables: Iterable[str], profiles: Iterable[str]
    ) -> list[p4runtime_pb2.Entity]:
        """Wildcard read requests: every entry of ``tables``, every member and group of
        ``profiles``."""
        out = [
            p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(table_id=self.table_id(t)))
            for t in tables
        ]
        for p in profiles:
            pid = self.profile_id(p)
            out.append(
                p4runtime_pb2.Entity(
                    action_profile_member=p4runtime_pb2.ActionProfileMember(action_profile_id=pid)
                )
            )
            out.append(
                p4runtime_pb2.Entity(
                    action_profile_group=p4runtime_pb2.ActionProfileGroup(action_profile_id=pid)
                )
            )
        return out

    # -- counters -------------------------------------------------------------------------

    def counter_read(self, name: str, index: int | None = None) -> p4runtime_pb2.Entity:
        """A read of one cell, or (``index`` None) every cell, of an indexed counter."""
        entry = p4runtime_pb2.CounterEntry(counter_id=self.counter_id(name))
        if index is not None:
            entry.index.index = index
        return p4runtime_pb2.Entity(counter_entry=entry)

    def decode_counter(self, msg: p4runtime_pb2.CounterEntry) -> tuple[str, int, int, int]:
        """``(counter name, index, packets, bytes)``."""
        name = self.counter(msg.counter_id).preamble.name
        return name, msg.index.index, msg.data.packet_count, msg.data.byte_count

    # -- digests --------------------------------------------------------------------------

    def digest_entry(
        self, name: str, *, max_timeout_ns: int, max_list_size: int, ack_timeout_ns: int
    ) -> p4runtime_pb2.Entity:
        entry = p4runtime_pb2.DigestEntry(digest_id=self.digest_id(name))
        entry.config.max_timeout_ns = max_timeout_ns
        entry.config.max_list_size = max_list_size
        entry.config.ack_timeout_ns = ack_timeout_ns
        return p4runtime_pb2.Entity(digest_entry=entry)

    def digest_fields(self, digest: str | int) -> list[tuple[str, int]]:
        """``(member name, bit width)`` of a digest's struct, in order."""
        d = self.digest(digest)
        spec = d.type_spec
        if spec.WhichOneof("type_spec") != "struct":
            raise SchemaError(f"digest {d.preamble.name} is not a struct")
        struct = self.p4info.type_info.structs.get(spec.struct.name)
        if struct is None:
            raise SchemaError(f"P4Info has no type_info for struct {spec.struct.name}")
        out = []
        for m in struct.members:
            if m.type_spec.WhichOneof("type_spec") != "bitstring":
                raise SchemaError(f"digest {d.preamble.name}: member {m.name} is not a bit string")
            bs = m.type_spec.bitstring
            kind = bs.WhichOneof("type_spec") or "bit"
            width = getattr(bs, kind).bitwidth if kind != "varbit" else bs.varbit.max_bitwidth
            out.append((m.name, int(width)))
        return out

    def decode_digest_data(self, digest: str | int, data: p4data_pb2.P4Data) -> dict[str, int]:
        """One digest message (a ``P4Data`` struct) as ``{member: value}``."""
        fields = self.digest_fields(digest)
        if data.WhichOneof("data") != "struct" or len(data.struct.members) != len(fields):
            raise SchemaError(f"digest data does not match struct of {len(fields)} members")
        return {name: _int(m.bitstring) for (name, _w), m in zip(fields, data.struct.members)}

    # -- packet I/O -----------------------------------------------------------------------

    def packet_out(
        self, payload: bytes, metadata: Mapping[str, int], header: str = "packet_out"
    ) -> p4runtime_pb2.PacketOut:
        """A ``PacketOut`` with every metadata field of ``header`` (unnamed ones are 0)."""
        h = self.packet_metadata(header)
        given = dict(metadata)
        out = p4runtime_pb2.PacketOut(payload=payload)
        for m in h.metadata:
            out.metadata.add(
                metadata_id=m.id,
                value=_bytes(given.pop(m.name, 0), m.bitwidth, f"{header}.{m.name}"),
            )
        if given:
            raise SchemaError(
                f"{header} has no field '{next(iter(given))}' "
                f"(its fields: {', '.join(m.name for m in h.metadata)})"
            )
        return out

    def packet_in_metadata(
        self, msg: p4runtime_pb2.PacketIn, header: str = "packet_in"
    ) -> dict[str, int]:
        h = self.packet_metadata(header)
        names = {m.id: m.name for m in h.metadata}
        return {names.get(m.metadata_id, str(m.metadata_id)): _int(m.value) for m in msg.metadata}

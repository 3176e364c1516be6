"""Fuzzing the Write RPC: random and mutated requests must never crash the server or corrupt state.

A seeded generator sends well-formed, mutated and bit-flipped (at the serialized level) Write
requests over every entity kind. A model applies exactly the updates the server reports as OK;
afterwards a Read must return exactly the model's table entries, the server must still answer,
and once cleaned up through P4Runtime the switch must forward a packet as a fresh entry says.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable

import grpc
from google.rpc import code_pb2
from p4.v1 import p4data_pb2, p4runtime_pb2
from p4rt_helpers import (
    DEVICE_ID,
    INSERT,
    MODIFY,
    Harness,
    aid,
    details,
    exact_entry,
    names,
    packet,
    running,
    tid,
    uint128,
    update,
)

SEED = 20240611
STRUCTURED_REQUESTS = 900
FLIPPED_REQUESTS = 400

FM = p4runtime_pb2.FieldMatch
TE = p4runtime_pb2.TableEntry
Key = tuple[int, frozenset[tuple[int, str, tuple[int, ...]]], int]
Value = tuple[object, int, bytes]

TABLES = [
    "MyIngress.t_exact",
    "MyIngress.t_lpm",
    "MyIngress.t_ternary",
    "MyIngress.t_range",
    "MyIngress.t_optional",
    "MyIngress.t_sel",
    "MyIngress.t_const",
    "MyIngress.t_const_default",
]
ACTIONS = [
    "MyIngress.fwd",
    "MyIngress.set_out",
    "MyIngress.drop",
    "MyIngress.to_cpu",
    "MyIngress.hit_only",
    "MyIngress.miss",
    "NoAction",
    "MyIngress.set_out_rated",
]
PARAM_WIDTH = {"MyIngress.fwd": 9, "MyIngress.set_out": 8, "MyIngress.set_out_rated": 8}


def _bytes(rng: random.Random, value: int, width: int) -> bytes:
    """A valid encoding of ``value``: canonical, or zero-padded."""
    n = max(1, (value.bit_length() + 7) // 8)
    if rng.random() < 0.3:
        n = (width + 7) // 8 + rng.randint(0, 2)
    return value.to_bytes(max(n, 1), "big")


class Generator:
    """Random P4Runtime updates over the test program, valid-ish and then maybe mutated."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.mutation_rate = 0.3
        ids = names()
        self.profile = ids.id_of("action_profiles", "ecmp")
        self.counter = ids.id_of("counters", "kind_count")
        self.meter = ids.id_of("meters", "kind_rate")
        self.register = ids.id_of("registers", "last_dst")
        self.digest = ids.id_of("digests", "learn_t")
        self.value_set = ids.id_of("value_sets", "special_kinds")
        self.all_ids = [o.preamble.id for kind in ids.KINDS for o in getattr(ids.p4info, kind)]

    def some_id(self) -> int:
        r = self.rng.random()
        if r < 0.6:
            return self.rng.choice(self.all_ids)
        if r < 0.8:
            return self.rng.randint(0, 20)
        return self.rng.getrandbits(32)

    def action(self, table: str) -> p4runtime_pb2.TableAction:
        rng = self.rng
        ta = p4runtime_pb2.TableAction()
        if table == "MyIngress.t_sel" and rng.random() < 0.8:
            if rng.random() < 0.5:
                ta.action_profile_member_id = rng.randint(0, 4)
            else:
                ta.action_profile_group_id = rng.randint(0, 3)
            return ta
        own = [names().name_of("actions", r.id) for r in names().table(table).action_refs]
        name = rng.choice(own if rng.random() < 0.85 else ACTIONS)
        ta.action.action_id = aid(name)
        if name in PARAM_WIDTH:
            ta.action.params.add(
                param_id=1, value=_bytes(rng, rng.randint(0, 40), PARAM_WIDTH[name])
            )
        return ta

    def match(self, table: str) -> tuple[list[FM], int]:
        rng = self.rng
        fms: list[FM] = []
        prio = 0
        kind = FM(
            field_id=2 if table in ("MyIngress.t_ternary", "MyIngress.t_optional") else 1,
            exact=FM.Exact(value=_bytes(rng, rng.randint(0, 7), 8)),
        )
        if table == "MyIngress.t_lpm":
            plen = rng.choice([8, 16, 24, 32])
            base = rng.choice([0x0A000000, 0x0A010000, 0xC0A80100])
            fms.append(FM(field_id=1, lpm=FM.LPM(value=_bytes(rng, base, 32), prefix_len=plen)))
        elif table == "MyIngress.t_ternary":
            if rng.random() < 0.7:
                mask = rng.choice([0xFF00, 0x00FF, 0xFFFF])
                fms.append(
                    FM(
                        field_id=1,
                        ternary=FM.Ternary(
                            value=_bytes(rng, rng.randint(0, 3) * 0x0101 & mask, 16),
                            mask=_bytes(rng, mask, 16),
                        ),
                    )
                )
            fms.append(kind)
            prio = rng.randint(1, 4)
        elif table == "MyIngress.t_range":
            lo = rng.randint(0, 10)
            fms.append(
                FM(
                    field_id=1,
                    range=FM.Range(
                        low=_bytes(rng, lo, 16), high=_bytes(rng, lo + rng.randint(0, 5), 16)
                    ),
                )
            )
            prio = rng.randint(1, 4)
        elif table == "MyIngress.t_optional":
            if rng.random() < 0.6:
                fms.append(
                    FM(field_id=1, optional=FM.Optional(value=_bytes(rng, rng.randint(0, 3), 8)))
                )
            fms.append(kind)
            prio = rng.randint(1, 4)
        else:
            fms.append(kind)
        return fms, prio

    def table_entry(self) -> TE:
        rng = self.rng
        table = rng.choice(TABLES)
        fms, prio = self.match(table)
        te = TE(table_id=tid(table), match=fms, priority=prio)
        if rng.random() < 0.85:
            te.action.CopyFrom(self.action(table))
        if rng.random() < 0.1:
            te.controller_metadata = rng.getrandbits(64)
            te.metadata = rng.randbytes(rng.randint(0, 6))
        if rng.random() < self.mutation_rate:
            self.mutate(te)
        return te

    def mutate(self, te: TE) -> None:
        rng = self.rng
        mutations: list[Callable[[], None]] = [
            lambda: setattr(te, "table_id", self.some_id()),
            lambda: setattr(te, "priority", rng.choice([-1, 0, 1, 7, 2**31 - 1])),
            lambda: setattr(te, "is_default_action", True),
            lambda: setattr(te, "is_const", True),
            lambda: setattr(te, "idle_timeout_ns", rng.randint(1, 100)),
            lambda: te.ClearField("action"),
            lambda: te.ClearField("match"),
            lambda: te.counter_data.CopyFrom(
                p4runtime_pb2.CounterData(
                    packet_count=rng.randint(-2, 5), byte_count=rng.randint(0, 50)
                )
            ),
            lambda: te.meter_config.CopyFrom(
                p4runtime_pb2.MeterConfig(
                    cir=rng.randint(-1, 10),
                    cburst=1,
                    pir=rng.randint(0, 10),
                    pburst=1,
                    eburst=rng.choice([0, 0, 1]),
                )
            ),
            lambda: te.action.action.params.add(
                param_id=rng.randint(0, 3), value=rng.randbytes(rng.randint(0, 3))
            ),
            lambda: setattr(te.action.action, "action_id", self.some_id()),
        ]
        if len(te.match):
            fm = te.match[rng.randrange(len(te.match))]
            mutations += [
                lambda: setattr(fm, "field_id", rng.randint(0, 4)),
                lambda: fm.exact.CopyFrom(FM.Exact(value=rng.randbytes(rng.randint(0, 3)))),
                lambda: fm.lpm.CopyFrom(
                    FM.LPM(value=rng.randbytes(rng.randint(0, 5)), prefix_len=rng.randint(-1, 40))
                ),
                lambda: fm.ternary.CopyFrom(
                    FM.Ternary(value=rng.randbytes(2), mask=rng.randbytes(rng.randint(0, 3)))
                ),
                lambda: fm.range.CopyFrom(FM.Range(low=rng.randbytes(2), high=rng.randbytes(2))),
                lambda: fm.optional.CopyFrom(FM.Optional(value=rng.randbytes(rng.randint(0, 2)))),
                lambda: te.match.append(fm),
            ]
        for _ in range(rng.randint(1, 2)):
            rng.choice(mutations)()

    def other_entity(self) -> p4runtime_pb2.Entity:
        rng = self.rng
        e = p4runtime_pb2.Entity()
        pick = rng.randrange(9)
        if pick == 0:
            m = e.action_profile_member
            m.action_profile_id = self.profile if rng.random() < 0.8 else self.some_id()
            m.member_id = rng.randint(0, 4)
            if rng.random() < 0.9:
                m.action.action_id = aid(
                    rng.choice(["MyIngress.fwd", "NoAction", "MyIngress.drop"])
                )
                if m.action.action_id == aid("MyIngress.fwd"):
                    m.action.params.add(param_id=1, value=_bytes(rng, rng.randint(1, 9), 9))
        elif pick == 1:
            g = e.action_profile_group
            g.action_profile_id = self.profile if rng.random() < 0.8 else self.some_id()
            g.group_id = rng.randint(0, 3)
            g.max_size = rng.choice([0, 0, 2, -1])
            for mid in rng.sample(range(0, 5), rng.randint(0, 3)):
                g.members.add(member_id=mid, weight=rng.choice([1, 1, 2, 0]))
        elif pick == 2:
            c = e.counter_entry
            c.counter_id = self.counter if rng.random() < 0.8 else self.some_id()
            if rng.random() < 0.8:
                c.index.index = rng.randint(-1, 17)
            c.data.packet_count = rng.randint(-1, 9)
        elif pick == 3:
            m2 = e.meter_entry
            m2.meter_id = self.meter if rng.random() < 0.8 else self.some_id()
            m2.index.index = rng.randint(-1, 17)
            if rng.random() < 0.7:
                m2.config.CopyFrom(
                    p4runtime_pb2.MeterConfig(
                        cir=rng.randint(0, 9), cburst=2, pir=rng.randint(0, 9), pburst=3
                    )
                )
        elif pick == 4:
            r = e.register_entry
            r.register_id = self.register if rng.random() < 0.8 else self.some_id()
            if rng.random() < 0.8:
                r.index.index = rng.randint(-1, 17)
            r.data.CopyFrom(p4data_pb2.P4Data(bitstring=rng.randbytes(rng.randint(0, 5))))
        elif pick == 5:
            d = e.digest_entry
            d.digest_id = self.digest if rng.random() < 0.8 else self.some_id()
            d.config.max_list_size = rng.randint(-1, 3)
        elif pick == 6:
            v = e.value_set_entry
            v.value_set_id = self.value_set if rng.random() < 0.8 else self.some_id()
            for _ in range(rng.randint(0, 5)):
                v.members.add().match.add(
                    field_id=rng.choice([1, 1, 2]),
                    exact={"value": rng.randbytes(rng.randint(0, 2))},
                )
        elif pick == 7:
            mg = e.packet_replication_engine_entry.multicast_group_entry
            mg.multicast_group_id = rng.randint(0, 3)
            for _ in range(rng.randint(0, 3)):
                mg.replicas.add(egress_port=rng.choice([1, 2, 3, 600]), instance=rng.randint(0, 2))
        else:
            cs = e.packet_replication_engine_entry.clone_session_entry
            cs.session_id = rng.randint(0, 3)
            cs.class_of_service = rng.choice([0, 1, 9])
            cs.replicas.add(egress_port=rng.randint(0, 4))
        return e

    def update(self) -> p4runtime_pb2.Update:
        rng = self.rng
        utype = rng.choices(
            [INSERT, MODIFY, p4runtime_pb2.Update.DELETE, 0, 9], [45, 25, 25, 3, 2]
        )[0]
        r = rng.random()
        if r < 0.7:
            return p4runtime_pb2.Update(
                type=utype, entity=p4runtime_pb2.Entity(table_entry=self.table_entry())
            )
        if r < 0.97:
            return p4runtime_pb2.Update(type=utype, entity=self.other_entity())
        return p4runtime_pb2.Update(type=utype)

    def request(self) -> p4runtime_pb2.WriteRequest:
        req = p4runtime_pb2.WriteRequest(device_id=DEVICE_ID, election_id=uint128(1))
        req.updates.extend(self.update() for _ in range(self.rng.randint(1, 4)))
        return req


# ----- the model


def _ints(msg: object) -> tuple[int, ...]:
    return tuple(
        int.from_bytes(v, "big") if isinstance(v, bytes) else int(v) for _, v in msg.ListFields()
    )  # type: ignore[attr-defined]


def key_of(te: TE) -> Key:
    fields = frozenset(
        (
            fm.field_id,
            str(fm.WhichOneof("field_match_type")),
            _ints(getattr(fm, str(fm.WhichOneof("field_match_type")))),
        )
        for fm in te.match
    )
    return te.table_id, fields, te.priority


def action_of(te: TE) -> object:
    kind = te.action.WhichOneof("type")
    if kind == "action":
        a = te.action.action
        return a.action_id, tuple(
            sorted((p.param_id, int.from_bytes(p.value, "big")) for p in a.params)
        )
    if kind is None:
        return None
    return kind, getattr(te.action, kind)


class Model:
    """The table entries the server accepted, as the client believes them to be."""

    def __init__(self, entries: list[TE]) -> None:
        self.entries: dict[Key, Value] = {key_of(te): self.value(te) for te in entries}
        self.const_tables = {tid("MyIngress.t_const")}

    @staticmethod
    def value(te: TE) -> Value:
        return action_of(te), te.controller_metadata, te.metadata

    def apply(self, upd: p4runtime_pb2.Update) -> None:
        if upd.entity.WhichOneof("entity") != "table_entry":
            return
        te = upd.entity.table_entry
        if te.is_default_action:
            return
        key = key_of(te)
        if upd.type == INSERT:
            self.entries[key] = self.value(te)
        elif upd.type == MODIFY:
            if te.table_id in self.const_tables:
                return  # only direct resources change
            old = self.entries[key]
            action = action_of(te) if te.HasField("action") else old[0]
            self.entries[key] = (action, te.controller_metadata, te.metadata)
        else:
            del self.entries[key]


def outcomes(call: Callable[[], object], n: int, seen: Counter[str]) -> list[bool] | None:
    """Which of ``n`` updates succeeded, or None when the whole RPC was refused."""
    try:
        call()
        seen["OK"] += n
        return [True] * n
    except grpc.RpcError as err:
        if err.code() != grpc.StatusCode.UNKNOWN:  # type: ignore[attr-defined]
            seen["rpc " + err.code().name] += 1  # type: ignore[attr-defined]
            return None
        errs = details(err)
        assert len(errs) == n
        seen.update(code_pb2.Code.Name(e.canonical_code) for e in errs)
        return [e.canonical_code == code_pb2.OK for e in errs]


def read_all(h: Harness) -> list[TE]:
    return [e.table_entry for e in h.read(p4runtime_pb2.Entity(table_entry=TE()))]


def flip(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(out))
        out[i] ^= 1 << rng.randrange(8)
    if rng.random() < 0.1:
        del out[rng.randrange(len(out)) :]
    return bytes(out)


def test_fuzzed_writes_keep_the_server_consistent() -> None:
    rng = random.Random(SEED)
    gen = Generator(rng)
    with running() as h:
        raw_write = h.channel.unary_unary(
            "/p4.v1.P4Runtime/Write",
            request_serializer=None,
            response_deserializer=p4runtime_pb2.WriteResponse.FromString,
        )
        model = Model(read_all(h))
        accepted = refused = 0
        seen: Counter[str] = Counter()
        unparsable: Counter[str] = Counter()
        for i in range(STRUCTURED_REQUESTS + FLIPPED_REQUESTS):
            if i == STRUCTURED_REQUESTS:
                gen.mutation_rate = 0.0  # flip bits of well-formed requests from now on
            req = gen.request()
            if i < STRUCTURED_REQUESTS:
                result = outcomes(lambda r=req: h.stub.Write(r), len(req.updates), seen)
            else:
                data = flip(rng, req.SerializeToString())
                try:
                    req = p4runtime_pb2.WriteRequest.FromString(data)
                except Exception:
                    req = None  # the server cannot parse it either
                if req is None:  # gRPC refuses it before our code sees it
                    assert outcomes(lambda d=data: raw_write(d), 0, unparsable) is None
                    continue
                result = outcomes(lambda d=data: raw_write(d), len(req.updates), seen)
            if result is None:
                refused += 1
                continue
            for upd, ok in zip(req.updates, result):
                if ok:
                    accepted += 1
                    model.apply(upd)
            if i % 200 == 0:
                assert {key_of(te): model.value(te) for te in read_all(h)} == model.entries
        got = {key_of(te): Model.value(te) for te in read_all(h)}
        assert got == model.entries
        print(dict(seen), dict(unparsable))
        assert accepted > 200 and refused > 10
        assert "INTERNAL" not in seen and "rpc INTERNAL" not in seen, seen
        for code in (
            "ALREADY_EXISTS",
            "NOT_FOUND",
            "INVALID_ARGUMENT",
            "OUT_OF_RANGE",
            "PERMISSION_DENIED",
            "FAILED_PRECONDITION",
        ):
            assert seen[code], f"the fuzzer never produced {code}: {seen}"
        assert h.stub.Capabilities(p4runtime_pb2.CapabilitiesRequest()).p4runtime_api_version
        _clean_up(h)
        h.write(update(INSERT, table_entry=exact_entry(0x42, "MyIngress.fwd", 9)))
        with h.device.lock:
            h.device.receive(1, packet(kind=0x42, dst=0x0A000001, tport=1, rport=1))
            frames = h.device.service_queues()
        assert frames == [(9, packet(kind=0x42, dst=0x0A000001, tport=1, rport=1))]


def _clean_up(h: Harness) -> None:
    """Remove everything the fuzzing left, through P4Runtime only."""
    for te in read_all(h):
        if not te.is_const:
            h.write(update(p4runtime_pb2.Update.DELETE, table_entry=te))
    profile = names().id_of("action_profiles", "ecmp")
    for e in h.read(
        p4runtime_pb2.Entity(
            action_profile_group=p4runtime_pb2.ActionProfileGroup(action_profile_id=profile)
        )
    ):
        h.write(update(p4runtime_pb2.Update.DELETE, action_profile_group=e.action_profile_group))
    for e in h.read(
        p4runtime_pb2.Entity(
            action_profile_member=p4runtime_pb2.ActionProfileMember(action_profile_id=profile)
        )
    ):
        h.write(update(p4runtime_pb2.Update.DELETE, action_profile_member=e.action_profile_member))
    for t in TABLES:
        if t != "MyIngress.t_const_default":
            h.write(update(MODIFY, table_entry=TE(table_id=tid(t), is_default_action=True)))
    h.write(
        update(
            MODIFY,
            value_set_entry=p4runtime_pb2.ValueSetEntry(
                value_set_id=names().id_of("value_sets", "special_kinds")
            ),
        )
    )
    assert [te for te in read_all(h) if not te.is_const] == []

"""SwitchState: built from a ProgramSchema, names resolved by suffix, reset like a commit."""

from __future__ import annotations

import pytest
from runtime_schema_helpers import ACTIONS, EXACT, SELECTOR, fwd, table

from switch.pipeline.errors import Code, StateError
from switch.pipeline.pre import Replica
from switch.pipeline.state import DigestConfig, SwitchState
from switch.pipeline.tables import TableEntry
from switch.pipeline.trtcm import YELLOW
from switch.schema import (
    ActionCall,
    ActionProfileSpec,
    CounterSpec,
    CounterUnit,
    DigestSpec,
    MeterSpec,
    MeterUnit,
    ProgramSchema,
    RegisterSpec,
    StructField,
    ValueSetSpec,
)


def schema() -> ProgramSchema:
    return ProgramSchema(
        actions=list(ACTIONS.values()),
        tables=[
            table(("h.a", 8, EXACT), name="MyIngress.fib", default=ActionCall("MyIngress.drop")),
            table(("h.a", 8, EXACT), name="MyEgress.fib"),
            table(
                ("h.a", 8, EXACT),
                ("h.s", 16, SELECTOR),
                name="MyIngress.ecmp",
                implementation="MyIngress.ecmp_sel",
            ),
        ],
        action_profiles=[
            ActionProfileSpec("MyIngress.ecmp_sel", 16, ("MyIngress.ecmp",), True, "crc16", 16)
        ],
        counters=[CounterSpec("MyIngress.hits", 8, CounterUnit.BOTH)],
        meters=[MeterSpec("MyIngress.rate", 4, MeterUnit.BYTES)],
        registers=[RegisterSpec("MyIngress.seen", 8, 32)],
        digests=[DigestSpec("learn_t", (StructField("mac", 48), StructField("port", 9)))],
        value_sets=[ValueSetSpec("MyParser.ports", 4, (StructField("port", 16),))],
    )


def test_objects_are_held_by_fully_qualified_name() -> None:
    s = SwitchState(schema())
    assert set(s.tables) == {"MyIngress.fib", "MyEgress.fib", "MyIngress.ecmp"}
    assert s.tables["MyIngress.ecmp"].profile is s.action_profiles["MyIngress.ecmp_sel"]
    assert set(s.counters) == {"MyIngress.hits"}
    assert set(s.meters) == {"MyIngress.rate"}
    assert set(s.registers) == {"MyIngress.seen"}
    assert s.digest_config == {"learn_t": None}


def test_names_resolve_by_unique_suffix() -> None:
    s = SwitchState(schema())
    assert s.table("ecmp").name == "MyIngress.ecmp"
    assert s.counter("hits").name == "MyIngress.hits"
    assert s.register("MyIngress.seen").name == "MyIngress.seen"


def test_ambiguous_suffix_is_invalid_argument() -> None:
    with pytest.raises(StateError) as err:
        SwitchState(schema()).table("fib")
    assert err.value.code is Code.INVALID_ARGUMENT
    assert "MyEgress.fib" in err.value.message and "MyIngress.fib" in err.value.message


@pytest.mark.parametrize(
    ("lookup", "hint"),
    [
        (lambda s: s.table("ecmq"), "MyIngress.ecmp"),
        (lambda s: s.counter("hit"), "MyIngress.hits"),
        (lambda s: s.register("MyIngress.sen"), "MyIngress.seen"),
    ],
)
def test_unknown_name_suggests_the_nearest(lookup: object, hint: str) -> None:
    with pytest.raises(StateError) as err:
        lookup(SwitchState(schema()))  # type: ignore[operator]
    assert err.value.code is Code.NOT_FOUND
    assert f"did you mean '{hint}'" in err.value.message


def test_profile_members_are_checked_against_the_tables_actions() -> None:
    s = SwitchState(schema())
    prof = s.action_profile("ecmp_sel")
    prof.insert_member(1, fwd(1))
    with pytest.raises(StateError) as err:
        prof.insert_member(2, ActionCall("MyIngress.only_default"))
    assert err.value.code is Code.INVALID_ARGUMENT


def test_reset_forgets_all_forwarding_state() -> None:
    s = SwitchState(schema())
    fib = s.table("MyIngress.fib")
    fib.insert(TableEntry((1,), action=fwd(1)))
    fib.set_default(fwd(2))
    prof = s.action_profile("ecmp_sel")
    prof.insert_member(1, fwd(1))
    prof.insert_group(1, [1])
    s.table("ecmp").insert(TableEntry((1,), group_id=1))
    s.counter("hits").count(0, 10)
    s.meter("rate").set_rates(0, [(0.0, 1), (0.0, 1)])
    s.register("seen").write(0, 5)
    s.value_set("ports").set_members([[(80, 0xFFFF)]])
    s.pre.insert_group(1, [Replica(1)])
    s.pre.mirroring_add(1, 2)
    s.push_digest("learn_t", (1, 2))
    s.configure_digest("learn_t", DigestConfig(max_list_size=10))
    assert s.meter("rate").execute(0, 0, 2) != 0

    s.reset()

    assert len(fib) == 0 and fib.default == ActionCall("MyIngress.drop")
    assert len(s.table("ecmp")) == 0 and prof.members == {} and prof.groups == {}
    assert s.counter("hits").read(0) == (0, 0)
    assert s.meter("rate").execute(0, 0, 2) == 0
    assert s.register("seen").read(0) == 0
    assert not s.value_set("ports").contains((80,))
    assert s.pre.replicas(1) == () and s.pre.clone_replicas(1) is None
    assert len(s.digests) == 0 and s.digest_config == {"learn_t": None}


def test_value_set_membership_with_masks() -> None:
    vs = SwitchState(schema()).value_set("ports")
    vs.set_members([[(0x1200, 0xFF00)], [(80, 0xFFFF)]])
    assert vs.contains((0x12AB,)) and vs.contains((80,)) and not vs.contains((81,))
    with pytest.raises(StateError) as err:
        vs.set_members([[(1, 0xFFFF)]] * 5)
    assert err.value.code is Code.RESOURCE_EXHAUSTED


def test_meter_state_is_per_index() -> None:
    m = SwitchState(schema()).meter("rate")
    m.set_rates(1, [(0.0, 1), (0.0, 10)])
    assert m.execute(1, 0, 5) == YELLOW
    assert m.execute(0, 0, 5) == 0

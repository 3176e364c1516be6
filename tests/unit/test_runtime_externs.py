"""Counters, registers and meters (indexed and direct): data-plane and control-plane sides."""

from __future__ import annotations

import pytest
from runtime_schema_helpers import ACTIONS, EXACT, fwd, table

from switch.pipeline.errors import Code, StateError
from switch.pipeline.externs import Counter, DirectCounter, DirectMeter, Meter, Register
from switch.pipeline.tables import Table, TableEntry
from switch.pipeline.trtcm import GREEN, RED, YELLOW, MeterConfig
from switch.schema import (
    CounterSpec,
    CounterUnit,
    DirectCounterSpec,
    DirectMeterSpec,
    MeterSpec,
    MeterUnit,
    RegisterSpec,
)


def test_counter_counts_packets_and_bytes() -> None:
    c = Counter(CounterSpec("MyIngress.c", 4, CounterUnit.BOTH))
    c.count(1, 100)
    c.count(1, 50)
    assert c.read(1) == (2, 150)
    c.write(1, 7, 8)
    assert c.read(1) == (7, 8)
    c.reset()
    assert c.read(1) == (0, 0)


def test_counter_out_of_range_index_from_data_plane_is_counted_as_error() -> None:
    c = Counter(CounterSpec("MyIngress.c", 4, CounterUnit.PACKETS))
    c.count(4, 10)
    c.count(-1, 10)
    assert c.errors == 2
    assert sum(c.packets) == 0


@pytest.mark.parametrize("index", [4, -1, 100])
def test_counter_out_of_range_index_from_control_plane_is_out_of_range(index: int) -> None:
    c = Counter(CounterSpec("MyIngress.c", 4, CounterUnit.PACKETS))
    with pytest.raises(StateError) as err:
        c.read(index)
    assert err.value.code is Code.OUT_OF_RANGE


@pytest.mark.parametrize(
    ("width", "signed", "written", "read"),
    [
        (8, False, 0x1FF, 0xFF),
        (8, False, -1, 0xFF),
        (8, True, 0x80, -128),
        (8, True, 0xFF, -1),
        (8, True, 127, 127),
        (16, True, -2, -2),
        (1, False, 3, 1),
    ],
)
def test_register_values_wrap_to_the_element_type(
    width: int, signed: bool, written: int, read: int
) -> None:
    r = Register(RegisterSpec("MyIngress.r", 2, width, signed))
    r.write(0, written)
    assert r.read(0) == read


def test_register_out_of_range_reads_zero_and_ignores_writes() -> None:
    r = Register(RegisterSpec("MyIngress.r", 2, 32))
    r.write(2, 5)
    assert r.read(2) == 0
    assert r.values == [0, 0]
    assert r.errors == 2


def test_register_control_plane_is_strict() -> None:
    r = Register(RegisterSpec("MyIngress.r", 2, 8, signed=True))
    r.control_write(1, -5)
    assert r.control_read(1) == -5
    r.control_write(1, 0xFB)  # the unsigned spelling of the same bits
    assert r.control_read(1) == -5
    for index, value, code in [
        (2, 0, Code.OUT_OF_RANGE),
        (0, 256, Code.INVALID_ARGUMENT),
        (0, -129, Code.INVALID_ARGUMENT),
    ]:
        with pytest.raises(StateError) as err:
            r.control_write(index, value)
        assert err.value.code is code


def bytes_meter() -> Meter:
    return Meter(MeterSpec("MyIngress.m", 2, MeterUnit.BYTES))


def test_unconfigured_meter_is_green() -> None:
    m = bytes_meter()
    assert m.execute(0, 0, 10_000) == GREEN
    assert m.execute(5, 0, 10) == GREEN and m.errors == 1


@pytest.mark.parametrize(
    ("steps"),
    [
        # CIR 1 B/us burst 100, PIR 2 B/us burst 200; buckets start full.
        [(0, 80, GREEN), (0, 80, YELLOW), (0, 80, RED), (0, 40, YELLOW), (0, 1, RED)],
        [(0, 80, GREEN), (0, 80, YELLOW), (30, 80, YELLOW), (1000, 80, GREEN)],
        [(0, 201, RED), (0, 200, YELLOW), (0, 1, RED)],
        [(0, 100, GREEN), (0, 1, YELLOW), (1, 1, GREEN)],
    ],
)
def test_meter_is_a_two_rate_three_colour_marker(steps: list[tuple[int, int, int]]) -> None:
    m = bytes_meter()
    m.set_rates(0, [(1.0, 100), (2.0, 200)])
    assert [m.execute(0, t, n) for t, n, _ in steps] == [c for _, _, c in steps]


def test_packet_meter_counts_packets_not_bytes() -> None:
    m = Meter(MeterSpec("MyIngress.m", 1, MeterUnit.PACKETS))
    m.set_config(0, cir=0, cburst=1, pir=0, pburst=2)  # per second, as P4Runtime
    assert [m.execute(0, 0, 1500) for _ in range(3)] == [GREEN, YELLOW, RED]
    assert m.get_config(0) == MeterConfig(0.0, 1, 0.0, 2)
    m.reset(0)
    assert m.execute(0, 0, 1500) == GREEN


@pytest.mark.parametrize(
    "rates",
    [[(2.0, 10), (1.0, 10)], [(1.0, 10)], [(-1.0, 10), (1.0, 10)], [(1.0, -1), (1.0, 10)]],
)
def test_bad_meter_rates_are_invalid(rates: list[tuple[float, int]]) -> None:
    with pytest.raises(StateError) as err:
        bytes_meter().set_rates(0, rates)
    assert err.value.code is Code.INVALID_ARGUMENT


def test_meter_array_set_rates_configures_every_index() -> None:
    m = bytes_meter()
    m.set_all_rates([(0.0, 10), (0.0, 20)])
    assert [m.execute(i, 0, 15) for i in (0, 1)] == [YELLOW, YELLOW]


def test_meter_set_config_converts_per_second_rates() -> None:
    m = bytes_meter()
    m.set_config(1, cir=1_000_000, cburst=100, pir=2_000_000, pburst=200)
    assert m.get_config(1) == MeterConfig(1.0, 100, 2.0, 200)
    assert m.get_config(1).rates_per_second() == (1_000_000, 100, 2_000_000, 200)  # type: ignore[union-attr]


def test_direct_counter_and_meter_live_on_the_entry() -> None:
    t = Table(
        table(("h.a", 8, EXACT), direct_counter="MyIngress.dc", direct_meter="MyIngress.dm"),
        ACTIONS,
    )
    t.insert(TableEntry((1,), action=fwd(1)))
    entry = t.lookup((1,))[0]
    assert entry is not None
    dc = DirectCounter(DirectCounterSpec("MyIngress.dc", CounterUnit.BOTH, "MyIngress.t"))
    dc.count(entry, 64)
    assert dc.read(t.get((1,))) == (1, 64)
    dm = DirectMeter(DirectMeterSpec("MyIngress.dm", MeterUnit.BYTES, "MyIngress.t"))
    assert dm.execute(entry, 0, 1000) == GREEN
    dm.set_config(entry, MeterConfig(0.0, 10, 0.0, 20))
    assert [dm.execute(entry, 0, 15) for _ in range(2)] == [YELLOW, RED]
    assert dm.execute(None, 0, 15) == GREEN

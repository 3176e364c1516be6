"""Stateful v1model externs: indexed counters, registers and meters, and direct counters/meters.

Each has a lenient data-plane side (an out-of-range index is ignored and counted in ``errors``,
as a packet cannot fail) and a strict control-plane side (OUT_OF_RANGE / INVALID_ARGUMENT).
Direct counters and meters keep their state on the :class:`TableEntry` they belong to.
"""

from __future__ import annotations

from collections.abc import MutableSequence, Sequence

from switch.pipeline.errors import Code, StateError
from switch.pipeline.tables import TableEntry
from switch.pipeline.trtcm import GREEN, MeterCell, MeterConfig, check_config
from switch.pipeline.validate import invalid
from switch.schema import (
    CounterSpec,
    DirectCounterSpec,
    DirectMeterSpec,
    MeterSpec,
    MeterUnit,
    RegisterSpec,
)


def _check_index(kind: str, name: str, index: int, size: int) -> int:
    if not isinstance(index, int) or not 0 <= index < size:
        raise StateError(
            Code.OUT_OF_RANGE, f"{kind} '{name}': index {index!r} is outside 0..{size - 1}"
        )
    return index


class Counter:
    """``counter(size, type)``: packet and byte counts per index (both kept, whatever the unit).

    ``packets`` and ``bytes`` may be arrays shared with a native executor (:meth:`share`);
    assigning a whole list then copies it into them.
    """

    def __init__(self, spec: CounterSpec) -> None:
        self.spec = spec
        self.name = spec.name
        self.size = spec.size
        self._packets: MutableSequence[int] = [0] * spec.size
        self._bytes: MutableSequence[int] = [0] * spec.size
        self._shared = False
        self.errors = 0

    @property
    def packets(self) -> MutableSequence[int]:
        return self._packets

    @packets.setter
    def packets(self, values: Sequence[int]) -> None:
        self._packets = _assign(self._packets, values, self._shared)

    @property
    def bytes(self) -> MutableSequence[int]:
        return self._bytes

    @bytes.setter
    def bytes(self, values: Sequence[int]) -> None:
        self._bytes = _assign(self._bytes, values, self._shared)

    def share(self, packets: MutableSequence[int], nbytes: MutableSequence[int]) -> None:
        """Keep the counts in ``packets``/``nbytes`` (of ``size`` each) from now on."""
        packets[0 : self.size] = list(self._packets)
        nbytes[0 : self.size] = list(self._bytes)
        self._packets, self._bytes, self._shared = packets, nbytes, True

    def count(self, index: int, nbytes: int) -> None:
        """Data plane: count one packet of ``nbytes`` bytes."""
        if 0 <= index < self.size:
            self._packets[index] += 1
            self._bytes[index] += nbytes
        else:
            self.errors += 1

    def read(self, index: int) -> tuple[int, int]:
        """(packets, bytes) at ``index``."""
        _check_index("counter", self.name, index, self.size)
        return self.packets[index], self.bytes[index]

    def write(self, index: int, packets: int, nbytes: int) -> None:
        _check_index("counter", self.name, index, self.size)
        if packets < 0 or nbytes < 0:
            raise invalid(f"counter '{self.name}': counts must be >= 0")
        self.packets[index] = packets
        self.bytes[index] = nbytes

    def reset(self) -> None:
        # in place: the native executor shares these arrays (switch.native)
        self.packets[0 : self.size] = [0] * self.size
        self.bytes[0 : self.size] = [0] * self.size
        self.errors = 0


class DirectCounter:
    """``direct_counter(type)``: the counts live on each entry of the owning table."""

    def __init__(self, spec: DirectCounterSpec) -> None:
        self.spec = spec
        self.name = spec.name
        self.table = spec.table

    @staticmethod
    def count(entry: TableEntry, nbytes: int) -> None:
        entry.packets += 1
        entry.bytes += nbytes

    @staticmethod
    def read(entry: TableEntry) -> tuple[int, int]:
        return entry.packets, entry.bytes

    def write(self, entry: TableEntry, packets: int, nbytes: int) -> None:
        if packets < 0 or nbytes < 0:
            raise invalid(f"direct counter '{self.name}': counts must be >= 0")
        entry.packets = packets
        entry.bytes = nbytes


class Register:
    """``register<T>(size)``: values wrapped to the element width (two's complement if signed)."""

    def __init__(self, spec: RegisterSpec) -> None:
        self.spec = spec
        self.name = spec.name
        self.size = spec.size
        self.width = spec.width
        self.signed = spec.signed
        self._values: MutableSequence[int] = [0] * spec.size
        self._shared = False
        self.errors = 0
        self._mask = (1 << spec.width) - 1

    @property
    def values(self) -> MutableSequence[int]:
        """The values (an array shared with a native executor after :meth:`share`)."""
        return self._values

    @values.setter
    def values(self, values: Sequence[int]) -> None:
        self._values = _assign(self._values, values, self._shared)

    def share(self, values: MutableSequence[int]) -> None:
        """Keep the values in ``values`` (of ``size``) from now on."""
        values[0 : self.size] = list(self._values)
        self._values, self._shared = values, True

    def wrap(self, value: int) -> int:
        """``value`` reduced to the element type (signed elements as negative Python ints)."""
        v = value & self._mask
        if self.signed and v >> (self.width - 1):
            v -= 1 << self.width
        return v

    def read(self, index: int) -> int:
        """Data plane: the value at ``index``; 0 when out of range."""
        if 0 <= index < self.size:
            return self._values[index]  # not the property: this is per packet
        self.errors += 1
        return 0

    def write(self, index: int, value: int) -> None:
        """Data plane: store ``value`` wrapped to the width; ignored when out of range."""
        if 0 <= index < self.size:
            self._values[index] = self.wrap(value)
        else:
            self.errors += 1

    def control_read(self, index: int) -> int:
        return self.values[_check_index("register", self.name, index, self.size)]

    def control_write(self, index: int, value: int) -> None:
        """Control plane: any value representable as bit<W> or int<W> is accepted."""
        _check_index("register", self.name, index, self.size)
        if not isinstance(value, int) or not -(1 << (self.width - 1)) <= value <= self._mask:
            raise invalid(
                f"register '{self.name}': value {value!r} does not fit in {self.width} bits"
            )
        self.values[index] = self.wrap(value)

    def reset(self) -> None:
        self.values[0 : self.size] = [0] * self.size  # in place, as Counter.reset
        self.errors = 0


def _assign(
    current: MutableSequence[int], values: Sequence[int], shared: bool
) -> MutableSequence[int]:
    """The storage after assigning ``values``: copied into ``current`` when it is shared."""
    if not shared:
        return values if isinstance(values, list) else list(values)
    if len(values) != len(current):
        raise ValueError(f"expected {len(current)} values, got {len(values)}")
    current[0 : len(current)] = list(values)
    return current


def _rates_config(owner: str, rates: Sequence[tuple[float, int]]) -> MeterConfig:
    if len(rates) != 2:
        raise invalid(f"{owner}: expected 2 rates (committed, peak), got {len(rates)}")
    (cir, cburst), (pir, pburst) = rates
    return check_config(owner, MeterConfig(float(cir), int(cburst), float(pir), int(pburst)))


class Meter:
    """``meter(size, type)``: an array of trTCM instances, unconfigured (always GREEN) at first.

    Rates are given as simple_switch_CLI's ``meter_set_rates`` takes them: ``[(cir, cburst),
    (pir, pburst)]`` with rates in units per microsecond; :meth:`set_config` takes P4Runtime's
    units per second.
    """

    def __init__(self, spec: MeterSpec) -> None:
        self.spec = spec
        self.name = spec.name
        self.size = spec.size
        self.packets_unit = spec.unit is MeterUnit.PACKETS
        self.cells: list[MeterCell | None] = [None] * spec.size
        self.errors = 0

    def set_rates(self, index: int, rates: Sequence[tuple[float, int]]) -> None:
        _check_index("meter", self.name, index, self.size)
        self.cells[index] = MeterCell(_rates_config(f"meter '{self.name}'", rates))

    def set_all_rates(self, rates: Sequence[tuple[float, int]]) -> None:
        """simple_switch_CLI's ``meter_array_set_rates``."""
        config = _rates_config(f"meter '{self.name}'", rates)
        self.cells = [MeterCell(config) for _ in range(self.size)]

    def set_config(self, index: int, cir: int, cburst: int, pir: int, pburst: int) -> None:
        """P4Runtime ``MeterConfig``: rates per second."""
        _check_index("meter", self.name, index, self.size)
        config = check_config(
            f"meter '{self.name}'", MeterConfig.per_second(cir, cburst, pir, pburst)
        )
        self.cells[index] = MeterCell(config)

    def get_config(self, index: int) -> MeterConfig | None:
        cell = self.cells[_check_index("meter", self.name, index, self.size)]
        return None if cell is None else cell.config

    def reset(self, index: int | None = None) -> None:
        """Unconfigure one meter (or all): every packet is GREEN again."""
        if index is None:
            self.cells = [None] * self.size
        else:
            self.cells[_check_index("meter", self.name, index, self.size)] = None

    def execute(self, index: int, now_us: int, nbytes: int) -> int:
        """Data plane: colour 0 GREEN, 1 YELLOW or 2 RED; out-of-range indexes are GREEN."""
        if not 0 <= index < self.size:
            self.errors += 1
            return GREEN
        cell = self.cells[index]
        if cell is None:
            return GREEN
        return cell.execute(now_us, 1 if self.packets_unit else nbytes)


class DirectMeter:
    """``direct_meter<T>(type)``: each entry of the owning table carries its own trTCM."""

    def __init__(self, spec: DirectMeterSpec) -> None:
        self.spec = spec
        self.name = spec.name
        self.table = spec.table
        self.packets_unit = spec.unit is MeterUnit.PACKETS

    def set_config(self, entry: TableEntry, config: MeterConfig | None) -> None:
        """Configure (or with None, unconfigure) the meter of ``entry``; buckets start full."""
        if config is not None:
            check_config(f"direct meter '{self.name}'", config)
        entry.meter_config = config
        entry.meter_cell = None if config is None else MeterCell(config)

    def execute(self, entry: TableEntry | None, now_us: int, nbytes: int) -> int:
        """Colour for a packet that hit ``entry`` (a miss, or no config, is GREEN)."""
        if entry is None or entry.meter_cell is None:
            return GREEN
        return entry.meter_cell.execute(now_us, 1 if self.packets_unit else nbytes)

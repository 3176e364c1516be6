"""Parser value sets (``value_set<T>(size)``): the members the control plane installs."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from switch.pipeline.errors import Code, StateError
from switch.pipeline.validate import check_uint, invalid
from switch.schema import ValueSetSpec

Member = tuple[tuple[int, int], ...]  # (value, mask) per field


class ValueSet:
    """A value set; a parser ``select`` case on it matches if any member matches all fields."""

    def __init__(self, spec: ValueSetSpec) -> None:
        self.spec = spec
        self.name = spec.name
        self.size = spec.size
        self._widths = tuple(f.width for f in spec.fields)
        self.members: list[Member] = []

    def set_members(self, members: Iterable[Sequence[tuple[int, int]]]) -> None:
        """Replace the members (P4Runtime writes the whole set at once)."""
        checked: list[Member] = []
        for m in members:
            if len(m) != len(self._widths):
                raise invalid(
                    f"value set '{self.name}' has {len(self._widths)} field(s), member has {len(m)}"
                )
            fields = []
            for (value, mask), width, f in zip(m, self._widths, self.spec.fields):
                what = f"value set '{self.name}' field '{f.name}'"
                v = check_uint(what, value, width)
                k = check_uint(what + " mask", mask, width)
                if v & ~k:
                    raise invalid(f"{what}: value {v:#x} has bits outside the mask {k:#x}")
                fields.append((v, k))
            checked.append(tuple(fields))
        if len(checked) > self.size:
            raise StateError(
                Code.RESOURCE_EXHAUSTED,
                f"value set '{self.name}' holds at most {self.size} members",
            )
        self.members = checked

    def contains(self, values: Sequence[int]) -> bool:
        for m in self.members:
            if all(v & k == mv for v, (mv, k) in zip(values, m)):
                return True
        return False

    def clear(self) -> None:
        self.members = []

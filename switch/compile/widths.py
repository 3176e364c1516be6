"""Widths of values whose P4 type has none, as the v1model back end of p4c gives them.

An ``enum`` without an underlying type is a symbolic value in P4, but BMv2 stores it in 32
bits: p4c's v1model mid-end turns every such enum into ``bit<32>`` (``EnumOn32Bits``), so
that is its width in metadata structs, field lists (hash, checksum, digest), table keys and
registers. Every other type has its P4 width (:func:`switch.lang.types.width_of`).
"""

from __future__ import annotations

from switch.lang import types as T

ENUM_WIDTH = 32
"""Bits of an enum without an underlying type on BMv2."""


def target_width(t: T.Type) -> int:
    """The width of a scalar value of type ``t`` on this target (and on BMv2)."""
    if isinstance(t, T.EnumT) and t.underlying is None:
        return ENUM_WIDTH
    return T.width_of(t)

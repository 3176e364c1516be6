"""Name resolution for pipeline objects (tables, counters, ...): exact name, else a unique dotted suffix."""

from __future__ import annotations

from collections.abc import Iterable

from switch.pipeline.errors import Code, StateError, unknown


def resolve_name(kind: str, name: str, names: Iterable[str]) -> str:
    """The fully qualified name that ``name`` denotes among ``names``.

    ``ipv4_lpm`` resolves to ``MyIngress.ipv4_lpm`` when that is the only name ending in
    ``.ipv4_lpm``. Unknown names raise NOT_FOUND with a suggestion; ambiguous suffixes raise
    INVALID_ARGUMENT listing the candidates.
    """
    pool = list(names)
    if name in pool:
        return name
    hits = [n for n in pool if n.endswith("." + name)]
    if len(hits) == 1:
        return hits[0]
    if hits:
        listed = ", ".join(sorted(hits))
        raise StateError(Code.INVALID_ARGUMENT, f"{kind} name '{name}' is ambiguous: {listed}")
    raise unknown(kind, name, pool)

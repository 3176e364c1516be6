"""Action profiles and selectors: members (id -> action) and weighted groups of members.

Errors follow P4Runtime: duplicate ids ALREADY_EXISTS, missing ids NOT_FOUND, deleting a member
that a group or a table entry still uses (or a group an entry uses) FAILED_PRECONDITION, a full
profile or group RESOURCE_EXHAUSTED.

Member selection follows BMv2: every member gets the lowest free handle when created; a group
lists its members by ascending handle and a packet picks ``members[hash % len(members)]``. A
member of weight *w* is listed *w* times in a row.

One-shot programming (P4Runtime "One Shot Action Selector Programming"): a table entry given a
set of (action, weight) pairs gets a group and members the profile creates itself, with ids from
:data:`ONE_SHOT_ID_BASE` up (beyond any uint32 id a client can use). Such a group disappears,
members included, when the last table entry using it lets it go. A selector is programmed either
with one-shot sets or with the client's own members and groups, never both at once
(INVALID_ARGUMENT); it may switch when it holds neither.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from switch.pipeline.errors import Code, StateError, unknown
from switch.pipeline.hashes import CrcConfig, compute_hash
from switch.pipeline.validate import check_action_call, invalid
from switch.schema import ActionCall, ActionProfileSpec, ActionRef, ActionSpec

#: The first member/group id of one-shot sets: P4Runtime ids are uint32, so these never collide.
ONE_SHOT_ID_BASE = 1 << 32

_MIXED = (
    "one-shot action sets and client-written members/groups cannot be mixed in one action selector"
)


def is_one_shot_id(object_id: int) -> bool:
    """Whether a member or group id was allocated for a one-shot action set."""
    return object_id >= ONE_SHOT_ID_BASE


@dataclass
class ActionGroup:
    """A selector group: member id -> weight, in insertion order; ``max_size`` 0 = unbounded."""

    group_id: int
    members: dict[int, int] = field(default_factory=dict)
    max_size: int = 0


class ActionProfile:
    """The members and groups of one ``action_profile`` / ``action_selector`` instance."""

    def __init__(
        self,
        spec: ActionProfileSpec,
        actions: Mapping[str, ActionSpec] | None = None,
        refs: Mapping[str, ActionRef] | None = None,
    ) -> None:
        """``actions`` and ``refs`` (the actions the using tables allow) enable action checks."""
        self.spec = spec
        self.name = spec.name
        self._actions = actions
        self._refs = refs
        self.members: dict[int, ActionCall] = {}
        self.groups: dict[int, ActionGroup] = {}
        self.crc_config: CrcConfig | None = None  # for crc16_custom / crc32_custom selectors
        self._handles: dict[int, int] = {}  # member id -> BMv2-style handle
        self._member_refs: dict[int, int] = {}  # member id -> number of groups + entries using it
        self._group_refs: dict[int, int] = {}  # group id -> number of entries using it
        self._expanded: dict[int, tuple[ActionCall, ...]] = {}
        self._next_one_shot = ONE_SHOT_ID_BASE

    # ----- programming modes

    def has_one_shot(self) -> bool:
        """Whether any group or member was made for a one-shot action set."""
        return any(is_one_shot_id(g) for g in self.groups) or any(
            is_one_shot_id(m) for m in self.members
        )

    def has_client_objects(self) -> bool:
        """Whether any member or group was written by the client (not for a one-shot set)."""
        return any(not is_one_shot_id(g) for g in self.groups) or any(
            not is_one_shot_id(m) for m in self.members
        )

    def _check_mode(self, object_id: int) -> None:
        if is_one_shot_id(object_id):
            self._next_one_shot = max(self._next_one_shot, object_id + 1)
        elif self.has_one_shot():
            raise invalid(f"action profile '{self.name}': {_MIXED}")

    # ----- members

    def _check_action(self, call: ActionCall) -> ActionCall:
        if self._actions is None or self._refs is None:
            if not isinstance(call, ActionCall):
                raise invalid(f"action profile '{self.name}': expected an ActionCall")
            return call
        return check_action_call(
            f"action profile '{self.name}'", call, self._refs, self._actions, for_default=False
        )

    def _member(self, member_id: int) -> ActionCall:
        try:
            return self.members[member_id]
        except KeyError:
            raise unknown(f"member of action profile '{self.name}'", member_id) from None

    def insert_member(self, member_id: int, action: ActionCall) -> None:
        if not isinstance(member_id, int) or member_id < 0:
            raise invalid(f"action profile '{self.name}': bad member id {member_id!r}")
        if member_id in self.members:
            raise StateError(
                Code.ALREADY_EXISTS,
                f"action profile '{self.name}': member {member_id} already exists",
            )
        self._check_mode(member_id)
        if self.spec.size > 0 and len(self.members) >= self.spec.size:
            raise StateError(
                Code.RESOURCE_EXHAUSTED,
                f"action profile '{self.name}' is full ({self.spec.size} members)",
            )
        call = self._check_action(action)
        used = set(self._handles.values())
        handle = 0
        while handle in used:
            handle += 1
        self.members[member_id] = call
        self._handles[member_id] = handle
        self._member_refs[member_id] = 0

    def modify_member(self, member_id: int, action: ActionCall) -> None:
        self._member(member_id)
        self.members[member_id] = self._check_action(action)
        self._refresh(g.group_id for g in self.groups.values() if member_id in g.members)

    def delete_member(self, member_id: int) -> None:
        self._member(member_id)
        if self._member_refs[member_id]:
            raise StateError(
                Code.FAILED_PRECONDITION,
                f"action profile '{self.name}': member {member_id} is still used by "
                f"{self._member_refs[member_id]} group(s) or table entries",
            )
        del self.members[member_id]
        del self._handles[member_id]
        del self._member_refs[member_id]

    def get_member(self, member_id: int) -> ActionCall:
        return self._member(member_id)

    # ----- groups

    def _group(self, group_id: int) -> ActionGroup:
        try:
            return self.groups[group_id]
        except KeyError:
            raise unknown(f"group of action profile '{self.name}'", group_id) from None

    def _checked_members(
        self, members: Mapping[int, int] | Iterable[int], max_size: int
    ) -> dict[int, int]:
        items = members.items() if isinstance(members, Mapping) else ((m, 1) for m in members)
        out: dict[int, int] = {}
        for member_id, weight in items:
            self._member(member_id)
            if member_id in out:
                raise invalid(f"action profile '{self.name}': member {member_id} listed twice")
            if not isinstance(weight, int) or weight < 1:
                raise invalid(
                    f"action profile '{self.name}': member {member_id} has weight {weight!r}"
                )
            out[member_id] = weight
        if max_size > 0 and sum(out.values()) > max_size:
            raise StateError(
                Code.RESOURCE_EXHAUSTED,
                f"action profile '{self.name}': group needs {sum(out.values())} slots, "
                f"max_size is {max_size}",
            )
        return out

    def insert_group(
        self, group_id: int, members: Mapping[int, int] | Iterable[int] = (), max_size: int = 0
    ) -> None:
        """Create a group; ``members`` maps member id -> weight (or lists ids, weight 1)."""
        if not self.spec.with_selector:
            raise invalid(f"action profile '{self.name}' has no selector and takes no groups")
        if not isinstance(group_id, int) or group_id < 0:
            raise invalid(f"action profile '{self.name}': bad group id {group_id!r}")
        if group_id in self.groups:
            raise StateError(
                Code.ALREADY_EXISTS,
                f"action profile '{self.name}': group {group_id} already exists",
            )
        if max_size < 0:
            raise invalid(f"action profile '{self.name}': negative max_size {max_size}")
        self._check_mode(group_id)
        checked = self._checked_members(members, max_size)
        self.groups[group_id] = ActionGroup(group_id, {}, max_size)
        self._group_refs[group_id] = 0
        self._set_members(self.groups[group_id], checked)

    def modify_group(
        self,
        group_id: int,
        members: Mapping[int, int] | Iterable[int],
        max_size: int | None = None,
    ) -> None:
        """Replace the membership (and optionally max_size) of a group, as P4Runtime MODIFY."""
        group = self._group(group_id)
        size = group.max_size if max_size is None else max_size
        checked = self._checked_members(members, size)
        group.max_size = size
        self._set_members(group, checked)

    def delete_group(self, group_id: int) -> None:
        group = self._group(group_id)
        if self._group_refs[group_id]:
            raise StateError(
                Code.FAILED_PRECONDITION,
                f"action profile '{self.name}': group {group_id} is still used by "
                f"{self._group_refs[group_id]} table entries",
            )
        self._set_members(group, {})
        del self.groups[group_id]
        del self._group_refs[group_id]
        self._expanded.pop(group_id, None)

    def get_group(self, group_id: int) -> ActionGroup:
        return self._group(group_id)

    def add_member_to_group(self, group_id: int, member_id: int, weight: int = 1) -> None:
        group = self._group(group_id)
        if member_id in group.members:
            raise StateError(
                Code.ALREADY_EXISTS,
                f"action profile '{self.name}': member {member_id} already in group {group_id}",
            )
        self.modify_group(group_id, {**group.members, member_id: weight})

    def remove_member_from_group(self, group_id: int, member_id: int) -> None:
        group = self._group(group_id)
        if member_id not in group.members:
            raise unknown(f"member of group {group_id} in '{self.name}'", member_id)
        self.modify_group(group_id, {m: w for m, w in group.members.items() if m != member_id})

    def _set_members(self, group: ActionGroup, members: dict[int, int]) -> None:
        for m in group.members:
            self._member_refs[m] -= 1
        for m in members:
            self._member_refs[m] += 1
        group.members = members
        self._refresh((group.group_id,))

    def _refresh(self, group_ids: Iterable[int]) -> None:
        for gid in group_ids:
            group = self.groups[gid]
            order = sorted(group.members, key=self._handles.__getitem__)
            self._expanded[gid] = tuple(
                self.members[m] for m in order for _ in range(group.members[m])
            )

    # ----- use by tables and the data plane

    def retain(self, member_id: int | None, group_id: int | None) -> None:
        """Record a table entry's reference (NOT_FOUND if the member or group does not exist)."""
        for object_id in (member_id, group_id):
            if object_id is not None and not is_one_shot_id(object_id) and self.has_one_shot():
                raise invalid(f"action profile '{self.name}': {_MIXED}")
        if member_id is not None:
            self._member(member_id)
            self._member_refs[member_id] += 1
        if group_id is not None:
            self._group(group_id)
            self._group_refs[group_id] += 1

    def release(self, member_id: int | None, group_id: int | None) -> None:
        if member_id is not None and member_id in self._member_refs:
            self._member_refs[member_id] -= 1
        if group_id is not None and group_id in self._group_refs:
            self._group_refs[group_id] -= 1
            if is_one_shot_id(group_id):
                self.drop_one_shot(group_id)

    # ----- one-shot action sets

    def insert_one_shot(self, actions: Sequence[tuple[ActionCall, int]]) -> int:
        """Create the members and group of a one-shot action set; returns the group id.

        ``actions`` lists (action, weight) pairs in the client's order; the same action may
        appear more than once (one member each). Nothing is created if any pair is refused.
        """
        owner = f"action profile '{self.name}'"
        if not self.spec.with_selector:
            raise invalid(f"{owner} has no selector; one-shot action sets need one")
        if self.has_client_objects():
            raise invalid(f"{owner}: {_MIXED}")
        calls: list[tuple[ActionCall, int]] = []
        for call, weight in actions:
            if not isinstance(weight, int) or weight < 1:
                raise invalid(f"{owner}: one-shot action {call.name} has weight {weight!r}")
            calls.append((self._check_action(call), weight))
        if self.spec.size > 0 and len(self.members) + len(calls) > self.spec.size:
            raise StateError(
                Code.RESOURCE_EXHAUSTED,
                f"{owner} is full ({self.spec.size} members); the set needs {len(calls)}",
            )
        made: list[int] = []
        try:
            for call, _weight in calls:
                member_id = self._next_one_shot
                self.insert_member(member_id, call)
                made.append(member_id)
            group_id = self._next_one_shot
            self.insert_group(group_id, {m: w for m, (_c, w) in zip(made, calls)})
        except BaseException:
            for member_id in made:
                self.delete_member(member_id)
            raise
        return group_id

    def one_shot_actions(self, group_id: int) -> list[tuple[ActionCall, int]]:
        """The (action, weight) pairs of a one-shot group, in the order they were given."""
        group = self._group(group_id)
        return [(self.members[m], w) for m, w in group.members.items()]

    def drop_one_shot(self, group_id: int) -> None:
        """Delete a one-shot group and its members if no table entry uses it any more."""
        if group_id not in self.groups or self._group_refs[group_id]:
            return
        members = list(self.groups[group_id].members)
        self.delete_group(group_id)
        for member_id in members:
            if not self._member_refs[member_id]:
                self.delete_member(member_id)

    def choose(self, group_id: int, data: bytes) -> ActionCall | None:
        """The action a packet whose selector input is ``data`` gets from a group (None: empty)."""
        members = self._expanded.get(group_id)
        if not members:
            return None
        if len(members) == 1:
            return members[0]
        algo = self.spec.algorithm or "crc16"
        return members[compute_hash(algo, data, self.crc_config) % len(members)]

    def clear(self) -> None:
        """Remove every member and group (tables using the profile must be cleared first)."""
        self.members.clear()
        self.groups.clear()
        self._handles.clear()
        self._member_refs.clear()
        self._group_refs.clear()
        self._expanded.clear()

"""Entity handlers of action profiles and selectors: ``ActionProfileMember``, ``ActionProfileGroup``.

Ids are non-zero; a member binds one of the actions its tables allow in entries; groups exist only
in selectors, list each member once with a weight >= 1, and keep the ``max_size`` they were
inserted with (at most the P4Info ``max_group_size`` when that is set). Watch ports are not
implemented (UNIMPLEMENTED; an empty ``watch_port`` watches nothing). The hidden members and
groups of one-shot action sets (see :mod:`switch.p4rt.entity_tables`) are never read here, and
members or groups cannot be written to a selector that holds one-shot sets (INVALID_ARGUMENT). Duplicate ids, missing ids, members still in use and full profiles
get the codes the pipeline state raises (ALREADY_EXISTS, NOT_FOUND, FAILED_PRECONDITION,
RESOURCE_EXHAUSTED).
"""

from __future__ import annotations

from collections.abc import Iterator

from p4.v1 import p4runtime_pb2

from switch.p4rt.codec import decode_action, encode_action
from switch.p4rt.pipeline_view import ProfileView
from switch.p4rt.status import INVALID_ARGUMENT, NOT_FOUND, UNIMPLEMENTED, P4RTError
from switch.p4rt.target import Target
from switch.pipeline.profiles import is_one_shot_id

INSERT = p4runtime_pb2.Update.INSERT
MODIFY = p4runtime_pb2.Update.MODIFY
DELETE = p4runtime_pb2.Update.DELETE


def _owner(pv: ProfileView) -> str:
    return f"action profile '{pv.name}'"


def _profiles(target: Target, profile_id: int) -> list[ProfileView]:
    if profile_id == 0:
        return list(target.view.profiles.values())
    return [target.view.profile(profile_id)]


class ProfileMembers:
    """``ActionProfileMember``: member id -> action, in action profiles and selectors."""

    def write(
        self, target: Target, update_type: int, msg: p4runtime_pb2.ActionProfileMember
    ) -> None:
        pv = target.view.profile(msg.action_profile_id)
        profile = target.state.action_profiles[pv.name]
        if msg.member_id == 0:
            raise P4RTError(INVALID_ARGUMENT, f"{_owner(pv)}: member id 0 is not valid")
        if update_type == DELETE:
            profile.delete_member(msg.member_id)
            return
        if update_type == MODIFY:
            profile.get_member(msg.member_id)
        if not msg.HasField("action"):
            raise P4RTError(INVALID_ARGUMENT, f"{_owner(pv)}: member needs an action")
        call = decode_action(target.view, msg.action, pv.actions, _owner(pv))
        if update_type == INSERT:
            profile.insert_member(msg.member_id, call)
        else:
            profile.modify_member(msg.member_id, call)

    def read(
        self, target: Target, msg: p4runtime_pb2.ActionProfileMember
    ) -> Iterator[p4runtime_pb2.Entity]:
        for pv in _profiles(target, msg.action_profile_id):
            profile = target.state.action_profiles[pv.name]
            if msg.member_id:
                if msg.member_id not in profile.members:
                    raise P4RTError(NOT_FOUND, f"{_owner(pv)} has no member {msg.member_id}")
                ids = [msg.member_id]
            else:
                ids = sorted(m for m in profile.members if not is_one_shot_id(m))
            for mid in ids:
                out = p4runtime_pb2.ActionProfileMember(
                    action_profile_id=pv.id,
                    member_id=mid,
                    action=encode_action(target.view, profile.members[mid]),
                )
                yield p4runtime_pb2.Entity(action_profile_member=out)


class ProfileGroups:
    """``ActionProfileGroup``: weighted groups of members, in action selectors."""

    def write(
        self, target: Target, update_type: int, msg: p4runtime_pb2.ActionProfileGroup
    ) -> None:
        pv = target.view.profile(msg.action_profile_id)
        owner = _owner(pv)
        if not pv.spec.with_selector:
            raise P4RTError(INVALID_ARGUMENT, f"{owner} has no selector and takes no groups")
        profile = target.state.action_profiles[pv.name]
        if msg.group_id == 0:
            raise P4RTError(INVALID_ARGUMENT, f"{owner}: group id 0 is not valid")
        if update_type == DELETE:
            profile.delete_group(msg.group_id)
            return
        members: dict[int, int] = {}
        for m in msg.members:
            kind = m.WhichOneof("watch_kind")
            if kind == "watch" or (kind == "watch_port" and m.watch_port != b""):
                raise P4RTError(UNIMPLEMENTED, "watch ports are not implemented")
            if m.member_id in members:
                raise P4RTError(INVALID_ARGUMENT, f"{owner}: member {m.member_id} is listed twice")
            if m.weight < 1:
                raise P4RTError(
                    INVALID_ARGUMENT, f"{owner}: member {m.member_id} has weight {m.weight}"
                )
            members[m.member_id] = m.weight
        if msg.max_size < 0 or (pv.max_group_size and not 0 < msg.max_size <= pv.max_group_size):
            raise P4RTError(INVALID_ARGUMENT, f"{owner}: max_size {msg.max_size} is not valid")
        if update_type == INSERT:
            profile.insert_group(msg.group_id, members, msg.max_size)
            return
        group = profile.get_group(msg.group_id)
        if msg.max_size != group.max_size:
            raise P4RTError(
                INVALID_ARGUMENT,
                f"{owner}: the max_size of group {msg.group_id} "
                f"is {group.max_size} and cannot change",
            )
        profile.modify_group(msg.group_id, members)

    def read(
        self, target: Target, msg: p4runtime_pb2.ActionProfileGroup
    ) -> Iterator[p4runtime_pb2.Entity]:
        for pv in _profiles(target, msg.action_profile_id):
            if not pv.spec.with_selector:
                if msg.action_profile_id:
                    raise P4RTError(INVALID_ARGUMENT, f"{_owner(pv)} has no groups")
                continue
            profile = target.state.action_profiles[pv.name]
            if msg.group_id:
                if msg.group_id not in profile.groups:
                    raise P4RTError(NOT_FOUND, f"{_owner(pv)} has no group {msg.group_id}")
                ids = [msg.group_id]
            else:
                ids = sorted(g for g in profile.groups if not is_one_shot_id(g))
            for gid in ids:
                group = profile.groups[gid]
                out = p4runtime_pb2.ActionProfileGroup(
                    action_profile_id=pv.id, group_id=gid, max_size=group.max_size
                )
                for mid, weight in group.members.items():
                    out.members.add(member_id=mid, weight=weight)
                yield p4runtime_pb2.Entity(action_profile_group=out)

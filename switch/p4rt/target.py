"""What an entity handler works on: the running state, the P4Info view and server-side extras.

The pipeline state (:mod:`switch.pipeline`) keeps everything that affects forwarding; a few P4Runtime fields have no place
there (the metadata cookie of a default entry, the order and metadata of a multicast group's
replicas as the client wrote them). :class:`Extras` keeps those, and readers only trust an extra
while the pipeline state still agrees with it, so a commit that replaces the state never makes a
read return stale values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from switch.device.device import PacketTotals
from switch.p4rt.pipeline_view import PipelineView
from switch.pipeline.drops import DropCell
from switch.pipeline.pre import Replica
from switch.pipeline.state import SwitchState
from switch.schema import ActionCall


@dataclass
class Extras:
    """P4Runtime fields the pipeline state does not keep, for the state object ``owner``."""

    # table name -> (the default action it was written with, packed cookie of the default entry)
    default_cookies: dict[str, tuple[ActionCall, int]] = field(default_factory=dict)
    # multicast group id -> (replicas in the client's order, metadata)
    multicast: dict[int, tuple[tuple[Replica, ...], bytes]] = field(default_factory=dict)
    owner: SwitchState | None = None

    def clear(self) -> None:
        self.default_cookies.clear()
        self.multicast.clear()

    def bind(self, state: SwitchState, *, carry: bool = False) -> None:
        """Serve ``state`` from now on; ``carry`` keeps the extras (a state-keeping commit)."""
        if state is not self.owner and not carry:
            self.clear()
        self.owner = state


@dataclass
class Target:
    """One request's view of the device; handlers run with ``device.lock`` held."""

    state: SwitchState
    view: PipelineView
    extras: Extras
    # Called with a digest name when its configuration changes (the digest engine flushes it).
    on_digest_config: Callable[[str], None] = lambda name: None
    # The device's drop counters by reason, port and queue (target-specific ExternEntry reads).
    drop_cells: Callable[[], list[DropCell]] = lambda: []
    # Packets in, out, made and queued (target-specific ExternEntry reads); None: not kept.
    packet_totals: Callable[[], PacketTotals] | None = None
    # The device clock in microseconds (``time_since_last_hit`` of idle-timeout tables).
    now_us: Callable[[], int] = lambda: 0

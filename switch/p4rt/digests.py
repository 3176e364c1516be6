"""Digest streaming: the data plane's digest messages become ``DigestList`` stream messages.

A background thread drains ``device.state.digests``, following the
"DigestEntry" section of the specification: messages of digests that are not enabled are dropped;
a message already buffered, or sent and not yet acknowledged (for up to ``ack_timeout_ns``), is a
duplicate and dropped; a digest's buffer is sent to the primary stream of the default role when it
holds ``max_list_size`` messages (0: no limit) or its oldest message is ``max_timeout_ns`` old. A
``DigestListAck`` clears the cache entries of its list. A new pipeline (a new state object) starts
everything afresh.

The thread sleeps until the device says a pass left digests (``Device.on_digest``), then runs
every ``poll_s`` seconds while lists are buffered or wait for their acknowledgement; with
nothing pending it only looks every :data:`IDLE_POLL_S` seconds (for digests that no hook
announced), so an idle switch does not wake up hundreds of times a second.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from p4.v1 import p4runtime_pb2

from switch.device.device import Device
from switch.p4rt.arbitration import DEFAULT_ROLE, Arbiter
from switch.p4rt.codec import encode_struct
from switch.p4rt.pipeline_view import PipelineView
from switch.pipeline.state import DigestConfig, SwitchState

log = logging.getLogger(__name__)

Message = tuple[int, ...]
IDLE_POLL_S = 0.1  # seconds between looks when nothing is pending and no hook fired


@dataclass
class _Buffer:
    first_ns: int
    messages: list[Message] = field(default_factory=list)
    seen: set[Message] = field(default_factory=set)


@dataclass
class DigestStats:
    lists_sent: int = 0
    messages_sent: int = 0
    duplicates: int = 0
    disabled_drops: int = 0  # messages of digests that are not enabled
    no_primary_drops: int = 0  # messages that had no primary stream to go to
    acks: int = 0


class DigestEngine:
    """Buffers, sends and de-duplicates the digests of one device."""

    def __init__(
        self,
        device: Device,
        arbiter: Arbiter,
        view_of: Callable[[], PipelineView | None],
        poll_s: float = 0.002,
    ) -> None:
        self.device = device
        self.arbiter = arbiter
        self.view_of = view_of
        self.poll_s = poll_s
        self.stats = DigestStats()
        self._lock = threading.Lock()
        self._state: SwitchState | None = None
        self._buffers: dict[str, _Buffer] = {}
        self._cache: dict[str, dict[Message, int]] = {}  # digest -> message -> list id
        self._lists: dict[tuple[str, int], tuple[int, list[Message]]] = {}  # -> (sent, messages)
        self._next_list: dict[str, int] = {}
        self._stop = threading.Event()
        self._kick = threading.Event()
        self._thread: threading.Thread | None = None

    # ----- thread

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self.device.on_digest = self.kick
        self._thread = threading.Thread(target=self._run, name="p4rt-digests", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._kick.set()
        if self.device.on_digest == self.kick:
            self.device.on_digest = None
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def kick(self) -> None:
        """Digests are waiting: drain them now (called from the data path)."""
        self._kick.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._kick.wait(max(self.poll_s, IDLE_POLL_S) if self._idle() else self.poll_s)
            self._kick.clear()
            if self._stop.is_set():
                break
            try:
                self.tick()
            except Exception:  # keep streaming digests whatever one pass ran into
                log.exception("digest pass failed")

    # ----- one pass

    def _reset(self, state: SwitchState | None) -> None:
        self._state = state
        self._buffers.clear()
        self._cache.clear()
        self._lists.clear()
        self._next_list.clear()

    def _idle(self) -> bool:
        """Nothing to do (checked without the device lock, so the data path is not slowed)."""
        state = self.device.state
        return (
            state is self._state
            and (state is None or not state.digests)
            and not self._buffers
            and not self._lists
        )

    def tick(self, now_ns: int | None = None) -> None:
        """Drain the device's digest queue and send every list that is due."""
        if self._idle():
            return
        with self.device.lock, self._lock:
            state = self.device.state
            view = self.view_of()
            if state is not self._state:
                self._reset(state)
            if state is None or view is None:
                return
            now = time.monotonic_ns() if now_ns is None else now_ns
            self._expire(state, now)
            queue = state.digests
            while queue:
                name, values = queue.popleft()
                config = state.digest_config.get(name)
                if config is None:
                    self.stats.disabled_drops += 1
                    continue
                buf = self._buffers.get(name)
                if values in self._cache.get(name, {}) or (buf is not None and values in buf.seen):
                    self.stats.duplicates += 1
                    continue
                if buf is None:
                    buf = self._buffers[name] = _Buffer(now)
                buf.messages.append(values)
                buf.seen.add(values)
                if config.max_list_size > 0 and len(buf.messages) >= config.max_list_size:
                    self._send(view, name, config, now)
            for name in list(self._buffers):
                config = state.digest_config.get(name)
                if config is None:
                    del self._buffers[name]
                elif now - self._buffers[name].first_ns >= config.max_timeout_ns:
                    self._send(view, name, config, now)

    def _expire(self, state: SwitchState, now: int) -> None:
        for key, (sent, _messages) in list(self._lists.items()):
            config = state.digest_config.get(key[0])
            if config is None or now - sent >= config.ack_timeout_ns:
                self._forget(key)

    def _forget(self, key: tuple[str, int]) -> None:
        _sent, messages = self._lists.pop(key)
        cache = self._cache.get(key[0], {})
        for m in messages:
            if cache.get(m) == key[1]:
                del cache[m]

    def _send(self, view: PipelineView, name: str, config: DigestConfig, now: int) -> None:
        buf = self._buffers.pop(name)
        digest_id = view.digest_ids.get(name)
        sink = self.arbiter.primary_sink(DEFAULT_ROLE)
        if digest_id is None or sink is None:
            self.stats.no_primary_drops += len(buf.messages)
            return
        fields = view.digests[digest_id].fields
        list_id = self._next_list.get(name, 1)
        self._next_list[name] = list_id + 1
        msg = p4runtime_pb2.StreamMessageResponse()
        msg.digest.digest_id = digest_id
        msg.digest.list_id = list_id
        msg.digest.timestamp = time.time_ns()
        msg.digest.data.extend(encode_struct(v, fields) for v in buf.messages)
        if not sink.send(msg, droppable=True):
            self.stats.no_primary_drops += len(buf.messages)
            return
        self.stats.lists_sent += 1
        self.stats.messages_sent += len(buf.messages)
        if config.ack_timeout_ns > 0:
            cache = self._cache.setdefault(name, {})
            for m in buf.messages:
                cache[m] = list_id
            self._lists[(name, list_id)] = (now, buf.messages)

    # ----- control

    def ack(self, digest_id: int, list_id: int) -> bool:
        """A ``DigestListAck``; False when the digest id is unknown."""
        view = self.view_of()
        if view is None or digest_id not in view.digests:
            return False
        with self._lock:
            self.stats.acks += 1
            key = (view.digests[digest_id].name, list_id)
            if key in self._lists:
                self._forget(key)
        return True

    def config_changed(self, name: str) -> None:
        """A DigestEntry write: a disabled digest loses its buffer and cache."""
        with self._lock:
            state = self._state
            if state is None or state.digest_config.get(name) is None:
                self._buffers.pop(name, None)
                self._cache.pop(name, None)
                for key in [k for k in self._lists if k[0] == name]:
                    del self._lists[key]

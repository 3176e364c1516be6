"""One switch device: its pipeline (program + P4Info + state), traffic manager and CPU port.

The P4Runtime server and the daemon's packet loop share a :class:`Device`. Every change of
forwarding state and every pipeline pass happens under ``device.lock``; the data path holds it
per batch of packets, so control-plane writes land between batches and never half-way through
a packet.

Packet flow: :meth:`Device.receive` runs ingress and enqueues into the traffic manager
(:meth:`Device.receive_batch` for a batch of frames: the one place the data-path loop hands
frames to the executor, so a faster executor can take over a whole batch);
:meth:`Device.service_queues` dequeues what the port rates allow, runs egress and returns the
frames to transmit. Frames for the CPU port become PacketIn messages (the ``packet_in``
controller header is cut off and decoded); PacketOut messages enter ingress on the CPU port with
a ``packet_out`` header built from their metadata.

Drops: every packet the device loses is counted once by reason and port in ``device.drops``
(:mod:`switch.pipeline.drops`): the executor counts the program's drops, the traffic manager its
tail drops, the device what has no pipeline or no controller header; the port layer's own
counts (ring overruns, send failures) come in through ``io_drops`` when they are read, and
:meth:`Device.drop_cells` returns them all.
"""

from __future__ import annotations

import array
import contextlib
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from switch.compile import CompiledProgram
from switch.device.tm import PortQueue, TrafficManager
from switch.errors import P4Error
from switch.pipeline.drops import DropCell, DropCounters, DropReason, merge_cells
from switch.pipeline.state import SwitchState
from switch.pipeline.v1model import EgressJob, InstanceType, V1Switch
from switch.schema import ControllerHeaderSpec

if TYPE_CHECKING:
    from switch.device.ports import PortPackets

PacketInHook = Callable[[bytes, dict[int, int]], None]


@dataclass
class Pipeline:
    """A committed (or saved) forwarding pipeline."""

    program: CompiledProgram
    p4info: Any  # p4.config.v1.P4Info
    device_config: bytes
    cookie: int


@dataclass
class DeviceCounters:
    rx: int = 0
    tx: int = 0
    to_cpu: int = 0
    from_cpu: int = 0
    no_pipeline_drops: int = 0
    malformed_packet_out: int = 0


@dataclass(frozen=True)
class PacketTotals:
    """Packets through the device, for conservation: ``rx + from_cpu + copies = tx + to_cpu +
    drops + queued`` (without ports); with ports, the ports' ``in``/``tx`` replace ``rx``/``tx``
    (frames lost before the device or after it are drop reasons too)."""

    rx_pkts: int  # frames handed to ingress from the ports
    tx_pkts: int  # frames egress handed to the ports (not the CPU port)
    from_cpu_pkts: int  # PacketOuts
    to_cpu_pkts: int  # PacketIns
    copies_pkts: int  # packets the switch made: clones, multicast replicas beyond the first
    queued_pkts: int  # in the traffic manager's queues or about to be handed out
    ports: tuple[PortPackets, ...] = ()


def _encode_header(spec: ControllerHeaderSpec, values: dict[int, int]) -> bytes:
    acc = 0
    total = 0
    for i, f in enumerate(spec.fields, start=1):
        v = values.get(i, 0) & ((1 << f.width) - 1)
        acc = (acc << f.width) | v
        total += f.width
    return acc.to_bytes(total // 8, "big")


def _decode_header(spec: ControllerHeaderSpec, data: bytes) -> tuple[dict[int, int], bytes] | None:
    total = sum(f.width for f in spec.fields)
    n = total // 8
    if len(data) < n:
        return None
    acc = int.from_bytes(data[:n], "big")
    values: dict[int, int] = {}
    shift = total
    for i, f in enumerate(spec.fields, start=1):
        shift -= f.width
        values[i] = (acc >> shift) & ((1 << f.width) - 1)
    return values, data[n:]


class HeldQueues(Protocol):
    """Egress queues kept outside the traffic manager (the native data path's queues in C,
    :class:`switch.device.fastpath.RingFastPath`), with the traffic manager's semantics."""

    def held(self) -> int:
        """Packets waiting in them."""
        ...

    def held_at(self, port: int) -> int:
        """Packets waiting for ``port``."""
        ...

    def held_departure_us(self) -> float | None:
        """The earliest time one of them may leave (None: none waits)."""
        ...

    def release(self) -> None:
        """Move them into the traffic manager's queues, in order."""
        ...


class Wakeup:
    """Wakes the data-path loop from another thread (a PacketOut, a config change, a thread
    that wants the device lock).

    ``set()`` sets ``flag[0]`` (a C ``int`` the loop in C reads between its rounds) and writes
    a byte to a pipe the loop polls; ``is_set()``/``wait()`` also make it usable like a
    ``threading.Event`` where no loop polls it.
    """

    def __init__(self) -> None:
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        os.set_blocking(self._w, False)
        self._event = threading.Event()
        self.flag = array.array("i", [0])

    def fileno(self) -> int:
        return self._r

    def set(self) -> None:
        self.flag[0] = 1
        self._event.set()
        try:
            os.write(self._w, b"x")
        except (BlockingIOError, OSError):
            pass  # the pipe is full: the loop will wake up anyway

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._event.wait(timeout)

    def clear(self) -> None:
        self.flag[0] = 0
        self._event.clear()
        try:
            while os.read(self._r, 4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def close(self) -> None:
        for fd in (self._r, self._w):
            try:
                os.close(fd)
            except OSError:
                pass


class DeviceLock:
    """``Device.lock``: a re-entrant lock whose waiters wake the data path first.

    The data path may hold the lock for long stretches while its loop waits and runs rounds in
    C (:mod:`switch.native.loop`, GIL released). A thread that finds the lock taken sets the
    device's wake-up (the loop in C returns, the data path lets go of the lock) and waits in a
    turnstile that the data path passes too before it takes the lock again
    (:meth:`quietly`), so the waiting thread gets the lock before the data path's next turn.
    Uncontended, it costs a lock and a turnstile pass.
    """

    def __init__(self, wakeup: Wakeup) -> None:
        self._lock = threading.Lock()
        self._turn = threading.Lock()
        self._wakeup = wakeup
        self._owner: int | None = None
        self._depth = 0
        self.waits = 0  # times a thread had to wake the data path to get the lock
        self._quiet = _QuietHold(self)

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """Take the lock (again, in the thread holding it); waking the data path if taken.

        With a ``timeout`` the wait may last up to twice that (turnstile, then the lock).
        """
        return self._acquire(blocking, timeout, True)

    def _acquire(self, blocking: bool, timeout: float, wake: bool) -> bool:
        me = threading.get_ident()
        if self._owner == me:
            self._depth += 1
            return True
        # Nobody waits in the turnstile: take it straight away if free (a thread entering the
        # turnstile meanwhile finds it taken and wakes the holder, as below).
        if not self._turn.locked() and self._lock.acquire(False):
            self._owner = me
            self._depth = 1
            return True
        if not self._turn.acquire(blocking, timeout if blocking else -1):
            return False
        try:
            if not self._lock.acquire(False):
                if not blocking:
                    return False
                if wake:
                    self.waits += 1
                    self._wakeup.set()
                if not self._lock.acquire(True, timeout):
                    return False
        finally:
            self._turn.release()
        self._owner = me
        self._depth = 1
        return True

    def release(self) -> None:
        if self._owner != threading.get_ident():
            raise RuntimeError("cannot release un-acquired lock")
        self._depth -= 1
        if not self._depth:
            self._owner = None
            self._lock.release()

    def __enter__(self) -> bool:
        return self._acquire(True, -1, True)

    def __exit__(self, *exc: object) -> None:
        self.release()

    def quietly(self) -> _QuietHold:
        """``with lock.quietly():`` holds the lock without waking the data path (for the data
        path itself)."""
        return self._quiet


class _QuietHold:
    """``DeviceLock.quietly()``'s context manager (a class: a generator costs microseconds)."""

    __slots__ = ("_lock",)

    def __init__(self, lock: DeviceLock) -> None:
        self._lock = lock

    def __enter__(self) -> None:
        lk = self._lock
        if lk._turn.locked() or not lk._lock.acquire(False):
            lk._acquire(True, -1, False)  # taken, or a waiter first: the turnstile
            return
        lk._owner = threading.get_ident()
        lk._depth = 1

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


class Device:
    """A switch: pipeline lifecycle, traffic manager, CPU port and packet I/O hooks."""

    def __init__(
        self,
        device_id: int = 1,
        cpu_port: int | None = None,
        *,
        priority_queues: int = 1,
        queue_depth: int = 64,
        seed: int = 0,
        clock: Callable[[], int] | None = None,
        queue_burst_us: float = 0.0,
        queue_catchup_us: float | None = None,
        executor: Callable[..., V1Switch] = V1Switch,
    ) -> None:
        self.device_id = device_id
        self.cpu_port = cpu_port
        self.seed = seed
        # What runs a committed program: called like V1Switch(program, seed=, clock=, drops=)
        # (a native executor with the same interface can take its place).
        self.executor = executor
        self.wakeup = Wakeup()  # set when work arrives from the control plane
        self.lock = DeviceLock(self.wakeup)
        self.pipeline: Pipeline | None = None
        self.saved: Pipeline | None = None  # VERIFY_AND_SAVE, waiting for COMMIT
        self.switch: V1Switch | None = None
        self.drops = DropCounters()  # by reason and port, kept across pipeline changes
        self.tm = TrafficManager(
            priority_queues, queue_depth, self.drops, queue_burst_us, queue_catchup_us
        )
        self.counters = DeviceCounters()
        # The port layer's drop counts (ring overruns, send failures), read on demand; the
        # daemon sets it to its PortSet's (call with ``lock`` held).
        self.io_drops: Callable[[], list[DropCell]] | None = None
        self.tm.drop_cells = self.drop_cells
        # The ports' packets in and out (set by the daemon like ``io_drops``).
        self.io_packets: Callable[[], list[PortPackets]] | None = None
        # The data-path loop's counters, name -> count (set by the daemon; ``show_loop``).
        self.loop_stats: Callable[[], dict[str, int]] | None = None
        self._copies = 0  # made by pipelines no longer running
        self.on_packet_in: PacketInHook | None = None
        self.on_pipeline_change: Callable[[], None] | None = None
        # Called when a pass left digest messages in ``state.digests`` (the digest engine
        # sleeps until then instead of polling).
        self.on_digest: Callable[[], None] | None = None
        self._start_ns = time.monotonic_ns()
        self._clock = clock
        self._ready: list[tuple[int, bytes]] = []  # frames egress produced, not yet handed out
        # Queues the native data path keeps in C: released into ``tm`` before the Python path
        # queues a packet (:meth:`receive`, :meth:`receive_batch`, :meth:`packet_out`), so
        # that a port's packets stay in order.
        self.native_queues: HeldQueues | None = None
        self.tm.held_at = self._held_at

    # -- time --------------------------------------------------------------------------

    def now_us(self) -> int:
        """Microseconds since the switch started (the v1model timestamps' clock)."""
        if self._clock is not None:
            return self._clock()
        return (time.monotonic_ns() - self._start_ns) // 1000

    # -- pipeline ----------------------------------------------------------------------

    @property
    def state(self) -> SwitchState | None:
        return self.switch.state if self.switch is not None else None

    @property
    def program(self) -> CompiledProgram | None:
        return self.pipeline.program if self.pipeline is not None else None

    def commit(self, pipeline: Pipeline, keep_state: bool = False) -> None:
        """Make ``pipeline`` the running one; forwarding state starts empty unless kept."""
        with self.lock:
            old = self.switch
            sw = self.executor(
                pipeline.program, seed=self.seed, clock=self.now_us, drops=self.drops
            )
            if keep_state and old is not None:
                _carry_state(old.state, sw.state)
            if old is not None:
                self._copies += old.counters.copies
            self.switch = sw
            self.pipeline = pipeline
        if self.on_pipeline_change is not None:
            self.on_pipeline_change()

    # -- packet path -------------------------------------------------------------------

    def _held_at(self, port: int) -> int:
        nq = self.native_queues
        return nq.held_at(port) if nq is not None else 0

    def _release_held(self) -> None:
        nq = self.native_queues
        if nq is not None and nq.held():
            nq.release()

    def receive(self, port: int, data: bytes) -> int:
        """Ingress for a frame received on ``port``; returns how many packets were queued."""
        sw = self.switch
        if self.native_queues is not None:
            self._release_held()
        self.counters.rx += 1
        if sw is None:
            self.counters.no_pipeline_drops += 1
            self.drops.count(DropReason.NO_PIPELINE, port)
            return 0
        sw.counters.received += 1
        now = self.now_us()
        n = self._enqueue(sw.ingress_pass(port, data, now=now), now)
        if sw.state.digests and self.on_digest is not None:
            self.on_digest()
        return n

    def receive_batch(
        self,
        frames: Sequence[tuple[int, bytes]],
        on_error: Callable[[int, BaseException], None] | None = None,
    ) -> int:
        """Ingress for ``(port, frame)`` pairs in order; returns how many packets were queued.

        The data-path loop's one call into the executor (per frame :meth:`receive` here; a
        batch executor can replace it whole). A frame whose pass raises is dropped and counted
        as ``internal_error`` at its port, and ``on_error`` (if given) is told; the rest of the
        batch goes on. Call with ``lock`` held.
        """
        sw = self.switch
        if self.native_queues is not None:
            self._release_held()
        if sw is not None and len(frames) > 1 and self._whole_batch_ok(sw, frames):
            return self._receive_whole_batch(sw, frames, on_error)
        n = 0
        receive = self.receive
        for port, data in frames:
            try:
                n += receive(port, data)
            except Exception as exc:  # noqa: BLE001 - one bad packet must not stop the switch
                self.drops.count(DropReason.INTERNAL_ERROR, port)
                if on_error is not None:
                    on_error(port, exc)
        return n

    def _whole_batch_ok(self, sw: V1Switch, frames: Sequence[tuple[int, bytes]]) -> bool:
        """Whether a batch executor (``process_batch``, the native one) may run ``frames``
        whole, ingress to egress, with no traffic manager between: nothing is queued, and every
        port could send the whole batch now (an unlimited rate, or one whose next departure
        plus the batch's transmission time stays within the burst allowance). That is what the
        per-packet path would do too: every packet would cut through."""
        if getattr(sw, "process_batch", None) is None or self._ready:
            return False
        tm = self.tm
        if tm.backlog:
            return False
        rated = [pq for pq in tm.ports.values() if pq.rate_pps or pq.rate_bps]
        if tm.default_rate_pps or tm.default_rate_bps:
            rated.append(_default_queue(tm))
        if not rated:
            return True
        if not tm.burst_us:
            return False
        now = self.now_us()
        nbytes = sum(len(d) for _, d in frames) + 64 * len(frames)
        for pq in rated:
            cost = nbytes * 8e6 / pq.rate_bps if pq.rate_bps else len(frames) * 1e6 / pq.rate_pps
            if max(pq.next_free_us, now) + cost > now + tm.burst_us:
                return False
        return True

    def _receive_whole_batch(
        self,
        sw: V1Switch,
        frames: Sequence[tuple[int, bytes]],
        on_error: Callable[[int, BaseException], None] | None,
    ) -> int:
        """``frames`` through ``sw.process_batch``: outputs go out in order, each charged to its
        port's rate and counted as enqueued and dequeued at once (queue telemetry 0)."""
        self.counters.rx += len(frames)
        try:
            out: list[tuple[int, bytes]] = sw.process_batch(frames)  # type: ignore[attr-defined]
        except Exception as exc:  # noqa: BLE001 - the batch is lost, not the switch
            for port, _data in frames:
                self.drops.count(DropReason.INTERNAL_ERROR, port)
            if on_error is not None:
                on_error(frames[0][0], exc)
            return 0
        now = self.now_us()
        tm = self.tm
        ports = tm.ports
        for port, data in out:
            pq = ports.get(port) or tm.port(port)
            pq.enqueued += 1
            pq.dequeued += 1
            if pq.rate_pps or pq.rate_bps:
                tm.charge(pq, _Sized(len(data) + 64), now)
        self._ready.extend(out)
        if sw.state.digests and self.on_digest is not None:
            self.on_digest()
        return len(out)

    def packet_out(self, payload: bytes, metadata: dict[int, int]) -> int:
        """A PacketOut from the controller: ingress on the CPU port with a packet_out header."""
        sw = self.switch
        self._release_held()
        self.counters.from_cpu += 1
        if sw is None or self.cpu_port is None:
            self.counters.no_pipeline_drops += 1
            self.drops.count(DropReason.NO_PIPELINE, self.cpu_port or 0)
            return 0
        spec = _controller_header(sw.program, "packet_out")
        data = payload if spec is None else _encode_header(spec, metadata) + payload
        n = self._enqueue(sw.ingress_pass(self.cpu_port, data))
        if sw.state.digests and self.on_digest is not None:
            self.on_digest()
        self.wakeup.set()
        return n

    def _enqueue(self, jobs: list[EgressJob], now: int | None = None) -> int:
        """Queue the packets ingress produced; returns how many were accepted.

        Cut-through: a packet for a port whose queues are empty and which may send now (an
        unlimited rate, or a rate whose next departure has come: ``TrafficManager.may_send_now``)
        would be dequeued at once anyway, so it goes straight through egress (enq_qdepth,
        deq_qdepth and deq_timedelta 0) and the port's rate is charged, saving the queue round
        trip on the common path.
        """
        n = 0
        if now is None:
            now = self.now_us()
        tm = self.tm
        ts = now & 0xFFFFFFFF
        for job in jobs:
            pq = tm.ports.get(job.port) or tm.port(job.port)
            if (
                job.priority < tm.nq
                and pq.depth[job.priority]  # a queue of depth 0 drops everything
                and tm.may_send_now(pq, now)
            ):
                pq.enqueued += 1
                pq.dequeued += 1
                if pq.rate_pps or pq.rate_bps:
                    job.nbytes = len(job.payload) + 64
                    tm.charge(pq, job, now)
                job.sm.f_enq_timestamp = ts
                job.sm.f_enq_qdepth = 0
                self._egress(job, (ts, 0, 0, 0), now)
                n += 1
                continue
            job.nbytes = len(job.payload) + 64
            depth = tm.enqueue(job.port, job.priority, job, now)
            if depth is not None:
                job.sm.f_enq_timestamp = ts
                job.sm.f_enq_qdepth = depth
                n += 1
        return n

    def _egress(self, job: EgressJob, info: tuple[int, int, int, int], now: int) -> None:
        sw = self.switch
        assert sw is not None
        sent, clones, recircs = sw.egress_pass(job, info, now)
        if sent:
            self._ready.extend(sent)
        if clones:
            self._enqueue(clones, now)
        for _p, data, saver in recircs:
            self._enqueue(sw.ingress_pass(0, data, InstanceType.RECIRC, saver, job.passes + 1))

    def service_queues(self, limit: int = 64) -> list[tuple[int, bytes]]:
        """Dequeue what the port rates allow, run egress, return frames to transmit."""
        sw = self.switch
        if sw is None:
            return []
        now = self.now_us()
        for _port, job, enq_us, deq_depth in self.tm.dequeue_ready(now, limit):
            info = (
                enq_us & 0xFFFFFFFF,
                job.sm.f_enq_qdepth,
                (now - enq_us) & 0xFFFFFFFF,
                deq_depth,
            )
            self._egress(job, info, now)
        frames, self._ready = self._ready, []
        cpu = self.cpu_port
        if cpu is None or not any(port == cpu for port, _ in frames):
            self.counters.tx += len(frames)
            return frames
        out: list[tuple[int, bytes]] = []
        for port, data in frames:
            if port == cpu:
                self._to_cpu(data)
            else:
                out.append((port, data))
        self.counters.tx += len(out)
        return out

    def _to_cpu(self, data: bytes) -> None:
        self.counters.to_cpu += 1
        hook = self.on_packet_in
        if hook is None or self.switch is None:
            return
        spec = _controller_header(self.switch.program, "packet_in")
        if spec is None:
            hook(data, {})
            return
        decoded = _decode_header(spec, data)
        if decoded is None:
            self.counters.to_cpu -= 1  # not a PacketIn after all: a drop
            self.drops.count(DropReason.PACKET_IN_MALFORMED, self.cpu_port or 0)
            return
        values, payload = decoded
        hook(payload, values)

    def drop_cells(self) -> list[DropCell]:
        """Every drop so far by reason, port and queue, the port layer's included.

        Call with ``lock`` held.
        """
        io = self.io_drops() if self.io_drops is not None else []
        return merge_cells(self.drops.cells(), io)

    def packet_totals(self) -> PacketTotals:
        """Packets in, out, made and queued so far (call with ``lock`` held)."""
        c = self.counters
        sw = self.switch
        return PacketTotals(
            c.rx,
            c.tx,
            c.from_cpu,
            c.to_cpu,
            self._copies + (sw.counters.copies if sw is not None else 0),
            self.tm.backlog
            + len(self._ready)
            + (self.native_queues.held() if self.native_queues is not None else 0),
            tuple(self.io_packets()) if self.io_packets is not None else (),
        )

    @property
    def python_work(self) -> bool:
        """Packets wait in the Python path: queued in the traffic manager, or produced by
        egress and not yet handed out (the loop skips :meth:`service_queues` otherwise)."""
        return bool(self.tm.backlog or self._ready)

    def next_departure_us(self) -> float | None:
        """When the data path must run again to send something (None: nothing pending)."""
        if self._ready:
            return float(self.now_us())
        nxt = self.tm.next_departure_us()
        nq = self.native_queues
        if nq is not None and nq.held():
            held = nq.held_departure_us()
            if held is not None and (nxt is None or held < nxt):
                nxt = held
        return nxt


class _Sized:
    """What the traffic manager charges a rate for: a packet of ``nbytes``."""

    __slots__ = ("nbytes",)

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes


def _default_queue(tm: TrafficManager) -> PortQueue:
    """The queue a port not seen yet would get (its rate is the default one)."""
    return PortQueue([], [], tm.default_rate_pps, tm.default_rate_bps)


def _controller_header(program: CompiledProgram, name: str) -> ControllerHeaderSpec | None:
    for h in program.schema.controller_headers:
        if h.name == name:
            return h
    return None


def _carry_state(old: SwitchState, new: SwitchState) -> None:
    """RECONCILE_AND_COMMIT: keep every piece of state that still fits the new pipeline.

    Action profiles first (indirect entries refer to their members and groups), then table
    entries with their direct counters, indexed counters/meters/registers of the same size,
    value sets, the replication engine and digest configuration. What no longer validates
    (a removed table, a changed key) is dropped, as the P4Runtime spec allows.
    """

    def keep(fn: Callable[..., object], *args: object) -> None:
        with contextlib.suppress(P4Error):  # no longer valid in the new pipeline: dropped
            fn(*args)

    for name, prof in old.action_profiles.items():
        np = new.action_profiles.get(name)
        if np is None:
            continue
        for mid, call in prof.members.items():
            keep(np.insert_member, mid, call)
        for gid, grp in prof.groups.items():
            keep(np.insert_group, gid, dict(grp.members), grp.max_size)
    for name, t in old.tables.items():
        nt = new.tables.get(name)
        if nt is None or nt.spec.is_const:
            continue
        for e in t.entries():
            if not e.is_const:
                keep(nt.insert, e)
        if t.default != t.spec.default_action and not nt.spec.const_default_action:
            keep(nt.set_default, t.default)
    for name, c in old.counters.items():
        nc = new.counters.get(name)
        if nc is not None and nc.size == c.size:
            nc.packets, nc.bytes = list(c.packets), list(c.bytes)
    for name, m in old.meters.items():
        nm = new.meters.get(name)
        if nm is not None and nm.size == m.size:
            nm.cells = list(m.cells)
    for name, r in old.registers.items():
        nr = new.registers.get(name)
        if nr is not None and nr.spec.size == r.spec.size and nr.spec.width == r.spec.width:
            nr.values = list(r.values)
    for name, vs in old.value_sets.items():
        nv = new.value_sets.get(name)
        if nv is not None:
            keep(nv.set_members, vs.members)
    for name, cfg in old.digest_config.items():
        if name in new.digest_config:
            new.digest_config[name] = cfg
    new.pre = old.pre

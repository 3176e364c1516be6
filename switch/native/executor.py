"""The native executor: :class:`NativeSwitch` runs whole packets in the generated C.

It is a :class:`~switch.pipeline.v1model.V1Switch` (same constructor, same ``state``,
``counters`` and ``drops``) whose :meth:`process` and :meth:`process_batch` run parser,
ingress, egress and deparser in C. ``ingress_pass``/``egress_pass`` (the traffic manager's
split of the pipeline, used by :mod:`switch.device`) run in C too: the
:class:`~switch.pipeline.v1model.EgressJob` of a native pass carries the packet's C state as
bytes in ``hdr`` (``meta`` is :data:`NATIVE_JOB`) and a :class:`NativeSm` with the fields the
traffic manager sets; other jobs (resubmitted, recirculated) go through the Python passes.
Both executors work on the same state:

- registers and counters: the Python objects' lists are replaced by C arrays that both
  executors use (re-bound if something replaces them);
- tables: the C copy is reloaded from the Python :class:`~switch.pipeline.tables.Table` after
  any write (its ``listeners``), and tables using an action profile whenever the profile's
  members or groups differ from what was loaded;
- digests and extern index errors are handed to the Python state after every call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from switch.compile import CompiledProgram
from switch.native.cgen import NativeProgram, NativeTable
from switch.pipeline.drops import DropCounters, DropReason
from switch.pipeline.state import SwitchState
from switch.pipeline.tables import Table, TableEntry
from switch.pipeline.v1model import EgressJob, InstanceType, V1Switch
from switch.pipeline.validate import prefix_mask
from switch.schema import ActionCall, MatchKind

log = logging.getLogger("tailfabric.switch")

CHUNK = 256  # packets per call into C
MAX_FRAME = 16384
ST_RECEIVED, ST_SENT, ST_DROPPED, ST_PARSER_ERRORS, ST_EGRESS_DIGESTS_IGNORED = range(5)
ST_DIGESTS, ST_EXT_ERRORS, ST_N = 5, 6, 7
_M64 = (1 << 64) - 1


NATIVE_JOB = "native"
"""``EgressJob.meta`` of a job whose state is the C executor's (``hdr`` holds it as bytes)."""


class NativeSm:
    """The standard metadata fields of a native job that the traffic manager reads and sets."""

    __slots__ = ("f_enq_timestamp", "f_enq_qdepth", "f_priority")

    def __init__(self, priority: int) -> None:
        self.f_enq_timestamp = 0
        self.f_enq_qdepth = 0
        self.f_priority = priority


class NativeSwitch(V1Switch):
    """A v1model switch whose whole-packet path runs in the program's generated C."""

    native = True

    def __init__(
        self,
        program: CompiledProgram,
        built: tuple[NativeProgram, Any],
        state: SwitchState | None = None,
        *,
        seed: int = 0,
        clock: Callable[[], int] | None = None,
        drops: DropCounters | None = None,
    ) -> None:
        super().__init__(program, state, seed=seed, clock=clock, drops=drops)
        self.native_program, mod = built
        ffi, lib = mod.ffi, mod.lib
        self._ffi, self._lib = ffi, lib
        self._x = ffi.gc(lib.tf_new(), lib.tf_free)
        if self._x == ffi.NULL:
            raise MemoryError("tf_new")
        self._handle = ffi.new_handle(self)
        lib.tf_set_handle(self._x, self._handle)
        npg = self.native_program
        self._stats = ffi.new("uint64_t[]", ST_N)
        self._ext_err = ffi.new("uint64_t[]", max(len(npg.externs), 1))
        self._dig = ffi.new("uint64_t[]", CHUNK * npg.digest_stride)
        lib.tf_bind_stats(self._x, self._stats, self._ext_err, self._dig, CHUNK)
        self._arrays: list[Any] = []  # the C arrays the Python objects now keep their values in
        for k, (kind, fq, size) in enumerate(npg.externs):
            a = ffi.new("uint64_t[]", size)
            if kind == "counter":
                b = ffi.new("uint64_t[]", size)
                self.state.counters[fq].share(a, b)
                lib.tf_bind(self._x, k, a, b)
                self._arrays += (a, b)
            else:
                self.state.registers[fq].share(a)
                lib.tf_bind(self._x, k, a, ffi.NULL)
                self._arrays.append(a)
        self._dirty: set[int] = set(range(len(npg.tables)))
        # indirect tables: (kind 'm'|'g', id, the member's ActionCall / the group's tuple) loaded
        self._profile_refs: dict[int, list[tuple[str, int, object]]] = {}
        self._tables: list[tuple[NativeTable, Table]] = []
        for nt in npg.tables:
            t = self.state.tables[nt.fqname]
            dirty = self._dirty
            t.listeners.append(lambda i=nt.index, d=dirty: d.add(i))  # type: ignore[misc]
            self._tables.append((nt, t))
        self._order: dict[int, list[TableEntry]] = {}  # entries as loaded, by C index
        self._timed = [(nt, t) for nt, t in self._tables if t.spec.support_timeout]
        self._indirect = [
            (nt, t) for nt, t in self._tables if t.profile is not None and t.spec.implementation
        ]
        self._res = ffi.new("int[]", CHUNK)
        self._out_port = ffi.new("int[]", CHUNK)
        self._out_off = ffi.new("int[]", CHUNK + 1)
        self._out_cap = CHUNK * (MAX_FRAME + npg.max_header_bytes + 16)
        self._out = ffi.new("uint8_t[]", self._out_cap)
        self._out_buf = ffi.buffer(self._out)
        self._state_size = int(lib.tf_state_size())
        self._pass_res = ffi.new("int[]", 4)
        self._enq = ffi.new("uint64_t[]", 4)

    # -- shared state ----------------------------------------------------------------------

    def _profiles_changed(self) -> None:
        """Reload an indirect table when a member or group its entries use has changed (the
        profile stores a new ActionCall / member tuple on every change)."""
        for nt, t in self._indirect:
            prof = t.profile
            assert prof is not None
            members, groups = prof.members, prof._expanded
            for kind, oid, obj in self._profile_refs.get(nt.index, ()):
                now = members.get(oid) if kind == "m" else groups.get(oid)
                if now is not obj:
                    self._dirty.add(nt.index)
                    break

    def _sync(self) -> None:
        if self._indirect:
            self._profiles_changed()
        if self._dirty:
            for i in sorted(self._dirty):
                nt, t = self._tables[i]
                self._load(nt, t)
            self._dirty.clear()

    def _load(self, nt: NativeTable, t: Table) -> None:
        ffi = self._ffi
        kinds = nt.kinds
        nk = len(kinds)
        entries = t.entries()
        ternary = t.spec.needs_priority
        lpm = [i for i, k in enumerate(kinds) if k is MatchKind.LPM]
        if ternary:
            order = sorted(entries, key=lambda e: -e.priority)  # stable: insertion order ties
            early = 0
        elif lpm:
            li = lpm[0]
            order = sorted(entries, key=lambda e: -_pair(e.match[li])[1])
            early = 1
        else:
            order = list(entries)
            early = 1
        kv: list[int] = []
        kr: list[int] = []
        cls: list[int] = []
        classes: dict[tuple[int, ...], int] = {}
        act: list[int] = []
        args: list[int] = []
        goff: list[int] = []
        gn: list[int] = []
        mact: list[int] = []
        margs: list[int] = []
        refs: list[tuple[str, int, object]] = []
        for e in order:
            values, masks, ranged = _key_of(e, kinds, nt.widths)
            for v, m in zip(values, masks):
                kv += (v >> 64, v & _M64)
                kr += (m >> 64, m & _M64)
            if ranged:
                cls.append(-1)
            else:
                cls.append(classes.setdefault(tuple(masks), len(classes)))
            calls = self._entry_calls(t, e, refs)
            if calls is None:
                act.append(-2)
                goff.append(len(mact))
                gn.append(0)
            elif isinstance(calls, list):
                act.append(-2)
                goff.append(len(mact))
                gn.append(len(calls))
                for c in calls:
                    mact.append(nt.actions.get(c.name, -1))
                    margs += _args(c, nt.nargs)
            else:
                act.append(nt.actions.get(calls.name, -1))
                goff.append(0)
                gn.append(0)
            if calls is None or isinstance(calls, list):
                args += [0] * (2 * nt.nargs)
            else:
                args += _args(calls, nt.nargs)
        self._order[nt.index] = order
        self._profile_refs[nt.index] = refs
        cls_mask: list[int] = []
        for class_masks in classes:
            for m in class_masks:
                cls_mask += (m >> 64, m & _M64)
        d = t.default
        rc = self._lib.tf_table_load(
            self._x,
            nt.index,
            len(order),
            ffi.new("uint64_t[]", kv or [0]),
            ffi.new("uint64_t[]", kr or [0]),
            ffi.new("int[]", cls or [0]),
            len(classes),
            ffi.new("uint64_t[]", cls_mask or [0]),
            ffi.new("int[]", act or [0]),
            ffi.new("uint64_t[]", args or [0]),
            ffi.new("int[]", goff or [0]),
            ffi.new("int[]", gn or [0]),
            ffi.new("int[]", mact or [0]),
            ffi.new("uint64_t[]", margs or [0]),
            nt.actions.get(d.name, -1),
            ffi.new("uint64_t[]", _args(d, nt.nargs)),
            early,
        )
        if rc != 0:
            raise MemoryError(f"loading table {nt.fqname} into the native executor")
        del nk

    def _entry_calls(
        self, t: Table, e: TableEntry, refs: list[tuple[str, int, object]]
    ) -> ActionCall | list[ActionCall] | None:
        """The entry's action, or the members of its group (None: an unknown member)."""
        if e.action is not None:
            return e.action
        prof = t.profile
        if prof is None:
            return None
        if e.member_id is not None:
            m = prof.members.get(e.member_id)
            refs.append(("m", e.member_id, m))
            return [m] if m is not None else []
        if e.group_id is not None:
            g = prof._expanded.get(e.group_id)
            refs.append(("g", e.group_id, g))
            return list(g or ())
        return None

    # -- packets ---------------------------------------------------------------------------

    def process(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        """Run one packet through the switch (in C) with a zero-delay traffic manager."""
        return self.process_batch(((port, data),))

    def process_batch(self, packets: Sequence[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
        """Run many packets, in order; their outputs in order (as ``process`` one by one)."""
        out: list[tuple[int, bytes]] = []
        n = len(packets)
        i = 0
        while i < n:
            ports, frames = zip(*packets[i : i + CHUNK])
            i += self._run(ports, frames, out)
        return out

    def process_frames(self, port: int, frames: Sequence[bytes]) -> list[tuple[int, bytes]]:
        """``process_batch`` of frames that all arrived on ``port`` (a receive batch)."""
        out: list[tuple[int, bytes]] = []
        n = len(frames)
        i = 0
        while i < n:
            i += self._run(port, frames[i : i + CHUNK], out)
        return out

    def _run(
        self, ports: int | Sequence[int], frames: Sequence[bytes], out: list[tuple[int, bytes]]
    ) -> int:
        ffi = self._ffi
        self._sync()
        lens = list(map(len, frames))
        if max(lens) > MAX_FRAME:  # jumbo frames: the Python passes (same state), one by one
            each = [ports] * len(frames) if isinstance(ports, int) else ports
            for p, f in zip(each, frames):
                out += V1Switch.process(self, p, f)
            return len(frames)
        buf = b"".join(frames)
        stats = self._stats
        before = (stats[ST_DROPPED], stats[ST_PARSER_ERRORS])
        done = self._lib.tf_run(
            self._x,
            len(frames),
            ffi.NULL if isinstance(ports, int) else ffi.new("int[]", ports),
            ports if isinstance(ports, int) else 0,
            ffi.from_buffer(buf),
            ffi.new("int[]", lens),
            self.clock(),
            self._out,
            self._out_cap,
            self._res,
            self._out_port,
            self._out_off,
        )
        offs = ffi.unpack(self._out_off, done + 1)
        oports = ffi.unpack(self._out_port, done)
        data = self._out_buf[0 : offs[-1]]
        c = self.counters
        c.received += done
        dropped = stats[ST_DROPPED] - before[0]
        if not dropped:  # the common case: every packet sent, in order
            out += zip(oports, map(data.__getitem__, map(slice, offs, offs[1:])))
        else:
            for j, st in enumerate(ffi.unpack(self._res, done)):
                if st == 0:
                    out.append((oports[j], data[offs[j] : offs[j + 1]]))
                elif st & 15 == 1:
                    reason = DropReason.PARSER_ERROR if st & 16 else DropReason.INGRESS_DROP
                    self.drops.count(reason, oports[j])
                else:
                    self.drops.count(DropReason.EGRESS_DROP, oports[j])
        c.dropped += stats[ST_DROPPED] - before[0]
        c.parser_errors += stats[ST_PARSER_ERRORS] - before[1]
        c.sent += done - (stats[ST_DROPPED] - before[0])
        self._after_call()
        if done == 0:
            raise RuntimeError("the native executor made no progress")
        return int(done)

    # -- the traffic manager's split ------------------------------------------------------

    def ingress_pass(
        self,
        port: int,
        data: bytes,
        instance_type: int = InstanceType.NORMAL,
        restore: tuple[Any, Any] | None = None,
        passes: int = 0,
        original: bytes | None = None,
        now: int | None = None,
    ) -> list[EgressJob]:
        """Parse, verify, run ingress in C; the packet to enqueue, if any (see the module)."""
        if instance_type != InstanceType.NORMAL or restore is not None or passes:
            return super().ingress_pass(port, data, instance_type, restore, passes, original, now)
        if len(data) > MAX_FRAME:  # a jumbo frame: the Python pass (same state)
            return super().ingress_pass(port, data, instance_type, restore, passes, original, now)
        ffi = self._ffi
        self._sync()
        if now is None:
            now = self.clock()
        stats = self._stats
        perr = stats[ST_PARSER_ERRORS]
        state = ffi.new("uint8_t[]", self._state_size)
        r = self._pass_res
        st = self._lib.tf_ingress(self._x, port, data, len(data), now, state, r)
        self.counters.parser_errors += stats[ST_PARSER_ERRORS] - perr
        self._after_call()
        if st:
            self.counters.dropped += 1
            self.drops.count(DropReason.PARSER_ERROR if st & 16 else DropReason.INGRESS_DROP, port)
            return []
        payload = data[r[2] :]
        job = EgressJob(r[1], state, NATIVE_JOB, NativeSm(r[3]), payload, data, passes, r[3])
        job.truncate = 0  # the ingress truncation travels in the C state
        return [job]

    def egress_pass(
        self,
        job: EgressJob,
        enq_info: tuple[int, int, int, int] | None = None,
        now: int | None = None,
    ) -> tuple[list[tuple[int, bytes]], list[EgressJob], list[tuple[int, bytes, Any]]]:
        """Egress and the deparser in C for a native job (others: the Python pass)."""
        if job.meta is not NATIVE_JOB:
            return super().egress_pass(job, enq_info, now)
        self._sync()
        if now is None:
            now = self.clock()
        enq = self._enq
        if enq_info is not None:
            enq[0], enq[1], enq[2], enq[3] = enq_info
            has = 1
        else:
            enq[0], enq[1] = job.sm.f_enq_timestamp, job.sm.f_enq_qdepth
            has = 2
        payload = job.payload  # at most MAX_FRAME: the ingress pass was native
        r = self._pass_res
        st = self._lib.tf_egress(
            self._x, job.hdr, payload, len(payload), job.port, now, enq, has, self._out, r
        )
        self._after_call()
        if st:
            self.counters.dropped += 1
            self.drops.count(DropReason.EGRESS_DROP, job.port)
            return [], [], []
        return [(job.port, self._out_buf[0 : r[1]])], [], []

    # -- the data path's ring round (switch.device.fastpath) ---------------------------------

    def ring_api(self) -> tuple[Any, Any, Any]:
        """``(ffi, lib, handle)``: what calls ``lib.tf_ring_round(handle, ...)`` need."""
        return self._ffi, self._lib, self._x

    def before_ring_round(self) -> int:
        """Reload changed tables into C; returns the parser-error count to diff against."""
        self._sync()
        return int(self._stats[ST_PARSER_ERRORS])

    def after_ring_round(self, received: int, dropped: int, parser_errors_before: int) -> None:
        """Count a ring round's packets as the per-packet passes would, hand digests over."""
        c = self.counters
        c.received += received
        c.dropped += dropped
        c.parser_errors += int(self._stats[ST_PARSER_ERRORS]) - parser_errors_before
        self._after_call()

    def ring_job(self, port: int, state: Any, priority: int, data: bytes, poff: int) -> EgressJob:
        """The job of a packet a ring round stopped at after its ingress (``state``: the C
        state bytes, ``poff``: where the payload starts), as :meth:`ingress_pass` makes it."""
        st = self._ffi.new("uint8_t[]", self._state_size)
        self._ffi.memmove(st, state, self._state_size)
        job = EgressJob(port, st, NATIVE_JOB, NativeSm(priority), data[poff:], data, 0, priority)
        job.truncate = 0
        return job

    @property
    def state_size(self) -> int:
        return self._state_size

    def _after_call(self) -> None:
        stats = self._stats
        if stats[ST_DIGESTS]:
            self._flush_digests()
        if stats[ST_EXT_ERRORS]:
            self._flush_errors()
        if stats[ST_EGRESS_DIGESTS_IGNORED]:
            self.rt.egress_digests_ignored += stats[ST_EGRESS_DIGESTS_IGNORED]
            stats[ST_EGRESS_DIGESTS_IGNORED] = 0
        if self._timed:
            self._note_hits()

    def _note_hits(self) -> None:
        """Idle timeouts: tell the tables which entries packets hit (as Table.lookup does)."""
        for nt, t in self._timed:
            clock = t.hit_clock_us
            if clock is None:
                continue
            order = self._order.get(nt.index, [])
            buf = self._ffi.new("int[]", max(len(order), 1))
            n = self._lib.tf_table_hits(self._x, nt.index, buf, len(order))
            if n:
                now_ns = clock() * 1000
                for idx in self._ffi.unpack(buf, n):
                    t.note_hit(order[idx].key, now_ns)

    def _flush_digests(self) -> None:
        npg = self.native_program
        stride = npg.digest_stride
        n = self._stats[ST_DIGESTS]
        words = self._ffi.unpack(self._dig, n * stride)
        for r in range(n):
            rec = words[r * stride : (r + 1) * stride]
            name, nf = npg.digests[rec[0]]
            values = tuple((rec[1 + 2 * j] << 64) | rec[2 + 2 * j] for j in range(nf))
            self.state.push_digest(name, values)
        self._stats[ST_DIGESTS] = 0

    def _flush_errors(self) -> None:
        for k, (kind, fq, _size) in enumerate(self.native_program.externs):
            e = self._ext_err[k]
            if e:
                obj: Any = (
                    self.state.counters[fq] if kind == "counter" else self.state.registers[fq]
                )
                obj.errors += e
                self._ext_err[k] = 0
        self._stats[ST_EXT_ERRORS] = 0


def _pair(v: object) -> tuple[int, int]:
    assert isinstance(v, tuple)
    return int(v[0]), int(v[1])


def _key_of(
    e: TableEntry, kinds: tuple[MatchKind, ...], widths: tuple[int, ...]
) -> tuple[list[int], list[int], bool]:
    """(value or range low, mask or range high) per key, and whether a key is a range."""
    values: list[int] = []
    masks: list[int] = []
    ranged = False
    for v, k, w in zip(e.match, kinds, widths):
        full = (1 << w) - 1
        if k is MatchKind.EXACT:
            values.append(int(v))  # type: ignore[call-overload]
            masks.append(full)
        elif k is MatchKind.LPM:
            val, plen = _pair(v)
            values.append(val)
            masks.append(prefix_mask(plen, w))
        elif k is MatchKind.TERNARY:
            val, m = _pair(v)
            values.append(val)
            masks.append(m)
        elif k is MatchKind.OPTIONAL:
            if v is None:
                values.append(0)
                masks.append(0)
            else:
                values.append(int(v))  # type: ignore[call-overload]
                masks.append(full)
        else:  # RANGE
            lo, hi = _pair(v)
            values.append(lo)
            masks.append(hi)
            ranged = True
    return values, masks, ranged


def _args(call: ActionCall, nargs: int) -> list[int]:
    out: list[int] = []
    vals = list(call.args) + [0] * (nargs - len(call.args))
    for v in vals[:nargs]:
        iv = int(v)
        out += (iv >> 64, iv & _M64)
    return out

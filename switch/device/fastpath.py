"""The data path's fast round: receive, pipeline and transmit in one call into the native C.

When the running program is native (:class:`switch.native.NativeSwitch`) and every port has
PACKET_MMAP RX and TX rings, :meth:`RingFastPath.round` hands the rings to the generated
``tf_ring_round``: it reads the ready frames in place (fair across ports, as
:meth:`PortSet.recv_batch <switch.device.ports.PortSet.recv_batch>`), runs ingress, and for
every packet the per-packet path would cut through the traffic manager (its port's queues
empty, its rate allowing it now within the burst allowance, a queue for its priority) runs
egress and writes the frame straight into the egress port's TX ring, kicking each ring once.
No Python object is made per packet. What the C does not decide comes back to Python, which
then does exactly what the per-packet path does:

* a packet for the CPU port or a port without a ring: after its ingress it goes to
  :meth:`Device._enqueue` with its C state, in order (the round stops after it, so that its
  egress runs before any later packet's);
* a packet for a ring port that must queue (and every later packet for that port until its
  queue is empty): with one queue per port it waits in the port's queue **in C** (the
  traffic manager's depth, tail drop counted as ``tail_drop``, ``enq_qdepth`` and the enqueue
  time kept with it); every round first dequeues what the ports' rates allow (round robin,
  one packet per port per pass, as :meth:`TrafficManager.dequeue_ready
  <switch.device.tm.TrafficManager.dequeue_ready>`), runs egress with ``enq_timestamp``,
  ``enq_qdepth``, ``deq_timedelta`` and ``deq_qdepth`` and writes the frame into the TX
  ring. Before the Python path queues anything (a Python round, a slow-path frame, a
  PacketOut) or a queue's depth is set anew, :meth:`RingFastPath.release` moves those packets
  into the traffic manager's queues in order, and the C leaves a port to the traffic manager
  until its queue there is empty again (so a port's packets never pass each other). With
  several priority queues per port they go to the traffic manager as before;
* an output whose TX ring is full: the round stops and it is sent on the plain socket;
* a frame the rings' slow path handles (VLAN tag taken out, partial checksum, truncated, runt,
  outgoing, jumbo): the round stops before it, and that frame is read by the ring's Python
  code and goes through the per-packet path.

The accounting is the per-packet path's: device and port counters, the traffic manager's
enqueued/dequeued counts, largest depth and rate schedule (``next_free_us``, the same
arithmetic), drops by reason and port, the executor's counters, digests; packets waiting in C
count as queued (:meth:`Device.packet_totals`) and in ``show_queues``' depth, and their next
departure wakes the loop (:meth:`Device.next_departure_us`). Call :meth:`RingFastPath.round`
with the device lock held, from the data-path thread only.
"""

from __future__ import annotations

import struct
from collections import Counter
from typing import Any

from switch.device.device import Device
from switch.device.ports import PortSet
from switch.native.build import BuildError
from switch.native.executor import ST_DIGESTS, NativeSwitch
from switch.native.loop import address
from switch.native.loop import load as load_loop
from switch.pipeline.drops import DropReason
from switch.pipeline.v1model import V1Switch

PMAP_N = 1024  # egress port numbers the C maps to rings (others go through Python)
MAX_LIMIT = 256  # frames per round at most
SPILL_BYTES = 16384 + 4096
JOB_BYTES = 16384  # a job's frame at most (TF_RING_MAX_FRAME)
MAX_JOBS = 64  # packets for the traffic manager per round at most
CQ_MAX_DEPTH = 4096  # deeper queues stay in the Python traffic manager
LOOP_DROPS = 4096  # drops the loop in C logs before it returns to Python
_CQ_HEAD = struct.Struct("=4IQ")  # a C queue slot: length, payload offset, enq_qdepth, 0, enq_us


# What _read_back reads of a tf_port, in this order.
_READ_FIELDS = (
    ("rx_idx", "i"),
    ("tx_idx", "i"),
    ("tx_pending", "i"),
    ("next_free", "d"),
    ("rx_n", "Q"),
    ("out_n", "Q"),
    ("enq_n", "Q"),
    ("tx_malformed", "Q"),
    ("tx_errors", "Q"),
    ("tail_drops", "Q"),
    ("tx_n", "q"),
    ("cq_n", "i"),
    ("cq_max", "i"),
    ("cq_enq", "Q"),
    ("cq_deq", "Q"),
)
_COUNTS_BYTES = 7 * 8  # rx_n .. tx_n: seven 64-bit counters, one after the other
_COUNTS_ZERO = bytes(_COUNTS_BYTES)


def _field_reader(ffi: Any, fields: tuple[tuple[str, str], ...]) -> Any:
    """``unpack_from(buffer, offset)`` of a struct's ``fields`` (name, struct code), in the
    order given: one format with the gaps between them skipped."""
    offs = [(int(ffi.offsetof("tf_port", name)), code, i) for i, (name, code) in enumerate(fields)]
    fmt = "="
    pos = 0
    order = []
    for off, code, i in sorted(offs):
        assert off >= pos, "fields overlap"
        if off > pos:
            fmt += f"{off - pos}x"
        fmt += code
        pos = off + struct.calcsize("=" + code)
        order.append(i)
    unpack = struct.Struct(fmt).unpack_from
    if order == list(range(len(fields))):
        return unpack
    inverse = [order.index(i) for i in range(len(fields))]
    return lambda buf, off: tuple(unpack(buf, off)[j] for j in inverse)


class RingFastPath:
    """One switch's fast round (see the module); ``round`` returns -1 where it does not apply."""

    def __init__(self, device: Device, ports: PortSet, c_loop: bool = False) -> None:
        self.device = device
        self.ports = ports
        self._order = ports.ports
        self.usable = 0 < len(self._order) <= 64 and all(
            p.rx_mode == "ring" and p.tx_mode == "ring" for p in self._order
        )
        self._seen: V1Switch | None = None  # the executor the last round saw
        self._sw: NativeSwitch | None = None  # it, when it is native and the rings usable
        self._lib: Any = None
        self.rounds = 0  # rounds run in C
        self.frames = 0  # frames those rounds took
        self.dequeued = 0  # packets the C rounds took from the queues in C
        self._held: list[int] = [0] * len(self._order)  # per port: packets in its C queue
        self.held_total = 0
        # ``tm.version`` when a round last found the C's copy of every port's queue state
        # equal to Python's with nothing in Python's queues (-1: look again next round).
        self._clean = -1
        # The last round stopped only when the rings had no frame left (or at its limit), not
        # at a frame or packet for Python: the loop need not look at the rings again.
        self.drained = False
        # The wait-and-round loop in C (``loop``), where asked for and it builds.
        self._loop_mod: Any = None
        self._loop: Any = None
        self._loop_max_us = 0
        self.loop_error: str | None = None  # why it is not there
        self.loop_calls = 0  # calls of ``loop`` that ran the C loop
        self.loop_sleeps = 0  # its coalescing sleeps
        self.loop_polls = 0  # its waits in ppoll
        self.loop_yields = 0  # the cores it gave away after a full round (--yield-when-full)
        self.loop_returns: Counter[int] = Counter()  # its returns by reason (loop.REASONS)
        self.loop_error_port = -1  # the port index whose socket reported an error
        if c_loop:
            try:
                self._loop_mod = load_loop()
            except BuildError as e:
                self.loop_error = str(e)
        device.native_queues = self

    def invalidate(self) -> None:
        """Python touched the rings or the queues: the next round compares them again."""
        self._clean = -1

    def _bind(self, seen: V1Switch | None) -> None:
        if self.held_total:  # packets of the executor before: into the traffic manager
            self.release()
        self._clean = -1
        self._seen = seen
        self._sw = None
        self._lib = None
        self._loop = None
        if not self.usable or not isinstance(seen, NativeSwitch):
            return
        sw = self._sw = seen
        ffi, lib, handle = sw.ring_api()
        n = len(self._order)
        ports = ffi.new("tf_port[]", n)
        pmap = ffi.new("int16_t[]", [-1] * PMAP_N)
        for k, port in enumerate(self._order):
            rings = port._rings
            assert rings is not None
            # The mapping's address (the buffer export is released at once so that the rings
            # can still be closed; rounds check ``closed`` first).
            buf = ffi.from_buffer(rings.mm)
            base = int(ffi.cast("uintptr_t", buf))
            ffi.release(buf)
            c = ports[k]
            c.rx = ffi.cast("uint8_t *", base)
            c.rx_fs, c.rx_nfr = rings.frame_size, rings.rx_frames
            c.check_outgoing = int(rings.check_outgoing)
            c.tx = ffi.cast("uint8_t *", base + rings.tx_base)
            c.tx_fs, c.tx_nfr, c.tx_data = rings.frame_size, rings.tx_frames, rings.tx_data
            c.fd = rings.sock.fileno()
            c.number = port.number
            c.max_untagged, c.max_frame = port.max_untagged, port.max_frame
            if 0 <= port.number < PMAP_N:
                pmap[port.number] = k
        r = ffi.new("tf_round *")
        keep = [
            ffi.new("uint8_t[]", SPILL_BYTES),  # an output for a full TX ring
            ffi.new("uint8_t[]", MAX_JOBS * JOB_BYTES),  # the jobs' frames
            ffi.new("uint8_t[]", MAX_JOBS * max(sw.state_size, 1)),  # their ingress states
            ffi.new("int[]", MAX_JOBS),
            ffi.new("int[]", MAX_JOBS),
            ffi.new("int[]", MAX_JOBS),
            ffi.new("int[]", MAX_JOBS),
            ffi.new("int[]", MAX_LIMIT),
            ffi.new("int[]", MAX_LIMIT),
        ]
        r.spill, r.jobs, r.state = keep[0], keep[1], keep[2]
        r.job_port, r.job_prio, r.job_len, r.job_poff = keep[3], keep[4], keep[5], keep[6]
        r.drop_code, r.drop_port = keep[7], keep[8]
        r.spill_cap, r.drop_cap = MAX_JOBS, MAX_LIMIT
        self._keep = keep
        # the queues in C: a buffer per port, allocated for its depth when first used
        self._cq: list[Any] = [None] * n
        fmax = max(p._rings.frame_size for p in self._order if p._rings is not None)
        self._cq_slot = int(lib.tf_cq_slot_size(fmax))
        self._cq_state_off = int(lib.tf_cq_state_offset())
        self._cq_frame_off = int(lib.tf_cq_frame_offset())
        self._ffi, self._lib, self._handle = ffi, lib, handle
        self._ports, self._pmap, self._r = ports, pmap, r
        # What a read-back needs of a port, in one unpack of the array's bytes (a cffi field
        # read costs as much as a dozen unpacked fields).
        self._pbuf = ffi.buffer(ports)
        self._psize = ffi.sizeof("tf_port")
        self._pread = _field_reader(ffi, _READ_FIELDS)
        self._pcount = ffi.offsetof("tf_port", "rx_n")
        assert ffi.offsetof("tf_port", "tx_n") + 8 - self._pcount == _COUNTS_BYTES
        # per port: (rx_idx, tx_idx, tx_pending, fast, rate_bps, rate_pps, next_free, qlen,
        # depth, cq_on) as the C has them (None: unknown, written before the next round)
        self._cache: list[tuple[int, int, int, bool, float, float, float, int, int, bool] | None]
        self._cache = [None] * n
        self._bind_loop(sw)

    # -- the queues in C (Device.native_queues) ---------------------------------------------

    def held(self) -> int:
        """Packets waiting in the queues in C."""
        return self.held_total

    def held_at(self, port: int) -> int:
        """Packets waiting in port ``port``'s queue in C."""
        if not self.held_total:
            return 0
        return sum(h for p, h in zip(self._order, self._held) if p.number == port)

    def held_departure_us(self) -> float | None:
        """The earliest next departure of a port with packets in its queue in C."""
        if not self.held_total:
            return None
        return min(float(self._ports[k].next_free) for k, h in enumerate(self._held) if h)

    def release(self) -> None:
        """Move every packet of the queues in C into the traffic manager's queues, in order
        and with its enqueue time and depth (before the Python path touches a queue)."""
        for k, h in enumerate(self._held):
            if h:
                self._release_port(k)

    def _release_port(self, k: int) -> None:
        c = self._ports[k]
        sw = self._sw
        assert sw is not None
        port = self._order[k].number
        tm = self.device.tm
        pq = tm.ports.get(port) or tm.port(port)
        ffi = self._ffi
        slot, cap = c.cq_slot, c.cq_cap
        buf = ffi.buffer(c.cq, cap * slot)
        so, fo = self._cq_state_off, self._cq_frame_off
        for i in range(c.cq_n):
            off = ((c.cq_head + i) % cap) * slot
            length, poff, qdepth, _z, enq_us = _CQ_HEAD.unpack_from(buf, off)
            job = sw.ring_job(port, c.cq + off + so, 0, buf[off + fo : off + fo + length], poff)
            job.sm.f_enq_timestamp = enq_us & 0xFFFFFFFF
            job.sm.f_enq_qdepth = qdepth
            job.nbytes = length - poff + 64
            pq.queues[0].append((enq_us, job))
            tm.backlog += 1
        c.cq_n = c.cq_head = 0
        self.held_total -= self._held[k]
        self._held[k] = 0
        self._cache[k] = None
        self._clean = -1

    def _cq_alloc(self, k: int, depth: int) -> None:
        """Port ``k``'s queue in C for ``depth`` packets (it is empty)."""
        c = self._ports[k]
        if self._cq[k] is None or c.cq_cap != depth:
            buf = self._ffi.new("uint8_t[]", depth * self._cq_slot)
            self._cq[k] = buf
            c.cq, c.cq_cap, c.cq_slot = buf, depth, self._cq_slot
        c.cq_head = c.cq_n = 0

    def _read_back(self, k: int, now: int) -> None:
        """Port ``k``'s ring indices and counters from the C into the Python objects."""
        base = k * self._psize
        pbuf = self._pbuf
        (rx_idx, tx_idx, tx_pending, next_free, rx_n, out_n, enq, tx_malformed, tx_errors, tail,
         tx_n, cq_n, cq_max, cenq, cdeq) = self._pread(pbuf, base)  # fmt: skip
        port = self._order[k]
        rings = port._rings
        assert rings is not None
        rings.rx_idx, rings.tx_idx, rings.tx_pending = rx_idx, tx_idx, tx_pending
        dev = self.device
        tm = dev.tm
        pc = port.counters
        pc.rx += rx_n
        pc.tx += tx_n
        if tx_malformed:
            pc.malformed += tx_malformed
            pc.tx_malformed += tx_malformed
        if tx_errors:
            rings.tx_errors += tx_errors
        dev.counters.tx += out_n
        if tail:  # a full queue (tm.enqueue's accounting)
            pq = tm.ports.get(port.number) or tm.port(port.number)
            pq.drops += tail
            pq.prio_drops[0] += tail
            dev.drops.count(DropReason.TAIL_DROP, port.number, 0, tail)
            self._cache[k] = None  # its queue length in C moved
            self._clean = -1
        moved = enq or cdeq  # packets left: the rate's next departure moved
        if enq or cenq or cdeq:
            pq = tm.ports.get(port.number) or tm.port(port.number)
            pq.enqueued += enq + cenq
            pq.dequeued += enq + cdeq
            if moved and (pq.rate_bps or pq.rate_pps):
                pq.next_free_us = next_free
            if cq_max > pq.max_depth_seen:
                pq.max_depth_seen = cq_max
            if cenq or cdeq:
                self.held_total += cq_n - self._held[k]
                self._held[k] = cq_n
                self.dequeued += cdeq
                c = self._ports[k]
                c.cq_enq = c.cq_deq = 0
        # rx_n, out_n, enq_n, tx_malformed, tx_errors, tail_drops, tx_n: read, now zero
        at = base + self._pcount
        pbuf[at : at + _COUNTS_BYTES] = _COUNTS_ZERO
        cached = self._cache[k]
        if cached is not None:  # C and Python agree again on this port
            self._cache[k] = (
                rings.rx_idx,
                rings.tx_idx,
                rings.tx_pending,
                cached[3],
                cached[4],
                cached[5],
                next_free if moved else cached[6],
                cached[7],
                cached[8],
                cached[9],
            )

    def round(self, limit: int) -> int:
        """Frames taken from the rings (0: none ready), or -1: run a Python round instead."""
        dev = self.device
        if dev.switch is not self._seen:
            self._bind(dev.switch)
        sw = self._sw
        if sw is None or dev._ready or self.ports.closed:
            self._clean = -1
            self.drained = False
            return -1
        tm = dev.tm
        if self._clean != tm.version or tm.backlog:
            if not self._sync_ports():
                self._clean = -1
                return -1
            self._clean = -1 if tm.backlog else tm.version
        return self._round_c(sw, limit)

    def _sync_ports(self) -> bool:
        """Write what the C must know of each port (ring indices, rates, queue state) where
        it changed; False where a port is closed (a Python round then)."""
        tm = self.device.tm
        cports = self._ports
        cache = self._cache
        tm_ports = tm.ports
        one_queue = tm.nq == 1  # the C tail-drops for a full queue itself
        held = self._held
        for k, port in enumerate(self._order):
            rings = port._rings
            if port.closed or rings is None:
                return False
            pq = tm_ports.get(port.number)
            if pq is None:  # a queue the traffic manager would make with the defaults
                depth = tm.default_depth
                want = (
                    rings.rx_idx,
                    rings.tx_idx,
                    rings.tx_pending,
                    depth > 0,
                    tm.default_rate_bps,
                    tm.default_rate_pps,
                    0.0,
                    0,
                    depth if one_queue else 0,
                    one_queue and 0 < depth <= CQ_MAX_DEPTH,
                )
            else:
                if held[k] and pq.depth[0] != cports[k].cq_cap:  # the depth was set anew
                    self._release_port(k)
                busy = tm.backlog and any(pq.queues)
                depth = pq.depth[0]
                want = (
                    rings.rx_idx,
                    rings.tx_idx,
                    rings.tx_pending,
                    not busy and all(pq.depth),
                    pq.rate_bps,
                    pq.rate_pps,
                    pq.next_free_us,
                    len(pq.queues[0]) if busy and one_queue else 0,
                    depth if one_queue else 0,
                    one_queue and not busy and 0 < depth <= CQ_MAX_DEPTH,
                )
            if want != cache[k]:  # what the C has is not what Python has: write it
                c = cports[k]
                c.rx_idx, c.tx_idx, c.tx_pending = want[0], want[1], want[2]
                c.fast, c.rate_bps, c.rate_pps, c.next_free = want[3], want[4], want[5], want[6]
                c.qlen, c.depth = want[7], want[8]
                if want[9] and not held[k]:
                    self._cq_alloc(k, want[8])
                c.cq_on = want[9]
                cache[k] = want
        r = self._r
        r.nq, r.burst, r.catchup = tm.nq, tm.burst_us, tm.catchup_us
        return True

    def _round_c(self, sw: NativeSwitch, limit: int) -> int:
        dev = self.device
        r = self._r
        perr = sw.before_ring_round()
        now = dev.now_us()
        pset = self.ports
        n = len(self._order)
        start = pset._rr
        pset._rr = start + 1 if start + 1 < n else 0
        got = int(
            self._lib.tf_ring_round(
                self._handle, self._ports, n, start, min(limit, MAX_LIMIT), now, self._pmap,
                PMAP_N, r,
            )
        )  # fmt: skip
        self.rounds += 1
        nd = int(r.ndrop)
        codes = self._ffi.unpack(r.drop_code, nd) if nd else []
        ports = self._ffi.unpack(r.drop_port, nd) if nd else []
        return self._finish(sw, got, int(r.touched), codes, ports, perr, now)

    def _finish(
        self,
        sw: NativeSwitch,
        got: int,
        touched: int,
        drop_codes: list[int],
        drop_ports: list[int],
        perr: int,
        now: int,
    ) -> int:
        """What Python does after C rounds: read back the touched ports, count the drops and
        the packets, then the last round's work for Python (jobs, a spilled output, an odd
        frame) and digests. Returns the frames taken (the odd one included)."""
        dev = self.device
        order = self._order
        n = len(order)
        r = self._r
        pset = self.ports
        self.frames += got
        k = 0
        while touched:
            if touched & 1:
                self._read_back(k, now)
            touched >>= 1
            k += 1
        dev.counters.rx += got
        if drop_codes:
            count = dev.drops.count
            for code, dport in zip(drop_codes, drop_ports):
                if code & 16:
                    reason = DropReason.PARSER_ERROR
                elif code & 15 == 1:
                    reason = DropReason.INGRESS_DROP
                else:
                    reason = DropReason.EGRESS_DROP
                count(reason, dport)
        sw.after_ring_round(got, len(drop_codes), perr)
        nj = r.nspill
        if nj:  # the traffic manager decides, in order: queue, CPU port, unknown port
            ss = sw.state_size
            buf = self._ffi.buffer(r.jobs, nj * JOB_BYTES)
            jobs = []
            for j in range(nj):
                off = j * JOB_BYTES
                data = buf[off : off + r.job_len[j]]
                jobs.append(
                    sw.ring_job(r.job_port[j], r.state + j * ss, r.job_prio[j], data, r.job_poff[j])
                )
            dev._enqueue(jobs, now)
            self._cache = [None] * n  # the C marked their ports as queueing
            self._clean = -1
        spill = r.spill_kind
        if spill == 2:  # the TX ring was full: after what it holds, on the plain socket
            port = pset[r.spill_port]
            port.counters.tx += port._send_plain([bytes(self._ffi.buffer(r.spill, r.spill_len))])
        odd_port = r.odd
        self.drained = not (nj or spill or odd_port)
        if odd_port:  # the ring's slow path for that one frame, then the per-packet path
            self._clean = -1  # Python moves the ring's index
            odd: list[tuple[int, bytes]] = []
            order[odd_port - 1].read_into(odd, 1)
            if odd:
                dev.receive_batch(odd)
                got += 1
        if sw.state.digests and dev.on_digest is not None:
            dev.on_digest()
        return got

    # -- the wait-and-round loop in C (switch.native.loop) ----------------------------------

    def _bind_loop(self, sw: NativeSwitch) -> None:
        """The C loop's arguments for this executor (None where the loop cannot be built)."""
        self._loop = None
        if self._loop_mod is None:
            return
        lffi = self._loop_mod.ffi
        ffi = self._ffi
        dev = self.device
        lp = lffi.new("tf_loop *")
        wake = dev.wakeup
        self._loop_keep = [
            lffi.from_buffer(wake.flag),
            lffi.new("int[]", LOOP_DROPS),
            lffi.new("int[]", LOOP_DROPS),
        ]
        lp.wake_flag = lffi.cast("const int *", self._loop_keep[0])
        lp.wake_fd = wake.fileno()
        lp.drop_code, lp.drop_port = self._loop_keep[1], self._loop_keep[2]
        lp.drop_cap = LOOP_DROPS
        lp.start_ns = dev._start_ns
        stats = address(ffi, sw._stats) + 8 * ST_DIGESTS
        lp.digests = lffi.cast("const uint64_t *", stats)
        self._loop_args = (
            address(ffi, ffi.addressof(self._lib, "tf_ring_round")),
            address(ffi, self._handle),
            address(ffi, self._ports),
            len(self._order),
            address(ffi, self._pmap),
            PMAP_N,
            address(ffi, self._r),
        )
        # Idle-timeout tables note their hits when C returns: return at least every ms.
        self._loop_max_us = (
            1000 if any(t.spec.support_timeout for t in sw.state.tables.values()) else 0
        )
        self._loop = lp

    def loop(self, wait_us: int, coalesce_us: int, busy_us: int, yield_full: bool = True) -> int:
        """Rounds and waits in C (:mod:`switch.native.loop`) until Python has work or
        ``wait_us`` has passed; the reason it returned (``switch.native.loop.REASONS``), or
        -1: the loop does not apply now (run a Python round). Call with the device lock held,
        from the data-path thread only."""
        dev = self.device
        if dev.switch is not self._seen:
            self._bind(dev.switch)
        sw = self._sw
        lp = self._loop
        tm = dev.tm
        if sw is None or lp is None or dev._ready or tm.backlog or self.ports.closed:
            return -1
        if dev._clock is not None:  # a clock of the caller's: C cannot read it
            return -1
        if self._clean != tm.version:
            if not self._sync_ports():
                self._clean = -1
                return -1
            self._clean = tm.version
        perr = sw.before_ring_round()
        pset = self.ports
        now = dev.now_us()
        if self._loop_max_us:
            wait_us = min(wait_us, self._loop_max_us)
        lp.deadline_us = now + wait_us
        lp.start = pset._rr
        lp.limit = MAX_LIMIT
        lp.coalesce_us, lp.busy_us, lp.yield_full = coalesce_us, busy_us, int(yield_full)
        lp.early_us = tm.burst_us / 2
        reason = int(self._loop_mod.lib.tf_loop_run(*self._loop_args, lp))
        pset._rr = lp.start
        self.loop_error_port = int(lp.err_port)
        rounds = int(lp.rounds)
        self.loop_calls += 1
        self.loop_returns[reason] += 1
        self.loop_sleeps += int(lp.sleeps)
        self.loop_polls += int(lp.polls)
        self.loop_yields += int(lp.yields)
        if rounds:
            self.rounds += rounds
            nd = int(lp.ndrop)
            lffi = self._loop_mod.ffi
            codes = lffi.unpack(lp.drop_code, nd) if nd else []
            ports = lffi.unpack(lp.drop_port, nd) if nd else []
            self._finish(sw, int(lp.got), int(lp.touched), codes, ports, perr, int(lp.now))
        return reason

"""The v1model architecture: how BMv2's simple_switch moves a packet through a program.

:class:`V1Switch` runs parser, checksum verification, ingress, (traffic manager), egress,
checksum update and deparser, with simple_switch's rules between them. After ingress:
clone (I2E) → digest → resubmit → multicast (``mcast_grp != 0``) → drop (``egress_spec == 511``)
→ unicast. After egress: clone (E2E) → drop → recirculate → send. Parser errors do not drop the
packet: ingress runs with ``standard_metadata.parser_error`` set, as in BMv2.

The executor is pure: bytes and a time stamp in, packets out. The time stamp is the ``now`` a
caller passes, else the ``clock`` given to :class:`V1Switch` (by default microseconds since it
was made, for in-process use). Queues, ports and real clocks belong to :mod:`switch.device`,
whose :class:`~switch.device.device.Device` drives :meth:`V1Switch.ingress_pass` and
:meth:`V1Switch.egress_pass` separately; :meth:`V1Switch.process` chains them directly for
in-process use (STF tests, benchmarks).
"""

from __future__ import annotations

import logging
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from switch.pipeline import support
from switch.pipeline.drops import DropCounters, DropReason
from switch.pipeline.extern_modules import bind_extern_function
from switch.pipeline.hashes import compute_hash, pack_bits, v1model_hash_result
from switch.pipeline.state import SwitchState

if TYPE_CHECKING:
    from switch.compile import CompiledProgram

log = logging.getLogger("tailfabric.switch")

DROP_PORT = 511
MAX_PASSES = 16  # resubmit/recirculate passes per packet before it is dropped


class InstanceType:
    """``standard_metadata.instance_type`` values of BMv2's simple_switch."""

    NORMAL = 0
    INGRESS_CLONE = 1
    EGRESS_CLONE = 2
    COALESCED = 3
    RECIRC = 4
    REPLICATION = 5
    RESUBMIT = 6


class AssertionFailure(Exception):
    pass


class RuntimeContext:
    """``_rt`` of the generated code: per-pass requests and per-switch services."""

    def __init__(self, state: SwitchState, rng: random.Random) -> None:
        self.state = state
        self.rng = rng
        self.pkt_len = 0
        self.now_us = 0
        self.sm: Any = None
        self.payload = b""
        self.dm_color = 0
        self.checksum_error = 0
        self.clone_req: tuple[str, int, Any] | None = None
        self.resubmit_req: Any = None
        self.recirc_req: Any = None
        self.truncate_len = 0
        self.assert_failures = 0
        self.custom_crc: dict[str, Any] = {}
        self.in_ingress = True
        self.late_digests: list[tuple[str, Callable[[], tuple[int, ...]]]] = []
        self.egress_digests_ignored = 0

    def begin(self, pkt_len: int, now_us: int, sm: Any, in_ingress: bool = True) -> None:
        self.in_ingress = in_ingress
        if self.late_digests:
            self.late_digests = []
        self.pkt_len = pkt_len
        self.now_us = now_us
        self.sm = sm
        self.dm_color = 0
        self.checksum_error = 0
        self.clone_req = None
        self.resubmit_req = None
        self.recirc_req = None
        self.truncate_len = 0

    def hash(self, algo: str, data: bytes) -> int:
        return compute_hash(algo, data, self.custom_crc.get(algo))

    def random(self, lo: int, hi: int) -> int:
        if hi <= lo:
            return lo
        return self.rng.randint(lo, hi)

    # BMv2 keeps one learn list per packet (the last digest() call of the ingress pass wins)
    # and builds the message when ingress ends; digest() in egress does nothing.

    def digest(self, name: str, values: tuple[int, ...]) -> None:
        """A digest of a list or computed value: p4c copies it into a temporary at the call."""
        self.digest_late(name, lambda: values)

    def digest_late(self, name: str, read: Callable[[], tuple[int, ...]]) -> None:
        """A digest of a field reference: its fields are read when ingress ends."""
        if not self.in_ingress:
            self.egress_digests_ignored += 1
            return
        self.late_digests = [(name, read)]

    def flush_digests(self) -> None:
        for name, read in self.late_digests:
            self.state.push_digest(name, read())
        self.late_digests = []

    def log(self, msg: str, values: tuple[int, ...]) -> None:
        if log.isEnabledFor(logging.INFO):
            text = msg
            for v in values:
                text = text.replace("{}", str(v), 1)
            log.info("log_msg: %s", text)

    def assert_failed(self, kind: str, where: str) -> None:
        self.assert_failures += 1
        log.error("%s failed at %s; packet dropped", kind, where)
        raise AssertionFailure(where)


@dataclass(slots=True)
class EgressJob:
    """A packet between the traffic manager and egress."""

    port: int
    hdr: Any
    meta: Any
    sm: Any
    payload: bytes
    original: bytes  # the packet as it entered ingress (for I2E clones / resubmit)
    passes: int = 0
    priority: int = 0
    truncate: int = 0  # clone session truncation (packet_length_bytes)
    nbytes: int = 0  # approximate frame size, for the traffic manager's bit rates


@dataclass
class Counters:
    """What happened to packets, for tests and the daemon's status output."""

    received: int = 0
    sent: int = 0
    dropped: int = 0
    parser_errors: int = 0
    pass_limit_drops: int = 0
    assert_drops: int = 0
    copies: int = 0  # packets made by the switch: clones, multicast replicas beyond the first


class V1Switch:
    """One v1model switch running a compiled program over its :class:`SwitchState`."""

    def __init__(
        self,
        program: CompiledProgram,
        state: SwitchState | None = None,
        *,
        seed: int = 0,
        clock: Callable[[], int] | None = None,
        drops: DropCounters | None = None,
    ) -> None:
        self.program = program
        # by reason and port; the device passes its own so that counts outlive a pipeline
        self.drops = drops if drops is not None else DropCounters()
        self.state = state if state is not None else SwitchState(program.schema)
        self.rt = RuntimeContext(self.state, random.Random(seed))
        if clock is None:
            start = time.monotonic_ns()
            mono = time.monotonic_ns

            def clock() -> int:
                return (mono() - start) // 1000

        self.clock = clock
        self.counters = Counters()
        ns = self._namespace()
        exec(program.code, ns)  # noqa: S102 - our own generated code, compiled from P4
        self.ns = ns
        entry = ns["ENTRY"]
        self.parser = entry["parser"]
        self.verify_checksum = entry["verify_checksum"]
        self.ingress = entry["ingress"]
        self.egress = entry["egress"]
        self.compute_checksum = entry["compute_checksum"]
        self.deparser = entry["deparser"]
        self.new_headers = ns["NEW_HEADERS"]
        self.new_meta = ns["NEW_META"]
        self.new_sm = ns["NEW_SM"]
        self.field_lists = ns["FIELD_LISTS"]
        self.old_field_lists = ns["OLD_FIELD_LISTS"]

    def _namespace(self) -> dict[str, Any]:
        ns: dict[str, Any] = {
            "_rt": self.rt,
            "_ParserError": support.ParserError,
            "_ExitSignal": support.ExitSignal,
            "_to_signed": support.to_signed,
            "_shl": support.shl,
            "_div": support.div,
            "_mod": support.mod,
            "_stack_next": support.stack_next,
            "_stack_last": support.stack_last,
            "_stack_at": support.stack_at,
            "_push_front": support.push_front,
            "_pop_front": support.pop_front,
            "_eq": support.eq,
            "_pack_bits": pack_bits,
            "_v1model_hash_result": v1model_hash_result,
            "_bind_extern": bind_extern_function,  # user extern functions (--load-modules)
        }
        st = self.state
        for py, (kind, fq) in self.program.bindings.items():
            if kind == "table":
                ns[py] = st.tables[fq]
            elif kind == "value_set":
                ns[py] = st.value_sets[fq]
            elif kind == "direct_meter":
                ns[py] = st.direct_meters[fq]
            elif kind == "extern":
                obj = (
                    st.registers.get(fq)
                    or st.counters.get(fq)
                    or st.meters.get(fq)
                    or st.direct_counters.get(fq)
                    or st.direct_meters.get(fq)
                    or st.action_profiles.get(fq)
                )
                ns[py] = obj
        return ns

    # -- one pass through ingress ----------------------------------------------------------

    def _run_parser(self, data: bytes, hdr: Any, meta: Any, sm: Any) -> bytes:
        pkt = support.PacketIn(data)
        try:
            self.parser(pkt, hdr, meta, sm)
        except support.ParserError as e:
            if e.code >= 0:
                sm.f_parser_error = e.code
                self.counters.parser_errors += 1
        return data[pkt.off :]

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
        """Parse, verify, run ingress; return the packets the traffic manager must enqueue.

        Resubmitted packets are processed here recursively (they never reach a queue).
        """
        rt = self.rt
        if now is None:
            now = self.clock()
        hdr, meta, sm = self.new_headers(), self.new_meta(), self.new_sm()
        sm.f_ingress_port = port
        sm.f_packet_length = len(data)
        sm.f_instance_type = instance_type
        sm.f_ingress_global_timestamp = now & 0xFFFFFFFFFFFF
        if restore is not None:
            restore[0](meta, sm, restore[1])
        rt.begin(len(data), now, sm)
        payload = self._run_parser(data, hdr, meta, sm)
        rt.payload = payload
        try:
            if self.verify_checksum is not None:
                self.verify_checksum(hdr, meta)
                sm.f_checksum_error = rt.checksum_error
            if self.ingress is not None:
                try:
                    self.ingress(hdr, meta, sm)
                except support.ExitSignal:
                    pass
        except AssertionFailure:
            self.counters.assert_drops += 1
            self.drops.count(DropReason.ASSERT_FAILED, port)
            return []
        if rt.late_digests:
            rt.flush_digests()
        original = data if original is None else original
        jobs: list[EgressJob] = []
        # 1. clone (I2E): the packet as it entered ingress, parsed again
        if rt.clone_req is not None and rt.clone_req[0] == "I2E":
            clones = self._i2e_clones(rt.clone_req, meta, sm, data)
            self.counters.copies += len(clones)
            jobs.extend(clones)
        # 2. digest: recorded when digest() ran
        # 3. resubmit
        if rt.resubmit_req is not None:
            if passes + 1 >= MAX_PASSES:
                self.counters.pass_limit_drops += 1
                self.drops.count(DropReason.PASS_LIMIT, port)
                return jobs
            # BMv2 resets all metadata (standard_metadata included, so ingress_port is 0)
            # and keeps only the preserved field list
            saver = self._field_list(rt.resubmit_req, meta, sm)
            return jobs + self.ingress_pass(
                0, original, InstanceType.RESUBMIT, saver, passes + 1, original
            )
        # 4. multicast
        trunc = rt.truncate_len  # truncate() in ingress applies when the packet leaves
        grp = sm.f_mcast_grp
        if grp:
            sm.f_instance_type = InstanceType.REPLICATION
            replicas = self.state.pre.replicas(grp)
            for eport, rid in replicas:
                h2, m2, s2 = hdr.copy(), meta.copy(), sm.copy()
                s2.f_egress_rid = rid
                jobs.append(
                    EgressJob(eport, h2, m2, s2, payload, original, passes, sm.f_priority, trunc)
                )
            if not replicas:
                self.drops.count(DropReason.MCAST_EMPTY, port)
            else:
                self.counters.copies += len(replicas) - 1
            return jobs
        # 5. drop
        spec = sm.f_egress_spec
        if spec == DROP_PORT:
            self.counters.dropped += 1
            self.drops.count(
                DropReason.PARSER_ERROR if sm.f_parser_error else DropReason.INGRESS_DROP, port
            )
            return jobs
        # 6. unicast (BMv2 marks the packet NORMAL again, even after resubmit/recirculate)
        sm.f_instance_type = InstanceType.NORMAL
        jobs.append(EgressJob(spec, hdr, meta, sm, payload, original, passes, sm.f_priority, trunc))
        return jobs

    def _field_list(self, req: Any, meta: Any, sm: Any) -> tuple[Any, Any] | None:
        """Save the preserved fields now; return (loader, values) for the new packet."""
        if req is None:
            return None
        kind, idx = req
        if kind == "fl":
            pair = self.field_lists.get(idx)
            if pair is None:
                return None
            save, load = pair
            values = save(meta)
            return (lambda m, s, v: load(m, v)), values
        save_o, load_o = self.old_field_lists[idx]
        return load_o, save_o(meta, sm)

    def _i2e_clones(
        self, req: tuple[str, int, Any], meta: Any, sm: Any, data: bytes
    ) -> list[EgressJob]:
        _, session, fl = req
        replicas = self.state.pre.clone_replicas(session)
        if not replicas:
            return []
        saver = self._field_list(fl, meta, sm)
        trunc = self._clone_truncation(session)
        out = []
        for eport, rid in replicas:
            # parsed again from the original bytes (with the original ingress_port), then all
            # metadata is reset but for the preserved field list, as BMv2 does
            h2, m2, s2 = self.new_headers(), self.new_meta(), self.new_sm()
            s2.f_ingress_port = sm.f_ingress_port
            payload = self._run_parser(data, h2, m2, s2)
            m2, s2 = self.new_meta(), self.new_sm()
            if saver is not None:
                saver[0](m2, s2, saver[1])
            s2.f_instance_type = InstanceType.INGRESS_CLONE
            s2.f_packet_length = len(data)
            s2.f_egress_rid = rid
            job = EgressJob(eport, h2, m2, s2, payload, data)
            if trunc:
                job.truncate = trunc
            out.append(job)
        return out

    def _clone_truncation(self, session: int) -> int:
        s = self.state.pre.sessions.get(session)
        return s.packet_length_bytes if s is not None else 0

    # -- one pass through egress -----------------------------------------------------------

    def egress_pass(
        self,
        job: EgressJob,
        enq_info: tuple[int, int, int, int] | None = None,
        now: int | None = None,
    ) -> tuple[list[tuple[int, bytes]], list[EgressJob], list[tuple[int, bytes, Any]]]:
        """Run egress and the deparser.

        ``enq_info`` is (enq_timestamp, enq_qdepth, deq_timedelta, deq_qdepth) from the
        traffic manager. Returns (packets to send, E2E clones to enqueue, recirculations as
        (port, bytes, restore)).
        """
        rt = self.rt
        if now is None:
            now = self.clock()
        hdr, meta, sm = job.hdr, job.meta, job.sm
        sm.f_egress_port = job.port
        sm.f_egress_spec = 0
        sm.f_egress_global_timestamp = now & 0xFFFFFFFFFFFF
        if enq_info is not None:
            (sm.f_enq_timestamp, sm.f_enq_qdepth, sm.f_deq_timedelta, sm.f_deq_qdepth) = enq_info
        rt.begin(sm.f_packet_length, now, sm, in_ingress=False)
        rt.payload = job.payload
        try:
            if self.egress is not None:
                try:
                    self.egress(hdr, meta, sm)
                except support.ExitSignal:
                    pass
        except AssertionFailure:
            self.counters.assert_drops += 1
            self.drops.count(DropReason.ASSERT_FAILED, job.port)
            return [], [], []
        clones: list[EgressJob] = []
        if rt.clone_req is not None and rt.clone_req[0] == "E2E":
            _, session, fl = rt.clone_req
            replicas = self.state.pre.clone_replicas(session) or ()
            saver = self._field_list(fl, meta, sm)
            trunc = self._clone_truncation(session)
            for eport, rid in replicas:
                m2, s2 = self.new_meta(), self.new_sm()
                if saver is not None:
                    saver[0](m2, s2, saver[1])
                s2.f_instance_type = InstanceType.EGRESS_CLONE
                s2.f_packet_length = sm.f_packet_length
                s2.f_egress_rid = rid
                c = EgressJob(eport, hdr.copy(), m2, s2, job.payload, job.original, job.passes)
                if trunc:
                    c.truncate = trunc
                clones.append(c)
            self.counters.copies += len(clones)
        if sm.f_egress_spec == DROP_PORT:
            self.counters.dropped += 1
            self.drops.count(DropReason.EGRESS_DROP, job.port)
            return [], clones, []
        truncate_len = rt.truncate_len
        recirc = rt.recirc_req
        saver = self._field_list(recirc, meta, sm) if recirc is not None else None
        rt.payload = job.payload
        if self.compute_checksum is not None:
            self.compute_checksum(hdr, meta)
        parts: list[bytes] = []
        self.deparser(parts, hdr)
        parts.append(job.payload)
        data = b"".join(parts)
        if recirc is not None:
            if job.passes + 1 >= MAX_PASSES:
                self.counters.pass_limit_drops += 1
                self.drops.count(DropReason.PASS_LIMIT, job.port)
                return [], clones, []
            return [], clones, [(job.port, data, saver)]
        for t in (truncate_len, job.truncate):
            if t and len(data) > t:
                data = data[:t]
        return [(job.port, data)], clones, []

    # -- the whole pipeline, synchronously -------------------------------------------------

    def process(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        """Run one packet through the switch with an unbounded, zero-delay traffic manager."""
        self.counters.received += 1
        out: list[tuple[int, bytes]] = []
        pending: deque[EgressJob] = deque(self.ingress_pass(port, data))
        while pending:
            job = pending.popleft()
            sent, clones, recircs = self.egress_pass(job)
            out.extend(sent)
            pending.extend(clones)
            for _port, rdata, saver in recircs:
                # metadata reset: a recirculated packet arrives on port 0
                pending.extend(
                    self.ingress_pass(0, rdata, InstanceType.RECIRC, saver, job.passes + 1)
                )
        self.counters.sent += len(out)
        return out

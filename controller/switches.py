"""One switch as the controller sees it: a P4Runtime client, the pipeline's schema, and a mirror
of the entities installed, kept equal to the switch by writing differences.

:meth:`SwitchSession.sync` takes the wanted ``{key: entity}`` map and writes what differs, in
dependency order, one batch per phase (a P4Runtime batch may be applied in any order):

1. insert/modify members, 2. insert/modify groups, 3. insert/modify table entries,
4. delete table entries, 5. delete groups, 6. delete members.

After a failed write the mirror keeps what the server reported as done (per-update errors) or,
without details, is read back from the switch; the error is raised either way.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from controller import program as fp
from controller.config import ControllerConfig
from controller.drops import (
    NO_TARGET_DROPS,
    NO_TARGET_DROPS_RPC,
    PacketTotals,
    TargetDrop,
    decode_drops,
    decode_packets,
    drop_read,
    packets_read,
)
from controller.entries import Diff, Entity, EntityMap, Group, Member, TableEntry, diff, index
from controller.errors import FabricUnavailable, P4RuntimeError, SchemaError
from controller.p4rt import (
    DELETE,
    INSERT,
    MODIFY,
    Arbitration,
    ClientOptions,
    GetResponseType,
    P4RuntimeClient,
    update,
)
from controller.schema import Schema
from topologies.model import Switch

T = TypeVar("T")


@dataclass(frozen=True)
class SyncResult:
    """How many entities one sync inserted, modified and deleted."""

    inserted: int = 0
    modified: int = 0
    deleted: int = 0
    first_write_sent: float | None = None
    """``time.monotonic()`` when the sync's first Write was sent: nothing had changed before
    (None: nothing was written)."""
    first_write_done: float | None = None
    """When the first Write returned: a switch had applied part of the change by then."""

    def __add__(self, other: SyncResult) -> SyncResult:
        def first(a: float | None, b: float | None) -> float | None:
            return b if a is None else a if b is None else min(a, b)

        return SyncResult(
            self.inserted + other.inserted,
            self.modified + other.modified,
            self.deleted + other.deleted,
            first(self.first_write_sent, other.first_write_sent),
            first(self.first_write_done, other.first_write_done),
        )

    @property
    def total(self) -> int:
        return self.inserted + self.modified + self.deleted


def _phase(entities: Iterable[Entity], kind: type) -> list[Entity]:
    return [e for e in entities if isinstance(e, kind)]


def write_plan(d: Diff) -> list[tuple[int, list[Entity]]]:
    """The phases of a diff: ``(update type, entities)`` in the order they must be written."""
    plan: list[tuple[int, list[Entity]]] = []
    for kind in (Member, Group, TableEntry):
        plan.append((INSERT, _phase(d.inserts, kind)))
        plan.append((MODIFY, _phase(d.modifies, kind)))
    for kind in (TableEntry, Group, Member):
        plan.append((DELETE, _phase(d.deletes, kind)))
    return [(t, es) for t, es in plan if es]


class SwitchSession:
    """The controller's connection to one switch."""

    def __init__(
        self,
        switch: Switch,
        address: str,
        config: ControllerConfig,
        schema: Schema | None = None,
        election_id: int | None = None,
    ) -> None:
        self.switch = switch
        self.address = address
        self.config = config
        self.schema = schema
        self.client = P4RuntimeClient(
            address,
            ClientOptions(
                device_id=switch.device_id,
                election_id=election_id,
                connect_timeout_s=config.connect_timeout_s,
                rpc_timeout_s=config.rpc_timeout_s,
            ),
            name=switch.name,
        )
        self.installed: EntityMap = {}
        self.pipeline_cookie: int | None = None
        self.last_error: str = ""

    @property
    def name(self) -> str:
        return self.switch.name

    def connect(self) -> Arbitration:
        return self.client.connect()

    def close(self) -> None:
        self.client.close()

    def need_schema(self) -> Schema:
        if self.schema is None:
            raise FabricUnavailable(f"{self.name}: no P4Info (push a pipeline or fetch it)")
        return self.schema

    # -- pipeline -------------------------------------------------------------------------

    def push(self, p4info: p4info_pb2.P4Info, device_config: bytes, cookie: int) -> None:
        """``VERIFY_AND_COMMIT`` the pipeline: the switch starts with empty tables."""
        self.client.set_pipeline(p4info, device_config, cookie=cookie)
        self.pipeline_cookie = cookie
        self.installed = {}

    def fetch_pipeline(
        self, timeout_s: float | None = None
    ) -> tuple[p4info_pb2.P4Info | None, int | None]:
        """The switch's P4Info and cookie (None, None without a pipeline)."""
        config = self.client.get_pipeline(GetResponseType.P4INFO_AND_COOKIE, timeout_s=timeout_s)
        if config is None:
            return None, None
        cookie = config.cookie.cookie if config.HasField("cookie") else None
        info = config.p4info if config.HasField("p4info") else None
        return info, cookie

    # -- entities -------------------------------------------------------------------------

    def read_installed(self) -> EntityMap:
        """Read every entity of the tables and profiles the controller owns; refresh the mirror."""
        schema = self.need_schema()
        msgs = self.client.read(schema.read_all(fp.MANAGED_TABLES, fp.MANAGED_PROFILES))
        self.installed = index(schema.decode(m) for m in msgs)
        return dict(self.installed)

    def sync(self, desired: EntityMap) -> SyncResult:
        """Write what makes the switch hold exactly ``desired`` (of the managed tables)."""
        d = diff(self.installed, desired)
        if not d:
            return SyncResult()
        schema = self.need_schema()
        sent: float | None = None
        done: float | None = None
        for kind, entities in write_plan(d):
            for start in range(0, len(entities), self.config.write_batch):
                chunk = entities[start : start + self.config.write_batch]
                if sent is None:
                    sent = time.monotonic()
                self._write(schema, kind, chunk)
                if done is None:
                    done = time.monotonic()
        return SyncResult(len(d.inserts), len(d.modifies), len(d.deletes), sent, done)

    def _write(self, schema: Schema, kind: int, chunk: Sequence[Entity]) -> None:
        updates = [update(kind, schema.encode(e)) for e in chunk]
        try:
            self.client.write(updates)
        except P4RuntimeError as err:
            if len(err.errors) == len(chunk):
                for e, outcome in zip(chunk, err.errors):
                    if outcome.ok:
                        self._applied(kind, e)
            else:
                self.read_installed()
            self.last_error = str(err)
            raise
        for e in chunk:
            self._applied(kind, e)

    def _applied(self, kind: int, e: Entity) -> None:
        if kind == DELETE:
            self.installed.pop(e.key, None)
        else:
            self.installed[e.key] = e

    # -- counters, digests, packets -------------------------------------------------------

    def read_counters(
        self, names: Sequence[str], indices: Sequence[int] | None = None
    ) -> dict[tuple[str, int], tuple[int, int]]:
        """``{(counter, index): (packets, bytes)}`` for the ``indices`` (None: every cell) of
        the named counters, in one Read."""
        schema = self.need_schema()
        if indices is None:
            reads = [schema.counter_read(n) for n in names]
        else:
            reads = [schema.counter_read(n, i) for n in names for i in indices]
        msgs = self.client.read(reads)
        out: dict[tuple[str, int], tuple[int, int]] = {}
        for m in msgs:
            if m.WhichOneof("entity") == "counter_entry":
                name, idx, packets, nbytes = schema.decode_counter(m.counter_entry)
                out[(name, idx)] = (packets, nbytes)
        return out

    def read_target_drops(self) -> tuple[TargetDrop, ...] | None:
        """The switch target's drop counters by reason, port and queue, in one Read (None: the
        target has none, e.g. BMv2; :mod:`controller.drops`)."""
        try:
            msgs = self.client.read([drop_read()])
        except P4RuntimeError as err:
            if err.code in NO_TARGET_DROPS_RPC or any(err.only(c) for c in NO_TARGET_DROPS):
                return None
            raise
        return decode_drops(msgs)

    def read_target_packets(self) -> PacketTotals | None:
        """The switch target's packets in, out and queued, in one Read (None: the target does
        not count them, e.g. BMv2; :mod:`controller.drops`)."""
        try:
            msgs = self.client.read([packets_read()])
        except P4RuntimeError as err:
            if err.code in NO_TARGET_DROPS_RPC or any(err.only(c) for c in NO_TARGET_DROPS):
                return None
            raise
        return decode_packets(msgs)

    def enable_digest(self, name: str) -> None:
        """Insert the DigestEntry (or modify it when one exists) with the configured timeouts."""
        schema = self.need_schema()
        entity = schema.digest_entry(
            name,
            max_timeout_ns=self.config.digest_max_timeout_ns,
            max_list_size=self.config.digest_max_list_size,
            ack_timeout_ns=self.config.digest_ack_timeout_ns,
        )
        try:
            self.client.write([update(INSERT, entity)])
        except P4RuntimeError as err:
            if not err.is_already_exists_only:
                raise
            self.client.write([update(MODIFY, entity)])

    def packet_out(self, payload: bytes, **metadata: int) -> None:
        self.client.packet_out(self.need_schema().packet_out(payload, metadata))

    def decode_digest(self, digest: p4runtime_pb2.DigestList) -> list[dict[str, int]]:
        schema = self.need_schema()
        return [schema.decode_digest_data(digest.digest_id, d) for d in digest.data]

    def digest_name(self, digest_id: int) -> str | None:
        try:
            return str(self.need_schema().digest(digest_id).preamble.name)
        except SchemaError:
            return None


POOL_THREADS = 32
_POOL_PREFIX = "tf-ctl-switch"
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _shared_pool() -> ThreadPoolExecutor:
    """The controller's worker threads, started once (starting 8 threads per command cost
    more than the command: ~2 ms each on a busy machine)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(POOL_THREADS, thread_name_prefix=_POOL_PREFIX)
        return _pool


def run_parallel(
    sessions: Iterable[SwitchSession], fn: Callable[[SwitchSession], T], workers: int = 16
) -> dict[str, T | Exception]:
    """Run ``fn`` on every session in parallel; ``{name: result or the exception it raised}``.

    At most ``workers`` at once, on the shared worker threads; one at a time when called from
    one of them (nested calls cannot wait for the threads they occupy).
    """
    sessions = list(sessions)
    if not sessions:
        return {}
    out: dict[str, T | Exception] = {}
    if len(sessions) == 1 or threading.current_thread().name.startswith(_POOL_PREFIX):
        for s in sessions:
            try:
                out[s.name] = fn(s)
            except Exception as e:  # noqa: BLE001 - handed to the caller
                out[s.name] = e
        return out
    slots = threading.BoundedSemaphore(min(workers, POOL_THREADS))

    def limited(s: SwitchSession) -> T:
        with slots:
            return fn(s)

    pool = _shared_pool()
    futures = {s.name: pool.submit(limited, s) for s in sessions}
    for name, fut in futures.items():
        try:
            out[name] = fut.result()
        except Exception as e:  # noqa: BLE001 - handed to the caller
            out[name] = e
    return out


def for_each(
    sessions: Iterable[SwitchSession], fn: Callable[[SwitchSession], T], workers: int = 16
) -> dict[str, T]:
    """Run ``fn`` on every session in parallel; ``{name: result}``. The first error is raised
    after all have finished, naming the other failures in its notes."""
    results = run_parallel(sessions, fn, workers)
    errors = [(n, r) for n, r in results.items() if isinstance(r, Exception)]
    if errors:
        first = errors[0][1]
        for name, e in errors[1:]:
            first.add_note(f"also {name}: {e}")
        raise first
    return {n: r for n, r in results.items() if not isinstance(r, Exception)}

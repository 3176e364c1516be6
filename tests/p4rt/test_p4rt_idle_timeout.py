"""Table idle timeouts over gRPC (P4Runtime "Idle-timeout" and "Table Idle Timeout
Notification"): TTLs read back, ``time_since_last_hit`` follows the device clock and hits,
idle entries come as one ``IdleTimeoutNotification`` per table and again one TTL later, and the
fields are refused where the spec refuses them."""

from __future__ import annotations

import time

import grpc
import pytest
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2

from tests.p4rt.idle_oneshot_helpers import (
    FakeClock,
    action,
    config,
    entry,
    frame,
    one_shot,
    p4info,
    running,
    send,
    tid,
)
from tests.unit.p4rt_helpers import DELETE, INSERT, MODIFY, Harness, StreamClient, details, update

TE = p4runtime_pb2.TableEntry
MS = 1_000_000  # ns


def with_action(te: TE, value: int = 1) -> TE:
    te.action.action.CopyFrom(action("set_out", value))
    return te


def write_codes(h: Harness, *updates: p4runtime_pb2.Update) -> list[int]:
    with pytest.raises(grpc.RpcError) as err:
        h.write(*updates)
    return [e.canonical_code for e in details(err.value)]


def read_one(h: Harness, table: str, kind: int, *, hit_time: bool = True) -> TE:
    req = entry(table, kind)
    if hit_time:
        req.time_since_last_hit.SetInParent()
    [got] = h.read(p4runtime_pb2.Entity(table_entry=req))
    return got.table_entry


def notified(stream: StreamClient, timeout: float = 3.0) -> p4runtime_pb2.IdleTimeoutNotification:
    return stream.expect("idle_timeout_notification", timeout).idle_timeout_notification


def keys(note: p4runtime_pb2.IdleTimeoutNotification) -> list[tuple[int, bytes]]:
    return sorted((e.table_id, e.match[0].exact.value) for e in note.table_entry)


def test_idle_entries_are_notified_per_table_and_again_one_ttl_later() -> None:
    clock = FakeClock()
    with running(clock) as h:
        stream = h.streams[0]
        idle = h.server.service.idle
        a = with_action(entry("t_idle", 1, ttl_ns=100 * MS))
        a.controller_metadata = 77
        a.metadata = b"cookie"
        b = with_action(entry("t_idle", 2, ttl_ns=100 * MS))
        never = with_action(entry("t_idle", 3))  # TTL 0: never idle
        sel = one_shot("t_sel", 4, (action("set_out", 9), 1))
        sel.idle_timeout_ns = 300 * MS
        h.write(*(update(INSERT, table_entry=te) for te in (a, b, never, sel)))
        clock.advance_ms(99)
        assert idle.tick() == 0
        clock.advance_ms(1)
        assert idle.tick() == 2
        note = notified(stream)
        assert keys(note) == [(tid("t_idle"), b"\x01"), (tid("t_idle"), b"\x02")]
        [first] = [e for e in note.table_entry if e.match[0].exact.value == b"\x01"]
        assert (first.controller_metadata, first.metadata, first.idle_timeout_ns) == (
            77,
            b"cookie",
            100 * MS,
        )
        assert abs(note.timestamp - time.time_ns()) < 10**10
        assert stream.none_pending("idle_timeout_notification", wait=0.1)
        # entry 1 is hit, entry 2 stays idle: only 2 is reported one TTL later
        clock.advance_ms(50)
        send(h.device, frame(1))
        clock.advance_ms(50)
        assert idle.tick() == 1
        assert keys(notified(stream)) == [(tid("t_idle"), b"\x02")]
        # the selector table's entry is due at 300 ms, in a notification of its own
        clock.advance_ms(200)
        assert idle.tick() == 3
        notes = [notified(stream), notified(stream)]
        assert sorted(len(n.table_entry) for n in notes) == [1, 2]
        assert {e.table_id for n in notes for e in n.table_entry} == {tid("t_idle"), tid("t_sel")}


def test_time_since_last_hit_follows_the_device_clock_and_hits() -> None:
    clock = FakeClock()
    with running(clock) as h:
        h.write(update(INSERT, table_entry=with_action(entry("t_idle", 1, ttl_ns=5_000 * MS))))
        h.write(update(INSERT, table_entry=with_action(entry("t_idle", 2))))
        clock.advance_ms(30)
        got = read_one(h, "t_idle", 1)
        assert got.idle_timeout_ns == 5_000 * MS
        assert got.time_since_last_hit.elapsed_ns == 30 * MS
        [(_port, data)] = send(h.device, frame(1))
        assert data[3] == 1  # the entry hit
        clock.advance_ms(7)
        assert read_one(h, "t_idle", 1).time_since_last_hit.elapsed_ns == 7 * MS
        # TTL 0: the time since the last hit is still given when asked for
        assert read_one(h, "t_idle", 2).time_since_last_hit.elapsed_ns == 37 * MS
        # not asked for: not given
        assert not read_one(h, "t_idle", 1, hit_time=False).HasField("time_since_last_hit")


def test_modify_changes_the_ttl_and_delete_stops_notifications() -> None:
    clock = FakeClock()
    with running(clock) as h:
        idle = h.server.service.idle
        h.write(update(INSERT, table_entry=with_action(entry("t_idle", 1, ttl_ns=100 * MS))))
        h.write(update(MODIFY, table_entry=with_action(entry("t_idle", 1, ttl_ns=1_000 * MS))))
        assert read_one(h, "t_idle", 1).idle_timeout_ns == 1_000 * MS
        clock.advance_ms(500)
        assert idle.tick() == 0
        h.write(update(MODIFY, table_entry=with_action(entry("t_idle", 1))))  # TTL 0
        clock.advance_ms(5_000)
        assert idle.tick() == 0
        h.write(update(MODIFY, table_entry=with_action(entry("t_idle", 1, ttl_ns=10 * MS))))
        h.write(update(DELETE, table_entry=entry("t_idle", 1)))
        clock.advance_ms(5_000)
        assert idle.tick() == 0


def test_no_primary_means_nothing_is_sent_and_the_timer_still_restarts() -> None:
    clock = FakeClock()
    with running(clock) as h:
        idle = h.server.service.idle
        h.write(update(INSERT, table_entry=with_action(entry("t_idle", 1, ttl_ns=10 * MS))))
        h.streams[0].close()
        clock.advance_ms(10)
        deadline = time.monotonic() + 3
        while h.server.service.arbiter.primary_sink() is not None:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert idle.tick() == 1
        assert idle.stats.no_primary_drops == 1
        assert read_one(h, "t_idle", 1).time_since_last_hit.elapsed_ns == 0


REFUSED = [
    ("TTL on a table without support_timeout", with_action(entry("t_plain", 1, ttl_ns=MS))),
    ("time_since_last_hit in a write", with_action(entry("t_idle", 1))),
]


@pytest.mark.parametrize("why", [r[0] for r in REFUSED])
def test_idle_fields_are_refused_where_the_spec_refuses_them(why: str) -> None:
    te = dict(REFUSED)[why]
    if why == "time_since_last_hit in a write":
        te.time_since_last_hit.elapsed_ns = 1
    with running() as h:
        assert write_codes(h, update(INSERT, table_entry=te)) == [code_pb2.INVALID_ARGUMENT]


def test_default_entries_take_no_ttl_and_reads_of_other_tables_refuse_hit_times() -> None:
    with running() as h:
        default = TE(table_id=tid("t_idle"), is_default_action=True, idle_timeout_ns=MS)
        default.action.action.CopyFrom(action("NoAction"))
        assert write_codes(h, update(MODIFY, table_entry=default)) == [code_pb2.INVALID_ARGUMENT]
        h.write(update(INSERT, table_entry=with_action(entry("t_plain", 1))))
        req = TE(table_id=tid("t_plain"))
        req.time_since_last_hit.SetInParent()
        with pytest.raises(grpc.RpcError):
            h.read(p4runtime_pb2.Entity(table_entry=req))
        # a wildcard read answers, with hit times for idle-timeout tables only
        h.write(update(INSERT, table_entry=with_action(entry("t_idle", 1, ttl_ns=MS * 1000))))
        wildcard = TE()
        wildcard.time_since_last_hit.SetInParent()
        got = [e.table_entry for e in h.read(p4runtime_pb2.Entity(table_entry=wildcard))]
        assert {(e.table_id, e.HasField("time_since_last_hit")) for e in got} == {
            (tid("t_plain"), False),
            (tid("t_idle"), True),
        }


def test_the_sweep_thread_notifies_in_real_time_and_hits_keep_an_entry_quiet() -> None:
    """Real clock, the server's own 10 ms sweep, the real stream: an entry hit every 20 ms
    with a 150 ms TTL is never reported; an idle one is, about every 150 ms."""
    with running(idle_poll_s=0.01) as h:
        stream = h.streams[0]
        h.write(update(INSERT, table_entry=with_action(entry("t_idle", 1, ttl_ns=150 * MS))))
        h.write(update(INSERT, table_entry=with_action(entry("t_idle", 2, ttl_ns=150 * MS))))
        start = time.monotonic()
        seen: list[float] = []
        while time.monotonic() - start < 0.5:
            send(h.device, frame(1))
            try:
                note = notified(stream, timeout=0.02)
            except Exception:  # queue.Empty: nothing this round
                continue
            assert keys(note) == [(tid("t_idle"), b"\x02")]
            seen.append(time.monotonic() - start)
        assert 2 <= len(seen) <= 4, seen
        assert 0.1 <= seen[0] <= 0.35, seen


def test_note_hit_is_how_another_executor_reports_a_hit() -> None:
    """``Table.note_hit(entry_key, now_ns)``: the one call a native executor makes per hit."""
    clock = FakeClock()
    with running(clock) as h:
        h.write(update(INSERT, table_entry=with_action(entry("t_idle", 1, ttl_ns=100 * MS))))
        assert h.device.state is not None
        table = h.device.state.tables["MyIngress.t_idle"]
        [stored] = table.entries()
        clock.advance_ms(90)
        with h.device.lock:
            table.note_hit(stored.key, table.now_ns())
            table.note_hit(((99,), 0), table.now_ns())  # gone since the lookup: ignored
        clock.advance_ms(20)
        assert h.server.service.idle.tick() == 0
        assert read_one(h, "t_idle", 1).time_since_last_hit.elapsed_ns == 20 * MS


def test_reconcile_and_commit_keeps_ttls_one_shot_sets_and_restarts_the_timers() -> None:
    clock = FakeClock()
    with running(clock) as h:
        idle = h.server.service.idle
        h.write(update(INSERT, table_entry=with_action(entry("t_idle", 1, ttl_ns=100 * MS))))
        sel = one_shot("t_sel", 4, (action("set_out", 9), 1), (action("set_out", 8), 2))
        sel.idle_timeout_ns = 100 * MS
        h.write(update(INSERT, table_entry=sel))
        clock.advance_ms(90)
        h.set_pipeline(action=5, p4info=p4info(), config=config())  # RECONCILE_AND_COMMIT
        clock.advance_ms(90)
        assert idle.tick() == 0  # 90 ms since the commit, not 180 ms since the inserts
        [got] = [e.table_entry for e in h.read(p4runtime_pb2.Entity(table_entry=entry("t_sel", 4)))]
        assert (got.action, got.idle_timeout_ns) == (sel.action, 100 * MS)
        assert send(h.device, frame(4, 1))[0][1][3] in (8, 9)
        clock.advance_ms(10)
        assert idle.tick() == 1  # t_sel's entry was hit just now; t_idle's was not
        assert keys(notified(h.streams[0])) == [(tid("t_idle"), b"\x01")]


def test_p4runtime_shell_sets_a_ttl_reads_the_hit_time_and_gets_the_notification() -> None:
    """The project's client, p4runtime-shell 0.0.6, against the real 10 ms sweep."""
    import p4runtime_sh.shell as sh

    with running(idle_poll_s=0.01) as h:
        sh.setup(  # a higher election id: the shell becomes the primary
            device_id=1,
            grpc_addr=f"127.0.0.1:{h.server.port}",
            election_id=(0, 2),
            config=None,
            verbose=False,
        )
        try:
            te = sh.TableEntry("MyIngress.t_idle")(action="MyIngress.set_out")
            te.match["hdr.h.kind"] = "6"
            te.action["v"] = "3"
            te.idle_timeout_ns = 50 * MS
            te.insert()
            note = sh.client.get_stream_packet("idle_timeout_notification", timeout=3)
            assert note is not None
            [idle] = note.idle_timeout_notification.table_entry
            assert (idle.table_id, idle.idle_timeout_ns) == (tid("t_idle"), 50 * MS)
            reader = sh.TableEntry("MyIngress.t_idle")
            reader.time_since_last_hit  # noqa: B018 - the shell asks for it when it is read
            [got] = list(reader.read())
            assert got.idle_timeout_ns == 50 * MS
            assert 0 <= got.time_since_last_hit.elapsed_ns < 10**9
        finally:
            sh.teardown()


def test_sweeps_skip_until_an_entry_can_be_due_or_a_ttl_changes() -> None:
    clock = FakeClock()
    with running(clock) as h:
        idle = h.server.service.idle
        h.write(update(INSERT, table_entry=with_action(entry("t_idle", 1, ttl_ns=100 * MS))))
        assert idle.tick() == 0
        swept = idle.stats.sweeps
        clock.advance_ms(60)
        assert idle.tick() == 0
        assert idle.stats.sweeps == swept  # nothing can be due before 100 ms: no sweep at all
        h.write(update(INSERT, table_entry=with_action(entry("t_idle", 2, ttl_ns=10 * MS))))
        assert idle.tick() == 0
        assert idle.stats.sweeps == swept + 1  # a new TTL: swept again
        clock.advance_ms(10)
        assert idle.tick() == 1
        assert keys(notified(h.streams[0])) == [(tid("t_idle"), b"\x02")]
        clock.advance_ms(30)  # 100 ms since entry 1 was inserted; entry 2 idle again since 80
        assert idle.tick() == 2
        assert keys(notified(h.streams[0])) == [(tid("t_idle"), b"\x01"), (tid("t_idle"), b"\x02")]

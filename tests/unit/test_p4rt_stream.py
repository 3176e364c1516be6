"""StreamChannel: arbitration, packet-out / packet-in, digests, stream errors, server lifecycle."""

from __future__ import annotations

import time

import grpc
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc
from p4rt_helpers import (
    CPU_PORT,
    DEVICE_ID,
    INSERT,
    DataPath,
    StreamClient,
    exact_entry,
    names,
    packet,
    running,
    uint128,
    update,
)

from switch.device.device import Device
from switch.p4rt import P4RuntimeServer

OK, ALREADY_EXISTS, NOT_FOUND = code_pb2.OK, code_pb2.ALREADY_EXISTS, code_pb2.NOT_FOUND


def eid(upd: p4runtime_pb2.MasterArbitrationUpdate) -> int | None:
    if not upd.HasField("election_id"):
        return None
    return (upd.election_id.high << 64) | upd.election_id.low


def test_primary_backup_and_notifications() -> None:
    with running(primary=False, pipeline=False) as h:
        a = h.stream()
        upd = a.arbitrate(10)
        assert (upd.status.code, eid(upd), upd.device_id) == (OK, 10, DEVICE_ID)
        b = h.stream()
        upd = b.arbitrate(5)
        assert (upd.status.code, eid(upd)) == (ALREADY_EXISTS, 10)
        assert a.none_pending("arbitration")  # a backup joining tells nobody else
        c = h.stream()
        assert c.arbitrate(1 << 70).status.code == OK  # 128-bit election ids
        assert a.expect("arbitration").arbitration.status.code == ALREADY_EXISTS
        assert b.expect("arbitration").arbitration.status.code == ALREADY_EXISTS
        c.close()
        for s in (a, b):
            upd = s.expect("arbitration").arbitration
            assert (upd.status.code, eid(upd)) == (NOT_FOUND, 1 << 70)
        assert a.arbitrate(11).status.code == NOT_FOUND  # below the highest: still no primary
        d = h.stream()
        assert d.arbitrate(1 << 70).status.code == OK  # the same id as the departed primary


def test_downgrade_and_unset_election_id() -> None:
    with running(primary=False, pipeline=False) as h:
        watcher = h.stream()
        upd = watcher.arbitrate(None)
        assert upd.status.code == NOT_FOUND and eid(upd) is None  # never a primary yet
        p = h.stream()
        assert p.arbitrate(3).status.code == OK
        assert watcher.expect("arbitration").arbitration.status.code == ALREADY_EXISTS
        assert p.arbitrate(2).status.code == NOT_FOUND  # it downgraded itself: no primary now
        assert watcher.expect("arbitration").arbitration.status.code == NOT_FOUND
        assert p.arbitrate(3).status.code == OK


def test_arbitration_errors_end_the_stream() -> None:
    with running(primary=False, pipeline=False) as h:
        h.primary(7)
        dup = h.stream()
        dup.send(
            p4runtime_pb2.StreamMessageRequest(
                arbitration=p4runtime_pb2.MasterArbitrationUpdate(
                    device_id=DEVICE_ID, election_id=uint128(7)
                )
            )
        )
        assert dup.ended().code() == grpc.StatusCode.INVALID_ARGUMENT
        other = h.stream()
        other.send(
            p4runtime_pb2.StreamMessageRequest(
                arbitration=p4runtime_pb2.MasterArbitrationUpdate(device_id=99)
            )
        )
        assert other.ended().code() == grpc.StatusCode.NOT_FOUND
        mover = h.stream()
        assert mover.arbitrate(1).status.code == ALREADY_EXISTS
        mover.send(
            p4runtime_pb2.StreamMessageRequest(
                arbitration=p4runtime_pb2.MasterArbitrationUpdate(
                    device_id=2, election_id=uint128(1)
                )
            )
        )
        assert mover.ended().code() == grpc.StatusCode.FAILED_PRECONDITION
        role = h.stream()
        role.arbitrate(2)
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = DEVICE_ID
        req.arbitration.role.name = "other"
        role.send(req)
        assert role.ended().code() == grpc.StatusCode.FAILED_PRECONDITION


def test_roles_are_arbitrated_separately() -> None:
    with running(pipeline=False) as h:  # default role primary with election id 1
        r = h.stream()
        upd = r.arbitrate(1, role="telemetry")
        assert upd.status.code == OK and upd.role.name == "telemetry"
        h.set_pipeline()
        req = p4runtime_pb2.WriteRequest(
            device_id=DEVICE_ID, role="telemetry", election_id=uint128(1)
        )
        req.updates.append(update(INSERT, table_entry=exact_entry(1, "MyIngress.drop")))
        h.stub.Write(req)


def _packet_out(
    payload: bytes, port: int, *, bad: bool = False
) -> p4runtime_pb2.StreamMessageRequest:
    req = p4runtime_pb2.StreamMessageRequest()
    req.packet.payload = payload
    req.packet.metadata.add(metadata_id=1, value=port.to_bytes(2, "big"))
    req.packet.metadata.add(metadata_id=2 if not bad else 7, value=b"\x00")
    return req


def test_packet_out_to_the_cpu_port_comes_back_as_packet_in() -> None:
    with running() as h:
        dp = DataPath(h.device).start()
        try:
            primary = h.streams[0]
            backup = h.stream()
            backup.arbitrate(0)
            frame = packet(kind=1, payload=b"hello")
            primary.send(_packet_out(frame, CPU_PORT))
            pin = primary.expect("packet").packet
            assert pin.payload == frame
            assert [(m.metadata_id, m.value) for m in pin.metadata] == [(1, b"\xff"), (2, b"\x00")]
            assert backup.none_pending("packet")  # packet-ins go to the primary only
            primary.send(_packet_out(frame, 3))
            port, data = dp.frames.get(timeout=3)
            assert (port, data) == (3, frame)
            dp.inject(2, packet(kind=5))
            h.write(update(INSERT, table_entry=exact_entry(6, "MyIngress.to_cpu")))
            dp.inject(4, packet(kind=6))
            pin = primary.expect("packet").packet
            assert pin.metadata[0].value == b"\x04"  # the ingress port
        finally:
            dp.stop()


def test_bad_packet_outs_get_stream_errors_and_the_stream_lives_on() -> None:
    with running() as h:
        primary = h.streams[0]
        backup = h.stream()
        backup.arbitrate(0)
        backup.send(_packet_out(b"x", 1))
        err = backup.expect("error").error
        assert err.canonical_code == code_pb2.PERMISSION_DENIED
        assert err.packet_out.packet_out.payload == b"x"
        primary.send(_packet_out(b"x", 1, bad=True))
        assert primary.expect("error").error.canonical_code == code_pb2.INVALID_ARGUMENT
        primary.send(_packet_out(b"x", 1024))  # 1024 does not fit bit<9>
        assert primary.expect("error").error.canonical_code == code_pb2.OUT_OF_RANGE
        missing = p4runtime_pb2.StreamMessageRequest()
        missing.packet.payload = b"x"
        primary.send(missing)
        assert primary.expect("error").error.canonical_code == code_pb2.INVALID_ARGUMENT
        primary.send(p4runtime_pb2.StreamMessageRequest())
        assert primary.expect("error").error.canonical_code == code_pb2.UNIMPLEMENTED
        ack = p4runtime_pb2.StreamMessageRequest()
        ack.digest_ack.digest_id = 12345
        primary.send(ack)
        assert primary.expect("error").error.HasField("digest_list_ack")
        primary.send(_packet_out(packet(kind=1), 2))
        deadline = time.time() + 3
        while h.server.service.stats.packet_outs < 1 and time.time() < deadline:
            time.sleep(0.01)
        stats = h.server.service.stats
        assert stats.packet_outs == 1 and stats.packet_out_errors == 4


def _enable_digest(h: object, **config: int) -> None:
    de = p4runtime_pb2.DigestEntry(digest_id=names().id_of("digests", "learn_t"))
    for k, v in config.items():
        setattr(de.config, k, v)
    h.write(update(INSERT, digest_entry=de))  # type: ignore[attr-defined]


def test_digests_are_sent_acknowledged_and_deduplicated() -> None:
    with running() as h:
        _enable_digest(h, max_list_size=1, ack_timeout_ns=10**12)
        primary = h.streams[0]
        with h.device.lock:
            h.device.receive(3, packet(kind=0x77))
            h.device.receive(3, packet(kind=0x77))  # a duplicate while unacknowledged
        d = primary.expect("digest").digest
        assert d.digest_id == names().id_of("digests", "learn_t") and d.list_id == 1
        [data] = d.data
        assert [m.bitstring for m in data.struct.members] == [b"\x77", b"\x03"]
        assert primary.none_pending("digest")
        ack = p4runtime_pb2.StreamMessageRequest()
        ack.digest_ack.digest_id, ack.digest_ack.list_id = d.digest_id, d.list_id
        primary.send(ack)
        deadline = time.time() + 3
        while h.server.service.digests.stats.acks < 1 and time.time() < deadline:
            time.sleep(0.01)
        with h.device.lock:
            h.device.receive(3, packet(kind=0x77))
        assert primary.expect("digest").digest.list_id == 2  # acknowledged: sent again


def test_digest_lists_fill_up_or_time_out() -> None:
    with running() as h:
        _enable_digest(h, max_list_size=3, max_timeout_ns=10**12)
        primary = h.streams[0]
        with h.device.lock:
            for port in (1, 2):
                h.device.receive(port, packet(kind=0x77))
        assert primary.none_pending("digest")
        with h.device.lock:
            h.device.receive(3, packet(kind=0x77))
        assert len(primary.expect("digest").digest.data) == 3
        de = p4runtime_pb2.DigestEntry(digest_id=names().id_of("digests", "learn_t"))
        de.config.max_list_size = 0
        de.config.max_timeout_ns = 50_000_000
        h.write(update(p4runtime_pb2.Update.MODIFY, digest_entry=de))
        engine = h.server.service.digests
        engine.stop()  # from here the test passes the engine its time
        sent = engine.stats.lists_sent
        with h.device.lock:
            h.device.receive(4, packet(kind=0x77))
            h.device.receive(5, packet(kind=0x77))
        t0 = time.monotonic_ns()
        engine.tick(t0)
        engine.tick(t0 + 50_000_000 - 1)
        assert engine.stats.lists_sent == sent  # held until its oldest message is 50 ms old
        engine.tick(t0 + 50_000_000)
        assert engine.stats.lists_sent == sent + 1
        assert len(primary.expect("digest").digest.data) == 2


def test_port_zero_lifecycle_and_stop_ends_streams() -> None:
    dev_a, dev_b = Device(1, cpu_port=CPU_PORT), Device(2, cpu_port=CPU_PORT)
    with P4RuntimeServer(dev_a, "127.0.0.1:0") as a, P4RuntimeServer(dev_b, "127.0.0.1:0") as b:
        assert a.port and b.port and a.port != b.port
        assert a.address == f"127.0.0.1:{a.port}"
        channel = grpc.insecure_channel(a.address)
        s = StreamClient(p4runtime_pb2_grpc.P4RuntimeStub(channel))
        assert s.arbitrate(1).status.code == OK
        assert dev_a.on_packet_in is not None
        a.stop()
        a.stop()  # idempotent
        s.ended()
        assert s.finished()  # stopping the server ended the stream
        assert dev_a.on_packet_in is None  # the previous hook is back
        s.close()
        channel.close()


def test_too_many_streams_for_a_role_is_resource_exhausted() -> None:
    with running(primary=False, pipeline=False) as h:
        for i in range(16):
            assert h.stream().arbitrate(i + 1).status.code in (OK, ALREADY_EXISTS)
        extra = h.stream()
        extra.send(
            p4runtime_pb2.StreamMessageRequest(
                arbitration=p4runtime_pb2.MasterArbitrationUpdate(
                    device_id=DEVICE_ID, election_id=uint128(99)
                )
            )
        )
        assert extra.ended().code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_a_packet_out_to_a_device_without_a_cpu_port_is_refused_without_its_lock() -> None:
    # refused at once, even while the data path holds the device (taking the lock would wake
    # it and wait for it: ~1 ms of a busy switch's time per refused packet)
    with running(cpu_port=None) as h:
        primary = h.streams[0]
        with h.device.lock:
            primary.send(_packet_out(packet(kind=1), 2))
            err = primary.expect("error").error
        assert err.canonical_code == code_pb2.FAILED_PRECONDITION
        assert "no CPU port" in err.message
        assert h.server.service.stats.packet_out_errors == 1

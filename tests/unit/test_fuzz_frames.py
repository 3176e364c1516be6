"""Truncated, oversized and random frames never crash the executor.

Whatever the parser makes of a frame (accept, PacketTooShort, StackOutOfBounds, a failed
verify, NoMatch, reject), the v1model behaviour is that ingress still runs and the deparser
re-emits the valid headers followed by the unparsed rest. The program used never changes a
header, so the output must be the input, byte for byte: a strong check that extraction and
deparsing agree for every field layout, stack and select path.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrSegmentRouting
from scapy.layers.l2 import Dot1Q, Ether

from switch.compile import CompiledProgram, load_program
from switch.pipeline.v1model import V1Switch

PROG = Path(__file__).resolve().parents[1] / "p4" / "passthrough_stacks.p4"


@pytest.fixture(scope="module")
def program() -> CompiledProgram:
    return load_program(PROG)


def _seeds() -> list[bytes]:
    eth = Ether(dst="02:00:00:00:00:01", src="02:00:00:00:00:02")
    srh = IPv6ExtHdrSegmentRouting(
        addresses=["2001:db8::1", "2001:db8::2", "2001:db8::3"], segleft=2
    )
    return [
        bytes(eth / IP(dst="10.0.0.1") / UDP(sport=1, dport=2) / b"payload"),
        bytes(eth / Dot1Q(vlan=10) / Dot1Q(vlan=20) / IPv6(dst="2001:db8::9") / UDP() / b"x"),
        bytes(eth / IPv6(dst="2001:db8::9") / srh / UDP(sport=7, dport=9) / (b"y" * 20)),
        bytes(eth / Dot1Q() / Dot1Q() / Dot1Q() / Dot1Q() / IP() / b"too many tags"),
        bytes(eth / IPv6() / IPv6ExtHdrSegmentRouting(addresses=["::1"] * 6) / b"stack overflow"),
    ]


def _mutate(rng: random.Random, frame: bytes) -> bytes:
    choice = rng.randrange(6)
    b = bytearray(frame)
    if choice == 0 and b:  # truncate
        return bytes(b[: rng.randrange(len(b))])
    if choice == 1:  # flip bytes
        for _ in range(rng.randint(1, 8)):
            if b:
                b[rng.randrange(len(b))] = rng.randrange(256)
        return bytes(b)
    if choice == 2:  # oversized
        return bytes(b) + rng.randbytes(rng.choice([1500, 9000, 65535 - len(b)]))
    if choice == 3:  # random garbage
        return rng.randbytes(rng.randrange(0, 200))
    if choice == 4:  # empty or tiny
        return rng.randbytes(rng.randrange(0, 15))
    return bytes(b)


def test_ten_thousand_random_and_mutated_frames(program: CompiledProgram) -> None:
    sw = V1Switch(program, seed=1)
    rng = random.Random(20261129)
    seeds = _seeds()
    for i in range(10_000):
        frame = _mutate(rng, seeds[i % len(seeds)])
        out = sw.process(0, frame)
        assert out == [(1, frame)], f"frame {i} ({len(frame)} bytes) was changed"
    # the corpus really exercises the parser's error paths
    assert sw.counters.parser_errors > 1000


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_round_trip(data: bytes) -> None:
    sw = V1Switch(load_program_cached())
    assert sw.process(3, data) == [(1, data)]


_cache: list[CompiledProgram] = []


def load_program_cached() -> CompiledProgram:
    if not _cache:
        _cache.append(load_program(PROG))
    return _cache[0]

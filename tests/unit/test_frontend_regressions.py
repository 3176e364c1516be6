"""Front-end regressions found by running P4-16 v1model programs of the kind p4c's samples use.

Each test is a small program written for this file; it pins one behaviour that used to be a
crash, a wrong rejection or a wrong result.
"""

from __future__ import annotations

import pytest

from switch.compile import compile_source
from switch.errors import P4Error
from switch.pipeline.v1model import V1Switch

TAIL = """
parser P(packet_in p, out H h, inout M m, inout standard_metadata_t sm) {
    state start { p.extract(h.h); transition accept; }
}
control V(inout H h, inout M m) { apply {} }
control E(inout H h, inout M m, inout standard_metadata_t sm) { apply {} }
control C(inout H h, inout M m) { apply {} }
control D(packet_out p, in H h) { apply { p.emit(h.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""

HEAD = """#include <v1model.p4>
header h_t { bit<8> a; int<8> s; }
struct H { h_t h; }
struct M {}
"""


def _prog(decls: str, ingress: str) -> str:
    return (
        HEAD
        + decls
        + "\ncontrol I(inout H h, inout M m, inout standard_metadata_t sm) {\n"
        + ingress
        + "\n}\n"
        + TAIL
    )


def test_other_package_is_reported_as_not_supported() -> None:
    src = """#include <core.p4>
parser Prs(packet_in b);
package Pkg(Prs p);
parser MyP(packet_in b) { state start { transition accept; } }
Pkg(MyP()) main;
"""
    with pytest.raises(P4Error) as info:
        compile_source(src, "pkg.p4")
    assert "package 'Pkg' is not supported" in info.value.message
    assert info.value.span is not None and info.value.span.line == 5


def test_signed_stack_index_is_accepted() -> None:
    src = _prog("header e_t { bit<8> v; }", "e_t[2] st; apply { st[h.h.s].v = 1; }")
    compile_source(src, "prog.p4")


def test_block_constructor_argument_must_name_an_instance() -> None:
    decls = """control T(inout bit<8> v);
control Inc(inout bit<8> v) { apply { v = v + 1; } }
control Chain(inout bit<8> v)(T t) { apply { t.apply(v); } }"""
    src = _prog(decls, "Chain(Inc()) c; apply { c.apply(h.h.a); }")
    with pytest.raises(P4Error) as info:
        compile_source(src, "prog.p4")
    assert "must name an instance" in info.value.message


def test_direct_type_invocation_gets_its_own_instance_names() -> None:
    decls = """control Cnt(inout bit<8> v) {
    action inc() { v = v + 1; }
    table t { actions = { inc; } default_action = inc(); }
    apply { t.apply(); }
}"""
    prog = compile_source(_prog(decls, "apply { Cnt.apply(h.h.a); Cnt.apply(h.h.a); }"), "prog.p4")
    names = sorted(t.name for t in prog.schema.tables)
    assert names == ["I.Cnt_0.t", "I.Cnt_1.t"]


DIGEST_TIMING = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; }
struct headers_t { h_t h; }
struct d_t { bit<8> v; bit<8> w; }
struct meta_t { d_t d; bit<8> x; }
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control V(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        meta.x = 5;
        digest(2, { meta.x, hdr.h.a });      // a list: copied at the call, but overridden below
        meta.d.v = 1;
        meta.d.w = 7;
        digest<d_t>(1, meta.d);              // a field reference: read when ingress ends
        meta.d.v = 2;
        meta.x = 6;
        sm.egress_spec = 1;
    }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { digest<d_t>(1, meta.d); }      // BMv2 ignores digests from egress
}
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def test_digest_fields_are_read_at_the_end_of_ingress_as_bmv2_does() -> None:
    sw = V1Switch(compile_source(DIGEST_TIMING, "digest_timing.p4"))
    assert sw.process(0, b"\x09") == [(1, b"\x09")]
    # one learn list per packet (the last call wins), read when ingress ends; egress ignored
    assert list(sw.state.digests) == [("d_t", (2, 7))]
    assert sw.rt.egress_digests_ignored == 1


def test_a_list_digest_keeps_the_values_of_the_call() -> None:
    src = DIGEST_TIMING.replace(
        "digest<d_t>(1, meta.d);              // a field reference: read when ingress ends", ""
    )
    sw = V1Switch(compile_source(src, "digest_list.p4"))
    sw.process(0, b"\x09")
    assert [v for _, v in sw.state.digests] == [(5, 9)]

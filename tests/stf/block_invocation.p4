// block_invocation.p4 -- ways of applying controls besides a declared local instance.
//
// Covers: direct type invocation (`Twice.apply(x)` on a control *type*, which
// declares an anonymous instance per call site); a control instance passed as a
// constructor argument of another control (`Chain(inc) c;`) and applied through
// the constructor parameter, whose type is a control type declaration; the
// shared instance's counter seen by both paths; `lookahead<S>()` of a struct
// type; a header stack indexed by a signed int<8> value (in range / negative).
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> x;
    bit<8> y;
    int<8> idx;
    bit<8> peek_hi;
    bit<8> peek_lo;
}

header e_t {
    bit<8> v;
}

struct pair_t {
    bit<4> hi;
    bit<12> lo;
}

struct headers_t {
    h_t h;
    e_t[2] e;
}

struct meta_t { }

control step_t(inout bit<8> v);

control Inc(inout bit<8> v) {
    apply { v = v + 1; }
}

control Chain(inout bit<8> v)(step_t s) {
    apply {
        v = v << 1;
        s.apply(v);
    }
}

control Twice(inout bit<8> v) {
    Inc() i;
    apply {
        i.apply(v);
        i.apply(v);
    }
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pair_t p = pkt.lookahead<pair_t>();
        pkt.extract(hdr.h);
        hdr.h.peek_hi = (bit<8>)p.hi;
        hdr.h.peek_lo = p.lo[7:0];
        pkt.extract(hdr.e[0]);
        pkt.extract(hdr.e[1]);
        transition accept;
    }
}

control Ing(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    Inc() inc;
    Chain(inc) c;
    apply {
        sm.egress_spec = 2;
        c.apply(hdr.h.x);          // x = x * 2 + 1
        Twice.apply(hdr.h.y);      // y = y + 2
        Twice.apply(hdr.h.y);      // a second anonymous instance: y = y + 2
        hdr.e[hdr.h.idx].v = 0xEE; // no effect when idx is negative
    }
}

control Eg(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control VC(inout headers_t hdr, inout meta_t m) { apply { } }
control CC(inout headers_t hdr, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;

// lazy_side_effects.p4 -- calls with side effects inside operands that may not be evaluated.
//
// Covers: the right operand of `&&` / `||` and the branches of `?:` calling a
// function with an `inout` argument (its effect must happen only when the
// operand is evaluated); a table with neither `default_action` nor NoAction in
// its `actions` (the implicit default is NoAction); the table applied inside a
// condition (`t.apply().hit`).
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> sel;   // which expressions are true
    bit<8> c0;    // counters bumped by the calls
    bit<8> c1;
    bit<8> c2;
    bit<8> c3;
    bit<8> r;     // results, one bit each
}

struct headers_t { h_t h; }
struct meta_t { }

bool bump(inout bit<8> c) {
    c = c + 1;
    return true;
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition accept;
    }
}

control Ing(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    action set_r() { hdr.h.r = hdr.h.r | 0x80; }
    table lookup {
        key = { hdr.h.sel : exact; }
        actions = { set_r; }
    }
    apply {
        sm.egress_spec = 1;
        hdr.h.r = 0;
        bool a = hdr.h.sel[0:0] == 1;
        bool b = hdr.h.sel[1:1] == 1;
        if (a && bump(hdr.h.c0)) { hdr.h.r = hdr.h.r | 1; }
        if (b || bump(hdr.h.c1)) { hdr.h.r = hdr.h.r | 2; }
        bit<8> v = a ? (bump(hdr.h.c2) ? 8w4 : 8w0) : (bump(hdr.h.c3) ? 8w8 : 8w0);
        hdr.h.r = hdr.h.r | v;
        if (b && lookup.apply().hit) { hdr.h.r = hdr.h.r | 0x40; }
    }
}

control Eg(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control VC(inout headers_t hdr, inout meta_t m) { apply { } }
control CC(inout headers_t hdr, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;

// eval_order_effects.p4 -- operands with side effects are evaluated left to right.
//
// P4-16 ("Expression evaluation order"): the operands of binary operators, the arguments of
// function and action calls and the components of a concatenation are evaluated from left to
// right, each one's side effects complete before the next is evaluated. Here the side effects
// are table applies whose actions change `x` (t_dbl doubles it, t_inc adds 1 and writes the new
// value into register `trace` at index sel[2:0]) and function calls with inout arguments; every
// case reads `x` in several operands, so any other order gives other bytes (and registers).
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> sel;  // which case; table keys
    bit<8> x;    // changed by the effects
    bit<8> a;
    bit<8> b;
    bit<8> c;
}

struct headers_t { h_t h; }
struct meta_t { }

bit<8> bump(inout bit<8> v) {
    v = v + 1;
    return v;
}

bit<8> twice(inout bit<8> v) {
    v = v << 1;
    return v;
}

bit<8> sub(in bit<8> p, in bit<8> q) {
    return p - q;
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition accept;
    }
}

control Ing(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    register<bit<8>>(8) trace;

    action dbl() {
        hdr.h.x = hdr.h.x << 1;
    }
    action inc() {
        hdr.h.x = hdr.h.x + 1;
        trace.write((bit<32>)hdr.h.sel[2:0], hdr.h.x);
    }
    action put(bit<8> p, bit<8> q) {
        hdr.h.b = p;
        hdr.h.c = q;
    }

    table t_dbl {
        key = { hdr.h.sel: exact; }
        actions = { dbl; NoAction; }
        const entries = { 1: dbl(); 2: dbl(); 3: dbl(); 4: dbl(); 5: dbl(); }
        default_action = NoAction();
    }

    table t_inc {
        key = { hdr.h.sel: exact; }
        actions = { inc; NoAction; }
        const entries = { 2: inc(); 3: inc(); 4: inc(); 5: inc(); }
        default_action = NoAction();
    }

    apply {
        sm.egress_spec = 1;
        if (hdr.h.sel == 1) {
            // the read of x comes before the apply that doubles it
            hdr.h.a = hdr.h.x + (t_dbl.apply().hit ? 8w0 : 8w0x80);
        } else if (hdr.h.sel == 2) {
            // binary operator: t_dbl's effect, then t_inc's
            hdr.h.a = (t_dbl.apply().hit ? hdr.h.x : 8w0) - (t_inc.apply().hit ? hdr.h.x : 8w0);
        } else if (hdr.h.sel == 3) {
            // function arguments
            hdr.h.a = sub(t_dbl.apply().hit ? hdr.h.x : 8w0, t_inc.apply().hit ? hdr.h.x : 8w0);
        } else if (hdr.h.sel == 4) {
            // action arguments
            put(t_dbl.apply().hit ? hdr.h.x : 8w0, t_inc.apply().hit ? hdr.h.x : 8w0);
        } else if (hdr.h.sel == 5) {
            // concatenation
            bit<16> w = (t_dbl.apply().hit ? hdr.h.x : 8w0) ++ (t_inc.apply().hit ? hdr.h.x : 8w0);
            hdr.h.b = w[15:8];
            hdr.h.c = w[7:0];
        } else if (hdr.h.sel == 6) {
            // functions with inout arguments: bump first, then twice, then the comparison's
            hdr.h.a = bump(hdr.h.x) - twice(hdr.h.x);
            hdr.h.b = (twice(hdr.h.x) > bump(hdr.h.x)) ? 8w1 : 8w0;
            hdr.h.c = sub(hdr.h.x, bump(hdr.h.x)) + twice(hdr.h.x);
        }
    }
}

control Eg(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control VC(inout headers_t hdr, inout meta_t m) { apply { } }
control CC(inout headers_t hdr, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;

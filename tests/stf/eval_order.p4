// eval_order.p4 -- left-to-right evaluation when a later operand has side effects.
//
// Covers: `x + bump(x)` where bump() increments its inout argument (the left
// operand is read before the call); a function argument passed by value before
// an argument whose evaluation calls bump() on the same field; comparison
// operands in the same situation.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> x;    // field modified by the calls
    bit<8> sum;  // x + bump(x)
    bit<8> diff; // sub(x, bump(x))
    bit<8> lt;   // x < bump(x)
}

struct headers_t { h_t h; }
struct meta_t { }

bit<8> bump(inout bit<8> v) {
    v = v + 1;
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
    apply {
        sm.egress_spec = 1;
        hdr.h.sum = hdr.h.x + bump(hdr.h.x);
        hdr.h.diff = sub(hdr.h.x, bump(hdr.h.x));
        hdr.h.lt = (hdr.h.x < bump(hdr.h.x)) ? 8w1 : 8w0;
    }
}

control Eg(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control VC(inout headers_t hdr, inout meta_t m) { apply { } }
control CC(inout headers_t hdr, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;

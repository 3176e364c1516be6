// The value of a function whose every `out` argument is a don't-care `_` (P4-16 "Don't care
// arguments"): the call's value is the function's result alone, in an expression and as a
// whole right-hand side, and the discarded outs go nowhere.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> c;
}

struct headers_t { h_t h; }
struct meta_t { }

bit<8> one_out(out bit<8> x) {
    x = 0x44;
    return 0x55;
}

bit<8> two_outs(in bit<8> v, out bit<8> x, out bool y) {
    x = v;
    y = true;
    return v + 1;
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}

control MyIngress(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.h.a = hdr.h.a + one_out(_);
        hdr.h.b = two_outs(hdr.h.b, _, _);
        hdr.h.c = one_out(_);
    }
}

control MyEgress(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control VC(inout headers_t hdr, inout meta_t m) { apply { } }
control CC(inout headers_t hdr, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(P(), VC(), MyIngress(), MyEgress(), CC(), D()) main;

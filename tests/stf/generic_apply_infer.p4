// Direct invocation of a generic control without type arguments, `Swap.apply(x, y)` (P4-16
// 1.2.4 "Direct type invocation" with the type arguments inferred from the arguments, as for a
// generic function call): one instance per call, for bit<8>, bit<16>, a header type (values
// and validity move) and an apply-local variable, and of a generic sub-parser in a parser state
// (for two header types); the generic bodies only move values.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  a;
    bit<8>  b;
    bit<16> w1;
    bit<16> w2;
}

header p_t { bit<8> x; }

struct headers_t { h_t h; p_t p; p_t q; }
struct meta_t { }

control Swap<T>(inout T left, inout T right) {
    apply {
        T tmp = left;
        left = right;
        right = tmp;
    }
}

parser Sub<H>(packet_in pkt, out H x) {
    state start { pkt.extract(x); transition accept; }
}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    state start {
        Sub.apply(pkt, hdr.h);
        Sub.apply(pkt, hdr.p);
        transition accept;
    }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        Swap.apply(hdr.h.a, hdr.h.b);
        Swap.apply(hdr.h.w1, hdr.h.w2);
        Swap.apply(hdr.p, hdr.q);          // p (valid) moves to q, p becomes invalid
        bit<8> local = 0x77;
        Swap.apply(local, hdr.q.x);
        hdr.h.a = hdr.h.a + local;
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { }
}

control MyCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.h); pkt.emit(hdr.p); pkt.emit(hdr.q); }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;

// Indexed slices e[lo +: w] (P4-16 1.2.4, "Operations on fixed-width bit types"): w bits of e
// from bit lo up, lo a run-time bit<W> value, w a compile-time constant, as an r-value and as an
// l-value (also of an int<8>, and in a compound assignment whose start has a side effect: the
// l-value is evaluated once). Bits past the top of e read as 0 and are not written, as p4c
// lowers a run-time start ((e >> lo)[w-1:0]).
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  mode;
    bit<8>  lo;
    bit<32> val;
    bit<16> out;
    bit<8>  cnt;
    int<8>  s;
}

struct headers_t { h_t h; }
struct meta_t { }

bit<8> bump(inout bit<8> c) {
    bit<8> old = c;
    c = c + 1;
    return old;
}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (hdr.h.mode == 1) {
            hdr.h.out = (bit<16>) hdr.h.val[hdr.h.lo +: 8];
        } else if (hdr.h.mode == 2) {
            hdr.h.val[hdr.h.lo +: 8] = 0xab;
            hdr.h.out = hdr.h.val[8 +: 16];
        } else if (hdr.h.mode == 3) {
            hdr.h.val[bump(hdr.h.cnt) +: 4] |= 0xf;
        } else if (hdr.h.mode == 4) {
            hdr.h.out = (bit<16>) hdr.h.s[hdr.h.lo +: 4];
            hdr.h.s[hdr.h.lo +: 4] = 5;
        }
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { }
}

control MyCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control MyDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;

// Constants of struct, header and tuple type (P4-16 1.2.4, "Constants": the value of a
// constant may be of any type with compile-time known values, here structure-valued and list
// expressions): read field by field, folded into other constants, assigned whole (a struct, a
// valid header that is then emitted), nested, in a tuple, a local constant, one using `...`;
// using a constant never changes it; scalar elements of a tuple variable are assigned.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  mode;
    bit<8>  a;
    bit<16> b;
}

header p_t { bit<8> x; bit<8> y; }

struct In { bit<8> k; bool on; }
struct S { bit<8> x; bit<16> y; In inner; }

struct headers_t { h_t h; p_t p; }
struct meta_t { S s; }

const S CS = { x = 3, y = 0x0400, inner = { k = 9, on = true } };
const S CD = { x = 1, ... };
const bit<8> K = CS.x + CS.inner.k;           // folded: 12
const tuple<bit<8>, In> TP = { 5, { 6, false } };
const p_t CP = { x = 0xab, y = 0xcd };

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    const In LOCAL = { k = 0x70, on = true };
    apply {
        sm.egress_spec = 1;
        if (hdr.h.mode == 1) {
            hdr.h.a = K;
            hdr.h.b = CS.y + (bit<16>) CD.x + (bit<16>) CD.y;
        } else if (hdr.h.mode == 2) {
            // a copy of the constant is changed, the constant is not
            meta.s = CS;
            meta.s.x = meta.s.x + 1;
            meta.s.inner.k = 0;
            hdr.h.a = meta.s.x + CS.x + CS.inner.k;   // 4 + 3 + 9
            hdr.h.b = CD.inner.on ? 16w1 : 16w2;
        } else if (hdr.h.mode == 3) {
            hdr.p = CP;
            hdr.h.a = TP[0] + TP[1].k + LOCAL.k;      // 5 + 6 + 0x70
            hdr.h.b = (TP[1].on || !LOCAL.on) ? 16w1 : 16w0;
        } else if (hdr.h.mode == 4) {
            // a tuple variable initialised from a constant, its scalar element assigned
            tuple<bit<8>, In> tv = TP;
            tv[0] = tv[0] + 1;
            tuple<bit<8>, In> tw = tv;
            tw[0] = 0x40;
            hdr.h.a = tv[0] + tw[0] + TP[0] + tw[1].k;   // 6 + 0x40 + 5 + 6
            hdr.h.b = (bit<16>) tw[0];
        }
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { }
}

control MyCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.h); pkt.emit(hdr.p); }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;

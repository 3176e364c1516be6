// compound_assign.p4 -- l-values are evaluated once, and before the right-hand side (P4-16
// "Assignment statement": `A op= B` is `A = A op B` except that A is evaluated only once).
//
// Covers: `s[postincr(i) & 3].x |= v` twice (the index function runs once per statement);
// a compound assignment to a slice of a stack element at a run-time index with a side
// effect; `a += bump(a)` (the old value of a is read before the call, the call's change to a
// is then overwritten); a plain assignment whose left side indexes with a value the right
// side changes (the index is taken first); `-=`, `^=`, `<<=`, `>>=` and `*=` on fields.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> i;
    bit<8> v;
    bit<8> a;
    bit<8> j;
    bit<8> k;
    bit<8> ops;
}

header g_t {
    bit<8> x;
}

struct headers_t {
    h_t    h;
    g_t[4] s;
}

struct meta_t { }

bit<8> postincr(inout bit<8> x) {
    bit<8> old = x;
    x = x + 1;
    return old;
}

bit<8> bump(inout bit<8> x) {
    x = x + 1;
    return x;
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        pkt.extract(hdr.s.next);
        pkt.extract(hdr.s.next);
        pkt.extract(hdr.s.next);
        pkt.extract(hdr.s.next);
        transition accept;
    }
}

control MyIngress(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.s[postincr(hdr.h.i) & 3].x |= hdr.h.v;
        hdr.s[postincr(hdr.h.i) & 3].x |= hdr.h.v;
        hdr.s[postincr(hdr.h.j) & 3].x[7:4] += 1;
        hdr.h.a += bump(hdr.h.a);
        hdr.s[hdr.h.k & 3].x = bump(hdr.h.k);
        hdr.h.ops -= 1;
        hdr.h.ops ^= 0x0F;
        hdr.h.ops <<= 1;
        hdr.h.ops >>= 2;
        hdr.h.ops *= 3;
    }
}

control MyEgress(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control VC(inout headers_t hdr, inout meta_t m) { apply { } }
control CC(inout headers_t hdr, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }

V1Switch(P(), VC(), MyIngress(), MyEgress(), CC(), D()) main;

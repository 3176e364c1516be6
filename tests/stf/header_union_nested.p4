// header_union_nested.p4 -- header unions inside a struct and in a stack (P4-16 "Header
// unions", "Operations on header unions", "Header stacks").
//
// Covers: a stack of header unions filled by `extract(us.next.<member>)` (the stack's
// nextIndex advances as for a header stack); a union inside a struct inside the headers
// struct; assigning a valid header to a union member makes the other member invalid;
// assigning an invalid header to a union member makes it invalid; union-to-union assignment
// copies the valid member (and invalidity); `isValid()` of a union and of a stack element;
// `push_front` on a stack of unions; a union with a run-time stack index; emit of all of
// them (only valid members appear).
#include <core.p4>
#include <v1model.p4>

header tag_t {
    bit<8> n;     // number of union elements in the packet (0..3)
    bit<8> seen;  // written by ingress: bit i set when us[i] is valid after parsing
    bit<8> op;    // which ingress operation to run
    bit<8> idx;   // run-time index for op 4
}

header a_t {
    bit<8> kind;  // 0x0A
    bit<8> v;
}

header b_t {
    bit<8>  kind; // 0x0B
    bit<16> v;
}

header_union ab_u {
    a_t a;
    b_t b;
}

struct inner_t {
    ab_u u;
}

struct headers_t {
    tag_t    tag;
    ab_u[3]  us;
    inner_t  inner;
}

struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.tag);
        transition select(hdr.tag.n) {
            0: accept;
            default: elem;
        }
    }
    state elem {
        transition select(pkt.lookahead<bit<8>>()) {
            0x0A: elem_a;
            0x0B: elem_b;
        }
    }
    state elem_a {
        pkt.extract(hdr.us.next.a);
        transition more;
    }
    state elem_b {
        pkt.extract(hdr.us.next.b);
        transition more;
    }
    state more {
        transition select((bit<8>)hdr.us.lastIndex + 1 == hdr.tag.n) {
            true: accept;
            false: elem;
        }
    }
}

control MyIngress(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        bit<8> seen = 0;
        if (hdr.us[0].isValid()) { seen = seen | 1; }
        if (hdr.us[1].isValid()) { seen = seen | 2; }
        if (hdr.us[2].isValid()) { seen = seen | 4; }
        hdr.tag.seen = seen;
        if (hdr.tag.op == 1) {
            // a valid header assigned to the b member: a becomes invalid
            hdr.inner.u.a = { 0x0A, 0x11 };
            hdr.inner.u.b = { 0x0B, 0x2222 };
        } else if (hdr.tag.op == 2) {
            // union-to-union assignment: inner.u becomes a copy of us[0]
            hdr.inner.u = hdr.us[0];
            hdr.us[0].b.setInvalid();
            hdr.us[0].a.setInvalid();
        } else if (hdr.tag.op == 3) {
            hdr.us.push_front(1);
            hdr.us[0].b.setValid();
            hdr.us[0].b.kind = 0x0B;
            hdr.us[0].b.v = 0xABCD;
        } else if (hdr.tag.op == 4) {
            // set the a member of us[idx]: the b member there becomes invalid
            hdr.us[hdr.tag.idx].a.setValid();
            hdr.us[hdr.tag.idx].a.kind = 0x0A;
            hdr.us[hdr.tag.idx].a.v = 0x77;
        } else if (hdr.tag.op == 5) {
            // an invalid header assigned to the valid member makes it invalid
            a_t none;
            none.setInvalid();
            hdr.us[0].a = none;
        }
    }
}

control MyEgress(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control VC(inout headers_t hdr, inout meta_t m) { apply { } }
control CC(inout headers_t hdr, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }

V1Switch(P(), VC(), MyIngress(), MyEgress(), CC(), D()) main;

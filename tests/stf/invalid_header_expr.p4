// invalid_header_expr.p4 -- the invalid header / header union expression `{#}` (P4-16 1.2.4,
// "Operations on headers" and "Operations on header unions").
//
// Covers: `h = {#}` makes a header invalid (it is not emitted); `g == {#}` / `g != {#}` test
// validity; `u = (ab_u){#}` makes a union invalid; `u.b = {#}` makes the valid member invalid;
// `{#}` as the initializer of a local header and as an `in` argument of a function.
#include <core.p4>
#include <v1model.p4>

header op_t {
    bit<8> op;
    bit<8> flags;  // written by ingress: 1 = g valid, 2 = g == {#}, 4 = f({#}) saw it invalid
}

header a_t {
    bit<8> v;
}

header b_t {
    bit<16> v;
}

header_union ab_u {
    a_t a;
    b_t b;
}

struct headers_t {
    op_t op;
    a_t  g;
    ab_u u;
}

struct meta_t { }

bool is_invalid(in a_t x) {
    return !x.isValid();
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.op);
        pkt.extract(hdr.g);
        pkt.extract(hdr.u.b);
        transition accept;
    }
}

control MyIngress(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        a_t local = {#};
        bit<8> flags = 0;
        if (hdr.op.op == 1) {
            hdr.g = {#};
        } else if (hdr.op.op == 2) {
            hdr.u = (ab_u){#};
        } else if (hdr.op.op == 3) {
            hdr.u.b = {#};
            local.setValid();
            local.v = 0x5A;
            hdr.u.a = local;
        }
        if (hdr.g != {#}) {
            flags = flags | 1;
        }
        if (hdr.g == {#}) {
            flags = flags | 2;
        }
        if (is_invalid({#})) {
            flags = flags | 4;
        }
        hdr.op.flags = flags;
    }
}

control MyEgress(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control VC(inout headers_t hdr, inout meta_t m) { apply { } }
control CC(inout headers_t hdr, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }

V1Switch(P(), VC(), MyIngress(), MyEgress(), CC(), D()) main;

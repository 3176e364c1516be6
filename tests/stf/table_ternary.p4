// table_ternary.p4 -- ternary match with priorities, mixed key kinds, a key on
// a slice.
//
// Covers: a table whose key combines ternary fields and an exact field; a key
// element that is an expression (the slice hdr.h.b[7:4]) named with @name so
// that STF can refer to it as b_hi; overlapping ternary entries resolved by
// priority (in STF `add <table> <prio> ...` a larger number wins); wildcard
// nibbles written as * in STF values; a miss that runs a default action with an
// argument.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  a;
    bit<8>  b;
    bit<16> c;
    bit<8>  r;
}

struct headers_t { h_t h; }
struct metadata_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract(hdr.h);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    action set_r(bit<8> v) {
        hdr.h.r = v;
    }

    table tbl_tern {
        key = {
            hdr.h.a: ternary;
            hdr.h.b[7:4]: ternary @name("b_hi");
            hdr.h.c: exact;
        }
        actions = {
            set_r;
            NoAction;
        }
        default_action = set_r(8w0xDD);
    }

    apply {
        standard_metadata.egress_spec = 1;
        tbl_tern.apply();
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.h);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;

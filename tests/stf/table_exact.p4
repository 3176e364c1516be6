// table_exact.p4 -- exact-match tables, action data, default actions, hit/miss.
//
// Covers: a table with two exact keys; actions with action-data parameters
// (bit<8> and a bit<9> port) supplied by STF `add`; `default_action` with a
// compile-time argument used on a miss; `size`; a second table whose
// (non-const) default action is replaced at run time with STF `setdefault`;
// t.apply().hit and t.apply().miss.
// h.flags: 0x01 if tbl_exact hit, 0x02 if it missed; then OR-ed with the
// set_flag argument of tbl_sd, and with 0x80 if tbl_sd missed.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  k1;
    bit<16> k2;
    bit<8>  r;
    bit<8>  flags;
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
    action set_r(bit<8> v, bit<9> port) {
        hdr.h.r = v;
        standard_metadata.egress_spec = port;
    }
    action on_miss(bit<8> code) {
        hdr.h.r = code;
        standard_metadata.egress_spec = 3;
    }
    action set_flag(bit<8> f) {
        hdr.h.flags = hdr.h.flags | f;
    }

    table tbl_exact {
        key = {
            hdr.h.k1: exact;
            hdr.h.k2: exact;
        }
        actions = {
            set_r;
            on_miss;
        }
        default_action = on_miss(8w0xEE);
        size = 16;
    }

    table tbl_sd {
        key = {
            hdr.h.k1: exact;
        }
        actions = {
            set_flag;
            NoAction;
        }
        default_action = NoAction();
    }

    apply {
        if (tbl_exact.apply().hit) {
            hdr.h.flags = 0x01;
        } else {
            hdr.h.flags = 0x02;
        }
        if (tbl_sd.apply().miss) {
            hdr.h.flags = hdr.h.flags | 0x80;
        }
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

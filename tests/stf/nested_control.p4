// nested_control.p4 -- controls instantiated inside a control.
//
// Covers: a control type with a runtime parameter (inout bit<8>) and a
// constructor parameter (bit<8> inc); two instances of it with different
// constructor arguments, each owning its own copy of the table (STF names
// them MyIngress.c1.tbl_sub and MyIngress.c2.tbl_sub, key named "val"); `return` inside the
// nested control's apply block, which only leaves the nested control.
// Sub: if v == 0 return (v unchanged); else apply tbl_sub (hit: v = data,
// miss: nothing); then v = v + inc.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> v1;
    bit<8> v2;
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

control Sub(inout bit<8> v)(bit<8> inc) {
    action set_v(bit<8> data) {
        v = data;
    }
    table tbl_sub {
        key = { v: exact @name("val"); }
        actions = { set_v; NoAction; }
        default_action = NoAction();
    }
    apply {
        if (v == 0) {
            return;
        }
        tbl_sub.apply();
        v = v + inc;
    }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    Sub(8w1) c1;
    Sub(8w0x10) c2;
    apply {
        c1.apply(hdr.h.v1);
        c2.apply(hdr.h.v2);
        standard_metadata.egress_spec = 1;
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

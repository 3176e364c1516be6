// parser_lookahead.p4 -- packet_in.lookahead and packet_in.advance.
//
// Covers: lookahead<bit<16>>() assigned to metadata (does not consume bytes);
// select on lookahead<bit<8>>(); advance(16) skipping two bytes, which are then
// absent from the output because they were consumed by the parser but belong
// to no header. An info header carrying the 16 bits peeked at the start is
// added in front of the output packet.
#include <core.p4>
#include <v1model.p4>

header info_t {
    bit<16> peek16;
}

header t1_t {
    bit<8> kind;
    bit<8> data;
}

header t2_t {
    bit<8>  kind;
    bit<16> data;
}

struct headers_t {
    info_t info;
    t1_t   t1;
    t2_t   t2;
}

struct metadata_t {
    bit<16> peek16;
}

parser MyParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        meta.peek16 = pkt.lookahead<bit<16>>();
        transition select(pkt.lookahead<bit<8>>()) {
            1: parse_t1;
            2: parse_t2;
            default: skip2;
        }
    }
    state skip2 {
        pkt.advance(32w16);
        transition parse_t1;
    }
    state parse_t1 {
        pkt.extract(hdr.t1);
        transition accept;
    }
    state parse_t2 {
        pkt.extract(hdr.t2);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        hdr.info.setValid();
        hdr.info.peek16 = meta.peek16;
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
        pkt.emit(hdr.info);
        pkt.emit(hdr.t1);
        pkt.emit(hdr.t2);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;

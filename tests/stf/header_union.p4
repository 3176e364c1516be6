// header_union.p4 -- header_union parsing, validity and emit.
//
// Covers: extracting one member of a header union chosen by a lookahead;
// isValid() on the members and on the union itself; setValid() on one member
// invalidates the other (the v4 address is saved in a local first); emit() of
// a union emits only its valid member (or nothing).
// info.seen = 4 or 6 for the member found, 0 for none, | 0x80 when the union
// is valid at the end of ingress.
#include <core.p4>
#include <v1model.p4>

header info_t {
    bit<8> seen;
}

header v4_t {
    bit<8>  kind;
    bit<32> addr;
}

header v6_t {
    bit<8>  kind;
    bit<64> addr;
}

header_union addr_u {
    v4_t v4;
    v6_t v6;
}

struct headers_t {
    info_t info;
    addr_u u;
}

struct metadata_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract(hdr.info);
        transition select(pkt.lookahead<bit<8>>()) {
            4: parse_v4;
            6: parse_v6;
            default: accept;
        }
    }
    state parse_v4 {
        pkt.extract(hdr.u.v4);
        transition accept;
    }
    state parse_v6 {
        pkt.extract(hdr.u.v6);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        if (hdr.u.v4.isValid()) {
            bit<32> a = hdr.u.v4.addr;
            hdr.info.seen = 4;
            hdr.u.v6.setValid();
            hdr.u.v6.kind = 6;
            hdr.u.v6.addr = 32w0 ++ a;
        } else if (hdr.u.v6.isValid()) {
            hdr.info.seen = 6;
            hdr.u.v6.addr = hdr.u.v6.addr + 1;
        } else {
            hdr.info.seen = 0;
        }
        if (hdr.u.isValid()) {
            hdr.info.seen = hdr.info.seen | 0x80;
        }
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
        pkt.emit(hdr.u);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
